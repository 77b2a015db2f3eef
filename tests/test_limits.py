"""A run can never become unreadable: the limits at every entrance (issue: integrity, part 1).

Each test drives a run through the public API with a value that, before the limits, was
recorded and then broke its own decoder (or escaped as a raw exception), and checks that
the run still reads back, checks clean and resumes from a SQLite file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import Toolbox

from agentcore import Agent, Budget, Policy, RunStatus, ToolContext, check_transcript, tool
from agentcore.adapters import ScriptedModel
from agentcore.errors import ConfigurationError, LimitExceededError
from agentcore.events import ModelCalled, ToolFinished
from agentcore.limits import MAX_DEPTH, check_run_id, json_problem
from agentcore.stores import SQLiteStore
from agentcore.testing import finish


def nested(depth: int, leaf: object = 1) -> object:
    """``depth`` lists, one inside the other, around ``leaf``."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@tool(effect="read")
def keep(payload: Any) -> str:  # Any: a tool that accepts any JSON value
    """Store a JSON payload.

    Args:
        payload: any JSON value.
    """
    return "kept"


@tool(effect="read")
def measure(x: float) -> float:
    """Double a number.

    Args:
        x: the number.
    """
    return x * 2


async def readback(db: Path, run_id: str) -> list[Any]:  # Any: events
    """The run as a fresh store object decodes it; asserts it checks clean."""
    store = SQLiteStore(db)
    try:
        events = await store.load(run_id)
    finally:
        await store.close()
    assert check_transcript(events) == []
    return events


# ------------------------------------------------------------------ replies from a model


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (
            {"type": "tool", "thought": "t", "tool": "keep", "args": {"payload": nested(100)}},
            "nested deeper than 64",
        ),
        (
            {"type": "tool", "thought": "t", "tool": "keep", "args": {"payload": nested(200)}},
            "",
        ),
        (
            '{"type":"tool","thought":"t","tool":"keep","args":{"payload":' + "7" * 30_000 + "}}",
            "",
        ),
        (
            {"type": "tool", "thought": "t", "tool": "keep", "args": {"payload": 2**64}},
            "outside 64 bits",
        ),
        (
            {"type": "tool", "thought": "t", "tool": "keep", "args": {"payload": math.nan}},
            "not a JSON number",
        ),
        (
            {"type": "tool", "thought": "t", "tool": "measure", "args": {"x": math.inf}},
            "finite number",
        ),
        (
            '{"type":"tool","thought":"t","tool":"keep","args":{"payload":'
            + "[" * 100_000
            + "]" * 100_000
            + "}}",
            "",
        ),
    ],
    ids=[
        "deep-100",
        "deep-200",
        "int-30000-digits",
        "int-2**64",
        "nan",
        "inf-typed-float",
        "deep-100000",
    ],
)
async def test_a_reply_that_breaks_a_limit_is_reasked_and_the_run_stays_readable(
    tmp_path: Path, reply: object, why: str
) -> None:
    db = tmp_path / "runs.db"
    policy = Policy(max_reply_bytes=1_000_000)
    agent = Agent(
        tools=[keep, measure],
        model=ScriptedModel([reply, finish()]),
        store=f"sqlite:///{db}",
        policy=policy,
    )
    result = await agent.run("store it", budget=Budget(max_steps=3))
    await agent.close()

    assert result.status is RunStatus.COMPLETED, result.reason
    events = await readback(db, result.run_id)
    invalid = [e for e in events if isinstance(e, ModelCalled) and e.outcome == "invalid"]
    assert len(invalid) == 1
    assert why in (invalid[0].error or "")


