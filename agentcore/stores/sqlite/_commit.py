"""Group commit for SQLiteStore: concurrent appends share one transaction and one fsync.

An append is queued; the first append queued on an event loop schedules the commit with
``loop.call_soon``, so it starts on the loop's next iteration (no timer, no window), and
every append queued before then joins it. The commit is one ``BEGIN IMMEDIATE ... COMMIT``
(one fsync under ``synchronous=FULL``) in which each append runs inside its own
``SAVEPOINT``: its lease and seq are checked there, and a refused append (LeaseLostError,
SeqConflictError, QuotaExceededError, a value SQLite cannot bind) is rolled back to its
savepoint alone, counters included, while the others stay. Each append's ``await`` returns
only after the ``COMMIT`` that wrote it, so write-ahead holds. When the transaction itself
fails (the write lock not obtained within the busy timeout, the disk full, the ``COMMIT``
refused) every append of the batch fails with StoreError and nothing of it is written.

The batch runs inline, on the loop's thread, not on a dedicated writer thread: measured
with the agent at 1,000 concurrent runs (``bench/bench_scale.py``; figures in
``bench/RESULTS.md``), inline is the faster of the two except on a loaded machine, where a
thread that keeps the loop working through a slow fsync or WAL checkpoint degrades less.
Inline also needs no second connection (on the store's one connection, a read from the
loop during a batch would see its uncommitted rows), no lock against the loop, and no
result crossing threads; CPython's GIL takes the rest of the thread's
advantage away: the writer holds it to prepare and bind every statement, and each of a
batch's many short sqlite3 calls gives it back and must win it again from a busy loop.

Appends that arrive while the loop is blocked in a commit are processed on the next
iteration and form the next batch; a run that commits alone waits for one loop iteration
(microseconds) and its own transaction, nothing else.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentcore._faults import crash_point
from agentcore.contracts.errors import QuotaExceededError, SeqConflictError, StoreError

from .._batch import Batch
from .._codec import run_label
from .._commits import CommitStats
from ._transaction import immediate

__all__ = ["BIND_ERRORS", "Pending", "SQLiteCommits"]

BIND_ERRORS = (UnicodeError, OverflowError)
"""What a call into sqlite3 may raise besides sqlite3.Error: a value it cannot bind (a lone
surrogate in a str: UnicodeEncodeError; an int beyond 64 bits: OverflowError)."""

_EVENT_THERE = frozenset({"SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE"})
"""The errors of an event row that is stored already: another writer advanced the run."""


@dataclass(slots=True, eq=False)
class Pending:
    """One append, waiting for its commit; ``done`` gets its outcome."""

    batch: Batch
    done: asyncio.Future[None] | None = field(default=None)


ErrorFor = Callable[[Exception, str], StoreError]
"""The store's translation of a sqlite3 error into ours (its message names the file)."""

Write = Callable[[sqlite3.Connection, Batch], int]
"""The store's append inside an open transaction: ``(conn, batch)`` writes the batch's
events if the run is at its ``expected_seq`` (and held by its lease)
and returns the run's next seq before the call (``expected_seq``: written; anything else:
nothing written). Raises LeaseLostError before writing anything, or a sqlite3 error (an
IntegrityError when an event row is there already) perhaps after writing some rows."""


