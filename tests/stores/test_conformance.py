"""Every store of agentcore passes the conformance suite: memory, SQLite and PostgreSQL,
each with raw writes behind its back (``tamper``), so that the chain and snapshot checks
also show that a changed row is found."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcore.events import decode_event
from agentcore.stores import MemoryStore, PostgresStore, SQLiteStore, TranscriptStore
from agentcore.stores.testing import StoreConformance, Tamper


def memory_tamper(store: MemoryStore) -> Tamper:
    """A memory store's data is its objects: they are changed in place, as a raw write to a
    table would change a row."""
    runs = store._runs  # pyright: ignore[reportPrivateUsage]  # tampering: the data behind the API
    snapshots = store._snapshots  # pyright: ignore[reportPrivateUsage]  # tampering, as above

    def event_body(run_id: str, seq: int, body: str) -> None:
        runs[run_id][seq] = decode_event(run_id, seq, body)

    def snapshot_state(run_id: str, seq: int, state: str) -> None:
        rows = snapshots[run_id]
        i = next(i for i, row in enumerate(rows) if row[0].seq == seq)
        snap, digest, seal = rows[i]
        rows[i] = (dataclasses.replace(snap, state=state), digest, seal)

    return Tamper(event_body, snapshot_state)


def sqlite_tamper(path: Path) -> Tamper:
    def write(sql: str, *args: object) -> None:
        conn = sqlite3.connect(path)
        try:
            with conn:
                assert conn.execute(sql, args).rowcount == 1
        finally:
            conn.close()

    def event_body(run_id: str, seq: int, body: str) -> None:
        write("UPDATE events SET body = ? WHERE run_id = ? AND seq = ?", body, run_id, seq)

    def snapshot_state(run_id: str, seq: int, state: str) -> None:
        write("UPDATE snapshots SET state = ? WHERE run_id = ? AND seq = ?", state, run_id, seq)

    return Tamper(event_body, snapshot_state)


def postgres_tamper(dsn: str, schema: str) -> Tamper:
    def write(table: str, column: str, value: str, run_id: str, seq: int) -> None:
        import psycopg

        sql = f'UPDATE "{schema}".{table} SET {column} = %s WHERE run_id = %s AND seq = %s'
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute(sql.encode(), (value, run_id, seq)).rowcount == 1

    def event_body(run_id: str, seq: int, body: str) -> None:
        write("agentcore_events", "body", body, run_id, seq)

    def snapshot_state(run_id: str, seq: int, state: str) -> None:
        write("agentcore_snapshots", "state", state, run_id, seq)

    return Tamper(event_body, snapshot_state)


class TestMemoryStore(StoreConformance):
    @pytest.fixture
    async def store(self) -> AsyncIterator[TranscriptStore]:
        s = MemoryStore()
        try:
            yield s
        finally:
            await s.close()

    @pytest.fixture
    def tamper(self, store: TranscriptStore) -> Tamper | None:
        assert isinstance(store, MemoryStore)
        return memory_tamper(store)


class TestSQLiteStore(StoreConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[TranscriptStore]:
        s = SQLiteStore(tmp_path / "runs.db")
        try:
            yield s
        finally:
            await s.close()

    @pytest.fixture
    async def peer(
        self, store: TranscriptStore, tmp_path: Path
    ) -> AsyncIterator[TranscriptStore | None]:
        s = SQLiteStore(tmp_path / "runs.db")
        try:
            yield s
        finally:
            await s.close()

    @pytest.fixture
    def tamper(self, store: TranscriptStore, tmp_path: Path) -> Tamper | None:
        return sqlite_tamper(tmp_path / "runs.db")


@pytest.mark.postgres
class TestPostgresStore(StoreConformance):
    @pytest.fixture
    async def store(self, postgres_dsn: str, pg_schema: str) -> AsyncIterator[TranscriptStore]:
        s = PostgresStore(postgres_dsn, schema=pg_schema)
        try:
            yield s
        finally:
            await s.close()

    @pytest.fixture
    async def peer(
        self, store: TranscriptStore, postgres_dsn: str, pg_schema: str
    ) -> AsyncIterator[TranscriptStore | None]:
        s = PostgresStore(postgres_dsn, schema=pg_schema)
        try:
            yield s
        finally:
            await s.close()

    @pytest.fixture
    def tamper(self, store: TranscriptStore, postgres_dsn: str, pg_schema: str) -> Tamper | None:
        return postgres_tamper(postgres_dsn, pg_schema)