async def test_generic_args_json_that_breaks_a_limit_is_reasked(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    deep = json.dumps({"payload": nested(150)})
    reply = {"type": "tool", "thought": "t", "tool": "keep", "args_json": deep}
    agent = Agent(
        tools=[keep],
        model=ScriptedModel([reply, finish()]),
        store=f"sqlite:///{db}",
        policy=Policy(schema_form="generic"),
    )
    result = await agent.run("store it", budget=Budget(max_steps=3))
    await agent.close()
    assert result.status is RunStatus.COMPLETED, result.reason
    events = await readback(db, result.run_id)
    assert any(isinstance(e, ModelCalled) and e.outcome == "invalid" for e in events)


async def test_a_reply_with_a_lone_surrogate_is_recorded_as_text_and_reasked(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    agent = Agent(
        tools=[keep],
        model=ScriptedModel(['{"type": "finish", "thought": "x", "answer": "\ud800"}', finish()]),
        store=f"sqlite:///{db}",
    )
    result = await agent.run("answer", budget=Budget(max_steps=3))
    await agent.close()
    assert result.status is RunStatus.COMPLETED
    events = await readback(db, result.run_id)
    (bad,) = [e for e in events if isinstance(e, ModelCalled) and e.outcome == "invalid"]
    assert bad.reply is not None and "\ud800" not in bad.reply


async def test_nan_arguments_never_run_so_stored_and_run_arguments_agree(tmp_path: Path) -> None:
    seen: list[float] = []

    @tool(effect="read")
    def record(x: float) -> str:
        """Record a number.

        Args:
            x: the number.
        """
        seen.append(x)
        return "ok"

    db = tmp_path / "runs.db"
    agent = Agent(
        tools=[record],
        model=ScriptedModel(
            [
                '{"type":"tool","thought":"t","tool":"record","args":{"x":NaN}}',
                {"type": "tool", "thought": "t", "tool": "record", "args": {"x": 1.5}},
                finish(),
            ]
        ),
        store=f"sqlite:///{db}",
    )
    result = await agent.run("record", budget=Budget(max_steps=4))
    await agent.close()
    assert result.status is RunStatus.COMPLETED
    assert seen == [1.5]
    await readback(db, result.run_id)


# ------------------------------------------------------------------ results from a tool


class Cycle:
    pass


def _cyclic() -> object:
    loop: list[object] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (nested(200), "nested deeper than 64"),
        (10**30000, "outside 64 bits"),
        ({"bad": "\ud800"}, "lone surrogate"),
        ({"x": math.nan}, "not a JSON number"),
        (_cyclic(), "not JSON-ready"),
        (b"\x00\xff", "not JSON-ready"),
        (Cycle(), "not JSON-ready"),
    ],
    ids=["deep-200", "int-30000-digits", "surrogate", "nan", "cyclic", "bytes", "object"],
)
async def test_a_result_that_cannot_be_recorded_is_an_error_observation(
    tmp_path: Path, value: object, why: str
) -> None:
    @tool(effect="read")
    def produce() -> Any:  # Any: whatever the test returns
        """Produce a value."""
        return value

    db = tmp_path / "runs.db"
    agent = Agent(
        tools=[produce],
        model=ScriptedModel(
            [{"type": "tool", "thought": "t", "tool": "produce", "args": {}}, finish()]
        ),
        store=f"sqlite:///{db}",
    )
    result = await agent.run("produce", budget=Budget(max_steps=3))
    await agent.close()
    assert result.status is RunStatus.COMPLETED, result.reason
    events = await readback(db, result.run_id)
    (done,) = [e for e in events if isinstance(e, ToolFinished)]
    assert not done.ok
    assert why in (done.error or "")


async def test_a_tool_error_message_with_a_lone_surrogate_is_recorded(tmp_path: Path) -> None:
    @tool(effect="read")
    def fail() -> str:
        """Fail oddly."""
        raise ValueError("broken \udc80 text")

    db = tmp_path / "runs.db"
    agent = Agent(
        tools=[fail],
        model=ScriptedModel(
            [{"type": "tool", "thought": "t", "tool": "fail", "args": {}}, finish()]
        ),
        store=f"sqlite:///{db}",
    )
    result = await agent.run("fail", budget=Budget(max_steps=3))
    await agent.close()
    events = await readback(db, result.run_id)
    (done,) = [e for e in events if isinstance(e, ToolFinished)]
    assert done.error is not None and "broken" in done.error


