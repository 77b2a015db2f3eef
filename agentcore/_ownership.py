"""Owning a run while advancing it: a lease from the store, renewed on a timer.

One worker advances a run at a time. It acquires the run's lease (owner, epoch, expiry by
the store's clock), every append it makes carries the lease so the store refuses it once
anyone else has acquired the run (fencing), and a background task renews the lease every
third of its time-to-live, so a long tool keeps the run without a write per step. A worker
that stalls (paused, partitioned, slow) past its lease is taken over; when it wakes, its
next append fails with :class:`LeaseLostError`, and it checks :meth:`Ownership.check`
before every tool call, so it stops before running a tool for a run it no longer owns.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from types import TracebackType

from agentcore.contracts.errors import LeaseLostError, StoreError

from ._observability._log import get_logger
from .stores import Lease, TranscriptStore

__all__ = ["DEFAULT_LEASE_S", "Ownership", "default_owner"]

DEFAULT_LEASE_S = 30.0
"""How long a lease lasts without renewal; renewed every third of it."""


def default_owner() -> str:
    """``host:pid:random``: unique per process and agent, readable in a listing."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Ownership:
    """A held lease on one run, renewed in the background until released.

    Use as ``async with await Ownership.acquire(store, run_id, owner, ttl_s) as own:``;
    leaving the block (normally, by an exception or by cancellation) releases the lease.
    """

    def __init__(self, store: TranscriptStore, lease: Lease) -> None:
        self._store = store
        self._lease = lease
        self._lost: LeaseLostError | None = None
        # Conservative local deadline: measured from before the request that set it, on
        # this process's monotonic clock (the store's clock decides; this only errs early).
        self._valid_until = time.monotonic() + lease.ttl_s
        self._renewer: asyncio.Task[None] | None = None
        self._log = get_logger().bind(run_id=lease.run_id, owner=lease.owner)

    @classmethod
    async def acquire(
        cls, store: TranscriptStore, run_id: str, *, owner: str, ttl_s: float
    ) -> Ownership:
        """Acquire ``run_id``'s lease.

        Raises:
            RunBusyError: another worker holds it and its lease has not expired.
            RunNotFoundError: no such run.
        """
        asked = time.monotonic()
        lease = await store.acquire(run_id, owner=owner, ttl_s=ttl_s)
        own = cls(store, lease)
        own._valid_until = asked + lease.ttl_s
        return own

    @property
    def lease(self) -> Lease:
        """The current lease (its expiry moves with each renewal)."""
        return self._lease

    def check(self) -> None:
        """Raise :class:`LeaseLostError` if the run is (or may already be) someone else's.

        Called before every tool call: a worker whose renewals failed past its lease's
        time, or whose renewal was refused, must not start a side effect.
        """
        if self._lost is not None:
            raise self._lost
        if time.monotonic() >= self._valid_until:
            raise LeaseLostError(
                f"Run {self._lease.run_id}: the lease of {self._lease.owner} (epoch "
                f"{self._lease.epoch}) may have expired: it could not be renewed in time, "
                "so nothing more is run; another worker may take the run over."
            )

    async def __aenter__(self) -> Ownership:
        self._renewer = asyncio.create_task(self._renew_loop(), name="agentcore-lease")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        renewer, self._renewer = self._renewer, None
        cancelled = False
        if renewer is not None:
            renewer.cancel()
            try:
                await renewer
            except asyncio.CancelledError:
                # The renewer's own cancellation is expected; this task's is not ours to
                # swallow (a shutdown cancelling the turn while it waited here).
                task = asyncio.current_task()
                cancelled = task is not None and task.cancelling() > 0
        if self._lost is None:
            # Shielded: a cancelled task (a shutdown, SIGTERM) still gives its run back, so
            # another worker takes it at once instead of after the lease.
            with contextlib.suppress(StoreError):
                await asyncio.shield(self._store.release(self._lease))
        if cancelled:
            raise asyncio.CancelledError

    def _released(self) -> bool:
        """Whether ``__aexit__`` has begun (it clears ``_renewer`` before cancelling it)."""
        return self._renewer is None

    async def _renew_loop(self) -> None:
        interval = self._lease.ttl_s / 3
        # Ended by ``__aexit__`` clearing ``_renewer`` as well as by its cancel: a library
        # can swallow a cancellation (asyncio.wait_for on Python 3.11, gh-86296, inside
        # psycopg_pool's wait for a connection), and a renewer that lived on would keep
        # renewing a released run's lease while ``__aexit__`` waited for it forever.
        while not self._released():
            await asyncio.sleep(interval)
            if self._released():
                return
            asked = time.monotonic()
            try:
                self._lease = await self._store.renew(self._lease)
            except LeaseLostError as exc:
                self._lost = exc
                self._log.warning("lease_lost", error=str(exc))
                return
            except StoreError as exc:  # a passing outage: keep trying until the lease ends
                self._log.warning("lease_renewal_failed", error=str(exc))
                continue
            self._valid_until = asked + self._lease.ttl_s
