"""PostgreSQL: an operation whose connection was killed is retried on a fresh connection,
and an append whose first attempt committed before its connection died is not doubled."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Iterator
from types import MethodType
from typing import Any

import pytest

from agentcore.errors import SeqConflictError, StoreError
from agentcore.stores import PostgresStore
from agentcore.stores._batch import Batch
from agentcore.stores.postgres._retry import connection_lost, retried_append
from agentcore.stores.testing import context, fresh_run_id, started

pytestmark = pytest.mark.postgres

WAIT_S = 20.0


def tagged(dsn: str, name: str) -> str:
    """The DSN with an application_name unique to the test, to find its connections."""
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}"


@pytest.fixture
def sql(postgres_dsn: str) -> Iterator[Any]:
    """A plain autocommit connection (Any: a psycopg connection)."""
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        yield conn


def terminate(sql: Any, app: str) -> int:  # Any: a psycopg connection
    """Kill every backend of ``app``; how many there were."""
    rows = sql.execute(
        b"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (app,),
    ).fetchall()
    return len(rows)


async def test_killed_idle_connections_are_replaced_without_an_error(
    postgres_dsn: str, pg_schema: str, sql: Any
) -> None:
    store = PostgresStore(tagged(postgres_dsn, pg_schema), schema=pg_schema, min_connections=3)
    try:
        run = fresh_run_id()
        await store.append(run, 0, [started(run)])
        lease = await store.acquire(run, owner="w", ttl_s=30)
        # Every call below meets a dead connection first (all the pool's were killed).
        for seq in range(1, 4):
            assert terminate(sql, pg_schema) >= 1
            await store.append(run, seq, [context(run, seq)], lease=lease)
        assert terminate(sql, pg_schema) >= 1
        lease = await store.renew(lease)
        assert terminate(sql, pg_schema) >= 1
        assert [ev.seq for ev in await store.load(run)] == [0, 1, 2, 3]
        assert terminate(sql, pg_schema) >= 1
        await store.release(lease)
    finally:
        await store.close()


async def test_an_append_killed_under_its_statement_is_retried_once(
    postgres_dsn: str, pg_schema: str, sql: Any
) -> None:
    """The backend is terminated while the append waits on the run's row lock (held by the
    test): the statement never committed; the retry writes the batch, once."""
    app = f"{pg_schema}_w"
    store = PostgresStore(tagged(postgres_dsn, app), schema=pg_schema)
    try:
        run = fresh_run_id()
        await store.append(run, 0, [started(run)])
        sql.execute(f'SET search_path TO "{pg_schema}"'.encode())
        with sql.transaction():
            sql.execute(b"SELECT 1 FROM agentcore_runs WHERE run_id = %s FOR UPDATE", (run,))
            appending = asyncio.create_task(store.append(run, 1, [context(run, 1)]))
            deadline = time.monotonic() + WAIT_S
            while not sql.execute(
                b"""SELECT 1 FROM pg_stat_activity
                WHERE application_name = %s AND wait_event_type = 'Lock'""",
                (app,),
            ).fetchall():
                assert time.monotonic() < deadline, "the append never waited on the row lock"
                assert not appending.done(), appending
                await asyncio.sleep(0.02)
            assert terminate(sql, app) >= 1
            await asyncio.sleep(0.1)  # the retry queues behind the lock again
        await asyncio.wait_for(appending, WAIT_S)
        assert [ev.seq for ev in await store.load(run)] == [0, 1]
    finally:
        await store.close()


UNDECORATED = inspect.unwrap(PostgresStore.__dict__["_append"])
"""``PostgresStore._append`` (the write under ``append``'s checks) without its retry."""


def _lost_reply(
    real: Any,  # Any: PostgresStore._append, undecorated
    *,
    committed: bool,
) -> Any:  # Any: the same signature
    """An append whose first attempt reports a lost connection, after committing or not."""
    import psycopg

    calls: list[int] = []

    async def append(store: PostgresStore, batch: Batch, /) -> None:
        calls.append(batch.expected_seq)
        if len(calls) > 1 or committed:
            await real(store, batch)
        if len(calls) == 1:
            cause = psycopg.OperationalError("server closed the connection unexpectedly")
            raise StoreError("cannot append: server closed the connection") from cause

    return append


async def test_an_append_that_committed_before_its_connection_died_succeeds_once(
    postgres_dsn: str, pg_schema: str
) -> None:
    store = PostgresStore(postgres_dsn, schema=pg_schema)
    try:
        run = fresh_run_id()
        await store.append(run, 0, [started(run)])
        lease = await store.acquire(run, owner="w", ttl_s=30)
        flaky = retried_append(_lost_reply(UNDECORATED, committed=True))
        store._append = MethodType(flaky, store)
        batch = [context(run, 1), context(run, 2)]
        await store.append(run, 1, batch, lease=lease)  # the retry finds its own batch
        assert [ev.seq for ev in await store.load(run)] == [0, 1, 2]
        # A retry that finds another writer's events at those seqs still conflicts.
        flaky = retried_append(_lost_reply(UNDECORATED, committed=False))
        store._append = MethodType(flaky, store)
        with pytest.raises(SeqConflictError):
            await store.append(run, 1, [context(run, 1, content="other")], lease=lease)
        assert await store.load(run, after=0) == batch
    finally:
        await store.close()


def test_what_counts_as_a_lost_connection() -> None:
    import psycopg
    from psycopg import errors
    from psycopg_pool import PoolTimeout

    assert connection_lost(psycopg.OperationalError("server closed the connection"))
    assert connection_lost(errors.AdminShutdown("terminating connection"))
    assert connection_lost(errors.CannotConnectNow("the database system is starting up"))
    assert connection_lost(errors.ConnectionFailure("connection failure"))
    assert not connection_lost(errors.QueryCanceled("statement timeout"))
    assert not connection_lost(errors.LockNotAvailable("lock timeout"))
    assert not connection_lost(errors.UniqueViolation("duplicate key"))
    assert not connection_lost(PoolTimeout("no connection in 10 s"))
    assert not connection_lost(None)
