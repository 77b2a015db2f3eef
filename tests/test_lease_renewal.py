"""A run's lease renewer ends with its shift even when a cancellation is swallowed.

``asyncio.wait_for`` on Python 3.11 (gh-86296) returns its inner result when that completes
as the waiting task is cancelled: psycopg_pool waits for a connection that way, so under
load a renewal in flight when the shift ended could swallow the renewer's cancellation. The
renewer then lived on, renewing a run nobody advanced, and the shift waited for it forever
(found by the Celery load test: runs held "busy" by a live worker with no shift running).
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


async def test_a_shift_ends_although_the_renewal_in_flight_swallowed_the_cancel() -> None:
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
    shift = asyncio.create_task(agent.advance(run_id, max_steps=1))
    done, _ = await asyncio.wait({shift}, timeout=3)
    assert done, "the shift is still waiting for its lease renewer"
    result = shift.result()
    assert result.status is RunStatus.RUNNING
    store.slow = False
    lease = await store.acquire(run_id, owner="next-worker", ttl_s=5)
    assert lease.taken_over is None  # released, not left to a renewer that lived on


async def test_a_person_s_answer_waits_for_a_stalled_holder_s_lease_to_its_end() -> None:
    """A worker that stalled holding the run (its lease never renewed) delays a person's
    answer by the rest of its lease, not longer; and the answer waits to the lease's last
    moment rather than giving up one back-off pause before it ("held until ... 0.1 s from
    now": the killed worker's lease, seen by the compensation fault test under load)."""

    @tool(effect="destructive")
    def close_account() -> str:
        """Close the account."""
        return "closed"

    store = MemoryStore()
    lease_s = 1.2  # confirm waits up to the agent's lease_s for a lease another holds
    agent = Agent(
        tools=[close_account],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "t", "tool": "close_account", "args": {}},
                {"type": "finish", "thought": "t", "answer": "done"},
            ]
        ),
        store=store,
        lease_s=lease_s,
        policy=Policy(plan_before_writes=False),
    )
    paused = await agent.run("close it")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    await store.acquire(paused.run_id, owner="stalled-worker", ttl_s=lease_s - 0.05)
    started = asyncio.get_running_loop().time()
    done = await agent.confirm(paused.run_id, approve=True, by="ann")
    waited = asyncio.get_running_loop().time() - started
    assert done.status is RunStatus.COMPLETED
    assert lease_s - 0.3 <= waited <= lease_s + 1.0
