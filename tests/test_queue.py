"""Runs handed to workers: submit, bounded shifts (advance), hand-off after commands.

Through the public API with the in-process queue; the Celery integration builds on the
same three pieces (a queue's ``enqueue``, ``Agent.advance``, re-enqueue while running).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentcore import Agent, Budget, Policy, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import ConfigurationError, RunBusyError
from agentcore.events import RunFinished, RunResumed, ToolStarted
from agentcore.queue import InProcessQueue
from agentcore.stores import MemoryStore, TranscriptStore

STEPS = 4


@tool(effect="read")
def count(n: int) -> int:
    """Count one more.

    Args:
        n: the number so far.
    """
    return n + 1


@tool(effect="destructive")
def wipe(path: str) -> str:
    """Wipe a path.

    Args:
        path: what to wipe.
    """
    return f"wiped {path}"


def counting(messages: Sequence[Message]) -> dict[str, Any]:
    """Count to STEPS from the conversation (any worker can continue), then finish."""
    done = sum(1 for m in messages if m.role == "user" and "count returned" in m.content)
    if done >= STEPS:
        return {"type": "finish", "thought": "counted", "answer": str(done)}
    return {"type": "tool", "thought": "next", "tool": "count", "args": {"n": done}}


def make_agent(store: TranscriptStore, queue: InProcessQueue | None = None, **kw: Any) -> Agent:
    return Agent(
        tools=[count, wipe],
        model=ScriptedModel(counting),
        store=store,
        name="counter",
        queue=queue,
        policy=Policy(plan_before_writes=False),
        **kw,
    )


async def test_advance_takes_bounded_shifts_until_the_run_completes() -> None:
    store = MemoryStore()
    agent = make_agent(store)
    run_id = await agent.submit("count to four", budget=Budget(max_steps=10))
    assert (await agent.result(run_id)).status is RunStatus.RUNNING
    shifts: list[int] = []
    while True:
        result = await agent.advance(run_id, max_steps=1)
        shifts.append(result.usage.steps)
        if result.status is not RunStatus.RUNNING:
            break
    assert result.status is RunStatus.COMPLETED
    assert result.answer == str(STEPS)
    assert shifts == [1, 2, 3, 4, 5]  # one step per shift; the fifth is the finish
    # A shift ends between steps: every started tool finished before the shift ended.
    events = await store.load(run_id)
    assert not any(isinstance(e, RunResumed) for e in events)  # shifts are not recoveries


async def test_a_queue_worker_runs_submitted_and_confirmed_runs() -> None:
    store = MemoryStore()
    agents: dict[str, Agent] = {}

    async def worker(name: str, run_id: str) -> None:
        agent = agents[name]
        result = await agent.advance(run_id, max_steps=2)
        if result.status is RunStatus.RUNNING:
            assert agent.queue is not None
            agent.queue.enqueue(name, run_id)  # hand it back for the next shift

    queue = InProcessQueue(worker)
    agent = agents["counter"] = make_agent(store, queue)
    run_id = await agent.submit("count", budget=Budget(max_steps=10))
    await queue.drain()
    assert (await agent.result(run_id)).status is RunStatus.COMPLETED
    assert queue.sent.count(("counter", run_id)) == 3  # shifts of 2, 2 and the finish

    wiper = agents["wiper"] = Agent(
        tools=[wipe],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "t", "tool": "wipe", "args": {"path": "/tmp/x"}},
                {"type": "finish", "thought": "t", "answer": "wiped"},
            ]
        ),
        store=store,
        name="wiper",
        queue=queue,
        policy=Policy(plan_before_writes=False),
    )
    waiting_id = await wiper.submit("wipe /tmp/x", budget=Budget(max_steps=5))
    await queue.drain()
    waiting = await wiper.result(waiting_id)
    assert waiting.status is RunStatus.AWAITING_CONFIRMATION
    assert waiting.pending is not None
    handed = await wiper.confirm(
        waiting_id,
        approve=True,
        by="alice",
        step=waiting.pending.step,
        args_hash=waiting.pending.args_hash,
    )
    assert handed.status is RunStatus.RUNNING  # recorded, then handed to the queue
    await queue.drain()
    assert (await wiper.result(waiting_id)).status is RunStatus.COMPLETED


async def test_a_second_worker_finds_the_run_busy() -> None:
    store = MemoryStore()
    first, second = make_agent(store, lease_s=30), make_agent(store, lease_s=30)
    run_id = await first.submit("count", budget=Budget(max_steps=10))
    gate = asyncio.Event()
    release = asyncio.Event()

    @tool(effect="read")
    async def slow() -> str:
        """Wait."""
        gate.set()
        await release.wait()
        return "ok"

    holder = Agent(
        tools=[slow],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "t", "tool": "slow", "args": {}},
                {"type": "finish", "thought": "t", "answer": "done"},
            ]
        ),
        store=store,
    )
    slow_id = await holder.submit("slow", budget=Budget(max_steps=5))
    task = asyncio.create_task(holder.advance(slow_id))
    await gate.wait()
    with pytest.raises(RunBusyError):
        await second.advance(slow_id)
    release.set()
    assert (await task).status is RunStatus.COMPLETED
    assert (await second.advance(run_id, max_steps=1)).usage.steps == 1


async def test_a_shift_taken_over_from_a_dead_worker_counts_as_a_recovery() -> None:
    store = MemoryStore()
    agent = make_agent(store)
    run_id = await agent.submit("count", budget=Budget(max_steps=10))
    limit = Policy().dead_letter_after
    for _ in range(limit):
        # A worker took the run and died without releasing it: its lease lapses.
        await store.acquire(run_id, owner="dead-worker", ttl_s=0.01)
        await asyncio.sleep(0.02)
        result = await agent.advance(run_id, max_steps=0)  # takes it over, no new step
        assert result.status is RunStatus.RUNNING
    events = await store.load(run_id)
    assert sum(1 for e in events if isinstance(e, RunResumed) and e.recovery) == limit
    await store.acquire(run_id, owner="dead-worker", ttl_s=0.01)
    await asyncio.sleep(0.02)
    dead = await agent.advance(run_id, max_steps=1)
    assert dead.status is RunStatus.FAILED
    assert "dead-lettered" in (dead.reason or "")


async def test_a_worker_with_other_tools_sends_the_run_to_needs_attention() -> None:
    store = MemoryStore()
    agent = make_agent(store)
    run_id = await agent.submit("count", budget=Budget(max_steps=10))
    await agent.advance(run_id, max_steps=1)

    @tool(effect="read", name="count")
    def count_v2(n: int, by: int = 1) -> int:
        """Count on, by any amount.

        Args:
            n: the number so far.
            by: how much to add.
        """
        return n + by

    new_worker = Agent(tools=[count_v2, wipe], model=ScriptedModel(counting), store=store)
    result = await new_worker.advance(run_id, max_steps=1)
    assert result.status is RunStatus.NEEDS_ATTENTION
    assert "count (description changed; argument schema changed)" in (result.reason or "")
    events = await store.load(run_id)
    assert isinstance(events[-1], RunFinished)
    assert sum(1 for e in events if isinstance(e, ToolStarted)) == 1  # nothing ran


def test_a_queue_needs_a_name() -> None:
    with pytest.raises(ConfigurationError, match="name="):
        Agent(tools=[count], model=ScriptedModel([]), store="memory://", queue=InProcessQueue())


async def test_resuming_a_submitted_run_is_not_a_recovery() -> None:
    store = MemoryStore()
    agent = make_agent(store)
    run_id = await agent.submit("count", budget=Budget(max_steps=10))
    result = await agent.resume(run_id)
    assert result.status is RunStatus.COMPLETED
    resumed = [e for e in await store.load(run_id) if isinstance(e, RunResumed)]
    assert [e.recovery for e in resumed] == [False]
