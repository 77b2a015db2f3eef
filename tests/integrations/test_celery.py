"""Runs delivered by Celery to real worker processes (RabbitMQ, PostgreSQL; no mocks).

Each test starts ``celery -A service worker --pool threads`` processes on a queue and a
database schema of its own (``conftest.py``), drives runs through the public API from
this process and checks the outcome in the store and in the workers' logs.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from agentcore import Agent, Budget, RunResult, RunStatus, check_transcript
from agentcore.errors import DuplicateReplyError, RunBusyError
from agentcore.events import RunResumed, ToolStarted
from agentcore.integrations.celery import CeleryQueue, find_orphans, sweep
from agentcore.stores import PostgresStore

from .conftest import Workers
from .workload import make_agent

pytestmark = [pytest.mark.postgres, pytest.mark.subprocess]


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store  # a fresh schema's store, closed afterwards (tests/stores/conftest.py)


@pytest.fixture
def app(amqp_url: str, queue_name: str) -> Iterator[Celery]:
    """The web process's side: publishes to this test's queue."""
    client = Celery("agentcore-test-client", broker=amqp_url)
    client.conf.task_default_queue = queue_name
    try:
        yield client
    finally:
        client.close()


async def settled(agent: Agent, run_id: str, within: float = 30) -> RunResult:
    """The run's result once it is no longer ``running``."""
    deadline = time.monotonic() + within
    while True:
        result = await agent.result(run_id)
        if result.status is not RunStatus.RUNNING:
            return result
        assert time.monotonic() < deadline, f"run {run_id} still running after {within} s"
        await asyncio.sleep(0.1)


