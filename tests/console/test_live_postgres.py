"""A live page over PostgreSQL: a visitor who leaves mid-read is not an error.

The stream's store read is running (held by a table lock) when the client disconnects;
nothing is logged at warning level or above.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from starlette.types import Message, Scope
from stores.conftest import pg_schema, pg_store, postgres_dsn

from agentcore.console import create_app
from agentcore.stores.postgres import PostgresStore

from ._support import make_agent, seed

__all__ = ["pg_schema", "pg_store", "postgres_dsn"]  # the store tests' fixtures, used here too

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store  # a fresh schema's store, closed afterwards (tests/stores/conftest.py)


async def test_leaving_a_live_page_mid_read_logs_no_error(
    store: PostgresStore, postgres_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg

    first, _ = await seed(make_agent(store), n_plain=0)
    app = create_app(store, authenticate=lambda _: "ada", poll_s=0.01)
    sent: list[Message] = []
    got_body = asyncio.Event()
    leave = asyncio.Event()

    async def receive() -> Message:
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            got_body.set()

    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": f"/api/runs/{first.run_id}/stream",
        "raw_path": f"/api/runs/{first.run_id}/stream".encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"console.test")],
        "client": ("127.0.0.1", 1),
        "server": ("console.test", 80),
        "app": app,
    }
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as locker:
        caplog.set_level(logging.DEBUG)
        serving = asyncio.create_task(app(scope, receive, send))
        await asyncio.wait_for(got_body.wait(), 10)
        # hold the next read: the stream is inside a query when its client leaves
        lock = f'LOCK TABLE "{pg_schema}".agentcore_events IN ACCESS EXCLUSIVE MODE'
        await locker.execute(lock.encode())
        await asyncio.sleep(0.3)
        leave.set()
        await asyncio.wait_for(serving, 10)
        await locker.rollback()
    await asyncio.sleep(0.1)
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [], [f"{r.name}: {r.getMessage()}" for r in loud]
    assert sent[0]["status"] == 200
