"""Console test setup: an app over a store with seeded runs, a client that signs in by a
header, and the CSRF token a page would carry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request

from agentcore import Agent, RunResult
from agentcore.console import create_app
from agentcore.stores import MemoryStore

from ._support import make_agent, seed


def header_user(request: Request) -> str | None:
    """The test's authentication: the ``X-User`` header names the user."""
    return request.headers.get("x-user")


@dataclass
class Console:
    app: Starlette
    client: httpx.AsyncClient
    store: MemoryStore
    agent: Agent
    first: RunResult
    second: RunResult
    csrf: str


@pytest.fixture
async def console() -> AsyncIterator[Console]:
    store = MemoryStore()
    agent = make_agent(store)
    first, second = await seed(agent)
    app = create_app(store, agents=[agent], authenticate=header_user, poll_s=0.01)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=transport, base_url="http://console.test", headers={"X-User": "ada"}
        ) as client,
    ):
        csrf = (await client.get("/api/csrf")).json()["csrf"]
        yield Console(app, client, store, agent, first, second, csrf)
