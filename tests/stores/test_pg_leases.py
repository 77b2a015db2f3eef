"""PostgreSQL leases: times come from the database's clock, never a worker's, and a dead
worker's run is taken over once its lease has expired."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore.errors import RunBusyError
from agentcore.stores import PostgresStore
from agentcore.stores.testing import context, started

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store


@pytest.fixture
def sql(postgres_dsn: str, pg_schema: str, store: PostgresStore) -> Iterator[Any]:
    """A plain autocommit connection on the test's schema (Any: a psycopg connection)."""
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"'.encode())
        yield conn


def one(conn: Any, query: str, *params: object) -> Any:  # Any: psycopg connection and value
    row = conn.execute(query.encode(), params).fetchone()
    assert row is not None
    return row[0]


async def test_lease_times_are_the_database_clock(store: PostgresStore, sql: Any) -> None:
    await store.append("r", 0, [started("r")])
    lease = await store.acquire("r", owner="w", ttl_s=30)
    db_now = float(one(sql, "SELECT extract(epoch FROM now())::float8"))
    assert abs(lease.expires_at - (db_now + 30)) < 1.0
    stored = "SELECT extract(epoch FROM lease_until)::float8 FROM agentcore_runs"
    assert float(one(sql, stored)) == lease.expires_at
    renewed = await store.renew(lease)
    db_now = float(one(sql, "SELECT extract(epoch FROM now())::float8"))
    assert abs(renewed.expires_at - (db_now + 30)) < 1.0
    assert float(one(sql, stored)) == renewed.expires_at


async def test_expiry_is_judged_by_the_database_clock(store: PostgresStore, sql: Any) -> None:
    """Whatever a worker's clock says, the row's lease_until against the database's time
    decides: moving lease_until in the database is all it takes."""
    await store.append("r", 0, [started("r")])
    long = await store.acquire("r", owner="a", ttl_s=3600)
    sql.execute(b"UPDATE agentcore_runs SET lease_until = now() - interval '1 second'")
    taken = await store.acquire("r", owner="b", ttl_s=0.1)  # a's hour is over by the database
    assert taken.epoch == long.epoch + 1
    await asyncio.sleep(0.3)  # b's lease is over by every clock...
    sql.execute(b"UPDATE agentcore_runs SET lease_until = now() + interval '1 hour'")
    with pytest.raises(RunBusyError, match="'b'"):  # ...but not by the database's
        await store.acquire("r", owner="c", ttl_s=30)


HOLDER = """
import asyncio, sys
from agentcore.stores import PostgresStore

async def main():
    store = PostgresStore(sys.argv[1], schema=sys.argv[2])
    lease = await store.acquire("r", owner="doomed", ttl_s=float(sys.argv[3]))
    print("held", lease.epoch, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def start_holder(dsn: str, schema: str, ttl_s: float, cwd: Path) -> subprocess.Popen[str]:
    """A worker process that has acquired run ``r`` and then hangs."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, dsn, schema, str(ttl_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("held "):
        proc.kill()
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"the holder did not acquire the run: {line!r} {err}")
    return proc


@pytest.mark.subprocess
async def test_a_killed_workers_run_is_taken_after_its_lease(
    store: PostgresStore, postgres_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    await store.append("r", 0, [started("r")])
    proc = start_holder(postgres_dsn, pg_schema, 2.5, tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    with pytest.raises(RunBusyError, match="'doomed'"):  # nothing died with it but time
        await store.acquire("r", owner="heir", ttl_s=30)
    await asyncio.sleep(2.7)
    lease = await store.acquire("r", owner="heir", ttl_s=30)
    assert lease.epoch == 2
    await store.append("r", 1, [context("r", 1)], lease=lease)
