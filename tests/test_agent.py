"""End-to-end behaviour through Agent, with the scripted model: the governed loop."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest
from conftest import SLOW_TIMEOUT_S, Toolbox, make_toolbox

from agentcore import (
    Agent,
    Budget,
    ContextRequest,
    Policy,
    RunResult,
    RunStatus,
    tool,
)
from agentcore.adapters import ScriptedModel
from agentcore.errors import (
    ConfigurationError,
    ConfirmationMismatchError,
    NotAwaitingConfirmationError,
    RunNotFoundError,
)
from agentcore.events import (
    ActionProposed,
    Confirmation,
    ContextAdded,
    Decision,
    Event,
    ModelCalled,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from agentcore.stores import SQLiteStore
from agentcore.testing import call, finish, plan

# --------------------------------------------------------------------------- helpers

E = TypeVar("E")


def output_tokens(reply: dict[str, Any] | str) -> int:
    """What ScriptedModel reports for a reply: ceil(len(json text) * 0.25), at least 1."""
    text = reply if isinstance(reply, str) else json.dumps(reply)
    return max(1, math.ceil(len(text) * 0.25))


def seen(model: ScriptedModel, request: int = -1) -> str:
    """Everything the model was shown in one request's messages."""
    return "\n".join(m.content for m in model.requests[request].messages)


