"""Group commit for PostgresStore: concurrent appends share one transaction and one WAL flush.

Each event loop has a commit queue. The first append queued while no commit is in flight
starts a drain task (it runs on the loop's next iteration: no timer, no window); the task
takes every queued append as one batch and commits it, and the appends queued while that
commit is in flight form the next batch, taken the moment it ends. So a run that commits
alone waits only for its own transaction, and under load the batches grow by themselves.

A batch is one transaction on one connection, pipelined (psycopg pipeline mode): ``BEGIN``,
each append's one conditional statement, ``COMMIT``, then one sync: a single round trip and
one WAL flush whatever the batch's size. The statements are ordered by run id, so two
processes' batches lock run rows in the same order and cannot deadlock each other. An
append's conditions (its expected seq, its lease's owner and epoch) are in its own statement,
so a refused append writes nothing and does not disturb the others; it is told apart
(LeaseLostError or SeqConflictError) by reading its run's row after the commit.

An append that charges quota counters (``_quota``) does so in its own statement, which
raises when a charge would pass its limit: nothing of that append stays. A transaction
with such appends first takes an advisory lock per counter, all of them in one ascending
order, so two batches charging the same counters never wait on each other in a cycle.

A statement that raises (a quota's refusal; otherwise, not in normal operation: an event
row already there, a value out of range) aborts the pipelined transaction; the batch is
then run again statement by statement, each inside a savepoint, so that append fails
alone (an append alone in its batch fails at once: there is nothing else to keep). A
value psycopg cannot send (a lone surrogate) fails its append before anything is sent.
When the transaction itself fails (the connection lost, the ``COMMIT`` refused), every
append of the batch fails with StoreError. Each append's ``await`` returns only after the
``COMMIT`` that wrote it, so write-ahead holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from agentcore.contracts.errors import SeqConflictError, StoreError
from agentcore.events import Charge

from .._codec import run_label
from .._commits import CommitStats
from .._lease import Lease
from ._quota import quota_refusal
from ._schema import QUOTA_REFUSED

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PgAppend", "PgCommits", "of_loop"]

Q = TypeVar("Q")


@dataclass(slots=True, eq=False)
class PgAppend:
    """One append: its conditional statement and parameters (Any: query parameters of
    several types); ``done`` gets its outcome."""

    run_id: str
    expected_seq: int
    count: int
    statement: bytes
    params: dict[str, Any]
    lease: Lease | None
    done: asyncio.Future[None] | None = field(default=None)
    cancel: Sequence[Any] | None = field(default=None)
    """The run's cancel columns as the append's statement read them (Any: a row)."""
    charges: Sequence[Charge] = ()
    """What the append charges to quota counters (its statement applies them)."""
    locks: Sequence[int] = ()
    """The advisory locks of those counters (``_quota.quota_locks``)."""

    @property
    def where(self) -> str:
        return (
            f"cannot append to run {run_label(self.run_id)} at seq {self.expected_seq}; "
            "nothing was written"
        )


ErrorFor = Callable[[Exception, str], StoreError]
"""The store's translation of a psycopg error into ours (its message names the database)."""

Refusal = Callable[[PgAppend, "Sequence[Any] | None"], Exception]
"""Why an append wrote nothing, from its run's row read after the commit: ``(next_seq,
owner, epoch, lease_until, now)``, or ``None`` when there is no such run (Any: a row)."""

PoolFor = Callable[[str], Awaitable["AsyncConnectionPool[Any]"]]
"""The store's pool for the running loop (``where`` names the operation in errors)."""


def of_loop(
    entries: dict[asyncio.AbstractEventLoop, Q],
    loop: asyncio.AbstractEventLoop,
    make: Callable[[], Q],
) -> Q:
    """``loop``'s entry in a per-loop table, made on first use (the entries of loops closed
    since are dropped then: a store outlives the ``asyncio.run`` calls that used it)."""
    entry = entries.get(loop)
    if entry is None:
        for old in [lp for lp in entries if lp.is_closed()]:
            del entries[old]
        entry = entries[loop] = make()
    return entry


@dataclass(slots=True, eq=False)
class _Queue:
    """One event loop's appends waiting for a commit, and the task committing them."""

    items: list[PgAppend] = field(default_factory=list[PgAppend])
    drainer: asyncio.Task[None] | None = None


