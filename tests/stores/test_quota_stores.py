"""Quota counters in the durable stores beyond the conformance kit: the counters' table
added to existing databases by migration, read-only SQLite opens answering the reads, and
PostgreSQL group commits charging the same counters in opposite orders without a deadlock."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from agentcore.errors import QuotaExceededError, StoreError
from agentcore.stores import PostgresStore, SQLiteStore
from agentcore.stores.postgres import _schema as pg_module
from agentcore.stores.sqlite import _schema as sqlite_module
from agentcore.stores.testing import charge, charged_call, context, started


async def spend(store: SQLiteStore | PostgresStore, run: str, key: str) -> None:
    await store.append(run, 0, [started(run)])
    await store.append(run, 1, charged_call(run, 1, [charge(key, 2, limit=3)]))
    with pytest.raises(QuotaExceededError):
        await store.append(run, 3, charged_call(run, 3, [charge(key, 2, limit=3)]))
    assert await store.quota_usage([key]) == {key: 2.0}


# --------------------------------------------------------------------------- SQLite


async def test_a_sqlite_store_from_before_quotas_gets_its_counters(tmp_path: Path) -> None:
    path = tmp_path / "v7.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for migration in sqlite_module.MIGRATIONS[:7]:
            for statement in migration.statements:
                conn.execute(statement)
        conn.execute("PRAGMA user_version = 7")
    finally:
        conn.close()
    store = SQLiteStore(path)
    try:
        await spend(store, "r", "k")
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (sqlite_module.SCHEMA_VERSION,)
        columns = [(r[1], r[2], r[3]) for r in conn.execute("PRAGMA table_info(quota_usage)")]
    finally:
        conn.close()
    assert columns == [
        ("key", "TEXT", 1),  # a WITHOUT ROWID key is NOT NULL
        ("quota", "TEXT", 1),
        ("tenant", "TEXT", 0),
        ("used", "INTEGER", 1),
        ("window_end", "REAL", 0),
    ]


async def test_a_read_only_sqlite_store_reads_the_counters(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.append("r", 0, [started("r")])
        charges = [charge("a", 1.5, tenant="acme", window_end=60.0), charge("b", 2)]
        await store.append("r", 1, charged_call("r", 1, charges))
    finally:
        await store.close()
    reader = SQLiteStore(path, read_only=True)
    try:
        assert await reader.quota_usage(["a", "b", "c"]) == {"a": 1.5, "b": 2.0, "c": 0.0}
        assert [u.key for u in await reader.list_quota_usage(tenant="acme")] == ["a"]
        with pytest.raises(StoreError, match="cannot prune quota counters"):
            await reader.prune_quota_usage(1e12)
        with pytest.raises(StoreError):
            await reader.append("r", 3, charged_call("r", 3, [charge("a", 1)]))
        assert await reader.quota_usage(["a"]) == {"a": 1.5}
    finally:
        await reader.close()


async def test_a_sqlite_group_commit_keeps_the_others_of_a_refused_append(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        runs = ["a", "b", "c"]
        for run in runs:
            await store.append(run, 0, [started(run)])
        before = store.stats.batches
        results = await asyncio.gather(
            store.append("a", 1, charged_call("a", 1, [charge("k", 2, limit=3)])),
            store.append("b", 1, charged_call("b", 1, [charge("k", 2, limit=3)])),
            store.append("c", 1, [context("c", 1)]),
            return_exceptions=True,
        )
        assert store.stats.batches == before + 1  # one shared transaction
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], QuotaExceededError)
        assert [len(await store.load(run)) for run in runs] == [3, 1, 2]
        assert await store.quota_usage(["k"]) == {"k": 2.0}
    finally:
        await store.close()


# --------------------------------------------------------------------------- PostgreSQL


@pytest.mark.postgres
async def test_a_postgres_store_from_before_quotas_gets_its_counters(
    postgres_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patched:
        patched.setattr(pg_module, "MIGRATIONS", pg_module.MIGRATIONS[:5])
        PostgresStore(postgres_dsn, schema=pg_schema)
    store = PostgresStore(postgres_dsn, schema=pg_schema)
    try:
        await spend(store, "r", "k")
    finally:
        await store.close()


@pytest.mark.postgres
async def test_postgres_batches_charging_counters_in_opposite_orders_do_not_deadlock(
    postgres_dsn: str, pg_schema: str
) -> None:
    """Two store objects (two pools) commit a batch each at once: one charges x for run p0
    then y for run p1, the other y for q0 then x for q1. Another transaction holds the rows
    of p1 and q1, so that without one lock order for the counters each batch would stop
    holding its first counter, and on release each would wait for the other's: PostgreSQL
    finds that deadlock after ``deadlock_timeout`` (measured without the counters' locks:
    one batch aborted, retried append by append, after that stall). With them, the second
    batch waits for the first before it locks anything, and both finish at once."""
    import psycopg

    first = PostgresStore(postgres_dsn, schema=pg_schema)
    second = PostgresStore(postgres_dsn, schema=pg_schema)
    try:
        for run in ("p0", "p1", "q0", "q1"):  # each store knows its runs' chain heads:
            # their next appends need no read first, and queue into one batch
            await (first if run < "q" else second).append(run, 0, [started(run)])
        with psycopg.connect(postgres_dsn) as holder:
            row = holder.execute(
                "SELECT setting::float / 1000 FROM pg_settings WHERE name = 'deadlock_timeout'"
            ).fetchone()
            assert row is not None
            holder.execute(
                f"""SELECT 1 FROM "{pg_schema}".agentcore_runs
                WHERE run_id IN ('p1', 'q1') FOR UPDATE""".encode()
            )

            def batch(store: PostgresStore, runs: dict[str, str]) -> Any:
                return asyncio.gather(
                    *(
                        store.append(run, 1, charged_call(run, 1, [charge(key, 1)]))
                        for run, key in runs.items()
                    )
                )

            both = asyncio.gather(
                batch(first, {"p0": "x", "p1": "y"}), batch(second, {"q0": "y", "q1": "x"})
            )
            await asyncio.sleep(0.5)  # both batches are blocked now
            assert not both.done()
            holder.commit()
            released = time.monotonic()
            await both
            took = time.monotonic() - released
        assert took < row[0] / 2, f"the batches took {took:.2f} s: a deadlock was waited out"
        assert await first.quota_usage(["x", "y"]) == {"x": 2.0, "y": 2.0}
    finally:
        await first.close()
        await second.close()


@pytest.mark.postgres
async def test_a_postgres_group_commit_keeps_the_others_of_a_refused_append(
    pg_store: PostgresStore,
) -> None:
    store = pg_store
    runs = ["a", "b", "c", "d"]
    for run in runs:
        await store.append(run, 0, [started(run)])
    results = await asyncio.gather(
        store.append("a", 1, charged_call("a", 1, [charge("k", 2, limit=3)])),
        store.append("b", 1, charged_call("b", 1, [charge("k", 2, limit=3)])),
        store.append("c", 1, [context("c", 1)]),
        store.append("d", 1, charged_call("d", 1, [charge("j", 1, limit=1)])),
        return_exceptions=True,
    )
    assert [type(r).__name__ for r in results] == [
        "NoneType",
        "QuotaExceededError",
        "NoneType",
        "NoneType",
    ]
    assert [len(await store.load(run)) for run in runs] == [3, 1, 2, 3]
    assert await store.quota_usage(["k", "j"]) == {"k": 2.0, "j": 1.0}
