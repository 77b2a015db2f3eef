"""One psycopg pool per running event loop, closed when that loop ends.

A pool belongs to the event loop that opened it (its locks and worker tasks do). Code that
calls ``asyncio.run`` repeatedly with one store (the CLI, the ``*_sync`` methods) or uses a
store from threads with loops of their own gets a pool per loop, opened on first use. A
keeper task in each loop closes its pool when cancelled: by :meth:`LoopPools.close`, or by
the loop shutting down (``asyncio.run`` cancels every task), so no connection outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

__all__ = ["LoopPools"]


class LoopPools:
    """The pools of one store, one per event loop (Any: psycopg's row type).

    Args:
        dsn: the connection string.
        min_size, max_size: each pool's size.
        timeout: how long opening a pool, or waiting for a connection, may take.
    """

    def __init__(self, dsn: str, *, min_size: int, max_size: int, timeout: float) -> None:
        self._dsn = dsn
        self._min = min_size
        self._max = max_size
        self._timeout = timeout
        self._lock = threading.Lock()
        self._pools: dict[asyncio.AbstractEventLoop, _LoopPool] = {}

    async def get(self) -> AsyncConnectionPool[Any]:
        """The running loop's pool, opened on first use.

        Raises:
            psycopg.Error: the pool could not be opened (the next call tries again).
        """
        import psycopg

        loop = asyncio.get_running_loop()
        with self._lock:
            slot = self._pools.get(loop)
            if slot is None or (slot.keeper.done() and not slot.ready.done()):
                for old in [lp for lp in self._pools if lp.is_closed()]:
                    del self._pools[old]
                ready: asyncio.Future[AsyncConnectionPool[Any]] = loop.create_future()
                slot = _LoopPool(ready, loop.create_task(self._keep(ready)))
                self._pools[loop] = slot
        try:
            return await asyncio.shield(slot.ready)
        except psycopg.Error:
            with self._lock:
                if self._pools.get(loop) is slot:
                    del self._pools[loop]
            raise

    async def check(self) -> None:
        """Test the running loop's idle connections; the pool replaces the dead ones (after
        a connection was lost: a restart or ``pg_terminate_backend`` kills them all). Never
        raises: a connection that cannot be made now is retried by the pool."""
        with self._lock:
            slot = self._pools.get(asyncio.get_running_loop())
        if slot is None or not slot.ready.done() or slot.ready.cancelled():
            return
        if slot.ready.exception() is None:
            with contextlib.suppress(Exception):
                await slot.ready.result().check()

    async def close(self) -> None:
        """Close every pool: this loop's now, other live loops' soon. Idempotent."""
        with self._lock:
            pools, self._pools = self._pools, {}
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, slot in pools.items():
            if loop is current:
                slot.keeper.cancel()
                await asyncio.gather(slot.keeper, return_exceptions=True)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(slot.keeper.cancel)

    async def _keep(self, ready: asyncio.Future[AsyncConnectionPool[Any]]) -> None:
        """Open a pool for the running loop, hand it out, close it when cancelled (by
        :meth:`close` or by the loop shutting down)."""
        from psycopg import AsyncConnection
        from psycopg_pool import AsyncConnectionPool

        from . import _arrays as arrays

        # Every connection the pool opens, to close them even when the pool cannot close
        # itself: a loop that shuts down cancels the pool's workers too, and then
        # ``pool.close()`` stops at their cancellation before closing its connections.
        opened: weakref.WeakSet[AsyncConnection[Any]] = weakref.WeakSet()

        async def track(conn: AsyncConnection[Any]) -> None:
            opened.add(conn)
            arrays.register(conn.adapters)

        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self._dsn,
            kwargs={"autocommit": True},
            min_size=self._min,
            max_size=self._max,
            timeout=self._timeout,
            configure=track,
            open=False,
            name="agentcore",
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except asyncio.CancelledError:
            ready.cancel()
            await _shut(pool, opened)
            raise
        except Exception as exc:
            ready.set_exception(exc)
            await _shut(pool, opened)
            return
        ready.set_result(pool)
        try:
            await asyncio.Event().wait()
        finally:
            await _shut(pool, opened)


@dataclass(frozen=True, slots=True)
class _LoopPool:
    """One event loop's pool: ``ready`` gets it once open; ``keeper`` closes it."""

    ready: asyncio.Future[AsyncConnectionPool[Any]]
    keeper: asyncio.Task[None]


async def _shut(
    pool: AsyncConnectionPool[Any], opened: Iterable[psycopg.AsyncConnection[Any]]
) -> None:
    """Close a pool and every connection it opened (Any: psycopg's row type)."""
    with contextlib.suppress(asyncio.CancelledError):  # its workers were cancelled already
        await pool.close(timeout=1.0)
    for conn in list(opened):
        if not conn.closed:
            with contextlib.suppress(Exception):
                await conn.close()