class PgCommits:
    """The commit queues of one PostgresStore (one per event loop).

    Args:
        pool: the store's pool for the running loop.
        run_state: the statement that reads a run's ``(next_seq, owner, epoch, lease_until,
            now)``.
        quota_lock: the statement that takes one counter's advisory lock.
        error: the store's translation of a psycopg error.
        refusal: why an append wrote nothing, from its run's row.
        group: share a transaction among the appends queued on a loop; when false, every
            append is one statement in a transaction of its own.
    """

    def __init__(
        self,
        pool: PoolFor,
        run_state: bytes,
        quota_lock: bytes,
        error: ErrorFor,
        refusal: Refusal,
        *,
        group: bool,
    ) -> None:
        self._pool = pool
        self._run_state = run_state
        self._quota_lock = quota_lock
        self._error = error
        self._refusal = refusal
        self._group = group
        self._queues: dict[asyncio.AbstractEventLoop, _Queue] = {}
        self.stats = CommitStats()

    async def append(self, item: PgAppend) -> None:
        """Write ``item`` (in a shared transaction when grouping); return once it is durable.

        Raises:
            LeaseLostError, SeqConflictError: this append was refused; nothing of it written.
            StoreError: it could not be written (its batch's transaction failed, or one of
                its values could not be sent); nothing of it was written.
        """
        if not self._group:
            [outcome] = await self._commit([item])
            if outcome is not None:
                raise outcome
            return
        loop = asyncio.get_running_loop()
        queue = of_loop(self._queues, loop, _Queue)
        item.done = loop.create_future()
        queue.items.append(item)
        if queue.drainer is None:  # none in flight: start one now (next loop iteration)
            queue.drainer = loop.create_task(self._drain(queue), name="agentcore-commit")
        await item.done

    async def wait(self) -> None:
        """Let the running loop's commit in flight (and what queued behind it) finish."""
        queue = self._queues.get(asyncio.get_running_loop())
        if queue is not None and queue.drainer is not None:
            await asyncio.gather(queue.drainer, return_exceptions=True)

    async def _drain(self, queue: _Queue) -> None:
        """Commit batches until the queue is empty: each batch is what queued meanwhile."""
        batch: list[PgAppend] = []
        try:
            while queue.items:
                taken, queue.items = queue.items, []
                batch = [p for p in taken if p.done is not None and not p.done.cancelled()]
                if not batch:
                    continue  # everyone gave up before the commit started: nothing written
                outcomes = await self._commit(batch)
                for item, outcome in zip(batch, outcomes, strict=True):
                    _settle(item, outcome)
                batch = []
        finally:
            queue.drainer = None
            # Cancelled mid-commit (the loop is shutting down): whether these were written
            # is unknown, so their callers are cancelled too rather than told either way.
            for item in [*batch, *queue.items]:
                if item.done is not None and not item.done.done():
                    item.done.cancel()
            queue.items = []

    async def _commit(self, batch: Sequence[PgAppend]) -> list[Exception | None]:
        """One transaction for ``batch``; each append's outcome (``None``: written)."""
        import psycopg

        self.stats.batches += 1
        self.stats.largest_batch = max(self.stats.largest_batch, len(batch))
        order = sorted(range(len(batch)), key=lambda i: batch[i].run_id)  # lock order
        ordered = [batch[i] for i in order]
        locks = sorted({lock for item in ordered for lock in item.locks})
        first = [(self._quota_lock, (lock,)) for lock in locks]
        try:
            pool = await self._pool(ordered[0].where)
            async with pool.connection() as conn:
                try:
                    results = await _pipelined(conn, ordered, first)
                except psycopg.Error as exc:
                    if conn.broken or conn.closed:
                        raise
                    if len(ordered) == 1 and exc.sqlstate == QUOTA_REFUSED:
                        results = [exc]  # refused by a quota, alone: nothing else to keep
                    else:
                        # A statement raised and aborted the transaction (nothing was
                        # written): again, each append in a savepoint, so that one fails
                        # alone.
                        results = await _one_by_one(conn, ordered, first)
                outcomes = await self._outcomes(conn, ordered, results)
        except StoreError as exc:  # no pool
            self.stats.failed_commits += 1
            return [exc for _ in batch]
        except psycopg.Error as exc:
            self.stats.failed_commits += 1
            return [_caused(self._error(exc, item.where), exc) for item in batch]
        written = sum(o is None for o in outcomes)
        if written:
            self.stats.commits += 1
            self.stats.appends += written
        unordered: list[Exception | None] = [None] * len(batch)
        for i, outcome in zip(order, outcomes, strict=True):
            unordered[i] = outcome
        return unordered

    async def _outcomes(
        self,
        conn: psycopg.AsyncConnection[Any],
        batch: Sequence[PgAppend],
        results: Sequence[int | Exception],
    ) -> list[Exception | None]:
        """Each append's outcome; the refused ones' runs are read (one round trip)."""
        import psycopg

        outcomes: list[Exception | None] = []
        refused: list[int] = []
        for i, (item, result) in enumerate(zip(batch, results, strict=True)):
            if isinstance(result, Exception):
                error: Exception | None = None
                if isinstance(result, psycopg.errors.UniqueViolation):
                    error = _stored_already(item)
                elif isinstance(result, psycopg.Error) and result.sqlstate == QUOTA_REFUSED:
                    error = quota_refusal(item.charges, result.diag.message_detail)
                if error is None:
                    error = self._error(result, item.where)
                error.__cause__ = result
                outcomes.append(error)
            elif result == item.count:
                outcomes.append(None)
            else:
                outcomes.append(None)
                refused.append(i)
        if refused:
            async with conn.pipeline():
                cursors = [await conn.execute(self._run_state, (batch[i].run_id,)) for i in refused]
            for i, cur in zip(refused, cursors, strict=True):
                outcomes[i] = self._refusal(batch[i], await cur.fetchone())
        return outcomes


