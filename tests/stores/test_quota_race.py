"""Ten worker processes race to spend one counter's last units: on PostgreSQL and on one
SQLite file, exactly the limit is charged, by exactly as many recorded decisions, and every
other append is refused with QuotaExceededError (nothing else: no deadlock, no lock
timeout, no store error)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentcore.events import Decision
from agentcore.stores import PostgresStore, SQLiteStore, TranscriptStore

WORKERS = 10
LIMIT = 10.0
KEY = '["refunds",[["customer","c-1"]],"day:2026-01-01"]'

# One worker: opens the store, says it is ready, waits for "go" on stdin, then appends to
# its own run one decision charging 1.0 (limit 10) after another until one is refused.
# It prints what happened to each append, as JSON.
WORKER = """
import asyncio, json, sys
from agentcore.errors import QuotaExceededError
from agentcore.stores import PostgresStore, SQLiteStore
from agentcore.stores.testing import charge, charged_call, started

kind, where, schema, run, key, limit = sys.argv[1:7]

async def main() -> None:
    store = (
        SQLiteStore(where, busy_timeout_s=30)
        if kind == "sqlite"
        else PostgresStore(where, schema=schema)
    )
    await store.append(run, 0, [started(run)])
    print("ready", flush=True)
    sys.stdin.readline()
    seq, outcomes = 1, []
    try:
        while True:
            try:
                await store.append(
                    run, seq, charged_call(run, seq, [charge(key, 1.0, limit=float(limit))])
                )
            except QuotaExceededError as exc:
                outcomes.append(["refused", exc.used, exc.limit])
                break
            except Exception as exc:
                outcomes.append(["error", type(exc).__name__, str(exc)])
                break
            outcomes.append(["charged"])
            seq += 2
    finally:
        await store.close()
    print(json.dumps(outcomes), flush=True)

asyncio.run(main())
"""


def race(kind: str, where: str, schema: str, cwd: Path) -> list[list[list[object]]]:
    """Start the workers, wait until each is ready, let them all go at once; each one's
    outcomes."""
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, kind, where, schema, f"race-{i}", KEY, str(LIMIT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        for i in range(WORKERS)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            line = worker.stdout.readline()
            assert line == "ready\n", worker.communicate(timeout=10)
        for worker in workers:  # as close together as a loop of writes gets
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        results: list[list[list[object]]] = []
        for worker in workers:
            out, err = worker.communicate(timeout=60)
            assert worker.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


async def check_the_store(store: TranscriptStore, results: list[list[list[object]]]) -> None:
    outcomes = [outcome for result in results for outcome in result]
    charged = sum(outcome[0] == "charged" for outcome in outcomes)
    refused = [outcome for outcome in outcomes if outcome[0] == "refused"]
    errors = [outcome for outcome in outcomes if outcome[0] == "error"]
    assert errors == []
    assert charged == LIMIT
    # Each worker stopped at its first refusal, and each refusal saw the counter full.
    assert len(refused) == WORKERS
    assert all(used == LIMIT and limit == LIMIT for _, used, limit in refused)
    assert [len(result) for result in results] == [
        sum(o[0] == "charged" for o in result) + 1 for result in results
    ]
    assert await store.quota_usage([KEY]) == {KEY: LIMIT}  # pyright: ignore[reportAttributeAccessIssue]  # a QuotaStore
    decisions = 0
    for i, result in enumerate(results):
        events = await store.load(f"race-{i}")
        mine = [ev for ev in events if isinstance(ev, Decision) and ev.charges]
        assert len(mine) == sum(o[0] == "charged" for o in result)
        decisions += len(mine)
    assert decisions == LIMIT


@pytest.mark.postgres
def test_workers_racing_on_postgres_never_pass_the_limit(
    postgres_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    PostgresStore(postgres_dsn, schema=pg_schema)  # the schema, before the workers open it
    started = time.monotonic()
    results = race("postgres", postgres_dsn, pg_schema, tmp_path)
    took = time.monotonic() - started

    async def check() -> None:
        store = PostgresStore(postgres_dsn, schema=pg_schema)
        try:
            await check_the_store(store, results)
        finally:
            await store.close()

    asyncio.run(check())
    assert took < 30


def test_workers_racing_on_one_sqlite_file_never_pass_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteStore(path)  # created before the workers open it
    results = race("sqlite", str(path), "", tmp_path)

    async def check() -> None:
        store = SQLiteStore(path)
        try:
            await check_the_store(store, results)
        finally:
            await store.close()

    asyncio.run(check())
