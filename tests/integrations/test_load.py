"""Load: many runs through three Celery worker processes, one SIGKILLed halfway.

``AGENTCORE_LOAD_RUNS`` runs (default 1,000) of 10 steps each (9 tool steps, every third a
non-idempotent charge, then the finish), a scripted model that waits 5-20 ms per reply,
PostgreSQL as the store, leases of 2 s, three ``--pool threads`` workers. When half the
runs are done, one worker is killed with SIGKILL. Afterwards, from the store alone: every
run completed, every transcript is sound (``check_transcript``: no lost or duplicated
event), and every charge happened exactly once (its idempotency key is in the effects file
once). The test fails past 4 minutes. It prints its figures: runs, time, shifts,
redeliveries, takeovers, sweeps.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from agentcore import Budget, RunStatus, check_transcript
from agentcore.events import RunResumed, ToolStarted
from agentcore.integrations.celery import SWEEP_TASK, CeleryQueue
from agentcore.stores import PostgresStore

from .conftest import Workers
from .workload import make_agent

pytestmark = [pytest.mark.postgres, pytest.mark.subprocess, pytest.mark.slow]

RUNS = int(os.environ.get("AGENTCORE_LOAD_RUNS", "1000"))
TOOL_STEPS = 9  # + the finish: 10 steps
CHARGES = 3  # tool steps 3, 6 and 9 charge
LIMIT_S = 240.0
LEASE_S = "2"


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store  # a fresh schema's store, closed afterwards (tests/stores/conftest.py)


@pytest.fixture
def app(amqp_url: str, queue_name: str) -> Iterator[Celery]:
    client = Celery("agentcore-load-client", broker=amqp_url)
    client.conf.task_default_queue = queue_name
    try:
        yield client
    finally:
        client.close()


async def test_load_many_runs_three_workers_one_killed(
    workers: Workers, store: PostgresStore, app: Celery, tmp_path: Path
) -> None:
    began = time.monotonic()
    deadline = began + LIMIT_S
    env = {
        "AGENTCORE_TEST_LATENCY_MS": "5,20",
        "AGENTCORE_TEST_LEASE_S": LEASE_S,
        "AGENTCORE_TEST_SHIFT_STEPS": "5",
    }
    names = ["w1", "w2", "w3"]
    for name in names:
        workers.start(name, concurrency=32, **env)
    queue = CeleryQueue(app)
    agent = make_agent(store, queue=queue, lease_s=float(LEASE_S))
    run_ids = [
        await agent.submit(f"load steps={TOOL_STEPS}", budget=Budget(max_steps=12))
        for _ in range(RUNS)
    ]
    submitted = time.monotonic()

    killed_at: float | None = None
    sweeps = 0
    last_sweep = time.monotonic()
    while True:
        done = len(await store.list_runs(status=RunStatus.COMPLETED.value, limit=RUNS + 1))
        if done == RUNS:
            break
        if killed_at is None and done >= RUNS // 2:
            workers.stop("w2", signal.SIGKILL)
            killed_at = time.monotonic()
        if time.monotonic() - last_sweep >= 2.0:  # what `celery beat` would send
            app.send_task(SWEEP_TASK, ignore_result=True)
            sweeps += 1
            last_sweep = time.monotonic()
        assert time.monotonic() < deadline, (
            f"{done} of {RUNS} runs completed after {LIMIT_S:.0f} s "
            f"(killed w2 at {None if killed_at is None else round(killed_at - began)} s)"
        )
        await asyncio.sleep(0.5)
    finished = time.monotonic()
    cpu = {name: round(workers.cpu_seconds(name), 1) for name in ("w1", "w3")}
    for name in ("w1", "w3"):  # the workers' group-commit figures (service.py, SIGUSR2)
        workers.procs[name].send_signal(signal.SIGUSR2)
        workers.wait_for(name, "commit stats:")
    commits = {
        name: re.findall(r"commit stats: (.*)", workers.log(name))[-1] for name in ("w1", "w3")
    }
    assert killed_at is not None

    # Everything checked from the store (and the effects file) afterwards.
    takeovers = 0
    for run_id in run_ids:
        events = await store.load(run_id)
        assert check_transcript(events) == [], run_id
        result = await agent.result(run_id)
        assert result.status is RunStatus.COMPLETED, (run_id, result.reason)
        assert result.usage.steps == TOOL_STEPS + 1
        assert sum(1 for e in events if isinstance(e, ToolStarted)) >= TOOL_STEPS
        takeovers += sum(1 for e in events if isinstance(e, RunResumed) and e.recovery)
    charges = Counter((tmp_path / "effects.txt").read_text().split())
    assert not [key for key, n in charges.items() if n > 1], "a charge happened twice"
    assert len(charges) == RUNS * CHARGES

    outcomes = [o for name in names for o in workers.outcomes(name)]
    counts = Counter(outcome for _, outcome, _ in outcomes)
    redelivered = sum(1 for _, _, flag in outcomes if flag)
    print(
        f"\nload: {RUNS} runs x {TOOL_STEPS + 1} steps, 3 workers (w2 SIGKILLed at "
        f"{killed_at - began:.1f} s), submit {submitted - began:.1f} s, all completed at "
        f"{finished - began:.1f} s ({RUNS * (TOOL_STEPS + 1) / (finished - began):.0f} "
        f"steps/s); shifts logged by the survivors and w2 before its death: {dict(counts)}; "
        f"redelivered messages: {redelivered}; takeovers: {takeovers}; sweeps sent: {sweeps}; "
        f"CPU seconds of the survivors: {cpu}; their stores' group commit: {commits}"
    )