First = Sequence[tuple[bytes, tuple[int]]]
"""The statements a batch's transaction runs before its appends (the counters' locks)."""


async def _pipelined(
    conn: psycopg.AsyncConnection[Any], batch: Sequence[PgAppend], first: First
) -> list[int | Exception]:
    """``BEGIN``, ``first``, the statements, ``COMMIT``, in one round trip; each
    statement's count of events written, or the error of a value that could not be sent.

    Raises:
        psycopg.Error: a statement or the commit failed; nothing was written.
    """
    if len(batch) == 1 and not first:  # one statement is a transaction by itself (autocommit)
        item = batch[0]
        try:
            cur = await conn.execute(item.statement, item.params)
        except UnicodeError as exc:  # a lone surrogate: nothing was sent
            return [exc]
        return [await _count(cur, item)]
    sent: list[Any] = []  # Any: a cursor, or the error of a value that could not be sent
    async with conn.pipeline(), conn.transaction():
        for statement, params in first:
            await conn.execute(statement, params)
        for item in batch:
            try:
                sent.append(await conn.execute(item.statement, item.params))
            except UnicodeError as exc:
                sent.append(exc)
    return [
        s if isinstance(s, Exception) else await _count(s, item)
        for s, item in zip(sent, batch, strict=True)
    ]


async def _one_by_one(
    conn: psycopg.AsyncConnection[Any], batch: Sequence[PgAppend], first: First
) -> list[int | Exception]:
    """The batch again, one statement at a time, each in a savepoint: a statement that
    raises is rolled back alone and its error returned in its place.

    Raises:
        psycopg.Error: the transaction itself failed (the connection, the commit).
    """
    import psycopg

    results: list[int | Exception] = []
    async with conn.transaction():
        for statement, params in first:
            await conn.execute(statement, params)
        for item in batch:
            try:
                async with conn.transaction():  # a savepoint
                    cur = await conn.execute(item.statement, item.params)
                    results.append(await _count(cur, item))
            except (psycopg.Error, UnicodeError) as exc:
                if conn.broken or conn.closed:
                    raise
                results.append(exc)
    return results


async def _count(cur: psycopg.AsyncCursor[Any], item: PgAppend) -> int:
    """Events an append wrote (no row: its run's condition refused it); its run's cancel
    columns go to ``item.cancel``."""
    row = await cur.fetchone()
    if row is None:
        return 0
    item.cancel = row[1:]
    return int(row[0])


def _caused(error: StoreError, cause: Exception) -> StoreError:
    """``error`` with its cause set (as ``raise ... from cause`` would)."""
    error.__cause__ = cause
    return error


def _settle(item: PgAppend, outcome: Exception | None) -> None:
    if item.done is None or item.done.done():
        return  # cancelled meanwhile; its events may be written (as in a crash)
    if outcome is None:
        item.done.set_result(None)
    else:
        item.done.set_exception(outcome)


def _stored_already(item: PgAppend) -> SeqConflictError:
    return SeqConflictError(
        f"run {run_label(item.run_id)}: an event at seq {item.expected_seq}.."
        f"{item.expected_seq + item.count - 1} is already stored (another writer advanced "
        "it); nothing was written"
    )
