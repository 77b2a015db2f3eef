"""Property tests: hostile values never make a run unreadable (issue: integrity, part 1).

Hypothesis generates values a model, a tool or a caller could send (deep, wide, huge
numbers, NaN and Infinity, odd Unicode including lone surrogates) and each property runs
them through the public API against a SQLite file, then checks: the transcript reads back
from a fresh store object, ``check_transcript`` finds nothing, and ``resume`` works.

Profile: a fixed seed (``derandomize``), 200 examples per property, no per-example
deadline (the machine is shared), and each example bounded by the sizes below.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore import Agent, Budget, Policy, RunStatus, check_transcript, tool
from agentcore._state import RunState  # the fold: compared with every store's listing
from agentcore.adapters import ScriptedModel
from agentcore.contracts import FinishAction, PlanAction, ToolAction
from agentcore.errors import LimitExceededError
from agentcore.events import (
    ActionProposed,
    Confirmation,
    ContextAdded,
    Decision,
    Event,
    ModelCalled,
    Resolution,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from agentcore.stores import MemoryStore, SQLiteStore
from agentcore.testing import finish

HOSTILE = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Any Unicode scalar value, plus lone surrogates (hypothesis leaves those out by default).
# Half the characters come from a list of troublemakers.
TROUBLE = "\ud800\udfff\udc80\x00\x1b\x7f\u2028\u202e\ufeff\u0301\U0001f600\U0010ffff"
odd_text = st.text(st.one_of(st.characters(codec=None), st.sampled_from(TROUBLE)), max_size=40)
numbers = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([2**63 - 1, -(2**63), 2**64 - 1, 2**64, 10**400])
    | st.floats(allow_nan=True, allow_infinity=True)
)
scalars = st.none() | st.booleans() | numbers | odd_text


def _deep(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = {"k": value} if depth % 2 else [value]
    return value


json_like = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(odd_text, inner, max_size=5),
    max_leaves=30,
)
hostile = (
    json_like
    | st.builds(_deep, st.integers(1, 400), scalars)
    | st.builds(lambda n: list(range(n)), st.integers(0, 3000))
)


@tool(effect="read")
def keep(payload: Any) -> str:  # Any: a tool that takes any JSON value
    """Keep a payload.

    Args:
        payload: any JSON value.
    """
    return "kept"


async def _check_readable(db: Path, agent: Agent, run_id: str) -> None:
    fresh = SQLiteStore(db)
    try:
        events = await fresh.load(run_id)
        listed = {s.run_id: s.status for s in await fresh.list_runs(limit=10_000)}
    finally:
        await fresh.close()
    assert check_transcript(events) == [], events
    state = RunState(run_id)
    for ev in events:
        state.apply(ev)
    assert listed[run_id] == state.status.value
    resumed = await agent.resume(run_id, by="property-test")
    assert resumed.run_id == run_id


def _reply_text(payload: object) -> str:
    """A reply as a model could write it (Python's json writes NaN, Infinity, big ints)."""
    try:
        inner = json.dumps(payload, ensure_ascii=False)
    except ValueError:  # an integer longer than Python's str conversion limit
        inner = "7" * 5000
    return '{"type":"tool","thought":"t","tool":"keep","args":{"payload":' + inner + "}}"


@HOSTILE
@given(payload=hostile)
def test_hostile_replies_never_make_a_run_unreadable(tmp_path: Path, payload: object) -> None:
    db = tmp_path / "hostile-replies.db"

    async def go() -> None:
        agent = Agent(
            tools=[keep],
            model=ScriptedModel([_reply_text(payload), finish(), finish()]),
            store=f"sqlite:///{db}",
            policy=Policy(max_reply_bytes=2_000_000),
        )
        try:
            result = await agent.run("keep it", budget=Budget(max_steps=4))
            assert result.status is RunStatus.COMPLETED, result.reason
            await _check_readable(db, agent, result.run_id)
        finally:
            await agent.close()

    asyncio.run(go())


@HOSTILE
@given(value=hostile)
def test_hostile_tool_results_never_make_a_run_unreadable(tmp_path: Path, value: object) -> None:
    db = tmp_path / "hostile-results.db"

    @tool(effect="read")
    def produce() -> Any:  # Any: the hostile value
        """Produce the value."""
        return value

    async def go() -> None:
        agent = Agent(
            tools=[produce],
            model=ScriptedModel(
                [{"type": "tool", "thought": "t", "tool": "produce", "args": {}}, finish()]
            ),
            store=f"sqlite:///{db}",
            policy=Policy(max_tool_result_bytes=4_096),
        )
        try:
            result = await agent.run("produce", budget=Budget(max_steps=3))
            assert result.status is RunStatus.COMPLETED, result.reason
            await _check_readable(db, agent, result.run_id)
        finally:
            await agent.close()

    asyncio.run(go())


@HOSTILE
@given(run_id=odd_text | st.text(min_size=150, max_size=260))
def test_hostile_run_ids_are_refused_or_read_back(tmp_path: Path, run_id: str) -> None:
    db = tmp_path / "hostile-ids.db"

    async def go() -> None:
        agent = Agent(tools=[keep], model=ScriptedModel([finish()]), store=f"sqlite:///{db}")
        try:
            try:
                result = await agent.run("go", run_id=run_id)
            except LimitExceededError:
                return  # refused with a clear reason: nothing to read back
            assert result.run_id == run_id
            await _check_readable(db, agent, result.run_id)
        finally:
            await agent.close()

    asyncio.run(go())


@HOSTILE
@given(meta=hostile)
def test_hostile_metadata_is_refused_or_reads_back(tmp_path: Path, meta: object) -> None:
    db = tmp_path / "hostile-meta.db"

    async def go() -> None:
        agent = Agent(tools=[keep], model=ScriptedModel([finish()]), store=f"sqlite:///{db}")
        try:
            try:
                result = await agent.run("go", metadata={"m": meta})
            except LimitExceededError:
                return
            await _check_readable(db, agent, result.run_id)
        finally:
            await agent.close()

    asyncio.run(go())


# ------------------------------------------------------------------ the status rule


def _started(run_id: str) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        seq=0,
        at=0.0,
        task="t",
        scope=["keep"],
        budget={},
        policy={},
        contract={},
        route=["scripted"],
        tools={},
    )


