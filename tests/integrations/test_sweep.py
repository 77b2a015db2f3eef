"""The sweep's choices, on an in-memory store (no broker needed to decide what to publish),
and what ``install`` registers in an app."""

from __future__ import annotations

import asyncio

import pytest
from celery import Celery

from agentcore import Agent, Budget, Policy, Tool, tool
from agentcore.adapters import ScriptedModel
from agentcore.errors import ConfigurationError
from agentcore.integrations.celery import (
    ADVANCE_TASK,
    SWEEP_TASK,
    Registry,
    find_orphans,
    install,
)
from agentcore.stores import MemoryStore


@tool(effect="read")
def lookup(n: int) -> int:
    """Look up a number.

    Args:
        n: the number.
    """
    return n


@tool(effect="read")
def ping() -> str:
    """Answer pong."""
    return "pong"


def agent(name: str, store: MemoryStore, *tools: Tool) -> Agent:
    return Agent(
        tools=tools,
        model=ScriptedModel([]),
        store=store,
        name=name,
        policy=Policy(plan_before_writes=False),
    )


async def test_held_expired_and_idle_runs() -> None:
    store = MemoryStore()
    a = agent("a", store, lookup, ping)
    held = await a.submit("held", budget=Budget(max_steps=3))
    expired = await a.submit("expired", budget=Budget(max_steps=3))
    fresh = await a.submit("fresh", budget=Budget(max_steps=3))
    await store.acquire(held, owner="live-worker", ttl_s=30)
    await store.acquire(expired, owner="dead-worker", ttl_s=0.05)
    await asyncio.sleep(0.1)
    found = {o.run_id: o.why for o in await find_orphans([a], idle_after=3600)}
    assert found == {expired: "lease expired"}  # held and fresh are left alone
    found = {o.run_id: o.why for o in await find_orphans([a], idle_after=0)}
    assert found == {expired: "lease expired", fresh: "idle"}  # held: still left alone


async def test_agents_sharing_a_store_split_its_runs_by_scope() -> None:
    store = MemoryStore()
    counter = agent("counter", store, lookup)
    pinger = agent("pinger", store, ping)
    both = agent("both", store, lookup, ping)
    counted = await counter.submit("count", budget=Budget(max_steps=3))
    pinged = await pinger.submit("ping", budget=Budget(max_steps=3))
    found = {o.run_id: o.agent for o in await find_orphans([counter, pinger], idle_after=0)}
    assert found == {counted: "counter", pinged: "pinger"}
    # With an agent that has every tool too, the count fits two agents: left alone (logged).
    found = {o.run_id: o.agent for o in await find_orphans([counter, both], idle_after=0)}
    assert found == {pinged: "both"}


async def test_every_running_run_is_read_so_the_oldest_orphans_are_found() -> None:
    # Orphans are the runs nobody touched for longest: the last a most-recent-first
    # listing reaches. More running runs than one page must not hide them.
    store = MemoryStore()
    a = agent("a", store, lookup)
    lost = [await a.submit(f"lost {i}", budget=Budget(max_steps=3)) for i in range(3)]
    await asyncio.sleep(0.3)
    busy = [await a.submit(f"busy {i}", budget=Budget(max_steps=3)) for i in range(7)]
    for run_id in busy:
        await store.acquire(run_id, owner="live-worker", ttl_s=30)
    found = await find_orphans([a], idle_after=0.2, page=2)
    assert sorted(o.run_id for o in found) == sorted(lost)
    assert {o.why for o in found} == {"idle"}
    capped = await find_orphans([a], idle_after=0.2, page=4, limit=2)
    assert len(capped) == 2 and {o.run_id for o in capped} <= set(lost)
    with pytest.raises(ConfigurationError, match="page >= 1"):
        await find_orphans([a], page=0)


def test_install_registers_the_tasks_and_the_sweep_schedule() -> None:
    app = Celery("sweep-test", broker="memory://")
    registry = install(app, [agent("a", MemoryStore(), ping)], sweep_every=30)
    assert {ADVANCE_TASK, SWEEP_TASK} <= set(app.tasks)
    advance = app.tasks[ADVANCE_TASK]
    assert advance.acks_late and advance.reject_on_worker_lost
    assert app.conf.beat_schedule[SWEEP_TASK] == {"task": SWEEP_TASK, "schedule": 30}
    assert list(registry.agents) == ["a"]


def test_a_shifts_bounds_keep_their_old_turn_names_as_deprecated_aliases() -> None:
    """``turn_steps``/``turn_seconds`` (before a worker's bounded slice of a run was named a
    shift, keeping "turn" for a user's turn in a conversation) still work, with a warning."""
    app = Celery("shift-test", broker="memory://")
    a = agent("a", MemoryStore(), ping)
    registry = install(app, [a], shift_steps=3, shift_seconds=7.0, sweep_every=None)
    assert (registry.shift_steps, registry.shift_seconds) == (3, 7.0)
    with pytest.warns(DeprecationWarning, match="turn_steps= is deprecated: use shift_steps="):
        registry = install(app, [a], turn_steps=2, sweep_every=None)
    assert (registry.shift_steps, registry.shift_seconds) == (2, 30.0)
    with pytest.warns(DeprecationWarning, match="turn_seconds= is deprecated"):
        registry = Registry(app, turn_seconds=4.0)
    assert (registry.shift_steps, registry.shift_seconds) == (5, 4.0)
    with pytest.warns(DeprecationWarning, match="turn_steps is deprecated: use shift_steps"):
        assert registry.turn_steps == 5
    with pytest.warns(DeprecationWarning, match="turn_seconds is deprecated"):
        assert registry.turn_seconds == 4.0
    with (
        pytest.raises(ConfigurationError, match="shift_steps >= 1"),
        pytest.warns(DeprecationWarning, match="turn_steps="),
    ):
        Registry(app, turn_steps=0)
