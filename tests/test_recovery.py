"""Recovery through the public API, in one process.

A tool that raises CancelledError stands in for a process that died while the tool ran:
the driver keeps what it recorded (tool_started is durable) and the run stays `running`,
exactly the state a crash leaves. Process-level kills are in tests/faults/.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentcore import Agent, Budget, Policy, RunStatus, ToolContext, check_transcript, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import (
    ConfigurationError,
    RunError,
    StoreError,
    ToolManifestChangedError,
)
from agentcore.events import (
    Event,
    Resolution,
    RunResumed,
    ToolFinished,
    ToolStarted,
)
from agentcore.stores import CallGuardStore, MemoryStore, SQLiteStore, TranscriptStore

NO_PLAN = Policy(plan_before_writes=False)


class Crashy:
    """Side effects counted; the first `crash_times` calls die mid-call (after starting)."""

    def __init__(self, crash_times: int = 1) -> None:
        self.crash_times = crash_times
        self.calls: list[str] = []  # idempotency keys of calls that got to run
        self.done: dict[str, Any] = {}

    async def __call__(self, amount: int, ctx: ToolContext) -> dict[str, Any]:
        self.calls.append(ctx.idempotency_key)
        if len(self.calls) <= self.crash_times:
            raise asyncio.CancelledError  # the process "dies" while the tool runs
        self.done[ctx.idempotency_key] = {"charged": amount}
        return {"charged": amount}


def pay_tool(impl: Crashy, *, idempotent: bool, reconcile: Any = None, doc: str = "") -> Any:
    async def pay(amount: int, ctx: ToolContext) -> dict[str, Any]:
        return await impl(amount, ctx)

    pay.__doc__ = "Charge the customer." + doc
    return tool(effect="write", idempotent=idempotent, reconcile=reconcile)(pay)


def script() -> ScriptedModel:
    """Pay once, then finish; decided from the conversation so any agent can continue."""

    def next_action(messages: Sequence[Message]) -> dict[str, Any]:
        if any(m.role == "user" and "pay returned" in m.content for m in messages):
            return {"type": "finish", "thought": "paid", "answer": "paid"}
        if any(m.role == "user" and "pay failed" in m.content for m in messages):
            return {"type": "finish", "thought": "failed", "answer": "not paid"}
        return {"type": "tool", "thought": "pay", "tool": "pay", "args": {"amount": 5}}

    return ScriptedModel(next_action)


def of(events: Sequence[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


async def crash_run(agent: Agent, run_id: str = "r1") -> None:
    with pytest.raises(asyncio.CancelledError):
        await agent.run("pay 5", run_id=run_id)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


async def test_cancelled_task_leaves_the_run_running_with_the_intent_durable(
    store: MemoryStore,
) -> None:
    impl = Crashy()
    agent = Agent(
        tools=[pay_tool(impl, idempotent=False)], model=script(), store=store, policy=NO_PLAN
    )
    await crash_run(agent)
    result = await agent.result("r1")
    assert result.status is RunStatus.RUNNING
    events = await agent.transcript("r1")
    assert [e.type for e in events][-1] == "tool_started"
    assert check_transcript(events) == []


async def test_non_idempotent_lost_call_needs_attention_then_resolve_with_result(
    store: MemoryStore,
) -> None:
    impl = Crashy()
    agent = Agent(
        tools=[pay_tool(impl, idempotent=False)], model=script(), store=store, policy=NO_PLAN
    )
    await crash_run(agent)
    result = await agent.resume("r1")
    assert result.status is RunStatus.NEEDS_ATTENTION
    assert result.reason is not None
    assert "'pay'" in result.reason
    assert "agentcore resolve r1" in result.reason
    assert impl.calls == ["r1:1"]  # never re-run blindly
    # Resuming again changes nothing and runs nothing.
    again = await agent.resume("r1")
    assert again.status is RunStatus.NEEDS_ATTENTION
    assert impl.calls == ["r1:1"]

    done = await agent.resolve("r1", by="ops", result={"charged": 5}, reason="seen in Stripe")
    assert done.status is RunStatus.COMPLETED
    assert done.answer == "paid"
    assert impl.calls == ["r1:1"]
    events = await agent.transcript("r1")
    (res,) = of(events, Resolution)
    assert (res.decision, res.by, res.reason) == ("result", "ops", "seen in Stripe")
    finished = of(events, ToolFinished)
    assert finished[0].ok
    assert finished[0].result == {"charged": 5}
    assert check_transcript(events) == []


async def test_resolve_rerun_runs_the_call_once_more(store: MemoryStore) -> None:
    impl = Crashy()
    agent = Agent(
        tools=[pay_tool(impl, idempotent=False)], model=script(), store=store, policy=NO_PLAN
    )
    await crash_run(agent)
    await agent.resume("r1")
    done = await agent.resolve("r1", by="ops", rerun=True)
    assert done.status is RunStatus.COMPLETED
    assert impl.calls == ["r1:1", "r1:1"]  # same idempotency key
    events = await agent.transcript("r1")
    assert len(of(events, ToolStarted)) == 2
    assert check_transcript(events) == []


async def test_resolve_fail_shows_the_failure_to_the_model(store: MemoryStore) -> None:
    impl = Crashy()
    model = script()
    agent = Agent(
        tools=[pay_tool(impl, idempotent=False)], model=model, store=store, policy=NO_PLAN
    )
    await crash_run(agent)
    await agent.resume("r1")
    done = await agent.resolve("r1", by="ops", fail=True, reason="card declined")
    assert done.status is RunStatus.COMPLETED
    assert done.answer == "not paid"
    last = [m.content for m in model.requests[-1].messages]
    assert any("marked as failed by ops: card declined" in c for c in last)
    assert impl.calls == ["r1:1"]


async def test_resolve_refuses_bad_requests(store: MemoryStore) -> None:
    impl = Crashy(crash_times=0)
    agent = Agent(
        tools=[pay_tool(impl, idempotent=False)], model=script(), store=store, policy=NO_PLAN
    )
    result = await agent.run("pay", run_id="ok")
    assert result.status is RunStatus.COMPLETED
    with pytest.raises(RunError, match="no call with a lost outcome"):
        await agent.resolve("ok", by="ops", rerun=True)
    with pytest.raises(ConfigurationError, match="exactly one"):
        await agent.resolve("ok", by="ops", rerun=True, fail=True)
    with pytest.raises(ConfigurationError, match="by="):
        await agent.resolve("ok", by=" ", rerun=True)


@pytest.mark.parametrize("found", [True, False])
async def test_reconcile_decides_for_a_lost_non_idempotent_call(
    store: MemoryStore, found: bool
) -> None:
    impl = Crashy()
    asked: list[str] = []

    def reconcile(key: str) -> Any:
        asked.append(key)
        return {"charged": 5, "from": "ledger"} if found else None

    agent = Agent(
        tools=[pay_tool(impl, idempotent=False, reconcile=reconcile)],
        model=script(),
        store=store,
        policy=NO_PLAN,
    )
    await crash_run(agent)
    done = await agent.resume("r1")
    assert done.status is RunStatus.COMPLETED
    assert asked == ["r1:1"]
    events = await agent.transcript("r1")
    if found:
        assert impl.calls == ["r1:1"]  # adopted, not re-run
        assert of(events, ToolFinished)[0].result == {"charged": 5, "from": "ledger"}
    else:
        assert impl.calls == ["r1:1", "r1:1"]  # did not happen: run once
    assert check_transcript(events) == []


def ledger_reconcile(impl: Crashy, asked: list[str]) -> Any:
    def reconcile(key: str) -> Any:
        asked.append(key)
        return impl.done.get(key)

    return reconcile


def reconcilable(
    store: TranscriptStore, impl: Crashy, asked: list[str], *, lost_call_wait_s: float = 300
) -> Agent:
    """An agent whose non-idempotent pay tool reconciles from ``impl``'s record of what
    happened (each key asked is appended to ``asked``)."""
    return Agent(
        tools=[pay_tool(impl, idempotent=False, reconcile=ledger_reconcile(impl, asked))],
        model=script(),
        store=store,
        policy=NO_PLAN,
        lost_call_wait_s=lost_call_wait_s,
    )


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
@pytest.mark.parametrize("then", ["finishes", "stays"])
async def test_a_lost_call_whose_guard_is_held_is_waited_for_never_rerun(
    tmp_path: Path, store_kind: str, then: str
) -> None:
    """The call's guard is held (as by a stalled worker still inside the call): reconcile
    finds nothing, yet the call is not run again. When the holder makes the effect and
    lets go, the waiting resume adopts it; when it holds on past lost_call_wait_s, the run
    stops as needs_attention saying why, and nothing ran twice."""
    store: TranscriptStore = (
        MemoryStore() if store_kind == "memory" else SQLiteStore(tmp_path / "r.db")
    )
    impl, asked = Crashy(), list[str]()
    agent = reconcilable(store, impl, asked, lost_call_wait_s=0.6 if then == "stays" else 30)
    await crash_run(agent)
    (started,) = of(await agent.transcript("r1"), ToolStarted)
    assert started.guarded
    assert isinstance(store, CallGuardStore)
    async with store.guard_call("r1", "r1:1") as held:  # the stalled worker, still running
        assert held
        assert await store.call_running("r1", "r1:1")
        resuming = asyncio.create_task(agent.resume("r1"))
        await asyncio.sleep(0.9)
        if then == "finishes":
            assert not resuming.done()  # waiting, not re-running
            impl.done["r1:1"] = {"charged": 5, "by": "the stalled worker"}
    result = await resuming
    assert not await store.call_running("r1", "r1:1")
    assert impl.calls == ["r1:1"]  # never a second execution
    if then == "finishes":
        assert result.status is RunStatus.COMPLETED
        assert asked == ["r1:1"]  # asked once the guard was free
        finished = of(await agent.transcript("r1"), ToolFinished)
        assert finished[0].result == {"charged": 5, "by": "the stalled worker"}
    else:
        assert result.status is RunStatus.NEEDS_ATTENTION
        assert result.reason is not None
        assert "still holds the call's guard" in result.reason, result.reason
        assert "reconcile(key) found no record of it" in result.reason
    assert check_transcript(await agent.transcript("r1")) == []
    await agent.close()
    await store.close()


async def test_a_cancelled_sync_call_keeps_its_guard_while_its_thread_may_run(
    tmp_path: Path,
) -> None:
    """A shutdown or a caller's timeout cancels the task waiting for a sync tool, not the
    tool's thread: the call's guard stays held, so a worker that resumes the run meanwhile
    waits instead of running the call a second time while the first still can land."""
    import threading

    store = SQLiteStore(tmp_path / "r.db")
    ledger: dict[str, Any] = {}
    entered, release = threading.Event(), threading.Event()
    runs: list[str] = []

    def pay(amount: int, ctx: ToolContext) -> dict[str, Any]:
        """Charge the customer."""
        runs.append(ctx.idempotency_key)
        entered.set()
        release.wait(10)
        ledger[ctx.idempotency_key] = {"charged": amount}
        return ledger[ctx.idempotency_key]

    def reconcile(key: str) -> Any:
        return ledger.get(key)

    def agent(wait_s: float) -> Agent:
        paying = tool(effect="write", idempotent=False, reconcile=reconcile)(pay)
        return Agent(
            tools=[paying], model=script(), store=store, policy=NO_PLAN, lost_call_wait_s=wait_s
        )

    first = asyncio.create_task(agent(300).run("pay 5", run_id="r1"))
    await asyncio.to_thread(entered.wait, 10)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    stopped = await agent(0.5).resume("r1")  # the thread is still inside the call
    assert stopped.status is RunStatus.NEEDS_ATTENTION, stopped.reason
    assert stopped.reason is not None and "still holds the call's guard" in stopped.reason
    release.set()
    await asyncio.sleep(0.2)
    assert runs == ["r1:1"] and ledger == {"r1:1": {"charged": 5}}  # one effect
    done = await agent(300).resolve("r1", by="ops", result=ledger["r1:1"])
    assert done.status is RunStatus.COMPLETED
    assert runs == ["r1:1"]
    await store.close()


class UnreadableGuards(MemoryStore):
    """A memory store whose guard check fails (a database that cannot answer now)."""

    async def call_running(self, run_id: str, key: str) -> bool:
        raise StoreError("the guard cannot be read now")


async def test_a_guard_that_cannot_be_read_is_taken_as_held_never_as_free() -> None:
    """The check of a lost call's guard fails: whether its worker is gone cannot be told,
    so the call is not run again; the run waits, then goes to a person."""
    store = UnreadableGuards()
    impl, asked = Crashy(), list[str]()
    agent = reconcilable(store, impl, asked, lost_call_wait_s=0.5)
    await crash_run(agent)
    result = await agent.resume("r1")
    assert result.status is RunStatus.NEEDS_ATTENTION, result.reason
    assert result.reason is not None
    assert "its guard could not be read: the guard cannot be read now" in result.reason
    assert impl.calls == ["r1:1"]  # never run a second time


async def test_a_lost_call_started_without_a_guard_goes_to_a_person(store: MemoryStore) -> None:
    """A tool_started written without a guard (by an older agentcore, or on a store that
    keeps none): whether its worker is gone cannot be told, so reconcile finding nothing
    does not rerun it."""
    impl, asked = Crashy(), list[str]()
    agent = reconcilable(store, impl, asked)
    events = await hand_written_crash(store, agent, guarded=False)
    assert not of(events, ToolStarted)[0].guarded
    result = await agent.resume("r1")
    assert result.status is RunStatus.NEEDS_ATTENTION
    assert result.reason is not None
    assert "cannot be told" in result.reason, result.reason
    assert impl.calls == ["tmp:1"] and asked == ["r1:1"]  # the copied run ran nothing


async def hand_written_crash(store: MemoryStore, agent: Agent, *, guarded: bool) -> list[Event]:
    """A crashed run copied into run ``r1`` with its ``tool_started.guarded`` set."""
    await crash_run(agent, run_id="tmp")
    events = await agent.transcript("tmp")
    started = {"guarded": guarded, "idempotency_key": "r1:1"}
    copied = [
        e.model_copy(update={"run_id": "r1", **(started if isinstance(e, ToolStarted) else {})})
        for e in events
    ]
    await store.append("r1", 0, copied)
    return copied


async def test_idempotent_lost_call_reruns_with_the_same_key(store: MemoryStore) -> None:
    impl = Crashy()
    agent = Agent(
        tools=[pay_tool(impl, idempotent=True)], model=script(), store=store, policy=NO_PLAN
    )
    await crash_run(agent)
    done = await agent.resume("r1")
    assert done.status is RunStatus.COMPLETED
    assert impl.calls == ["r1:1", "r1:1"]
    resumed = of(await agent.transcript("r1"), RunResumed)
    assert [r.recovery for r in resumed] == [True]


async def test_dead_letter_after_repeated_crashes_then_manual_resume(store: MemoryStore) -> None:
    impl = Crashy(crash_times=10)
    agent = Agent(
        tools=[pay_tool(impl, idempotent=True)],
        model=script(),
        store=store,
        policy=Policy(plan_before_writes=False, dead_letter_after=2),
    )
    await crash_run(agent)
    for _ in range(2):  # two recoveries, each dies at the same place
        with pytest.raises(asyncio.CancelledError):
            await agent.resume("r1")
    stopped = await agent.resume("r1")
    assert stopped.status is RunStatus.FAILED
    assert stopped.reason is not None
    assert "dead-lettered" in stopped.reason
    assert "3 times in a row" in stopped.reason
    assert len(impl.calls) == 3
    # A failed run stays failed on a plain resume? No: failed is resumable by hand.
    impl.crash_times = 0
    done = await agent.resume("r1", by="alice")
    assert done.status is RunStatus.COMPLETED
    resumed = of(await agent.transcript("r1"), RunResumed)
    assert resumed[-1].by == "alice"
    assert resumed[-1].recovery is False


async def test_progress_resets_the_dead_letter_count(store: MemoryStore) -> None:
    impl = Crashy(crash_times=1)
    agent = Agent(
        tools=[pay_tool(impl, idempotent=True)],
        model=script(),
        store=store,
        policy=Policy(plan_before_writes=False, dead_letter_after=1),
    )
    await crash_run(agent)
    done = await agent.resume("r1")  # one recovery is allowed
    assert done.status is RunStatus.COMPLETED


async def test_changed_tool_refuses_resume_unless_accepted(store: MemoryStore) -> None:
    impl = Crashy()
    agent = Agent(
        tools=[pay_tool(impl, idempotent=True)], model=script(), store=store, policy=NO_PLAN
    )
    await crash_run(agent)
    changed = Agent(
        tools=[pay_tool(impl, idempotent=True, doc=" Now in cents.")],
        model=script(),
        store=store,
        policy=NO_PLAN,
    )
    with pytest.raises(ToolManifestChangedError, match="pay"):
        await changed.resume("r1")
    assert (await changed.result("r1")).status is RunStatus.RUNNING  # nothing recorded
    done = await changed.resume("r1", accept_tool_changes=True)
    assert done.status is RunStatus.COMPLETED
    resumed = of(await changed.transcript("r1"), RunResumed)
    assert resumed[0].accepted_tool_changes == ["pay (description changed)"]


async def test_removed_tool_refuses_resume(store: MemoryStore) -> None:
    impl = Crashy()
    agent = Agent(
        tools=[pay_tool(impl, idempotent=True)], model=script(), store=store, policy=NO_PLAN
    )
    await crash_run(agent)

    @tool(effect="read")
    def other() -> str:
        """Something else."""
        return "x"

    gone = Agent(tools=[other], model=script(), store=store, policy=NO_PLAN)
    with pytest.raises(ToolManifestChangedError, match="no longer a tool"):
        await gone.resume("r1")


class FailIntent:
    """A store wrapper whose append fails for batches holding tool_started (disk full);
    everything else goes to the wrapped store."""

    def __init__(self, inner: TranscriptStore) -> None:
        self.inner = inner
        self.url = inner.url
        self.broken = True

    async def append(
        self, run_id: str, expected_seq: int, events: Sequence[Event], *, lease: Any = None
    ) -> None:
        if self.broken and any(isinstance(e, ToolStarted) for e in events):
            raise StoreError("database or disk is full")
        await self.inner.append(run_id, expected_seq, events, lease=lease)

    def __getattr__(self, name: str) -> Any:  # Any: the wrapped store's methods
        return getattr(self.inner, name)


async def test_failed_intent_append_runs_nothing_and_confirmed_call_resumes_without_the_model(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []

    @tool(effect="destructive")
    def wipe(target: str) -> str:
        """Delete everything in target."""
        ran.append({"target": target})
        return "wiped"

    model = ScriptedModel(
        [
            {"type": "plan", "thought": "p", "steps": ["wipe"]},
            {"type": "tool", "thought": "w", "tool": "wipe", "args": {"target": "tmp"}},
            {"type": "finish", "thought": "f", "answer": "done"},
        ]
    )
    store = FailIntent(SQLiteStore(tmp_path / "runs.db"))
    agent = Agent(tools=[wipe], model=model, store=store)
    paused = await agent.run("wipe tmp", run_id="w1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    with pytest.raises(StoreError, match="disk is full"):
        await agent.confirm("w1", approve=True, by="alice")
    assert ran == []  # the intent was not durable, so the tool did not run
    assert (await agent.result("w1")).status is RunStatus.RUNNING
    calls_before = len(model.requests)
    store.broken = False
    done = await agent.resume("w1")
    assert done.status is RunStatus.COMPLETED
    assert ran == [{"target": "tmp"}]
    # The approved call ran from the transcript: only the finish needed a model call.
    assert len(model.requests) == calls_before + 1
    events = await agent.transcript("w1")
    assert check_transcript(events) == []
    await agent.close()
    await store.close()


async def test_invalid_reply_tokens_are_durable_before_the_next_model_call(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    seen_durable: list[int] = []

    def second(messages: Sequence[Message]) -> dict[str, Any]:
        # While the model is asked again, the invalid reply's model_called is already stored.
        with sqlite3.connect(db) as conn:
            (n,) = conn.execute(
                "SELECT count(*) FROM events WHERE run_id = 't1' AND type = 'model_called'"
            ).fetchone()
        conn.close()
        seen_durable.append(n)
        return {"type": "finish", "thought": "ok", "answer": "ok"}

    model = ScriptedModel(["not json", second])
    agent = Agent(tools=[], model=model, store=f"sqlite:///{db}")
    result = await agent.run("say ok", run_id="t1", budget=Budget(max_steps=3))
    assert result.status is RunStatus.COMPLETED
    assert seen_durable == [1]
    assert result.usage.model_calls == 2
    await agent.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_truncate_dry_run_and_repair(tmp_path: Path, kind: str) -> None:
    store: TranscriptStore = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "r.db")
    model = ScriptedModel([{"type": "finish", "thought": "t", "answer": "a"}])
    agent = Agent(tools=[], model=model, store=store)
    await agent.run("x", run_id="t")
    events = await store.load("t")
    n = len(events)
    preview = await store.truncate("t", after=1, dry_run=True)
    assert [seq for seq, _ in preview] == list(range(2, n))
    assert len(await store.load("t")) == n  # a dry run deletes nothing
    removed = await store.truncate("t", after=1)
    assert removed == preview
    assert [e.seq for e in await store.load("t")] == [0, 1]
    assert (await agent.result("t")).status is RunStatus.RUNNING
    runs = await store.list_runs()
    assert runs[0].status == "running"
    assert runs[0].events == 2
    with pytest.raises(StoreError):
        await store.truncate("t", after=-1)
    await store.close()


async def test_check_transcript_finds_tampering(store: MemoryStore) -> None:
    agent = Agent(
        tools=[pay_tool(Crashy(crash_times=0), idempotent=True)],
        model=script(),
        store=store,
        policy=NO_PLAN,
    )
    await agent.run("pay", run_id="c")
    events = await agent.transcript("c")
    assert check_transcript(events) == []
    gap = [e for e in events if e.seq != 3]
    assert any("expected seq 3" in p for p in check_transcript(gap))
    started_at = next(i for i, e in enumerate(events) if isinstance(e, ToolStarted))
    orphan = events[:started_at] + [
        e.model_copy(update={"seq": e.seq - 1}) for e in events[started_at + 1 :]
    ]
    assert any("no tool_started" in p for p in check_transcript(orphan))
    assert check_transcript([]) == ["the transcript is empty"]
