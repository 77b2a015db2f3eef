"""A store written before run metadata sat on the run's row (SQLite version 4, PostgreSQL
version 2) is searched by metadata once upgraded: the upgrade copies it from each run's
``run_started``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentcore.events import RunStarted
from agentcore.stores import PostgresStore, SQLiteStore

from .conftest import drop_schema


def started(run_id: str, metadata: dict[str, str]) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        seq=0,
        at=1.0,
        task="a task",
        scope=[],
        budget={},
        policy={},
        contract={"hash": "h"},
        route=["scripted"],
        tools={},
        metadata=dict(metadata),
    )


async def test_sqlite_upgrade_copies_metadata_to_the_row(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    await store.append("a", 0, [started("a", {"ticket": "T-7"})])
    await store.append("b", 0, [started("b", {})])
    await store.close()
    with sqlite3.connect(path) as conn:  # as version 4 wrote it
        conn.execute("ALTER TABLE runs DROP COLUMN metadata")
        conn.execute("ALTER TABLE runs DROP COLUMN chain_head")  # migration 6
        conn.execute("ALTER TABLE events DROP COLUMN chain")
        conn.execute("PRAGMA user_version = 4")
    store = SQLiteStore(path)
    try:
        assert [s.run_id for s in await store.list_runs(search="t-7")] == ["a"]
        assert await store.list_runs(search="{}") == []  # empty metadata is not kept
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT run_id, metadata FROM runs ORDER BY run_id").fetchall() == [
            ("a", '{"ticket":"T-7"}'),
            ("b", None),
        ]


@pytest.mark.postgres
async def test_postgres_upgrade_copies_metadata_to_the_row(
    postgres_dsn: str, pg_schema: str
) -> None:
    import psycopg

    store = PostgresStore(postgres_dsn, schema=pg_schema)
    await store.append("a", 0, [started("a", {"ticket": "T-7"})])
    await store.append("b", 0, [started("b", {})])
    await store.close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # as version 2 wrote it
        conn.execute(f'ALTER TABLE "{pg_schema}".agentcore_runs DROP COLUMN metadata'.encode())
        conn.execute(f'ALTER TABLE "{pg_schema}".agentcore_events DROP COLUMN chain'.encode())
        conn.execute(f'DELETE FROM "{pg_schema}".agentcore_schema WHERE version >= 3'.encode())
    store = PostgresStore(postgres_dsn, schema=pg_schema)
    try:
        assert [s.run_id for s in await store.list_runs(search="t-7")] == ["a"]
        assert await store.list_runs(search="{}") == []
    finally:
        await store.close()
        drop_schema(postgres_dsn, pg_schema)