class SQLiteCommits:
    """The commit queue of one SQLiteStore connection.

    Args:
        conn: the store's connection (autocommit mode: transactions are explicit).
        write: the store's append inside an open transaction.
        error: the store's translation of a sqlite3 error into a StoreError.
        group: share a transaction among the appends queued on a loop; when false, every
            append is its own transaction, committed at once.
    """

    def __init__(
        self, conn: sqlite3.Connection, write: Write, error: ErrorFor, *, group: bool
    ) -> None:
        self._conn = conn
        self._write = write
        self._error = error
        self._group = group
        self._lock = threading.Lock()  # one transaction at a time on the connection
        # Per event loop (a store may serve several, one after another or in threads): the
        # appends waiting for the commit that loop has scheduled.
        self._queued: dict[asyncio.AbstractEventLoop, list[Pending]] = {}
        self.stats = CommitStats()

    async def append(self, item: Pending) -> None:
        """Write ``item`` (in a shared transaction when grouping); return once it is durable.

        Raises:
            LeaseLostError, SeqConflictError, QuotaExceededError: this append was refused;
                nothing of it written.
            StoreError: it could not be written (its batch's transaction failed, or SQLite
                refused one of its values); nothing of it was written.
        """
        if not self._group:
            [outcome] = self._commit([item])
            if outcome is not None:
                raise outcome
            return
        loop = asyncio.get_running_loop()
        item.done = loop.create_future()
        queued = self._queued.get(loop)
        if queued is None:
            queued = self._queued[loop] = []
            loop.call_soon(self._commit_queued, loop)  # next iteration: no timer, no window
        queued.append(item)
        await item.done

    def flush(self) -> None:
        """Commit what the running loop has queued now (the store is closing)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._commit_queued(loop)

    def _commit_queued(self, loop: asyncio.AbstractEventLoop) -> None:
        queued = self._queued.pop(loop, [])
        batch = [p for p in queued if p.done is not None and not p.done.cancelled()]
        if not batch:
            return  # everyone gave up before the commit started: nothing is written
        try:
            outcomes = self._commit(batch)
        except Exception as exc:  # a bug, not the database: still, nobody waits forever
            self.stats.failed_commits += 1
            outcomes = [self._failed(item, exc) for item in batch]
        for item, outcome in zip(batch, outcomes, strict=True):
            assert item.done is not None
            if item.done.done():
                continue  # cancelled meanwhile; its events may be written (as in a crash)
            if outcome is None:
                item.done.set_result(None)
            else:
                item.done.set_exception(outcome)

    def _commit(self, batch: Sequence[Pending]) -> list[Exception | None]:
        """One transaction for ``batch``; each append's outcome (``None``: written)."""
        conn = self._conn
        alone = len(batch) == 1
        outcomes: list[Exception | None] = []
        self.stats.batches += 1
        self.stats.largest_batch = max(self.stats.largest_batch, len(batch))
        with self._lock:
            try:
                # Nothing to keep (every append refused): no commit, no fsync.
                with immediate(conn, keep=lambda: None in outcomes):
                    for item in batch:
                        outcomes.append(self._one(item, savepoint=not alone))
            except (sqlite3.Error, *BIND_ERRORS) as exc:
                self.stats.failed_commits += 1
                return [self._failed(item, exc) for item in batch]
        written = sum(o is None for o in outcomes)
        if written:
            self.stats.commits += 1
            self.stats.appends += written
        return outcomes

    def _one(self, item: Pending, *, savepoint: bool) -> Exception | None:
        """Append ``item`` inside the open transaction; when it is refused, undo what it
        wrote (to its savepoint; alone, the caller rolls back) and return why.

        Raises:
            sqlite3.Error: the transaction itself is gone (SQLite rolled it back on a full
                disk or an I/O error): the batch fails as a whole.
        """
        conn = self._conn
        if savepoint:
            conn.execute("SAVEPOINT agentcore_append")
        outcome: Exception | None = None
        try:
            current = self._write(conn, item.batch)
            if current != item.batch.expected_seq:
                outcome = _moved(item, current)
        except (StoreError, QuotaExceededError) as exc:
            # LeaseLostError; a chain head that does not fit (_chain); a quota's limit
            outcome = exc
        except (sqlite3.Error, *BIND_ERRORS) as exc:
            if not conn.in_transaction:
                raise  # SQLite ended the transaction: nothing of the batch stays
            if getattr(exc, "sqlite_errorname", None) in _EVENT_THERE:
                outcome = _stored_already(item)
                outcome.__cause__ = exc
            else:  # a value SQLite cannot bind, a trigger's or a CHECK's refusal
                outcome = self._failed(item, exc)
        if outcome is None:
            if savepoint:
                conn.execute("RELEASE agentcore_append")
            crash_point("in_append_transaction")
        elif savepoint:
            conn.execute("ROLLBACK TO agentcore_append")
            conn.execute("RELEASE agentcore_append")
        return outcome

    def _failed(self, item: Pending, exc: Exception) -> StoreError:
        """StoreError for ``item``, caused by ``exc`` (as ``raise ... from exc`` would)."""
        error = self._error(
            exc,
            f"cannot append to run {run_label(item.batch.run_id)} at seq "
            f"{item.batch.expected_seq}; nothing was written",
        )
        error.__cause__ = exc
        return error


def _moved(item: Pending, current: int) -> SeqConflictError:
    batch = item.batch
    return SeqConflictError(
        f"run {run_label(batch.run_id)}: expected to append at seq {batch.expected_seq}, but "
        f"the transcript has {current} events (another writer advanced it); nothing was "
        "written"
    )


def _stored_already(item: Pending) -> SeqConflictError:
    batch = item.batch
    return SeqConflictError(
        f"run {run_label(batch.run_id)}: an event at seq {batch.expected_seq}.."
        f"{batch.expected_seq + len(batch.events) - 1} is already stored (another writer "
        "advanced it); nothing was written"
    )