def of_type(events: Sequence[Event], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


AgentFactory = Callable[..., Agent]


@pytest.fixture
async def make_agent(tools: Toolbox) -> AsyncIterator[AgentFactory]:
    """Build agents over the toolbox (memory store unless told); all closed afterwards."""
    made: list[Agent] = []

    def build(model: Any, *, store: Any = "memory://", **kwargs: Any) -> Agent:
        kwargs.setdefault("tools", tools.all)
        agent = Agent(model=model, store=store, **kwargs)
        made.append(agent)
        return agent

    yield build
    for agent in made:
        await agent.close()


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both stores for the pause/confirm tests."""
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'runs.db'}"


NO_PLAN = Policy(plan_before_writes=False)


# --------------------------------------------------------------------------- completing


async def test_completes_with_answer_and_usage(make_agent: AgentFactory, tools: Toolbox) -> None:
    script = [call("lookup", order_id="A1"), finish("Order A1 has shipped.")]
    model = ScriptedModel(script)
    agent = make_agent(model)
    result = await agent.run("Where is order A1?")
    assert isinstance(result, RunResult)
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "Order A1 has shipped."
    assert result.reason is None
    assert result.pending is None
    assert tools.args_of("lookup") == [{"order_id": "A1"}]
    usage = result.usage
    assert usage.steps == 2
    assert usage.tool_calls == 1
    assert usage.model_calls == 2
    assert usage.input_tokens == 2 * 50
    assert usage.output_tokens == sum(output_tokens(a) for a in script)
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert model.remaining == 0
    # The model saw the task, then the tool's result.
    assert "Task: Where is order A1?" in seen(model, 0)
    assert '[c1] lookup returned: {"order_id": "A1", "status": "shipped"}' in seen(model, 1)
    assert (await agent.result(result.run_id)) == result


async def test_async_tool_runs_in_the_loop(make_agent: AgentFactory, tools: Toolbox) -> None:
    model = ScriptedModel([call("fetch_status", service="db"), finish("db is up")])
    result = await make_agent(model).run("Is the db up?")
    assert result.status is RunStatus.COMPLETED
    assert tools.args_of("fetch_status") == [{"service": "db"}]
    assert "[c1] fetch_status returned: db: up" in seen(model, 1)


async def test_tool_context_reaches_the_tool(make_agent: AgentFactory, tools: Toolbox) -> None:
    model = ScriptedModel([plan("delete"), call("delete_order", order_id="A1"), finish()])
    agent = make_agent(model)
    paused = await agent.run("Delete A1")
    result = await agent.confirm(paused.run_id, approve=True, by="alice")
    assert result.status is RunStatus.COMPLETED
    (ctx,) = tools.contexts
    assert ctx.run_id == result.run_id
    assert ctx.step == 2
    assert ctx.call_id == "c2"
    assert ctx.idempotency_key == f"{result.run_id}:2"
    started = of_type(await agent.transcript(result.run_id), ToolStarted)
    assert started[0].idempotency_key == ctx.idempotency_key


async def test_generic_schema_form_end_to_end(make_agent: AgentFactory, tools: Toolbox) -> None:
    reply = {"type": "tool", "thought": "t", "tool": "lookup", "args_json": '{"order_id": "G7"}'}
    model = ScriptedModel([reply, finish()])
    agent = make_agent(model, policy=Policy(schema_form="generic"))
    result = await agent.run("Find G7")
    assert result.status is RunStatus.COMPLETED
    assert model.requests[0].schema.form == "generic"
    assert tools.args_of("lookup") == [{"order_id": "G7"}]
    (proposed, _) = of_type(await agent.transcript(result.run_id), ActionProposed)
    assert proposed.action.model_dump()["args"] == {"order_id": "G7"}


# --------------------------------------------------------------------------- scope


OUT_OF_SCOPE = {
    "typed": call("fetch_status", service="db"),
    "generic": {
        "type": "tool",
        "thought": "I need this.",
        "tool": "fetch_status",
        "args_json": '{"service": "db"}',
    },
}


@pytest.mark.parametrize("form", ["typed", "generic"])
async def test_out_of_scope_tool_is_denied(
    make_agent: AgentFactory, tools: Toolbox, form: Any
) -> None:
    """Whatever the schema form, a real tool outside the scope is refused by the dispatcher."""
    model = ScriptedModel([OUT_OF_SCOPE[form], finish("cannot")])
    agent = make_agent(model, policy=Policy(schema_form=form))
    result = await agent.run("Check the db", scope=["lookup"])
    assert result.status is RunStatus.COMPLETED
    assert tools.calls == []
    # The schema offered only the scoped tool; the system text lists only it.
    first = model.requests[0]
    assert first.schema.tool_names == ("lookup",)
    assert "- lookup(order_id: str) (effect: read)" in first.system
    assert "fetch_status" not in first.system
    events = await agent.transcript(result.run_id)
    decision, finished = of_type(events, Decision)
    assert (finished.call_id, finished.verdict) == ("c2", "execute")
    assert decision.verdict == "deny"
    assert decision.call_id == "c1"
    assert decision.reason is not None
    assert "'fetch_status' is not in this run's scope" in decision.reason
    assert "Tools in scope: lookup." in decision.reason
    assert of_type(events, ToolStarted) == []
    assert f"[c1] Refused: {decision.reason}" in seen(model, 1)


async def test_scope_by_label(make_agent: AgentFactory, tools: Toolbox) -> None:
    model = ScriptedModel([call("lookup", order_id="A1"), finish()])
    agent = make_agent(model)
    result = await agent.run("Orders only", scope=["orders"])
    (started,) = of_type(await agent.transcript(result.run_id), RunStarted)
    assert started.scope == ["lookup", "update_note"]
    assert model.requests[0].schema.tool_names == ("lookup", "update_note")
    assert tools.count("lookup") == 1


async def test_unknown_scope_entry(make_agent: AgentFactory) -> None:
    model = ScriptedModel([finish()])
    agent = make_agent(model)
    with pytest.raises(ConfigurationError, match="'billing' is neither a tool nor a label") as info:
        await agent.run("task", scope=["lookup", "billing"])
    assert "lookup" in str(info.value)
    assert "orders" in str(info.value)  # the labels that exist
    assert model.requests == []
    assert await agent.store.list_runs() == []


async def test_scope_none_means_all_tools(make_agent: AgentFactory, tools: Toolbox) -> None:
    model = ScriptedModel([finish()])
    agent = make_agent(model)
    result = await agent.run("anything", scope=None)
    (started,) = of_type(await agent.transcript(result.run_id), RunStarted)
    names = [t.name for t in tools.all]
    assert started.scope == names
    assert set(started.tools) == set(names)
    assert model.requests[0].schema.tool_names == tuple(names)


# --------------------------------------------------------------------------- bad model output


async def test_unknown_tool_is_reasked(make_agent: AgentFactory) -> None:
    bad = call("teleport", destination="moon")
    model = ScriptedModel([bad, finish("ok")])
    agent = make_agent(model)
    result = await agent.run("go")
    assert result.status is RunStatus.COMPLETED
    assert result.usage.steps == 1  # a re-ask is not a step
    events = await agent.transcript(result.run_id)
    assert [e.outcome for e in of_type(events, ModelCalled)] == ["invalid", "ok"]
    invalid = of_type(events, ModelCalled)[0]
    assert invalid.error is not None
    assert "Unknown tool 'teleport'" in invalid.error
    # Only the finish was decided on: the unknown tool never became an action.
    assert [(d.call_id, d.verdict) for d in of_type(events, Decision)] == [("c1", "execute")]
    shown = [m.content for m in model.requests[1].messages]
    assert json.dumps(bad) in shown  # the bad reply is shown back as the model's turn
    assert "That reply is not a valid action: Unknown tool 'teleport'" in seen(model, 1)
    assert "lookup" in seen(model, 1)


async def test_invalid_json_and_schema_violations_are_reasked(make_agent: AgentFactory) -> None:
    model = ScriptedModel(["this is not json", {"type": "finish", "thought": "t"}, finish("fine")])
    agent = make_agent(model)
    result = await agent.run("task")
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "fine"
    assert result.usage.model_calls == 3
    assert result.usage.steps == 1
    events = await agent.transcript(result.run_id)
    assert [e.outcome for e in of_type(events, ModelCalled)] == ["invalid", "invalid", "ok"]
    assert "not valid JSON" in seen(model, 1)
    assert "answer" in seen(model, 2)
    assert "Field required" in seen(model, 2)


async def test_too_many_invalid_replies_fail_the_run(make_agent: AgentFactory) -> None:
    model = ScriptedModel(["{broken", {"type": "finish", "thought": "t"}, finish()])
    agent = make_agent(model, policy=Policy(max_reasks=1))
    result = await agent.run("task")
    assert result.status is RunStatus.FAILED
    assert len(model.requests) == 2  # max_reasks + 1 replies, then stop
    assert model.remaining == 1
    assert result.reason is not None
    assert "answer: Field required" in result.reason  # the last error, not the first
    events = await agent.transcript(result.run_id)
    (finished,) = of_type(events, RunFinished)
    assert finished.status == "failed"


async def test_oversized_reply_is_refused(make_agent: AgentFactory) -> None:
    model = ScriptedModel([finish("x" * 500), finish("short")])
    agent = make_agent(model, policy=Policy(max_reply_bytes=300))
    result = await agent.run("task")
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "short"
    invalid = of_type(await agent.transcript(result.run_id), ModelCalled)[0]
    assert invalid.outcome == "invalid"
    assert invalid.error is not None
    assert "the limit is 300" in invalid.error
    assert model.requests[0].schema.max_reply_bytes == 300


# --------------------------------------------------------------------------- plan before writes


async def test_write_before_plan_needs_plan(make_agent: AgentFactory, tools: Toolbox) -> None:
    model = ScriptedModel(
        [
            call("update_note", order_id="A1", note="late"),
            plan("note the delay"),
            call("update_note", order_id="A1", note="late"),
            finish(),
        ]
    )
    agent = make_agent(model)
    result = await agent.run("Note that A1 is late")
    assert result.status is RunStatus.COMPLETED
    assert tools.args_of("update_note") == [{"order_id": "A1", "note": "late"}]
    events = await agent.transcript(result.run_id)
    decisions = of_type(events, Decision)
    assert [(d.call_id, d.verdict) for d in decisions] == [
        ("c1", "needs_plan"),
        ("c2", "execute"),
        ("c3", "execute"),
        ("c4", "execute"),
    ]
    assert [e.call_id for e in of_type(events, ToolStarted)] == ["c3"]
    assert "[c1] Not run:" in seen(model, 1)
    assert "plan" in seen(model, 1)
    assert "[c2] Plan approved." in seen(model, 2)


async def test_plan_before_writes_can_be_off(make_agent: AgentFactory, tools: Toolbox) -> None:
    model = ScriptedModel([call("update_note", order_id="A1", note="x"), finish()])
    result = await make_agent(model, policy=NO_PLAN).run("note it")
    assert result.status is RunStatus.COMPLETED
    assert tools.count("update_note") == 1


async def test_reads_need_no_plan(make_agent: AgentFactory, tools: Toolbox) -> None:
    model = ScriptedModel([call("lookup", order_id="A1"), finish()])
    await make_agent(model).run("look")
    assert tools.count("lookup") == 1


async def test_confirm_plans_pauses_on_a_plan(
    make_agent: AgentFactory, tools: Toolbox, store_url: str
) -> None:
    model = ScriptedModel(
        [plan("write the note", "report"), call("update_note", order_id="A1", note="n"), finish()]
    )
    agent = make_agent(model, store=store_url, policy=Policy(confirm_plans=True))
    paused = await agent.run("Note A1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    assert paused.pending is not None
    assert paused.pending.kind == "plan"
    assert paused.pending.plan_steps == ("write the note", "report")
    assert paused.pending.step == 1
    assert len(model.requests) == 1
    result = await agent.confirm(paused.run_id, approve=True, by="carol")
    assert result.status is RunStatus.COMPLETED
    assert tools.count("update_note") == 1


# --------------------------------------------------------------------------- destructive


async def pause_on_delete(agent: Agent, order_id: str = "A1") -> RunResult:
    result = await agent.run(f"Delete order {order_id}")
    assert result.status is RunStatus.AWAITING_CONFIRMATION
    return result


async def test_destructive_pauses(make_agent: AgentFactory, tools: Toolbox, store_url: str) -> None:
    model = ScriptedModel([call("delete_order", thought="It must go.", order_id="A1")])
    agent = make_agent(model, store=store_url, policy=NO_PLAN)
    result = await pause_on_delete(agent)
    assert tools.calls == []
    pending = result.pending
    assert pending is not None
    assert pending.kind == "tool"
    assert pending.tool == "delete_order"
    assert pending.args == {"order_id": "A1"}
    assert pending.effect == "destructive"
    assert pending.step == 1
    assert pending.call_id == "c1"
    assert pending.thought == "It must go."
    assert isinstance(pending.args_hash, str)
    assert pending.args_hash
    assert result.reason is not None
    assert "destructive" in result.reason
    # Resuming does not run it either: it waits for a person.
    again = await agent.resume(result.run_id)
    assert again.status is RunStatus.AWAITING_CONFIRMATION
    assert again.pending == pending
    assert tools.calls == []
    assert len(model.requests) == 1


async def test_destructive_pauses_after_a_plan_too(
    make_agent: AgentFactory, tools: Toolbox
) -> None:
    model = ScriptedModel([plan("delete it"), call("delete_order", order_id="A1")])
    agent = make_agent(model)
    result = await pause_on_delete(agent)
    assert result.pending is not None
    assert result.pending.step == 2
    assert tools.calls == []


async def test_approve_runs_the_persisted_args_once(
    make_agent: AgentFactory, tools: Toolbox, store_url: str
) -> None:
    model = ScriptedModel([call("delete_order", order_id="A1"), finish("Deleted A1.")])
    agent = make_agent(model, store=store_url, policy=NO_PLAN)
    paused = await pause_on_delete(agent)
    assert paused.pending is not None
    result = await agent.confirm(
        paused.run_id,
        approve=True,
        by="alice",
        step=paused.pending.step,
        args_hash=paused.pending.args_hash,
    )
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "Deleted A1."
    assert tools.args_of("delete_order") == [{"order_id": "A1"}]
    assert len(model.requests) == 2  # the call was not re-generated, only the finish asked
    events = await agent.transcript(paused.run_id)
    (confirmation,) = of_type(events, Confirmation)
    assert confirmation.approved is True
    assert confirmation.by == "alice"
    assert confirmation.args is None
    assert confirmation.args_hash == paused.pending.args_hash
    (started,) = of_type(events, ToolStarted)
    assert started.args == paused.pending.args
    assert "[c1] Approved by alice." in seen(model)
    assert "[c1] delete_order returned:" in seen(model)
    # Nothing waits any more; a second approval is refused and runs nothing.
    with pytest.raises(NotAwaitingConfirmationError):
        await agent.confirm(paused.run_id, approve=True, by="alice")
    assert tools.count("delete_order") == 1


async def test_approve_with_edited_args(
    make_agent: AgentFactory, tools: Toolbox, store_url: str
) -> None:
    model = ScriptedModel([call("delete_order", order_id="A1"), finish()])
    agent = make_agent(model, store=store_url, policy=NO_PLAN)
    paused = await pause_on_delete(agent)
    result = await agent.confirm(paused.run_id, approve=True, by="alice", args={"order_id": "B2"})
    assert result.status is RunStatus.COMPLETED
    assert tools.args_of("delete_order") == [{"order_id": "B2"}]
    events = await agent.transcript(paused.run_id)
    (confirmation,) = of_type(events, Confirmation)
    assert confirmation.args == {"order_id": "B2"}
    assert paused.pending is not None
    assert confirmation.args_hash != paused.pending.args_hash
    (started,) = of_type(events, ToolStarted)
    assert started.args == {"order_id": "B2"}
    assert "Approved by alice with edited arguments" in seen(model)


@pytest.mark.parametrize("bad_args", [{"order": "A1"}, {"order_id": 5}, {}])
async def test_invalid_edited_args_record_nothing(
    make_agent: AgentFactory, tools: Toolbox, store_url: str, bad_args: dict[str, Any]
) -> None:
    model = ScriptedModel([call("delete_order", order_id="A1"), finish()])
    agent = make_agent(model, store=store_url, policy=NO_PLAN)
    paused = await pause_on_delete(agent)
    before = await agent.transcript(paused.run_id)
    with pytest.raises(ConfigurationError, match="delete_order"):
        await agent.confirm(paused.run_id, approve=True, by="alice", args=bad_args)
    assert await agent.transcript(paused.run_id) == before
    assert tools.calls == []
    still = await agent.result(paused.run_id)
    assert still.status is RunStatus.AWAITING_CONFIRMATION
    assert still.pending == paused.pending


async def test_deny_with_a_reason_the_model_sees(
    make_agent: AgentFactory, tools: Toolbox, store_url: str
) -> None:
    model = ScriptedModel([call("delete_order", order_id="A1"), finish("Not deleted.")])
    agent = make_agent(model, store=store_url, policy=NO_PLAN)
    paused = await pause_on_delete(agent)
    result = await agent.confirm(
        paused.run_id, approve=False, by="bob", reason="the customer changed their mind"
    )
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "Not deleted."
    assert tools.calls == []
    events = await agent.transcript(paused.run_id)
    assert of_type(events, ToolStarted) == []
    (confirmation,) = of_type(events, Confirmation)
    assert confirmation.approved is False
    assert confirmation.reason == "the customer changed their mind"
    assert "[c1] Denied by bob: the customer changed their mind" in seen(model)


async def test_confirm_a_run_that_is_not_waiting(make_agent: AgentFactory, store_url: str) -> None:
    model = ScriptedModel([finish()])
    agent = make_agent(model, store=store_url)
    result = await agent.run("nothing to confirm")
    assert result.status is RunStatus.COMPLETED
    before = await agent.transcript(result.run_id)
    with pytest.raises(NotAwaitingConfirmationError, match="completed"):
        await agent.confirm(result.run_id, approve=True, by="alice")
    assert await agent.transcript(result.run_id) == before


async def test_confirm_bound_to_step_and_args_hash(
    make_agent: AgentFactory, tools: Toolbox, store_url: str
) -> None:
    model = ScriptedModel([call("delete_order", order_id="A1"), finish()])
    agent = make_agent(model, store=store_url, policy=NO_PLAN)
    paused = await pause_on_delete(agent)
    assert paused.pending is not None
    before = await agent.transcript(paused.run_id)
    with pytest.raises(ConfirmationMismatchError, match="step"):
        await agent.confirm(paused.run_id, approve=True, by="alice", step=paused.pending.step + 1)
    with pytest.raises(ConfirmationMismatchError, match="hash"):
        await agent.confirm(paused.run_id, approve=True, by="alice", args_hash="0" * 16)
    assert await agent.transcript(paused.run_id) == before
    assert tools.calls == []
    result = await agent.confirm(
        paused.run_id, approve=True, by="alice", args_hash=paused.pending.args_hash
    )
    assert result.status is RunStatus.COMPLETED
    assert tools.count("delete_order") == 1


async def test_confirm_needs_a_name(make_agent: AgentFactory) -> None:
    agent = make_agent(ScriptedModel([call("delete_order", order_id="A1")]), policy=NO_PLAN)
    paused = await pause_on_delete(agent)
    with pytest.raises(ConfigurationError, match="by="):
        await agent.confirm(paused.run_id, approve=True, by="  ")


async def test_unknown_run_id(make_agent: AgentFactory, store_url: str) -> None:
    agent = make_agent(ScriptedModel([]), store=store_url)
    with pytest.raises(RunNotFoundError, match="nope"):
        await agent.confirm("nope", approve=True, by="alice")
    with pytest.raises(RunNotFoundError):
        await agent.resume("nope")
    with pytest.raises(RunNotFoundError):
        await agent.result("nope")
    with pytest.raises(RunNotFoundError):
        await agent.transcript("nope")
    with pytest.raises(RunNotFoundError):
        await agent.cancel("nope", by="ops")


# --------------------------------------------------------------------------- across processes

_SHARED = '''
"""Tools and agent shared by the pausing process and the confirming test."""
from pathlib import Path

from agentcore import Agent, Policy, tool
from agentcore.adapters import ScriptedModel

COUNTER = Path(__file__).with_name("side_effects.txt")


@tool(effect="destructive")
def wipe_disk(disk: str) -> dict:
    """Wipe a disk for good.

    Args:
        disk: the disk's name.
    """
    with COUNTER.open("a") as f:
        f.write(disk + "\\n")
    return {"wiped": disk}


def make_agent(store: str, script: list) -> Agent:
    return Agent(
        tools=[wipe_disk],
        model=ScriptedModel(script),
        store=store,
        policy=Policy(plan_before_writes=False),
    )
'''

_PAUSE = """
import asyncio
import json
import sys

from shared import make_agent


async def main() -> None:
    agent = make_agent(
        sys.argv[1],
        [{"type": "tool", "thought": "wipe it", "tool": "wipe_disk", "args": {"disk": "sdb"}}],
    )
    result = await agent.run("Wipe sdb", run_id="cross-process")
    pending = result.pending
    print(json.dumps({
        "status": result.status.value,
        "step": pending.step,
        "args_hash": pending.args_hash,
        "args": pending.args,
    }))
    await agent.close()


asyncio.run(main())
"""


def _import(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("shared_cross_process", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.subprocess
async def test_paused_run_survives_the_process(tmp_path: Path) -> None:
    (tmp_path / "shared.py").write_text(textwrap.dedent(_SHARED))
    (tmp_path / "pause.py").write_text(textwrap.dedent(_PAUSE))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    proc = subprocess.run(  # noqa: ASYNC221  # a blocking child process is the point
        [sys.executable, str(tmp_path / "pause.py"), url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    assert shown["status"] == "awaiting_confirmation"
    assert shown["args"] == {"disk": "sdb"}
    counter = tmp_path / "side_effects.txt"
    assert not counter.exists()  # paused before the side effect

    shared = _import(tmp_path / "shared.py")
    # The same script as the first process: a fresh ScriptedModel continues where the
    # transcript stands (its first reply was given there), so it answers with the finish.
    wipe = {"type": "tool", "thought": "wipe it", "tool": "wipe_disk", "args": {"disk": "sdb"}}
    model = ScriptedModel([wipe, finish("sdb wiped.")])
    agent: Agent = shared.make_agent(url, [])
    agent.route = (model,)
    try:
        waiting = await agent.result("cross-process")
        assert waiting.status is RunStatus.AWAITING_CONFIRMATION
        assert waiting.pending is not None
        assert waiting.pending.args_hash == shown["args_hash"]
        result = await agent.confirm(
            "cross-process",
            approve=True,
            by="alice",
            step=shown["step"],
            args_hash=shown["args_hash"],
        )
        assert result.status is RunStatus.COMPLETED
        assert result.answer == "sdb wiped."
        assert counter.read_text().splitlines() == ["sdb"]
        # Confirming or resuming again never repeats the side effect.
        with pytest.raises(NotAwaitingConfirmationError):
            await agent.confirm("cross-process", approve=True, by="alice")
        assert (await agent.resume("cross-process")).status is RunStatus.COMPLETED
        assert counter.read_text().splitlines() == ["sdb"]
    finally:
        await agent.close()
    # A third process (a fresh store object) sees the completed run.
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        events = await store.load("cross-process")
    finally:
        await store.close()
    assert isinstance(events[-1], RunFinished)
    assert events[-1].status == "completed"


# --------------------------------------------------------------------------- budgets


async def test_last_step_offers_only_finish(make_agent: AgentFactory, tools: Toolbox) -> None:
    model = ScriptedModel([call("lookup", order_id="A1"), finish("A1 shipped.")])
    agent = make_agent(model)
    result = await agent.run("Where is A1?", budget=Budget(max_steps=2))
    assert result.status is RunStatus.COMPLETED
    first, last = model.requests
    assert first.schema.offered_types == ("plan", "tool", "finish")
    assert last.schema.offered_types == ("finish",)
    first_note = first.messages[-1].content
    last_note = last.messages[-1].content
    assert "Step 1 of 2." in first_note
    assert "last step" not in first_note
    assert "Step 2 of 2." in last_note
    assert "This is your last step: reply with a finish action." in last_note


async def test_max_steps_exhausts_the_budget(make_agent: AgentFactory, tools: Toolbox) -> None:
    """A model that ignores the finish-only last step ends the run on the step budget; a
    larger budget continues it."""
    lookups = [call("lookup", order_id=f"A{i}") for i in range(1, 6)]
    model = ScriptedModel([*lookups, finish("Looked up A1 and A5.")])
    agent = make_agent(model)
    result = await agent.run("Look up everything", budget=Budget(max_steps=2))
    assert model.requests[1].schema.offered_types == ("finish",)
    assert "This is your last step" in model.requests[1].messages[-1].content
    assert tools.count("lookup") == 1
    assert result.status is RunStatus.BUDGET_EXHAUSTED, result.reason
    assert result.reason is not None
    assert "budget" in result.reason
    assert "finish" in result.reason
    assert result.usage.steps == 1
    # A larger budget continues the same run from where it stopped.
    resumed = await agent.resume(result.run_id, budget=Budget(max_steps=5))
    assert resumed.status is RunStatus.COMPLETED, resumed.reason
    assert resumed.answer == "Looked up A1 and A5."
    assert tools.args_of("lookup") == [{"order_id": "A1"}, {"order_id": "A5"}]
    assert model.requests[-2].schema.offered_types == ("plan", "tool", "finish")
    assert resumed.usage.steps == 3


async def test_max_tokens_counts_invalid_attempts(make_agent: AgentFactory) -> None:
    replies = ["nope", "nope again", finish()]
    model = ScriptedModel(replies)
    agent = make_agent(model)
    budget = Budget(max_tokens=100)
    result = await agent.run("task", budget=budget)
    assert result.status is RunStatus.BUDGET_EXHAUSTED
    expected = 2 * 50 + output_tokens("nope") + output_tokens("nope again")
    assert result.usage.total_tokens == expected
    assert result.usage.model_calls == 2
    assert result.usage.steps == 0
    assert result.reason is not None
    assert "token budget of 100" in result.reason
    assert model.remaining == 1
    assert "Tokens left:" in model.requests[0].messages[-1].content


async def test_resume_an_exhausted_run_with_a_larger_budget(make_agent: AgentFactory) -> None:
    model = ScriptedModel(["nope", "nope again", finish("Finally.")])
    agent = make_agent(model)
    exhausted = await agent.run("task", budget=Budget(max_tokens=100))
    assert exhausted.status is RunStatus.BUDGET_EXHAUSTED
    result = await agent.resume(exhausted.run_id, budget=Budget(max_steps=5))
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "Finally."
    assert result.run_id == exhausted.run_id
    events = await agent.transcript(result.run_id)
    (resumed,) = of_type(events, RunResumed)
    assert resumed.budget is not None
    assert resumed.budget["max_steps"] == 5
    assert [e.status for e in of_type(events, RunFinished)] == ["budget_exhausted", "completed"]


async def test_max_tool_calls_denies_further_calls(
    make_agent: AgentFactory, tools: Toolbox
) -> None:
    model = ScriptedModel(
        [call("lookup", order_id="A1"), call("lookup", order_id="B2"), finish("Only A1.")]
    )
    agent = make_agent(model)
    result = await agent.run("Look up A1 and B2", budget=Budget(max_tool_calls=1))
    assert tools.args_of("lookup") == [{"order_id": "A1"}]
    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.usage.tool_calls == 1
    assert "Tool calls left: 0." in model.requests[1].messages[-1].content
    events = await agent.transcript(result.run_id)
    denied = [d for d in of_type(events, Decision) if d.verdict == "deny"]
    assert [d.call_id for d in denied] == ["c2"]
    assert denied[0].reason is not None
    assert "tool-call budget (1)" in denied[0].reason
    assert "tool-call budget (1)" in seen(model, 2)


async def test_max_calls_per_tool_denies_further_calls(
    make_agent: AgentFactory, tools: Toolbox
) -> None:
    model = ScriptedModel(
        [
            call("lookup", order_id="A1"),
            call("lookup", order_id="B2"),
            call("fetch_status", service="db"),
            finish(),
        ]
    )
    agent = make_agent(model)
    result = await agent.run("task", budget=Budget(max_calls_per_tool={"lookup": 1}))
    assert result.status is RunStatus.COMPLETED
    assert tools.args_of("lookup") == [{"order_id": "A1"}]
    assert tools.count("fetch_status") == 1  # other tools are unaffected
    assert "lookup" not in model.requests[1].schema.tool_names
    events = await agent.transcript(result.run_id)
    (denied,) = [d for d in of_type(events, Decision) if d.verdict == "deny"]
    assert denied.call_id == "c2"
    assert denied.reason is not None
    assert "'lookup' may be called 1 time(s)" in denied.reason
    assert "[c2] Refused:" in seen(model, 2)


async def test_per_tool_cap_with_one_tool_in_scope(
    make_agent: AgentFactory, tools: Toolbox
) -> None:
    """When the capped tool is the only one in scope, a further call is still a refusal."""
    model = ScriptedModel(
        [call("lookup", order_id="A1"), call("lookup", order_id="B2"), finish("Only A1.")]
    )
    agent = make_agent(model)
    result = await agent.run(
        "task", scope=["lookup"], budget=Budget(max_calls_per_tool={"lookup": 1})
    )
    assert tools.args_of("lookup") == [{"order_id": "A1"}]
    events = await agent.transcript(result.run_id)
    denied = [d for d in of_type(events, Decision) if d.verdict == "deny"]
    assert [d.call_id for d in denied] == ["c2"]
    assert denied[0].reason is not None
    assert "'lookup' may be called 1 time(s)" in denied[0].reason


async def test_past_deadline_exhausts_before_asking(make_agent: AgentFactory) -> None:
    model = ScriptedModel([finish()])
    agent = make_agent(model)
    result = await agent.run("task", budget=Budget(deadline=time.time() - 1))
    assert result.status is RunStatus.BUDGET_EXHAUSTED
    assert result.reason is not None
    assert "deadline" in result.reason
    assert model.requests == []


def test_budget_and_policy_refuse_nonsense() -> None:
    with pytest.raises(ConfigurationError, match="max_steps"):
        Budget(max_steps=0)
    with pytest.raises(ConfigurationError, match="max_calls_per_tool"):
        Budget(max_calls_per_tool={"lookup": 0})
    with pytest.raises(ConfigurationError, match="'typed', 'generic'"):
        Policy(schema_form="free")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_reasks"):
        Policy(max_reasks=-1)


# --------------------------------------------------------------------------- failures


async def test_same_failing_call_three_times_fails(
    make_agent: AgentFactory, tools: Toolbox
) -> None:
    model = ScriptedModel([call("explode", reason="x")] * 3 + [finish()])
    agent = make_agent(model)
    result = await agent.run("try hard")
    assert result.status is RunStatus.FAILED
    assert tools.count("explode") == 3
    assert model.remaining == 1
    assert result.reason is not None
    assert "explode" in result.reason
    assert "3 times" in result.reason


async def test_different_failing_calls_are_not_repeats(
    make_agent: AgentFactory, tools: Toolbox
) -> None:
    model = ScriptedModel([call("explode", reason=r) for r in "abc"] + [finish("gave up")])
    result = await make_agent(model).run("try things")
    assert result.status is RunStatus.COMPLETED
    assert tools.count("explode") == 3


async def test_tool_errors_and_timeouts_are_observations(
    make_agent: AgentFactory, tools: Toolbox
) -> None:
    model = ScriptedModel(
        [call("explode", reason="bad disk"), call("slow"), finish("Both failed.")]
    )
    agent = make_agent(model)
    started = time.perf_counter()
    result = await agent.run("try")
    assert time.perf_counter() - started < 0.5
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "Both failed."
    assert "[c1] explode failed: ValueError: cannot do it: bad disk" in seen(model, 1)
    assert f"[c2] slow failed: timed out after {SLOW_TIMEOUT_S:g}s" in seen(model, 2)
    finished = of_type(await agent.transcript(result.run_id), ToolFinished)
    assert [(f.tool, f.ok) for f in finished] == [("explode", False), ("slow", False)]


# --------------------------------------------------------------------------- idempotent start


async def test_run_with_the_same_id_twice(make_agent: AgentFactory) -> None:
    model = ScriptedModel([call("lookup", order_id="A1"), finish("once"), finish("twice")])
    agent = make_agent(model)
    first = await agent.run("task", run_id="x")
    assert first.run_id == "x"
    assert first.status is RunStatus.COMPLETED
    events = await agent.transcript("x")
    remaining = model.remaining
    second = await agent.run("a different task", run_id="x")
    assert second == first
    assert model.remaining == remaining == 1
    assert await agent.transcript("x") == events


async def test_run_with_the_id_of_a_paused_run(make_agent: AgentFactory, tools: Toolbox) -> None:
    model = ScriptedModel([call("delete_order", order_id="A1"), finish()])
    agent = make_agent(model, policy=NO_PLAN)
    first = await agent.run("Delete A1", run_id="p")
    second = await agent.run("Delete A1", run_id="p")
    assert second == first
    assert second.status is RunStatus.AWAITING_CONFIRMATION
    assert len(model.requests) == 1
    assert tools.calls == []


async def test_resume_of_a_completed_run(make_agent: AgentFactory) -> None:
    model = ScriptedModel([finish("done"), finish("again")])
    agent = make_agent(model)
    result = await agent.run("task")
    events = await agent.transcript(result.run_id)
    assert await agent.resume(result.run_id) == result
    assert await agent.resume(result.run_id, budget=Budget(max_steps=9)) == result
    assert model.remaining == 1
    assert await agent.transcript(result.run_id) == events


# --------------------------------------------------------------------------- providers


def always_down(messages: Sequence[Any]) -> BaseException:
    return ConnectionError("provider is down")


async def test_route_moves_the_step_to_the_next_model(make_agent: AgentFactory) -> None:
    down = ScriptedModel(always_down, name="down")
    good = ScriptedModel([call("lookup", order_id="A1"), finish("ok")], name="good")
    agent = make_agent([down, good])
    result = await agent.run("task")
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "ok"
    assert len(down.requests) == 2
    assert len(good.requests) == 2
    called = of_type(await agent.transcript(result.run_id), ModelCalled)
    assert [(c.model, c.outcome) for c in called] == [
        ("down", "error"),
        ("good", "ok"),
        ("down", "error"),
        ("good", "ok"),
    ]
    assert called[0].error is not None
    assert "provider is down" in called[0].error
    assert result.usage.steps == 2
    # The second model saw the same transcript the first was given.
    assert [m.content for m in good.requests[0].messages] == [
        m.content for m in down.requests[0].messages
    ]


async def test_single_model_error_fails_the_run(make_agent: AgentFactory) -> None:
    model = ScriptedModel([RuntimeError("overloaded")])
    agent = make_agent(model)
    result = await agent.run("task")
    assert result.status is RunStatus.FAILED
    assert result.reason is not None
    assert "overloaded" in result.reason
    assert "scripted" in result.reason
    (called,) = of_type(await agent.transcript(result.run_id), ModelCalled)
    assert called.outcome == "error"


async def test_exhausted_script_fails_the_run(make_agent: AgentFactory) -> None:
    model = ScriptedModel([call("lookup", order_id="A1")])
    result = await make_agent(model).run("task")
    assert result.status is RunStatus.FAILED
    assert result.reason is not None
    assert "this run used all of them" in result.reason


async def test_runs_sharing_a_scripted_model_each_follow_the_script(
    make_agent: AgentFactory,
) -> None:
    """One ScriptedModel made from a list, one Agent, three runs (two at once): each run
    follows the script from its own position in its own transcript."""
    model = ScriptedModel([call("lookup", order_id="A1"), finish("A1 shipped.")])
    agent = make_agent(model)
    first = await agent.run("task")
    both = await asyncio.gather(agent.run("task two"), agent.run("task three"))
    for result in (first, *both):
        assert result.status is RunStatus.COMPLETED, result.reason
        assert result.answer == "A1 shipped."
    assert model.remaining == 0
    assert len(model.requests) == 6


# --------------------------------------------------------------------------- context


async def test_context_provider_is_recorded_and_rendered(make_agent: AgentFactory) -> None:
    asked: list[ContextRequest] = []

    def retrieval(request: ContextRequest) -> str | None:
        asked.append(request)
        return f"policy doc for step {request.step}"

    model = ScriptedModel([call("lookup", order_id="A1"), finish()])
    agent = make_agent(model, context=retrieval)
    result = await agent.run("task", scope=["lookup"])
    assert [r.step for r in asked] == [1, 2]
    assert asked[0].run_id == result.run_id
    assert asked[0].task == "task"
    assert asked[0].scope == ("lookup",)
    added = of_type(await agent.transcript(result.run_id), ContextAdded)
    assert [(c.step, c.source, c.content) for c in added] == [
        (1, "retrieval", "policy doc for step 1"),
        (2, "retrieval", "policy doc for step 2"),
    ]
    assert "Context from retrieval:\npolicy doc for step 1" in seen(model, 0)
    assert "policy doc for step 2" not in seen(model, 0)
    assert "Context from retrieval:\npolicy doc for step 2" in seen(model, 1)


async def test_async_context_provider_and_empty_results(make_agent: AgentFactory) -> None:
    async def maybe(request: ContextRequest) -> str | None:
        await asyncio.sleep(0)
        return "first only" if request.step == 1 else None

    model = ScriptedModel([call("lookup", order_id="A1"), finish()])
    agent = make_agent(model, context=maybe)
    result = await agent.run("task")
    added = of_type(await agent.transcript(result.run_id), ContextAdded)
    assert [(c.step, c.content) for c in added] == [(1, "first only")]


async def test_context_is_not_gathered_again_on_resume(make_agent: AgentFactory) -> None:
    calls: list[int] = []

    def retrieval(request: ContextRequest) -> str:
        calls.append(request.step)
        return f"fresh context #{len(calls)}"

    model = ScriptedModel([RuntimeError("blip"), finish("recovered")])
    agent = make_agent(model, context=retrieval)
    failed = await agent.run("task")
    assert failed.status is RunStatus.FAILED
    assert calls == [1]
    # A failed run is resumed only by a person: a plain resume leaves it as it is.
    assert (await agent.resume(failed.run_id)).status is RunStatus.FAILED
    result = await agent.resume(failed.run_id, by="ops")
    assert result.status is RunStatus.COMPLETED
    assert calls == [1]  # step 1 already had its context, recorded
    assert seen(model).count("fresh context #1") == 1
    added = of_type(await agent.transcript(result.run_id), ContextAdded)
    assert len(added) == 1


# --------------------------------------------------------------------------- transcript


async def test_transcript_shape(make_agent: AgentFactory) -> None:
    model = ScriptedModel(
        [call("lookup", order_id="A1"), call("fetch_status", service="db"), finish()]
    )
    agent = make_agent(model)
    result = await agent.run("task", scope=["lookup", "fetch_status"], metadata={"tenant": "t1"})
    events = await agent.transcript(result.run_id)
    assert [e.seq for e in events] == list(range(len(events)))
    assert all(e.run_id == result.run_id for e in events)
    started = events[0]
    assert isinstance(started, RunStarted)
    assert started.task == "task"
    assert started.scope == ["lookup", "fetch_status"]
    assert started.contract == {"version": agent.contract.version, "hash": agent.contract.hash}
    assert started.route == ["scripted"]
    assert started.metadata == {"tenant": "t1"}
    assert isinstance(events[-1], RunFinished)
    assert [a.call_id for a in of_type(events, ActionProposed)] == ["c1", "c2", "c3"]
    tool_events = [e for e in events if isinstance(e, ToolStarted | ToolFinished)]
    assert [(type(e).__name__, e.call_id) for e in tool_events] == [
        ("ToolStarted", "c1"),
        ("ToolFinished", "c1"),
        ("ToolStarted", "c2"),
        ("ToolFinished", "c2"),
    ]
    starts = of_type(events, ToolStarted)
    assert [s.args for s in starts] == [{"order_id": "A1"}, {"service": "db"}]
    # Every tool_started comes after its action and decision, every finish after its start.
    index = {(type(e).__name__, getattr(e, "call_id", None)): e.seq for e in events}
    for cid in ("c1", "c2"):
        assert (
            index[("ActionProposed", cid)]
            < index[("Decision", cid)]
            < index[("ToolStarted", cid)]
            < index[("ToolFinished", cid)]
        )


async def test_transcript_on_sqlite_matches_memory(tmp_path: Path, tools: Toolbox) -> None:
    script = [call("lookup", order_id="A1"), finish("same")]
    mem = Agent(tools=tools.all, model=ScriptedModel(script), store="memory://")
    disk = Agent(
        tools=tools.all, model=ScriptedModel(script), store=f"sqlite:///{tmp_path / 't.db'}"
    )
    try:
        a = await mem.run("task", run_id="same")
        b = await disk.run("task", run_id="same")
        assert (a.status, a.answer, a.usage.steps) == (b.status, b.answer, b.usage.steps)

        def shape(events: list[Event]) -> list[tuple[str, int]]:
            return [(e.type, e.seq) for e in events]

        assert shape(await mem.transcript("same")) == shape(await disk.transcript("same"))
    finally:
        await mem.close()
        await disk.close()


def test_default_store_comes_from_the_environment(default_store_path: Path, tools: Toolbox) -> None:
    agent = Agent(tools=tools.all, model=ScriptedModel([finish()]))
    try:
        assert agent.run_sync("task", run_id="env").status is RunStatus.COMPLETED
    finally:
        asyncio.run(agent.close())
    assert default_store_path.exists()
    store = SQLiteStore(default_store_path)
    try:
        runs = asyncio.run(store.list_runs())
    finally:
        asyncio.run(store.close())
    assert [s.run_id for s in runs] == ["env"]


# --------------------------------------------------------------------------- sync twins


def test_sync_twins_outside_a_loop(tools: Toolbox) -> None:
    model = ScriptedModel(
        [
            call("delete_order", order_id="A1"),
            finish("deleted"),
            finish("unused"),
        ]
    )
    agent = Agent(tools=tools.all, model=model, store="memory://", policy=NO_PLAN)
    try:
        paused = agent.run_sync("Delete A1")
        assert paused.status is RunStatus.AWAITING_CONFIRMATION
        assert agent.resume_sync(paused.run_id).status is RunStatus.AWAITING_CONFIRMATION
        done = agent.confirm_sync(paused.run_id, approve=True, by="alice")
        assert done.status is RunStatus.COMPLETED
        assert done.answer == "deleted"
        assert agent.resume_sync(paused.run_id) == done
        assert tools.count("delete_order") == 1
    finally:
        asyncio.run(agent.close())


async def test_sync_twins_inside_a_loop_refuse(make_agent: AgentFactory) -> None:
    model = ScriptedModel([finish()])
    agent = make_agent(model)
    with pytest.raises(ConfigurationError, match="event loop"):
        agent.run_sync("task")
    with pytest.raises(ConfigurationError, match="event loop"):
        agent.confirm_sync("r", approve=True, by="alice")
    with pytest.raises(ConfigurationError, match="event loop"):
        agent.resume_sync("r")
    assert model.requests == []
    assert await agent.store.list_runs() == []


# --------------------------------------------------------------------------- cancel


async def test_cancel_is_final(make_agent: AgentFactory, tools: Toolbox, store_url: str) -> None:
    model = ScriptedModel([call("delete_order", order_id="A1"), finish()])
    agent = make_agent(model, store=store_url, policy=NO_PLAN)
    paused = await pause_on_delete(agent)
    cancelled = await agent.cancel(paused.run_id, by="ops", reason="ticket closed")
    assert cancelled.status is RunStatus.CANCELLED
    assert cancelled.reason is not None
    assert "cancelled by ops" in cancelled.reason
    assert "ticket closed" in cancelled.reason
    assert cancelled.pending is None
    events = await agent.transcript(paused.run_id)
    assert await agent.resume(paused.run_id) == cancelled
    assert await agent.resume(paused.run_id, budget=Budget(max_steps=50)) == cancelled
    with pytest.raises(NotAwaitingConfirmationError):
        await agent.confirm(paused.run_id, approve=True, by="alice")
    assert await agent.transcript(paused.run_id) == events
    assert len(model.requests) == 1
    assert tools.calls == []


async def test_cancel_a_completed_run_changes_nothing(make_agent: AgentFactory) -> None:
    agent = make_agent(ScriptedModel([finish("done")]))
    result = await agent.run("task")
    assert await agent.cancel(result.run_id, by="ops") == result


# --------------------------------------------------------------------------- configuration


def test_agent_refuses_bad_configuration(tools: Toolbox) -> None:
    def plain(x: int) -> int:
        return x

    with pytest.raises(ConfigurationError, match="not a tool"):
        Agent(tools=[plain], model=ScriptedModel([]), store="memory://")  # type: ignore[list-item]
    other = make_toolbox()
    with pytest.raises(ConfigurationError, match="'lookup'"):
        Agent(tools=[tools.lookup, other.lookup], model=ScriptedModel([]), store="memory://")
    with pytest.raises(ConfigurationError, match="Unknown model"):
        Agent(tools=tools.all, model="nosuchprovider/model", store="memory://")


async def test_empty_task_is_refused(make_agent: AgentFactory) -> None:
    agent = make_agent(ScriptedModel([finish()]))
    with pytest.raises(ConfigurationError, match="task is empty"):
        await agent.run("   ")


def test_agent_lints_examples_against_its_tools() -> None:
    @tool(effect="read")
    def get_weather(location: str) -> str:
        """Current weather for a place (no longer takes 'city')."""
        return location

    with pytest.raises(ConfigurationError, match="Read, then answer"):
        Agent(tools=[get_weather], model=ScriptedModel([]), store="memory://")


async def test_a_tool_the_step_did_not_offer_is_decided_once(
    make_agent: AgentFactory, tools: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An out-of-scope tool's reply is read as a decision, and that ruling is the call's
    decision: the dispatcher is asked once for it (issue 39: one owner per decision)."""
    import agentcore._run._loop as loop

    asked: list[str] = []
    real = loop.decide

    def counted(state: Any, action: Any, table: Any, *rules: Any) -> Any:
        asked.append(getattr(action, "tool", action.type))
        return real(state, action, table, *rules)

    monkeypatch.setattr(loop, "decide", counted)
    model = ScriptedModel([OUT_OF_SCOPE["typed"], finish("cannot")])
    result = await make_agent(model).run("Check the db", scope=["lookup"])
    assert result.status is RunStatus.COMPLETED
    assert asked == ["fetch_status", "finish"]