@st.composite
def event_sequences(draw: st.DrawFn) -> list[Event]:
    """Random transcripts that fold: any status, any order of the continuation events."""
    run_id = "r"
    events: list[Event] = [_started(run_id)]
    step = 0
    open_call: str | None = None
    for _ in range(draw(st.integers(0, 25))):
        seq = len(events)
        base = {"run_id": run_id, "seq": seq, "at": float(seq)}
        kinds = ["model", "finish", "resume", "context", "propose"]
        if open_call is not None:
            kinds += ["decide", "confirm", "start", "end", "resolve"]
        kind = draw(st.sampled_from(kinds))
        call = open_call or ""
        match kind:
            case "model":
                outcome = draw(st.sampled_from(["ok", "invalid", "error"]))
                ev: Event = ModelCalled(**base, step=step + 1, model="m", outcome=outcome)
            case "finish":
                status = draw(st.sampled_from([s.value for s in RunStatus]))
                ev = RunFinished(**base, status=status)
            case "resume":
                ev = RunResumed(**base, recovery=draw(st.booleans()))
            case "context":
                ev = ContextAdded(**base, step=step + 1, source="s", content="c")
            case "propose":
                step += 1
                open_call = f"c{step}"
                action = draw(
                    st.sampled_from(
                        [
                            ToolAction(thought="t", tool="keep", args={"payload": 1}),
                            PlanAction(thought="t", steps=["a"]),
                            FinishAction(thought="t", answer="a"),
                        ]
                    )
                )
                ev = ActionProposed(**base, step=step, call_id=open_call, action=action)
            case "decide":
                verdict = draw(st.sampled_from(["execute", "deny", "needs_confirmation"]))
                ev = Decision(**base, step=step, call_id=call, verdict=verdict)
            case "confirm":
                ev = Confirmation(
                    **base, step=step, call_id=call, approved=draw(st.booleans()), by="p"
                )
            case "start":
                ev = ToolStarted(
                    **base, step=step, call_id=call, tool="keep", args={}, idempotency_key="k"
                )
            case "end":
                ev = ToolFinished(**base, step=step, call_id=call, tool="keep", ok=True)
            case _:
                decision = draw(st.sampled_from(["result", "rerun", "fail"]))
                ev = Resolution(**base, step=step, call_id=call, decision=decision, by="p")
        events.append(ev)
    return events


@HOSTILE
@given(events=event_sequences(), cut=st.integers(1, 5))
def test_the_fold_and_every_store_agree_on_the_status(
    tmp_path: Path, events: list[Event], cut: int
) -> None:
    state = RunState("r")
    for ev in events:
        state.apply(ev)

    async def listed(store: MemoryStore | SQLiteStore) -> str:
        try:
            for start in range(0, len(events), cut):  # batches of various sizes
                await store.append("r", start, events[start : start + cut])
            (summary,) = await store.list_runs()
            return summary.status
        finally:
            await store.close()

    db = tmp_path / "status.db"
    db.unlink(missing_ok=True)
    assert asyncio.run(listed(MemoryStore())) == state.status.value
    assert asyncio.run(listed(SQLiteStore(db))) == state.status.value


def test_a_resolution_lists_as_running_in_every_store(tmp_path: Path) -> None:
    action = ToolAction(thought="t", tool="keep", args={})
    base = {"run_id": "r", "at": 1.0}
    events: list[Event] = [
        _started("r"),
        ActionProposed(**base, seq=1, step=1, call_id="c1", action=action),
        Decision(**base, seq=2, step=1, call_id="c1", verdict="execute"),
        ToolStarted(**base, seq=3, step=1, call_id="c1", tool="keep", args={}, idempotency_key="k"),
        RunFinished(**base, seq=4, status="needs_attention"),
        Resolution(**base, seq=5, step=1, call_id="c1", decision="rerun", by="ops"),
    ]

    async def listed(store: MemoryStore | SQLiteStore) -> str:
        await store.append("r", 0, events)
        (summary,) = await store.list_runs()
        await store.close()
        return summary.status

    assert asyncio.run(listed(MemoryStore())) == "running"
    assert asyncio.run(listed(SQLiteStore(tmp_path / "s.db"))) == "running"
