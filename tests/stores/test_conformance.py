"""Every store of agentcore passes the conformance suite: memory, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcore.stores import MemoryStore, PostgresStore, SQLiteStore, TranscriptStore
from agentcore.stores.testing import StoreConformance


class TestMemoryStore(StoreConformance):
    @pytest.fixture
    async def store(self) -> AsyncIterator[TranscriptStore]:
        s = MemoryStore()
        try:
            yield s
        finally:
            await s.close()


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
