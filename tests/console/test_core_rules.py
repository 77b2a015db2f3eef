"""The console decides with the core's rules: the agent that owns a run is the one
``Agent.owns`` names, and an edited call is validated by ``Agent.confirm``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from agentcore import Agent, Policy, RunResult
from agentcore.adapters import ScriptedModel
from agentcore.console import create_app
from agentcore.events import Confirmation, RunStarted
from agentcore.stores import MemoryStore

from ._support import make_agent, refund
from .conftest import header_user


@asynccontextmanager
async def _console(store: MemoryStore, agents: list[Agent]) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, agents=agents, authenticate=header_user, poll_s=0.01)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://console.test",
            headers={"X-User": "ada"},
        ) as client,
    ):
        client.headers["X-CSRF-Token"] = (await client.get("/api/csrf")).json()["csrf"]
        yield client


async def _approve(client: httpx.AsyncClient, run: RunResult, **args: object) -> httpx.Response:
    assert run.pending is not None
    body = {"approve": True, "step": run.pending.step, "args_hash": run.pending.args_hash}
    return await client.post(
        f"/api/runs/{run.run_id}/confirm",
        content=json.dumps(body | ({"args": args} if args else {})),
        headers={"Content-Type": "application/json"},
    )


async def test_only_an_agent_that_owns_the_run_confirms_it() -> None:
    store = MemoryStore()
    owner = make_agent(store)
    run = await owner.run("Please refund order A1")
    # has the waiting tool, not the whole scope (lookup): it does not own the run
    partial = Agent(
        tools=[refund],
        model=ScriptedModel([]),
        store=store,
        policy=Policy(plan_before_writes=False),
    )
    assert not partial.owns(await _first(store, run.run_id))
    async with _console(store, [partial]) as client:
        refused = await _approve(client, run)
        assert refused.status_code == 409 and "agent that owns" in refused.json()["error"]
    assert not [e for e in await store.load(run.run_id) if isinstance(e, Confirmation)]
    async with _console(store, [partial, owner]) as client:
        assert (await _approve(client, run)).status_code == 200


async def test_an_edit_is_validated_as_agent_confirm_validates_it() -> None:
    store = MemoryStore()
    agent = make_agent(store)
    run = await agent.run("Please refund order A1")
    async with _console(store, [agent]) as client:
        bad = await _approve(client, run, order_id="A1", amount=[1])
        assert bad.status_code == 422 and "schema" in bad.json()["error"]
        # the tool's own coercion, as for the model's proposals: recorded as an integer
        assert (await _approve(client, run, order_id="A1", amount="12")).status_code == 200
    [confirmation] = [e for e in await store.load(run.run_id) if isinstance(e, Confirmation)]
    assert confirmation.args == {"order_id": "A1", "amount": 12}


async def _first(store: MemoryStore, run_id: str) -> RunStarted:
    first = (await store.load(run_id))[0]
    assert isinstance(first, RunStarted)
    return first
