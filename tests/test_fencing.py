"""A call's identity travels by itself on agentcore's HTTP client (``agentcore.net``).

A loopback service records the headers each request carried: the idempotency key is the
same when the call runs again after a crash, and the fencing token (the lease epoch) is
greater once another worker took the run over. The takeover is real: a worker process
SIGKILLs itself after its tool's request (``AGENTCORE_CRASH_AT=after_tool_return``),
leaving its lease behind, and a second agent on the same SQLite file takes the run once
that lease has expired. Run as a script, this file is that worker:
``python test_fencing.py <database> <service url>``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentcore import Agent, Policy, RunStatus, Tool, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.events import RunResumed
from agentcore.net import guarded_async_client, guarded_client
from agentcore.stores import SQLiteStore

LOCAL = ["127.0.0.1/32"]
LEASE_S = 1.0
KEY = "Idempotency-Key"
TOKEN = "Agentcore-Fencing-Token"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Service:
    """A payments service on 127.0.0.1 that records every request's headers."""

    url: str
    seen: list[Seen] = field(default_factory=list[Seen])

    def posts(self) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST"]


@pytest.fixture
def service() -> Iterator[Service]:
    seen: list[Seen] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            seen.append(Seen(self.command, self.path, dict(self.headers.items())))
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield Service(f"http://127.0.0.1:{httpd.server_address[1]}", seen)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def refund_tool(url: str, *, crash_first: bool = False) -> Tool:
    """An idempotent write: the service deduplicates by the Idempotency-Key it receives.
    ``crash_first``: the first call "dies" right after its request (a cancelled task)."""
    crashes = [crash_first]

    @tool(effect="write", idempotent=True)
    async def refund(order_id: str) -> str:
        """Refund an order through the payments service.

        Args:
            order_id: the order to refund.
        """
        async with guarded_async_client(allow_networks=LOCAL) as client:
            answer = await client.post(f"{url}/refunds", json={"order_id": order_id})
        if crashes.pop() if crashes else False:
            raise asyncio.CancelledError  # the process "dies" after the request went out
        return answer.text

    return refund


def script() -> ScriptedModel:
    """Refund A1, then finish; decided from the conversation so any agent can continue."""

    def next_action(messages: Sequence[Message]) -> dict[str, Any]:
        if any(m.role == "user" and "refund returned" in m.content for m in messages):
            return {"type": "finish", "thought": "done", "answer": "refunded"}
        return {"type": "tool", "thought": "refund", "tool": "refund", "args": {"order_id": "A1"}}

    return ScriptedModel(next_action)


def agent(store: SQLiteStore | str, url: str, *, crash_first: bool = False) -> Agent:
    return Agent(
        tools=[refund_tool(url, crash_first=crash_first)],
        model=script(),
        store=store,
        policy=Policy(plan_before_writes=False),
        lease_s=LEASE_S,
    )


async def test_a_call_sends_its_key_and_token_and_keeps_the_tools_own_headers(
    service: Service,
) -> None:
    """A sync tool (run in a worker thread) on the sync client: the token on every request,
    the key on each POST (numbered after the first), a header the tool set left alone."""
    url = service.url

    @tool(effect="write", idempotent=True)
    def sync_writes() -> str:
        """Look the order up, then write twice, once with a key of the tool's own."""
        with guarded_client(allow_networks=LOCAL) as client:
            client.get(f"{url}/orders/A1")
            client.post(f"{url}/refunds", json={})
            client.post(f"{url}/notes", json={})
            client.post(f"{url}/audit", json={}, headers={KEY: "mine", TOKEN: "7"})
            client.post(f"{url}/emails", json={})
        return "done"

    model = ScriptedModel(
        [
            {"type": "tool", "thought": "t", "tool": "sync_writes", "args": {}},
            {"type": "finish", "thought": "t", "answer": "done"},
        ]
    )
    bot = Agent(
        tools=[sync_writes], model=model, store="memory://", policy=Policy(plan_before_writes=False)
    )
    result = await bot.run("write", run_id="w1")
    assert result.status is RunStatus.COMPLETED
    sent = [(s.method, s.path, s.headers.get(KEY), s.headers.get(TOKEN)) for s in service.seen]
    assert sent == [
        ("GET", "/orders/A1", None, "1"),
        ("POST", "/refunds", "w1:1", "1"),
        ("POST", "/notes", "w1:1/2", "1"),
        ("POST", "/audit", "mine", "7"),
        ("POST", "/emails", "w1:1/3", "1"),
    ]


async def test_outside_a_tool_call_nothing_is_added(service: Service) -> None:
    async with guarded_async_client(allow_networks=LOCAL) as client:
        await client.post(f"{service.url}/refunds", json={})
    (seen,) = service.seen
    assert KEY not in seen.headers and TOKEN not in seen.headers


async def test_a_resume_after_a_crash_sends_the_same_key_and_a_greater_token(
    service: Service, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with pytest.raises(asyncio.CancelledError):
        await agent(db, service.url, crash_first=True).run("refund A1", run_id="r1")
    result = await agent(db, service.url).resume("r1")
    assert result.status is RunStatus.COMPLETED
    first, again = service.posts()
    assert first.headers[KEY] == again.headers[KEY] == "r1:1"
    assert int(again.headers[TOKEN]) > int(first.headers[TOKEN])


@pytest.mark.subprocess
async def test_a_takeover_after_a_worker_died_sends_the_same_key_and_a_greater_token(
    service: Service, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    env = {**os.environ, "AGENTCORE_CRASH_AT": "after_tool_return"}
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        str(db),
        service.url,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(worker.communicate(), 60)
    assert worker.returncode == -9, err.decode()  # SIGKILLed after its request
    (first,) = service.posts()
    # The dead worker's lease is still on the run: nobody released it.
    with sqlite3.connect(db) as conn:
        owner, epoch, until = conn.execute(
            "SELECT owner, epoch, lease_until FROM runs WHERE run_id = 'r1'"
        ).fetchone()
    assert owner is not None and int(first.headers[TOKEN]) == epoch
    await asyncio.sleep(max(0.0, until - time.time()) + 0.1)  # the lease has expired

    store = SQLiteStore(str(db))
    result = await agent(store, service.url).resume("r1")
    assert result.status is RunStatus.COMPLETED
    resumed = [e for e in await store.load("r1") if isinstance(e, RunResumed)]
    assert [e.recovery for e in resumed] == [True]  # taken over from a worker that died
    first, again = service.posts()
    assert first.headers[KEY] == again.headers[KEY] == "r1:1"
    assert int(again.headers[TOKEN]) > int(first.headers[TOKEN])


async def _work(db: str, url: str) -> None:
    """The worker process: start run r1; AGENTCORE_CRASH_AT kills it after the tool."""
    await agent(f"sqlite:///{db}", url).run("refund A1", run_id="r1")


if __name__ == "__main__":
    asyncio.run(_work(sys.argv[1], sys.argv[2]))