async def test_a_large_result_is_stored_truncated_with_its_size_and_hash(tmp_path: Path) -> None:
    big = {"rows": ["é" * 100 for _ in range(4000)]}  # ~800 KB of JSON
    full = json.dumps(big, ensure_ascii=False, separators=(",", ":")).encode()

    @tool(effect="read")
    def dump() -> dict[str, list[str]]:
        """Dump a table."""
        return big

    seen: list[str] = []

    def model(messages: Any) -> dict[str, str]:  # Any: rendered messages
        if seen:
            return finish()
        seen.append("asked")
        return {"type": "tool", "thought": "t", "tool": "dump", "args": {}}

    db = tmp_path / "runs.db"
    agent = Agent(
        tools=[dump],
        model=ScriptedModel(model),
        store=f"sqlite:///{db}",
        policy=Policy(max_tool_result_bytes=100_000, max_observation_chars=200),
    )
    result = await agent.run("dump", budget=Budget(max_steps=3))
    await agent.close()
    events = await readback(db, result.run_id)
    (done,) = [e for e in events if isinstance(e, ToolFinished)]
    assert done.ok
    assert done.result_bytes == len(full)
    import hashlib

    assert done.result_sha256 == hashlib.sha256(full).hexdigest()
    assert isinstance(done.result, str)
    assert len(done.result.encode()) <= 100_000
    assert full.decode().startswith(done.result)


async def test_the_model_is_told_a_result_was_truncated(tmp_path: Path) -> None:
    @tool(effect="read")
    def dump() -> str:
        """Dump a log."""
        return "x" * 50_000

    replies: list[str] = []

    def model(messages: Any) -> dict[str, str]:  # Any: rendered messages
        if replies:
            replies.append(messages[-2].content)
            return finish()
        replies.append("first")
        return {"type": "tool", "thought": "t", "tool": "dump", "args": {}}

    agent = Agent(
        tools=[dump],
        model=ScriptedModel(model),
        store="memory://",
        policy=Policy(max_tool_result_bytes=1_000),
    )
    await agent.run("dump", budget=Budget(max_steps=3))
    assert "only its start was kept" in replies[1]
    assert "50002 bytes" in replies[1]


# ------------------------------------------------------------------ values from people and code


async def test_edited_approval_arguments_are_checked(tools: Toolbox, tmp_path: Path) -> None:
    agent = Agent(
        tools=tools.all,
        model=ScriptedModel(
            [
                {
                    "type": "tool",
                    "thought": "t",
                    "tool": "delete_order",
                    "args": {"order_id": "A1"},
                },
                finish(),
            ]
        ),
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        policy=Policy(plan_before_writes=False),
    )
    waiting = await agent.run("delete", budget=Budget(max_steps=3))
    assert waiting.status is RunStatus.AWAITING_CONFIRMATION
    with pytest.raises(ConfigurationError):
        await agent.confirm(waiting.run_id, approve=True, by="alice", args={"order_id": "\ud800"})
    with pytest.raises(LimitExceededError, match="surrogate"):
        await agent.confirm(waiting.run_id, approve=False, by="bob \ud800")
    still = await agent.result(waiting.run_id)
    assert still.status is RunStatus.AWAITING_CONFIRMATION
    done = await agent.confirm(waiting.run_id, approve=True, by="alice", args={"order_id": "B2"})
    assert done.status is RunStatus.COMPLETED
    assert tools.args_of("delete_order") == [{"order_id": "B2"}]
    await agent.close()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metadata": {"deep": nested(100)}}, "nested deeper"),
        ({"metadata": {"n": math.inf}}, "not a JSON number"),
        ({"metadata": {"s": "\udfff"}}, "surrogate"),
    ],
)
async def test_metadata_that_breaks_a_limit_is_refused(
    kwargs: dict[str, Any], match: str
) -> None:  # Any: keyword arguments
    agent = Agent(tools=[keep], model=ScriptedModel([finish()]), store="memory://")
    with pytest.raises(LimitExceededError, match=match):
        await agent.run("go", **kwargs)
    assert await agent.store.list_runs() == []


async def test_a_task_with_a_lone_surrogate_is_refused() -> None:
    agent = Agent(tools=[keep], model=ScriptedModel([finish()]), store="memory://")
    with pytest.raises(LimitExceededError, match="task"):
        await agent.run("do \ud83d it")


