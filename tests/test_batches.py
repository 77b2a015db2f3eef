"""Batches of reads (``Policy(max_batch=N)``): several read-only calls in one step, each
recorded, decided and budgeted as a call of its own; through the public API with the
scripted model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcore import Agent, Budget, Policy, RunStatus, tool
from agentcore.adapters import ScriptedModel
from agentcore.contracts import compile_action_schema
from agentcore.errors import ConfigurationError
from agentcore.events import ActionProposed, Decision, Event, ToolFinished, ToolStarted
from agentcore.testing import batch, call, finish

WORKER = Path(__file__).with_name("faults") / "batch_worker.py"

LOOKED_UP: list[str] = []


@tool(effect="read")
def get_order(order_id: str) -> dict[str, str]:
    """Look up one order by id."""
    LOOKED_UP.append(order_id)
    return {"id": order_id, "status": "shipped"}


@tool(effect="read")
def get_customer(customer_id: str) -> dict[str, str]:
    """Look up one customer by id."""
    LOOKED_UP.append(customer_id)
    return {"id": customer_id, "name": "Ada"}


@tool(effect="write")
def refund(order_id: str) -> str:
    """Refund one order."""
    LOOKED_UP.append(f"refund {order_id}")
    return "refunded"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    LOOKED_UP.clear()


def _of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def _agent(
    *script: Any, tools: list[Any] | None = None, **policy: Any
) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(script))
    agent = Agent(
        tools=tools or [get_order, get_customer, refund],
        model=model,
        policy=Policy(max_batch=policy.pop("max_batch", 4), **policy),
    )
    return agent, model


THREE = batch(
    call("get_order", order_id="A-1"),
    call("get_order", order_id="A-2"),
    call("get_customer", customer_id="C-9"),
)


async def test_a_batch_of_three_lookups_is_three_calls_in_one_model_request() -> None:
    agent, model = _agent(THREE, finish("All shipped."))
    result = await agent.run("Where are A-1 and A-2, and who is C-9?")
    assert result.status is RunStatus.COMPLETED
    assert len(model.requests) == 2  # one for the batch, one for the finish; not four
    assert result.usage.tool_calls == 3 and result.usage.steps == 2
    assert sorted(LOOKED_UP) == ["A-1", "A-2", "C-9"]
    events = await agent.transcript(result.run_id)
    (proposed, *_) = _of(events, ActionProposed)
    assert proposed.call_id == "c1" and proposed.action.type == "batch"
    ids = ["c1.1", "c1.2", "c1.3"]
    assert [d.call_id for d in _of(events, Decision)][:3] == ids
    assert all(d.verdict == "execute" for d in _of(events, Decision))
    started = _of(events, ToolStarted)
    assert [s.call_id for s in started] == ids
    assert len({s.idempotency_key for s in started}) == 3
    assert started[0].idempotency_key == f"{result.run_id}:1.1"
    finished = {f.call_id: f for f in _of(events, ToolFinished)}
    assert sorted(finished) == ids and all(f.ok for f in finished.values())
    assert finished["c1.3"].result == {"id": "C-9", "name": "Ada"}
    # The model saw each outcome under its own call id.
    seen = "\n".join(m.content for m in model.requests[1].messages)
    for i in ids:
        assert f"[{i}]" in seen


async def test_a_batch_holding_a_write_is_refused_whole() -> None:
    bad = batch(call("get_order", order_id="A-1"), call("refund", order_id="A-1"))
    agent, model = _agent(bad, finish("I could not."))
    result = await agent.run("Refund A-1")
    assert result.status is RunStatus.COMPLETED
    assert LOOKED_UP == []  # nothing ran, not even the read
    events = await agent.transcript(result.run_id)
    decisions = [d for d in _of(events, Decision) if d.call_id.startswith("c1.")]
    assert [d.verdict for d in decisions] == ["deny", "deny"]
    assert "'refund'" in (decisions[0].reason or "") and "read-only" in (decisions[0].reason or "")
    assert not _of(events, ToolStarted)
    seen = "\n".join(m.content for m in model.requests[1].messages)
    assert "not a read-only, idempotent tool" in seen  # the model reads why


async def test_scope_applies_to_each_call_of_a_batch() -> None:
    agent, _ = _agent(THREE, finish("Partly."))
    result = await agent.run("x", scope=["get_order", "refund"])
    events = await agent.transcript(result.run_id)
    verdicts = {d.call_id: d.verdict for d in _of(events, Decision)}
    assert verdicts["c1.1"] == verdicts["c1.2"] == "execute"
    assert verdicts["c1.3"] == "deny"  # get_customer is not in this run's scope
    assert sorted(LOOKED_UP) == ["A-1", "A-2"]


async def test_each_call_of_a_batch_counts_against_max_tool_calls() -> None:
    agent, _ = _agent(THREE, finish("Partly."))
    result = await agent.run("x", budget=Budget(max_tool_calls=2))
    events = await agent.transcript(result.run_id)
    verdicts = [d.verdict for d in _of(events, Decision) if d.call_id.startswith("c1.")]
    assert verdicts == ["execute", "execute", "deny"]
    assert result.usage.tool_calls == 2
    assert sorted(LOOKED_UP) == ["A-1", "A-2"]


async def test_a_batch_larger_than_max_batch_is_refused() -> None:
    agent, _ = _agent(THREE, finish("No."), max_batch=2)
    result = await agent.run("x")
    events = await agent.transcript(result.run_id)
    assert LOOKED_UP == []
    assert {d.verdict for d in _of(events, Decision) if "." in d.call_id} == {"deny"}


def test_the_batch_variant_is_offered_only_with_a_read_tool_and_max_batch() -> None:
    specs = [get_order.spec, get_customer.spec, refund.spec]
    assert "batch" in compile_action_schema(specs, max_batch=4).offered_types
    assert "batch" not in compile_action_schema(specs).offered_types  # off by default
    one_read = [get_order.spec, refund.spec]  # several calls of one tool are a batch too
    assert compile_action_schema(one_read, max_batch=4).batch_names == ("get_order",)
    assert "batch" not in compile_action_schema([refund.spec], max_batch=4).offered_types
    schema = compile_action_schema(specs, max_batch=4)
    text = json.dumps(schema.json_schema())
    assert '"batch"' in text and '"refund"' in text
    batch_def = schema.json_schema()["$defs"]["BatchAction"]
    assert batch_def["properties"]["calls"]["maxItems"] == 4
    assert "refund" not in json.dumps(batch_def)  # only reads may be batched
    assert "batch" not in compile_action_schema(specs, max_batch=4, finish_only=True).offered_types
    generic = compile_action_schema(specs, max_batch=4, form="generic")
    action = generic.parse(
        json.dumps(
            {
                "type": "batch",
                "thought": "t",
                "calls": [
                    {"tool": "get_order", "args_json": '{"order_id": "A"}'},
                    {"tool": "get_customer", "args_json": '{"customer_id": "C"}'},
                ],
            }
        )
    )
    assert action.type == "batch" and action.calls[1].args == {"customer_id": "C"}


async def test_the_model_is_offered_a_batch_only_with_a_read_tool_in_scope() -> None:
    agent, model = _agent(finish("ok"))
    await agent.run("x", scope=["refund"])
    assert "batch" not in model.requests[0].schema.offered_types
    assert '"type": "batch"' not in model.requests[0].system
    agent, model = _agent(finish("ok"))
    await agent.run("x")
    assert "batch" in model.requests[0].schema.offered_types
    assert "get_order, get_customer" in model.requests[0].system  # told which may batch
    agent, model = _agent(finish("ok"), max_batch=0)
    await agent.run("x")
    assert "batch" not in model.requests[0].schema.offered_types
    assert '"type": "batch"' not in model.requests[0].system


async def test_three_lookups_of_one_tool_are_one_batch() -> None:
    three = batch(*(call("get_order", order_id=f"A-{i}") for i in (1, 2, 3)))
    agent, model = _agent(three, finish("All shipped."), tools=[get_order, refund])
    result = await agent.run("Where are A-1, A-2 and A-3?")
    assert result.status is RunStatus.COMPLETED
    assert model.requests[0].schema.batch_names == ("get_order",)
    assert sorted(LOOKED_UP) == ["A-1", "A-2", "A-3"]
    assert result.usage.model_calls == 2 and result.usage.tool_calls == 3


def test_max_batch_must_be_zero_or_at_least_two() -> None:
    with pytest.raises(ConfigurationError):
        Policy(max_batch=1)
    assert "max_batch" not in Policy().to_json()  # recorded as before batches existed
    assert Policy.from_json(Policy(max_batch=3).to_json()).max_batch == 3


def _worker(tmp: Path, cmd: str, crash: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCORE_")}
    if crash:
        env["AGENTCORE_CRASH_AT"] = crash
    return subprocess.run(
        [sys.executable, str(WORKER), cmd, str(tmp / "runs.db"), str(tmp / "ledger.txt")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_a_resume_after_a_crash_mid_batch_reruns_only_the_calls_without_an_outcome(
    tmp_path: Path,
) -> None:
    # The fast lookup returns first; its outcome is durable; the process dies while the
    # two slow ones are still running.
    died = _worker(tmp_path, "start", "after_batch_outcome:1")
    assert died.returncode == -9, died.stderr
    assert sorted(tmp_path.joinpath("ledger.txt").read_text().split()) == [
        "fast",
        "slow-1",
        "slow-2",
    ]
    done = _worker(tmp_path, "resume", None)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == "completed"
    assert report["tool_calls"] == 3  # each call counted once
    assert report["problems"] == []
    ran = tmp_path.joinpath("ledger.txt").read_text().split()
    assert sorted(ran) == ["fast", "slow-1", "slow-1", "slow-2", "slow-2"]  # fast not again
    assert report["finished"] == {"c1.1": 1, "c1.2": 1, "c1.3": 1}


async def test_a_snapshot_taken_mid_batch_restores_each_call_of_it() -> None:
    from agentcore._snapshot import dump_state, load_state
    from agentcore._state import RunState

    agent, _ = _agent(THREE, finish("ok"))
    result = await agent.run("x")
    events = await agent.transcript(result.run_id)
    cut = next(i for i, e in enumerate(events) if isinstance(e, ToolFinished))
    state = RunState(result.run_id)
    for ev in events[: cut + 1]:  # one outcome recorded, two still running
        state.apply(ev)
    restored = load_state(result.run_id, dump_state(state))
    assert restored.call is not None and state.call is not None
    assert [m.call_id for m in restored.call.members] == ["c1.1", "c1.2", "c1.3"]
    assert [m.finished is not None for m in restored.call.members] == [
        m.finished is not None for m in state.call.members
    ]
    assert sum(m.finished is not None for m in restored.call.members) == 1
    assert not restored.call.settled
    for ev in events[cut + 1 :]:
        restored.apply(ev)
    assert restored.status is RunStatus.COMPLETED


def test_cancelling_a_run_that_died_mid_batch_closes_each_call_left_running(
    tmp_path: Path,
) -> None:
    died = _worker(tmp_path, "start", "after_batch_outcome:1")
    assert died.returncode == -9, died.stderr
    done = _worker(tmp_path, "cancel", None)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == "cancelled"
    assert report["problems"] == []  # no started call is left without a tool_finished
    assert report["finished"] == {"c1.1": 1, "c1.2": 1, "c1.3": 1}


async def test_five_lookups_take_two_model_requests_instead_of_six() -> None:
    orders = [f"A-{i}" for i in range(1, 6)]
    one_by_one, model_a = _agent(
        *(call("get_order", order_id=o) for o in orders), finish("All shipped.")
    )
    batched, model_b = _agent(
        batch(*(call("get_order", order_id=o) for o in orders)), finish("All shipped."), max_batch=8
    )
    first = await one_by_one.run("Where are A-1 to A-5?")
    second = await batched.run("Where are A-1 to A-5?")
    assert first.usage.tool_calls == second.usage.tool_calls == 5
    assert (len(model_a.requests), len(model_b.requests)) == (6, 2)
    assert first.usage.model_calls == 6 and second.usage.model_calls == 2


def test_native_parallel_calls_of_reads_map_onto_a_batch() -> None:
    from agentcore.adapters._native import NativeCall, native_reply

    specs = [get_order.spec, get_customer.spec, refund.spec]
    schema = compile_action_schema(specs, max_batch=4)
    reads = [
        NativeCall("get_order", '{"order_id": "A-1"}'),
        NativeCall("get_customer", '{"customer_id": "C-9"}'),
    ]
    reply = native_reply(schema, "Both at once.", reads)
    assert reply.action is not None and reply.action.type == "batch"
    assert [c.tool for c in reply.action.calls] == ["get_order", "get_customer"]
    assert reply.dropped == ()
    # With a write among them, or without batches, the first call is the action, as before.
    mixed = native_reply(schema, "", [*reads, NativeCall("refund", '{"order_id": "A-1"}')])
    assert mixed.action is not None and mixed.action.type == "tool" and len(mixed.dropped) == 2
    plain = native_reply(compile_action_schema(specs), "", reads)
    assert plain.action is not None and plain.action.type == "tool" and len(plain.dropped) == 1


async def test_a_batch_in_native_history_is_one_turn_of_parallel_calls() -> None:
    from agentcore.adapters._native import native_messages

    agent, model = _agent(THREE, finish("ok"))
    await agent.run("x")
    request = model.requests[1]
    out = native_messages("system", list(request.messages), request.schema)
    turns = [m for m in out if m.get("tool_calls")]
    assert len(turns) == 1
    assert [c["id"] for c in turns[0]["tool_calls"]] == ["c1.1", "c1.2", "c1.3"]
    results = {m["tool_call_id"]: m["content"] for m in out if m["role"] == "tool"}
    assert sorted(results) == ["c1.1", "c1.2", "c1.3"]
    assert "C-9" in results["c1.3"] and "Ada" in results["c1.3"]


def test_a_generic_form_batch_with_a_write_is_read_for_the_dispatcher() -> None:
    from agentcore.contracts._schema import parse_loose_batch

    reply = json.dumps(
        {
            "type": "batch",
            "thought": "t",
            "calls": [
                {"tool": "get_order", "args_json": '{"order_id": "A"}'},
                {"tool": "refund", "args_json": '{"order_id": "A"}'},
            ],
        }
    )
    loose = parse_loose_batch(reply)
    assert loose is not None and [c.args for c in loose.calls] == [{"order_id": "A"}] * 2
    assert parse_loose_batch('{"type": "batch", "thought": "t", "calls": [1]}') is None
    assert parse_loose_batch('{"type": "tool"}') is None


async def test_five_lookups_take_six_model_requests_one_by_one_and_two_in_a_batch() -> None:
    calls = [call("get_order", order_id=f"A-{i}") for i in range(1, 6)]
    one_by_one, _ = _agent(*calls, finish("ok"), max_batch=0)
    batched, _ = _agent(batch(*calls), finish("ok"), max_batch=5)
    slow = await one_by_one.run("Where are A-1 to A-5?")
    fast = await batched.run("Where are A-1 to A-5?")
    assert (slow.usage.model_calls, slow.usage.tool_calls) == (6, 5)
    assert (fast.usage.model_calls, fast.usage.tool_calls) == (2, 5)


async def test_a_batch_refused_whole_is_judged_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusal the loop made reading the reply is the batch's decision: the rule is not
    applied a second time when its calls are decided (issue 39: one owner per decision)."""
    import agentcore._run._loop as loop
    import agentcore._run._tool_calls as tool_calls

    judged: list[int] = []
    real = loop.batch_refusal

    def counted(*args: Any) -> str | None:
        judged.append(1)
        return real(*args)

    monkeypatch.setattr(loop, "batch_refusal", counted)
    monkeypatch.setattr(tool_calls, "batch_refusal", counted)
    bad = batch(call("get_order", order_id="A-1"), call("refund", order_id="A-1"))
    agent, _ = _agent(bad, finish("I could not."))
    result = await agent.run("Refund A-1")
    events = await agent.transcript(result.run_id)
    assert [d.verdict for d in _of(events, Decision) if d.call_id.startswith("c1.")] == [
        "deny",
        "deny",
    ]
    assert len(judged) == 1
