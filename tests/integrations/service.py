"""The Celery app a test's worker processes load: ``celery -A service worker``.

Configured by the environment the test sets: the broker, the PostgreSQL store (DSN and
schema), the queue, the tools' variant, the model's latency, the lease and the shift size.
"""

from __future__ import annotations

import os
import signal

from celery import Celery
from workload import make_agent

from agentcore.integrations.celery import CeleryQueue, install
from agentcore.stores import PostgresStore

env = os.environ
app = Celery("agentcore-tests", broker=env["AGENTCORE_TEST_AMQP_URL"])
app.conf.task_default_queue = env["AGENTCORE_TEST_QUEUE"]
app.conf.worker_hijack_root_logger = True
low, _, high = env.get("AGENTCORE_TEST_LATENCY_MS", "").partition(",")
store = PostgresStore(
    env["AGENTCORE_TEST_POSTGRES_DSN"],
    schema=env["AGENTCORE_TEST_PG_SCHEMA"],
    max_connections=int(env.get("AGENTCORE_TEST_PG_CONNECTIONS", "10")),
)
agent = make_agent(
    store,
    queue=CeleryQueue(app),
    variant=env.get("AGENTCORE_TEST_TOOLS", "v1"),
    latency_ms=(float(low), float(high)) if low else None,
    lease_s=float(env.get("AGENTCORE_TEST_LEASE_S", "5")),
)
registry = install(
    app,
    [agent],
    shift_steps=int(env.get("AGENTCORE_TEST_SHIFT_STEPS", "2")),
    shift_seconds=10.0,
    sweep_every=None,
    idle_after=float(env.get("AGENTCORE_TEST_IDLE_AFTER", "120")),
    tune_gc=env.get("AGENTCORE_TEST_TUNE_GC") == "1",
)


def _dump_tasks(*_: object) -> None:
    """SIGUSR2: print the store's group-commit figures, then every task on the worker's
    loop with its stack (a stuck shift)."""
    import asyncio
    import sys

    stats = store.stats
    print(
        f"commit stats: appends={stats.appends} commits={stats.commits} "
        f"largest_batch={stats.largest_batch}",
        file=sys.stderr,
    )
    loop = registry._loop._loop
    if loop is None:
        return
    for task in asyncio.all_tasks(loop):
        print(f"--- {task!r}", file=sys.stderr)
        task.print_stack(file=sys.stderr)
    sys.stderr.flush()


signal.signal(signal.SIGUSR2, _dump_tasks)