async def test_context_provider_output_is_checked() -> None:
    def bad_context(request: Any) -> str:  # Any: the ContextRequest
        return "odd \ud800 context"

    agent = Agent(
        tools=[keep], model=ScriptedModel([finish()]), store="memory://", context=bad_context
    )
    with pytest.raises(LimitExceededError, match="bad_context"):
        await agent.run("go")


async def test_resolve_with_an_unrecordable_result_is_refused(tmp_path: Path) -> None:
    calls: list[str] = []

    @tool(effect="write", idempotent=False)
    def pay(amount: int, ctx: ToolContext) -> str:
        """Pay.

        Args:
            amount: cents.
        """
        calls.append(ctx.idempotency_key)
        return "paid"

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    from agentcore.events import ActionProposed, Decision, RunStarted, ToolStarted

    agent = Agent(
        tools=[pay],
        model=ScriptedModel([finish()]),
        store=db,
        policy=Policy(plan_before_writes=False),
    )
    # A lost call: tool_started with no tool_finished (the worker died inside the tool).
    first = await agent.run("pay", run_id="r1", budget=Budget(max_steps=3))
    assert first.status is RunStatus.COMPLETED  # a finished run, to read run_started from
    events = await agent.transcript("r1")
    started = events[0]
    assert isinstance(started, RunStarted)
    run2 = started.model_copy(update={"run_id": "r2"})
    from agentcore.contracts import ToolAction

    action = ToolAction(thought="pay", tool="pay", args={"amount": 5})
    await agent.store.append(
        "r2",
        0,
        [
            run2,
            ActionProposed(run_id="r2", seq=1, at=1.0, step=1, call_id="c1", action=action),
            Decision(run_id="r2", seq=2, at=1.0, step=1, call_id="c1", verdict="execute"),
            ToolStarted(
                run_id="r2",
                seq=3,
                at=1.0,
                step=1,
                call_id="c1",
                tool="pay",
                args={"amount": 5},
                idempotency_key="r2:1",
            ),
        ],
    )
    lost = await agent.resume("r2")
    assert lost.status is RunStatus.NEEDS_ATTENTION
    with pytest.raises(LimitExceededError):
        await agent.resolve("r2", by="ops", result={"receipt": math.nan})
    assert (await agent.result("r2")).status is RunStatus.NEEDS_ATTENTION
    assert calls == []
    await agent.close()


# ------------------------------------------------------------------ the rules themselves


def test_the_limits_name_the_path_of_the_problem() -> None:
    assert (
        json_problem({"a": [1, {"b": math.nan}]}) == "$.a[1].b is nan, which is not a JSON number"
    )
    assert json_problem(nested(MAX_DEPTH)) is None
    assert json_problem(nested(MAX_DEPTH + 1)) is not None
    assert json_problem(2**64 - 1) is None
    assert json_problem(-(2**63)) is None
    assert json_problem(2**64) is not None
    assert json_problem({1: "x"}) is not None
    assert json_problem({"k\ud800": 1}) is not None
    deep = nested(100_000)  # deeper than Python's recursion limit
    assert "nested deeper" in (json_problem(deep) or "")


@pytest.mark.parametrize("bad", ["", "a" * 201, "a\nb", "a\x00b", "x\x7f", "\ud800"])
def test_bad_run_ids_are_refused(bad: str) -> None:
    with pytest.raises(LimitExceededError):
        check_run_id(bad)


def test_good_run_ids_pass() -> None:
    for good in ["r1", "a" * 200, "order:42/attempt-1", "заказ-7", "🙂"]:
        check_run_id(good)


async def test_an_event_from_a_newer_format_is_refused_by_name(tmp_path: Path) -> None:
    import sqlite3

    from agentcore.errors import StoreCorruptedError

    db = tmp_path / "runs.db"
    agent = Agent(tools=[keep], model=ScriptedModel([finish()]), store=f"sqlite:///{db}")
    result = await agent.run("go", run_id="r1")
    await agent.close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET body = replace(body, '\"v\":1', '\"v\":9') WHERE seq = 0")
    store = SQLiteStore(db)
    with pytest.raises(StoreCorruptedError, match="format version 9, newer"):
        await store.load(result.run_id)
    await store.close()