def effects(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


async def test_a_submitted_run_is_completed_by_a_worker(
    workers: Workers, store: PostgresStore, app: Celery, tmp_path: Path
) -> None:
    workers.start("w1")
    agent = make_agent(store, queue=CeleryQueue(app))
    run_id = await agent.submit("count steps=5", budget=Budget(max_steps=10))
    result = await settled(agent, run_id)
    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.answer == "took 5 steps"
    assert check_transcript(await store.load(run_id)) == []
    # Turns of two steps: 2 + 2 + (1 tool step and the finish); each handed back in between.
    assert [o for _, o, _ in workers.outcomes("w1")] == ["running", "running", "completed"]
    assert effects(tmp_path / "effects.txt") == [f"{run_id}:3"]  # the one charge, once
    assert "agentcore.tune_gc" not in workers.log("w1")  # off unless asked for


async def test_install_with_tune_gc_tunes_the_workers_collector_at_start(
    workers: Workers, store: PostgresStore, app: Celery, tmp_path: Path
) -> None:
    workers.start("w1", AGENTCORE_TEST_TUNE_GC="1")
    workers.wait_for("w1", "agentcore.tune_gc")  # logged once the worker is ready
    line = next(ln for ln in workers.log("w1").splitlines() if "agentcore.tune_gc" in ln)
    assert "threshold=10000 before=700" in line  # CPython's default before
    frozen = int(line.rsplit("frozen=", 1)[1].split()[0])
    assert frozen > 10_000  # the app, agentcore and the agents, out of every collection
    agent = make_agent(store, queue=CeleryQueue(app))
    run_id = await agent.submit("count steps=5", budget=Budget(max_steps=10))
    result = await settled(agent, run_id)
    assert result.status is RunStatus.COMPLETED and result.answer == "took 5 steps"
    assert effects(tmp_path / "effects.txt") == [f"{run_id}:3"]


async def test_a_confirmation_is_carried_out_through_the_queue(
    workers: Workers, store: PostgresStore, app: Celery
) -> None:
    workers.start("w1")
    agent = make_agent(store, queue=CeleryQueue(app))
    run_id = await agent.submit("wipe /tmp/x", budget=Budget(max_steps=5))
    waiting = await settled(agent, run_id)
    assert waiting.status is RunStatus.AWAITING_CONFIRMATION
    assert waiting.pending is not None
    handed = await agent.confirm(
        run_id,
        approve=True,
        by="alice",
        step=waiting.pending.step,
        args_hash=waiting.pending.args_hash,
    )
    assert handed.status is RunStatus.RUNNING  # recorded here, advanced by the worker
    done = await settled(agent, run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.answer == "wiped"


async def test_a_reply_is_recorded_and_its_turn_completed_by_a_worker(
    workers: Workers, store: PostgresStore, app: Celery, tmp_path: Path
) -> None:
    workers.start("w1")
    agent = make_agent(store, queue=CeleryQueue(app))
    run_id = await agent.submit("count steps=3", budget=Budget(max_steps=10))
    first = await settled(agent, run_id)
    assert first.status is RunStatus.COMPLETED, first.reason
    assert first.answer == "took 3 steps"
    shifts = len(workers.outcomes("w1"))
    assert effects(tmp_path / "effects.txt") == [f"{run_id}:3"]

    handed = await agent.reply(run_id, "count steps=5", key="req-2")
    assert handed.status is RunStatus.RUNNING  # recorded here, advanced by the worker
    assert [t.number for t in handed.turns] == [1, 2]
    assert handed.turns[1].message == "count steps=5"
    done = await settled(agent, run_id)
    assert done.status is RunStatus.COMPLETED, done.reason
    # The workers' scripted model takes its step count from the conversation's first message
    # and counts every tool result in view: a turn that sees turn 1 finishes at once with
    # turn 1's count. A worker shown only the reply would take 5 steps (and charge again).
    assert done.answer == "took 3 steps"
    assert [(t.number, t.status, t.answer) for t in done.turns] == [
        (1, RunStatus.COMPLETED, "took 3 steps"),
        (2, RunStatus.COMPLETED, "took 3 steps"),
    ]
    assert effects(tmp_path / "effects.txt") == [f"{run_id}:3"]  # no tool ran in turn 2
    assert [o for _, o, _ in workers.outcomes("w1")[shifts:]] == ["completed"]  # one shift
    events = await store.load(run_id)
    assert sum(1 for e in events if isinstance(e, ToolStarted)) == 3
    assert check_transcript(events) == []
    with pytest.raises(DuplicateReplyError) as retried:  # the same request again
        await agent.reply(run_id, "count steps=5", key="req-2")
    assert retried.value.turn == 2
    assert len(await store.load(run_id)) == len(events)  # nothing recorded, nothing published
    await asyncio.sleep(0.5)
    assert len(workers.outcomes("w1")) == shifts + 1


async def test_a_message_for_a_held_run_is_a_no_op_and_the_sweep_delivers_it_later(
    workers: Workers, store: PostgresStore, app: Celery
) -> None:
    workers.start("w1")
    queue = CeleryQueue(app)
    agent = make_agent(store)  # no queue: the run is recorded and never published
    run_id = await agent.submit("count steps=2", budget=Budget(max_steps=5))
    lease = await store.acquire(run_id, owner="another-worker", ttl_s=30)
    queue.enqueue("worker", run_id)
    queue.enqueue("worker", run_id)  # a duplicate
    workers.wait_for("w1", "outcome=busy", timeout=15)
    deadline = time.monotonic() + 15
    while len(workers.outcomes("w1")) < 2:
        assert time.monotonic() < deadline, workers.log("w1")
        await asyncio.sleep(0.05)
    assert [o for _, o, _ in workers.outcomes("w1")] == ["busy", "busy"]
    assert len(await store.load(run_id)) == 1  # nothing written, nothing published again
    await store.release(lease)
    await asyncio.sleep(0.5)
    assert len(workers.outcomes("w1")) == 2

    # The holder "died" without publishing: the sweep finds the idle run and publishes it.
    assert await find_orphans([agent], idle_after=60) == []  # not idle for long enough
    orphans = await sweep([agent], queue, idle_after=0.1)
    assert [(o.agent, o.run_id, o.seq) for o in orphans] == [("worker", run_id, 1)]
    assert (await settled(agent, run_id)).status is RunStatus.COMPLETED
    # A message that was current when published, delivered after the run moved on: stale.
    queue.publish("worker", run_id, seq=1)
    workers.wait_for("w1", "outcome=stale")
    queue.enqueue("worker", "no-such-run")  # logged and dropped
    workers.wait_for("w1", "outcome=not_found")
    queue.enqueue("an-agent-of-another-service", run_id)  # logged and dropped
    workers.wait_for("w1", "outcome=unknown_agent")
    assert [o for _, o, _ in workers.outcomes("w1")] == [
        "busy",
        "busy",
        "running",
        "completed",
        "stale",
        "not_found",
        "unknown_agent",
    ]


async def test_a_worker_with_other_tools_sends_the_run_to_needs_attention(
    workers: Workers, store: PostgresStore, app: Celery
) -> None:
    workers.start("w2", AGENTCORE_TEST_TOOLS="v2")  # a rolling deploy: lookup changed
    agent = make_agent(store)
    run_id = await agent.submit("count steps=4", budget=Budget(max_steps=10))
    assert (await agent.advance(run_id, max_steps=1)).usage.steps == 1  # lookup was used
    CeleryQueue(app).enqueue("worker", run_id)
    result = await settled(agent, run_id)
    assert result.status is RunStatus.NEEDS_ATTENTION
    assert "lookup (" in (result.reason or "")
    await asyncio.sleep(1.0)  # no redelivery loop: one delivery, one outcome
    assert [o for _, o, _ in workers.outcomes("w2")] == ["needs_attention"]
    events = await store.load(run_id)
    assert sum(1 for e in events if isinstance(e, ToolStarted)) == 1
    assert check_transcript(events) == []


async def test_a_warm_shutdown_finishes_the_shift_and_releases_the_lease(
    workers: Workers, store: PostgresStore, app: Celery
) -> None:
    # Slow steps (0.3 s per model reply), shifts of 3 steps: SIGTERM arrives mid-shift.
    workers.start("w1", AGENTCORE_TEST_LATENCY_MS="300,300", AGENTCORE_TEST_SHIFT_STEPS="3")
    agent = make_agent(store, queue=CeleryQueue(app))
    run_id = await agent.submit("count steps=6", budget=Budget(max_steps=10))
    deadline = time.monotonic() + 15
    while not any(isinstance(e, ToolStarted) for e in await store.load(run_id)):
        assert time.monotonic() < deadline, workers.log("w1")
        await asyncio.sleep(0.05)
    assert workers.stop("w1", signal.SIGTERM) == 0
    # The shift under way finished whole (normally the only one: the next, delivered during
    # the shutdown, went back to the queue unstarted).
    shifts = [o for _, o, _ in workers.outcomes("w1")]
    assert shifts and set(shifts) == {"running"}
    assert (await agent.result(run_id)).usage.steps == 3 * len(shifts)
    lease = await store.acquire(run_id, owner="probe", ttl_s=5)  # free at once
    assert lease.taken_over is None  # released, not left to expire
    await store.release(lease)
    # The next shift was published before the worker left: another worker finishes the run.
    workers.start("w2")
    result = await settled(agent, run_id)
    assert result.status is RunStatus.COMPLETED
    events = await store.load(run_id)
    assert not any(isinstance(e, RunResumed) and e.recovery for e in events)
    assert check_transcript(events) == []


async def test_a_killed_workers_run_is_taken_over_after_its_lease(
    workers: Workers, store: PostgresStore, app: Celery, tmp_path: Path
) -> None:
    lease = {"AGENTCORE_TEST_LEASE_S": "1"}
    workers.start(
        "w1", AGENTCORE_TEST_LATENCY_MS="300,300", AGENTCORE_TEST_SHIFT_STEPS="3", **lease
    )
    queue = CeleryQueue(app)
    agent = make_agent(store, queue=queue, lease_s=1)
    run_id = await agent.submit("count steps=6", budget=Budget(max_steps=10))
    deadline = time.monotonic() + 15
    while not any(isinstance(e, ToolStarted) for e in await store.load(run_id)):
        assert time.monotonic() < deadline, workers.log("w1")
        await asyncio.sleep(0.05)
    workers.stop("w1", signal.SIGKILL)
    with pytest.raises(RunBusyError):  # the dead worker's lease has not expired yet
        await store.acquire(run_id, owner="probe", ttl_s=1)
    assert await find_orphans([agent], idle_after=3600) == []  # held: left alone
    await asyncio.sleep(1.2)
    orphans = await sweep([agent], queue, idle_after=3600)  # expired: published at once
    assert [(o.run_id, o.why) for o in orphans] == [(run_id, "lease expired")]
    workers.start("w2", **lease)  # takes it over (w1's redelivered message finds it stale)
    result = await settled(agent, run_id)
    assert result.status is RunStatus.COMPLETED, result.reason
    events = await store.load(run_id)
    assert sum(1 for e in events if isinstance(e, RunResumed) and e.recovery) == 1
    assert check_transcript(events) == []
    charges = effects(tmp_path / "effects.txt")
    assert sorted(charges) == sorted(set(charges)) == [f"{run_id}:3", f"{run_id}:6"]
