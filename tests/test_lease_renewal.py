"""A run's lease renewer ends with its turn even when a cancellation is swallowed.

``asyncio.wait_for`` on Python 3.11 (gh-86296) returns its inner result when that completes
as the waiting task is cancelled: psycopg_pool waits for a connection that way, so under
load a renewal in flight when the turn ended could swallow the renewer's cancellation. The
renewer then lived on, renewing a run nobody advanced, and the turn waited for it forever
(found by the Celery load test: runs held "busy" by a live worker with no turn running).
"""

from __future__ import annotations

import asyncio
import contextlib

from agentcore import Agent, Budget, Policy, RunStatus, tool
from agentcore.adapters import ScriptedModel
from agentcore.stores import Lease, MemoryStore


class SwallowingStore(MemoryStore):
    """A store whose renewal, once ``slow`` is set, takes a while and swallows a
    cancellation that arrives meanwhile, like a pool's wait_for on 3.11."""

    def __init__(self) -> None:
        super().__init__()
        self.slow = False
        self.renewing = asyncio.Event()

    async def renew(self, lease: Lease) -> Lease:
        if self.slow:
            self.renewing.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.3)
        return await super().renew(lease)


async def test_a_turn_ends_although_the_renewal_in_flight_swallowed_the_cancel() -> None:
    store = SwallowingStore()

    @tool(effect="read")
    async def wait_for_a_renewal() -> str:
        """Return once a lease renewal is in flight."""
        store.slow = True
        await store.renewing.wait()
        return "ok"

    agent = Agent(
        tools=[wait_for_a_renewal],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "t", "tool": "wait_for_a_renewal", "args": {}},
                {"type": "finish", "thought": "t", "answer": "done"},
            ]
        ),
        store=store,
        lease_s=0.15,  # renewed every 0.05 s
        policy=Policy(plan_before_writes=False),
    )
    run_id = await agent.submit("wait", budget=Budget(max_steps=3))
    turn = asyncio.create_task(agent.advance(run_id, max_steps=1))
    done, _ = await asyncio.wait({turn}, timeout=3)
    assert done, "the turn is still waiting for its lease renewer"
    result = turn.result()
    assert result.status is RunStatus.RUNNING
    store.slow = False
    lease = await store.acquire(run_id, owner="next-worker", ttl_s=5)
    assert lease.taken_over is None  # released, not left to a renewer that lived on
