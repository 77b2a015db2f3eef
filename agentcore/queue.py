"""Handing runs to workers: the one method a task queue needs to drive agentcore.

An :class:`~agentcore.Agent` built with ``queue=`` and a ``name`` records what a caller
asks for (``submit``, ``confirm``, ``resume``, ``resolve``) and hands the run to the queue
instead of advancing it in the caller's process; a worker takes the message and calls
``agent.advance(run_id, max_steps=..., max_seconds=...)`` for one bounded shift, then hands
the run back while it is still running. The queue gives delivery and redelivery; the
store's conditional appends and fenced leases give correctness, so a duplicate or
redelivered message is harmless (the second worker finds the run busy or already moved on).

The Celery implementation is :mod:`agentcore.integrations.celery`; :class:`InProcessQueue`
is a small one for tests and single-process services.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

__all__ = ["InProcessQueue", "RunQueue"]


@runtime_checkable
class RunQueue(Protocol):
    """Delivers "advance run ``run_id`` of the agent named ``agent``" to some worker."""

    def enqueue(self, agent: str, run_id: str) -> None:
        """Queue one shift on the run; must not block for long (publish and return)."""
        ...


class InProcessQueue:
    """A queue whose worker is a task of this process's event loop.

    Args:
        advance: called for each message (usually ``agent.advance`` wrapped by the caller
            to re-enqueue a run that is still running).

    Attributes:
        sent: every ``(agent, run_id)`` enqueued, in order.
    """

    def __init__(self, advance: Callable[[str, str], Awaitable[object]] | None = None) -> None:
        self.sent: list[tuple[str, str]] = []
        self._advance = advance
        self._tasks: set[asyncio.Task[object]] = set()

    def enqueue(self, agent: str, run_id: str) -> None:
        """Record the message and, with an ``advance`` callable, start it as a task."""
        self.sent.append((agent, run_id))
        if self._advance is not None:
            task: asyncio.Task[object] = asyncio.get_running_loop().create_task(
                self._call(agent, run_id)
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _call(self, agent: str, run_id: str) -> object:
        assert self._advance is not None
        return await self._advance(agent, run_id)

    async def drain(self) -> None:
        """Wait until every started shift (and the shifts they enqueued) has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
