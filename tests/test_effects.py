"""The one effect protocol, met by an undo as by a tool call: a sync undo runs in the
tools' pool within ``Compensation.timeout``; a timed-out one is an unknown outcome whose
guard is held until its thread returns, so a person's ``not_done`` (run it again) is
refused while it may still be running, as ``resolve --rerun`` is for a tool call; a call
whose outcome is unknown says so in a typed field. Real processes:
tests/faults/test_compensation.py."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentcore import (
    Agent,
    CommittedCall,
    Compensation,
    Policy,
    RunStatus,
    ToolContext,
    check_transcript,
    tool,
)
from agentcore.adapters import ScriptedModel
from agentcore.errors import CallStillRunningError, ToolDefinitionError, ToolOutcomeUnknownError
from agentcore.events import CompensationFinished, CompensationStarted, ToolFinished
from agentcore.stores import MemoryStore

NO_PLAN = Policy(plan_before_writes=False)
PAY = {"type": "tool", "thought": "pay", "tool": "pay", "args": {"amount": 1}}
CLOSE = {"type": "tool", "thought": "close", "tool": "close", "args": {"account": "x"}}


def _agent(undo: Compensation, effects: list[str], store: MemoryStore) -> Agent:
    @tool(effect="write", compensate=undo)
    def pay(amount: int) -> str:
        """Pay."""
        effects.append("pay")
        return "paid"

    @tool(effect="destructive")
    def close(account: str) -> str:
        """Close an account."""
        return "closed"

    return Agent(tools=[pay, close], model=ScriptedModel([PAY, CLOSE]), store=store, policy=NO_PLAN)


async def _cancelled(agent: Agent) -> None:
    paused = await agent.run("pay, then close", run_id="r1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    await agent.cancel("r1", by="ops")


@pytest.mark.parametrize("reconcile", [False, True])
async def test_a_timed_out_sync_undo_keeps_its_guard_until_its_thread_returns(
    reconcile: bool,
) -> None:
    """The undo passes its 0.05 s timeout and goes on in its thread: the compensation stops
    for a person without a ``compensation_finished`` (its outcome is unknown, not failed);
    a person's ``not_done`` is refused, with nothing recorded, until the thread returns;
    then ``not_done`` runs it again (the person said so), or, with ``reconcile``, a plain
    compensate adopts what the thread did."""
    effects: list[str] = []
    release = threading.Event()
    threads: list[str] = []

    def refund(call: CommittedCall) -> str:
        ctx = ToolContext.current()  # the undo's own context reaches its thread
        assert ctx is not None and ctx.idempotency_key == "r1:1:undo"
        threads.append(threading.current_thread().name)
        release.wait(10)
        effects.append("refund")
        return "refunded"

    def found(key: str) -> str | None:
        return "refunded" if effects.count("refund") else None

    undo = Compensation(refund, reconcile=found if reconcile else None, timeout=0.05)
    store = MemoryStore()
    agent = _agent(undo, effects, store)
    await _cancelled(agent)
    stopped = await agent.compensate("r1", by="ops")
    assert stopped.status is RunStatus.NEEDS_ATTENTION
    assert "timed out after 0.05s; its outcome is unknown" in (stopped.reason or ""), stopped
    events = await agent.transcript("r1")
    started = [e for e in events if isinstance(e, CompensationStarted)]
    assert len(started) == 1 and started[0].guarded
    assert not [e for e in events if isinstance(e, CompensationFinished)]
    assert threads and not threads[0].startswith("asyncio")  # the tools' pool

    with pytest.raises(CallStillRunningError, match="the undo's guard"):
        await agent.compensate("r1", by="ann", settle={"c1": "not_done"})
    assert len(await agent.transcript("r1")) == len(events)  # nothing recorded
    assert effects == ["pay"]

    release.set()
    for _ in range(200):  # the thread returns, and its guard is let go
        if not await store.call_running("r1", "r1:1:undo"):
            break
        await asyncio.sleep(0.01)
    assert effects == ["pay", "refund"]
    if reconcile:
        done = await agent.compensate("r1", by="ann")
        assert effects == ["pay", "refund"]  # found, not run again
    else:
        done = await agent.compensate("r1", by="ann", settle={"c1": "not_done"})
        assert effects == ["pay", "refund", "refund"]  # one more, as the person said
    assert done.status is RunStatus.CANCELLED, done.reason
    assert check_transcript(await agent.transcript("r1")) == []


async def test_a_timed_out_async_undo_is_in_doubt_and_its_guard_is_free() -> None:
    """An async undo past its timeout is cancelled: nothing runs it any more, so its guard
    is let go at once and a person's ``not_done`` runs it again."""
    calls: list[str] = []

    async def refund(call: CommittedCall) -> str:
        calls.append("refund")
        if len(calls) == 1:
            await asyncio.sleep(10)
        return "refunded"

    agent = _agent(Compensation(refund, timeout=0.05), [], MemoryStore())
    await _cancelled(agent)
    stopped = await agent.compensate("r1", by="ops")
    assert stopped.status is RunStatus.NEEDS_ATTENTION
    assert "--not-done c1 (run it again)" in (stopped.reason or "")
    done = await agent.compensate("r1", by="ops", settle={"c1": "not_done"})
    assert done.status is RunStatus.CANCELLED and calls == ["refund", "refund"]


async def test_a_call_cancelled_while_its_outcome_is_lost_has_a_typed_unknown_outcome() -> None:
    """A call whose outcome was lost, when the run is cancelled: its ``tool_finished`` says
    so in ``outcome_unknown`` (stored only when set), and compensation puts it to a person
    before undoing anything older."""
    effects: list[str] = []

    @tool(effect="write", compensate=lambda call: effects.append("refund"))
    def pay(amount: int) -> str:
        """Pay."""
        effects.append("pay")
        return "paid"

    @tool(effect="write", compensate=lambda call: effects.append("undo lost"))
    def lost(n: int) -> str:
        """Its outcome is lost."""
        raise ToolOutcomeUnknownError("connection dropped after the request was sent")

    lose = {"type": "tool", "thought": "lost", "tool": "lost", "args": {"n": 1}}
    agent = Agent(
        tools=[pay, lost], model=ScriptedModel([PAY, lose]), store=MemoryStore(), policy=NO_PLAN
    )
    assert (await agent.run("go", run_id="r1")).status is RunStatus.NEEDS_ATTENTION
    await agent.cancel("r1", by="ops")
    finished = [e for e in await agent.transcript("r1") if isinstance(e, ToolFinished)]
    assert [(f.call_id, f.ok, f.outcome_unknown) for f in finished] == [
        ("c1", True, False),
        ("c2", False, True),
    ]
    assert "outcome_unknown" not in finished[0].model_dump(mode="json")
    assert finished[1].model_dump(mode="json")["outcome_unknown"] is True
    stopped = await agent.compensate("r1", by="ops")
    assert stopped.status is RunStatus.NEEDS_ATTENTION
    assert "may or may not have happened" in (stopped.reason or "")
    assert effects == ["pay"]  # nothing older is undone while the lost call is in doubt


def test_a_compensation_timeout_must_be_positive() -> None:
    with pytest.raises(ToolDefinitionError, match="timeout must be > 0, got 0"):
        Compensation(lambda call: None, timeout=0)
