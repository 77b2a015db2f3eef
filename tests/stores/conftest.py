"""Store test setup: where the PostgreSQL tests find their database, and their isolation.

The PostgreSQL DSN comes from ``AGENTCORE_TEST_POSTGRES_DSN``, else the documented local
database (``postgresql://postgres@127.0.0.1:5432/test``, what CI sets) when it answers.
Without a database that answers, or without psycopg, PostgreSQL tests skip with the reason
locally (the end of the run lists each reason once), but fail under ``CI=true``: a CI run
that silently skips its database tests proves nothing. Each test gets its own schema,
dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import strategies as st

if TYPE_CHECKING:
    from agentcore.stores import PostgresStore

DSN_VARIABLE = "AGENTCORE_TEST_POSTGRES_DSN"
LOCAL_DSN = "postgresql://postgres@127.0.0.1:5432/test"
"""The documented local database, used when ``AGENTCORE_TEST_POSTGRES_DSN`` is unset."""


def unavailable(reason: str, what: str = "the PostgreSQL tests") -> None:
    """Skip with ``reason`` locally; fail under ``CI=true``, where every service must be up."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true, but {what} cannot run: {reason}")
    pytest.skip(reason)


_unavailable = unavailable


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The test database's DSN; skips (fails under CI=true) when there is none."""
    dsn = os.environ.get(DSN_VARIABLE, "")
    where = DSN_VARIABLE if dsn else f"{LOCAL_DSN} ({DSN_VARIABLE} is not set)"
    try:
        import psycopg
    except ImportError as exc:
        _unavailable(f"psycopg is not installed ({exc}): pip install -e '.[dev]'")
        raise  # unreachable: skip and fail raise
    try:
        with psycopg.connect(dsn or LOCAL_DSN, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        _unavailable(f"PostgreSQL: cannot connect to {where}: {str(exc).strip()}")
    return dsn or LOCAL_DSN


def drop_schema(dsn: str, schema: str) -> None:
    """Drop a test schema and everything in it."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


@pytest.fixture
def pg_schema(postgres_dsn: str) -> Iterator[str]:
    """A fresh schema name for one test (the store creates it); dropped afterwards."""
    schema = f"agentcore_t_{secrets.token_hex(6)}"
    try:
        yield schema
    finally:
        drop_schema(postgres_dsn, schema)


@pytest.fixture
async def pg_store(postgres_dsn: str, pg_schema: str) -> AsyncIterator[PostgresStore]:
    """A PostgresStore on a fresh schema of its own, closed afterwards."""
    from agentcore.stores import PostgresStore

    store = PostgresStore(postgres_dsn, schema=pg_schema)
    try:
        yield store
    finally:
        await store.close()


def hostile_text(*, min_size: int = 0, max_size: int = 200) -> st.SearchStrategy[str]:
    """Any text: control characters, NUL and lone surrogates included (``st.text()``
    leaves the surrogates out, so they are drawn on their own)."""
    char = st.characters() | st.integers(0xD800, 0xDFFF).map(chr) | st.sampled_from("\x00\n\x7f")
    return st.lists(char, min_size=min_size, max_size=max_size).map("".join)


def on_memory_and_sqlite(check: Callable[[Any], Awaitable[None]]) -> None:
    """Run ``check(store)`` on a fresh MemoryStore and a fresh SQLiteStore (in a temporary
    folder), both closed afterwards: one example of a property test, where a fixture's
    store would be shared by every example."""

    async def go() -> None:
        from agentcore.stores import MemoryStore, SQLiteStore

        with tempfile.TemporaryDirectory() as tmp:
            sqlite = SQLiteStore(Path(tmp) / "runs.db")
            memory = MemoryStore()
            try:
                for store in (memory, sqlite):
                    await check(store)
            finally:
                await sqlite.close()
                await memory.close()

    asyncio.run(go())


def on_postgres(dsn: str, schema: str, check: Callable[[Any], Awaitable[None]]) -> None:
    """Run ``check(store)`` on a fresh PostgresStore on ``schema``, closed afterwards: one
    example of a property test (see :func:`on_memory_and_sqlite`)."""

    async def go() -> None:
        from agentcore.stores import PostgresStore

        store = PostgresStore(dsn, schema=schema)
        try:
            await check(store)
        finally:
            await store.close()

    asyncio.run(go())
