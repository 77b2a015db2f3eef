"""Cancel-request reads of one PostgresStore, gathered per event loop.

Every run a worker advances reads its cancel request once a step, before asking the model.
Alone, that is one statement; with many runs on one loop it was one statement (and one
pool checkout, one round trip, ~150 us of the worker's CPU) per run per step. Here a read
that finds none in flight goes at once, as before; the reads that arrive while one is in
flight wait for it and then go together, in one ``WHERE run_id = ANY(...)`` statement: a
lone run pays what it paid, a thousand runs pay a few statements a round trip, not a
thousand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentcore.contracts.errors import StoreError

from ._commit import ErrorFor, PoolFor, of_loop

__all__ = ["CancelReads"]

Row = Sequence[Any]
"""A run's ``(cancel_by, cancel_reason, cancel_at)`` as stored (Any: column values)."""


@dataclass(slots=True, eq=False)
class _Read:
    run_id: str
    where: str
    done: asyncio.Future[Row | None]


@dataclass(slots=True, eq=False)
class _Queue:
    """One event loop's reads waiting for a statement, and the task reading them."""

    items: list[_Read] = field(default_factory=list[_Read])
    busy: bool = False
    """A read is in flight: new reads queue for the next statement."""
    reader: asyncio.Task[None] | None = None
    """The task reading what queued (held here so it is not collected while it runs)."""


class CancelReads:
    """The cancel-read queues of one PostgresStore (one per event loop).

    Args:
        pool: the store's pool for the running loop.
        one: ``SELECT cancel_by, cancel_reason, cancel_at ... WHERE run_id = %s``.
        many: ``SELECT run_id, cancel_by, cancel_reason, cancel_at ... WHERE run_id =
            ANY(%s)``.
        error: the store's translation of a psycopg error (each caller's with its own
            ``where``).
    """

    def __init__(self, pool: PoolFor, one: bytes, many: bytes, error: ErrorFor) -> None:
        self._pool = pool
        self._one = one
        self._many = many
        self._error = error
        self._queues: dict[asyncio.AbstractEventLoop, _Queue] = {}
        self.statements = 0
        """Statements sent so far (how well the reads are shared)."""

    async def read(self, run_id: str, where: str) -> Row | None:
        """The run's cancel columns (``None``: no such run).

        Raises:
            StoreError: the read failed (its cause is psycopg's error: a lost connection
                is retried by the caller, as any read).
        """
        loop = asyncio.get_running_loop()
        queue = of_loop(self._queues, loop, _Queue)
        if queue.busy:  # wait for the read in flight, then go with the others waiting
            item = _Read(run_id, where, loop.create_future())
            queue.items.append(item)
            return await item.done
        queue.busy = True
        try:
            return await self._read_one(run_id, where)
        finally:
            if queue.items:
                queue.reader = loop.create_task(self._drain(queue), name="agentcore-cancel-reads")
            else:
                queue.busy = False

    async def _read_one(self, run_id: str, where: str) -> Row | None:
        import psycopg

        try:
            pool = await self._pool(where)
            async with pool.connection() as conn:
                row: Row | None = await (await conn.execute(self._one, (run_id,))).fetchone()
        except (psycopg.Error, UnicodeError) as exc:
            error = self._error(exc, where)
            error.__cause__ = exc
            raise error from exc
        self.statements += 1
        return row

    async def _drain(self, queue: _Queue) -> None:
        """Read until the queue is empty: each statement reads what queued meanwhile."""
        batch: list[_Read] = []
        try:
            while queue.items:
                taken, queue.items = queue.items, []
                batch = [r for r in taken if not r.done.done()]
                if batch:
                    await self._read_batch(batch)
        finally:
            queue.busy, queue.reader = False, None
            # Cancelled mid-read (the loop is shutting down): its callers are cancelled too.
            for item in [*batch, *queue.items]:
                if not item.done.done():
                    item.done.cancel()
            queue.items = []

    async def _read_batch(self, batch: Sequence[_Read]) -> None:
        import psycopg

        ids = sorted({r.run_id for r in batch})
        try:
            pool = await self._pool(batch[0].where)
            async with pool.connection() as conn:
                cur = await conn.execute(self._many, (ids,))
                rows: dict[str, Row] = {row[0]: row[1:] for row in await cur.fetchall()}
            self.statements += 1
        except StoreError as exc:  # no pool
            for r in batch:
                _fail(r, StoreError(str(exc)), exc)
            return
        except (psycopg.Error, UnicodeError) as exc:
            for r in batch:
                _fail(r, self._error(exc, r.where), exc)
            return
        for r in batch:
            if not r.done.done():
                r.done.set_result(rows.get(r.run_id))


def _fail(item: _Read, error: StoreError, cause: Exception) -> None:
    error.__cause__ = cause
    if not item.done.done():
        item.done.set_exception(error)
