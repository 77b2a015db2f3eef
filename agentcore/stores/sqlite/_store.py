"""SQLiteStore: transcripts in one SQLite file, through the standard library's ``sqlite3``.

Layout: one row per event in ``events`` (the body is the event's compact JSON without
``run_id`` and ``seq``, which are the primary key), and one row per run in ``runs`` (status,
task, timestamps and the next sequence number), so that ``list_runs`` never reads events.
Quota counters are rows of ``quota_usage``, charged in the append's transaction
(``_quota``).
The layout is built by numbered migrations (``_schema``) applied on open, in one
transaction; the version is kept in ``PRAGMA user_version``. A file written by a newer
version, or by another application, is refused and left untouched.

Durability:
    The database runs in WAL mode (``journal_mode=WAL``): readers never block the writer,
    and a commit is one append to the write-ahead log. With ``synchronous=FULL`` (the
    default) every commit is fsynced before ``append`` returns, so an appended event
    survives a process crash and a power loss. With ``synchronous=NORMAL`` the log is
    fsynced only at checkpoints: a commit still survives a crash of the process, but the
    last commits before a power loss or an operating system crash may be lost (the file
    itself stays consistent). An append's events are written all or none, inside one
    ``BEGIN IMMEDIATE`` transaction, and ``append`` returns only after it committed.

Group commit (``_commit``, ``group_commit=True`` by default):
    Appends made at once on one event loop (concurrent runs) share that transaction and
    its fsync, each inside its own ``SAVEPOINT``, so one append's conflict or fencing
    undoes only its own rows. The commit starts on the loop's next iteration after the
    first append is queued (no timer); the batch runs inline, on the loop's thread.

Concurrency:
    Any number of processes may open the same file. An append takes SQLite's write lock
    for the duration of one short transaction, and waits up to ``busy_timeout_s`` for it;
    the conditional append (``expected_seq``) is checked inside that transaction, so two
    writers can never both append the same step. Calls are made inline, on the caller's
    thread: they are short, and a thread hop per step would cost more than the write.

Leases (``acquire`` / ``renew`` / ``release``, ``_leases``):
    The run's row holds the lease (owner, epoch, lease_until in Unix seconds of the
    machine's clock, which every process on the file shares). An acquire also takes the
    run's flock in ``<database>.locks/``; whoever gets that flock later knows its holder
    is gone, and voids its lease at once. A holder that is alive but stalled keeps its
    flock: once its lease has expired the run is taken without the flock, and the stalled
    holder, resumed, is fenced by the epoch. An append made with a lease checks owner and
    epoch in its ``BEGIN IMMEDIATE`` transaction, before the seq.

Errors:
    Nothing is ever deleted or recreated. A file that is not a SQLite database, or whose
    pages are damaged, raises :class:`StoreCorruptedError` and is left untouched; an event
    that cannot be decoded raises it too, naming the run and the seq. Every other failure
    (disk full, read-only file, lock held past the busy timeout, I/O error, a value SQLite
    cannot bind) rolls the transaction back and raises :class:`StoreError` naming the file,
    the run and the seq. An event that would not read back as itself is refused before the
    transaction starts.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from functools import partial
from pathlib import Path
from typing import Literal

from agentcore.contracts.errors import (
    ConfigurationError,
    LeaseLostError,
    RunNotFoundError,
    StoreCorruptedError,
    StoreError,
)
from agentcore.events import Event, RunStarted

from ..._status import status_after
from .._base import Listing, Pruning, StoreBase, check_lease_request, kept_status, metadata_text
from .._batch import Batch
from .._chain import ChainKey, ChainReport, WrittenHeads, check_chain, extend, truncated_head
from .._codec import decode_rows, printable, run_label
from .._commits import CommitStats
from .._errors import translated
from .._guards import FileGuards, need_flock
from .._lease import Lease
from .._protocol import CancelRequest, RunSummary
from .._quota import QuotaUsage
from .._snapshots import Snapshot, StoredRow, audit, check_snapshot, usable
from ._commit import BIND_ERRORS, Pending, SQLiteCommits
from ._integrity import chain_rows, run_page, save_snapshot, snapshot_rows
from ._leases import (
    Flock,
    HeldFlocks,
    check_lease,
    lost,
    release_lease,
    renew_lease,
    take_lease,
    try_flock,
)
from ._listing import list_query, prune
from ._quota import charge, list_counters, prune_counters, read_counters
from ._readonly import open_read_only
from ._schema import SCHEMA_VERSION, open_schema
from ._transaction import immediate

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

_INSERT_EVENT = "INSERT INTO events (run_id, seq, type, at, body, chain) VALUES (?, ?, ?, ?, ?, ?)"
_INSERT_RUN = """INSERT INTO runs
    (run_id, status, task, created_at, updated_at, next_seq, tenant, metadata, chain_head)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"""
_ADVANCE_RUN = "UPDATE runs SET updated_at = ?, next_seq = ?, chain_head = ? WHERE run_id = ?"
_REQUEST_CANCEL = """UPDATE runs SET cancel_by = ?, cancel_reason = ?, cancel_at = ?
    WHERE run_id = ?"""
_ADVANCE_RUN_STATUS = """UPDATE runs SET status = ?, updated_at = ?, next_seq = ?, chain_head = ?
    WHERE run_id = ?"""
# One statement, so the run row and its events come from one snapshot: no row at all means
# no run; a row with NULL event columns means a run with no events after ``after``.
# Bodies are read as bytes: a body that is not valid UTF-8 is then reported by load with its
# seq (sqlite3 would fail the whole fetch while decoding TEXT).
_LOAD = """SELECT r.next_seq, e.seq, e.type, CAST(e.body AS BLOB)
    FROM runs AS r LEFT JOIN events AS e ON e.run_id = r.run_id AND e.seq > ?
    WHERE r.run_id = ?
    ORDER BY e.seq"""
_SYNCHRONOUS = ("FULL", "NORMAL")
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT})
_SQLITE_ERRORS = (sqlite3.Error, *BIND_ERRORS)


class SQLiteStore(StoreBase):
    """A durable store in one SQLite file; the same semantics as :class:`MemoryStore`.

    One connection per store object, opened by the constructor. Several store objects (in
    one process or many) may share a file: conditional appends keep them consistent.

    Args:
        path: the database file; created with its parent directory when missing.
        synchronous: ``"FULL"`` fsyncs every commit (survives power loss); ``"NORMAL"``
            survives process crashes but may lose the last commits on power loss.
        busy_timeout_s: how long a write waits for another writer's lock before failing.
        migrate: bring an older layout up to date on open (default). When false, an older
            file is refused with a StoreError naming ``agentcore db upgrade``; a new or
            empty file still becomes a store.
        group_commit: appends made at once (concurrent runs on one event loop) share one
            transaction and one fsync, each returning once its own events are durable;
            when false, every append is a transaction of its own.
        read_only: open an existing store only to read it (listings): nothing is created,
            migrated or locked, and a file or directory without write permission can be
            read; writes fail with StoreError (``_readonly``).
        chain_key: the key that signs each run's chain head (``_chain``); default
            ``$AGENTCORE_CHAIN_KEY`` when set. Without one the chain is still kept, its head
            unsigned. Never stored or shown.

    Attributes:
        url: ``sqlite:///<path>``, as :func:`open_store` accepts it.
        path: the database file.
        stats: transactions and appends so far (:class:`CommitStats`).

    Raises:
        ConfigurationError: an empty path, an unknown ``synchronous`` or a negative timeout.
        StoreCorruptedError: the file exists but is not a usable SQLite database (it is
            left untouched).
        StoreError: the file cannot be opened or created, was written by a newer version
            of agentcore, or belongs to another application (it is left untouched).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout_s: float = 5.0,
        migrate: bool = True,
        group_commit: bool = True,
        read_only: bool = False,
        chain_key: bytes | str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.url = f"sqlite:///{self.path}"
        if not self.path:
            raise ConfigurationError("SQLiteStore needs a file path, e.g. SQLiteStore('runs.db')")
        if synchronous not in _SYNCHRONOUS:
            raise ConfigurationError(
                f"Invalid synchronous={synchronous!r} for SQLiteStore. Valid values: "
                "'FULL' (survives power loss), 'NORMAL' (survives process crashes)."
            )
        if busy_timeout_s < 0:
            raise ConfigurationError(f"busy_timeout_s must be >= 0, got {busy_timeout_s!r}")
        self._conn: sqlite3.Connection | None = None
        self._flocks = HeldFlocks(self.path)
        self._guards = FileGuards(self.path)
        self._key = ChainKey.configured(chain_key)
        write = partial(_append_if_at, key=self._key, written=WrittenHeads(), seen=self._saw_cancel)
        if read_only:  # _readonly: creates, migrates and locks nothing
            with self._translated("cannot open the file to read"):
                self._conn = open_read_only(self.path, busy_timeout_s)
            self._commits = SQLiteCommits(self._conn, write, self._error, group=False)
            return
        need_flock(self.path)
        if Path(self.path).is_dir():
            raise StoreError(
                f"Cannot open SQLite store {self.path}: it is a directory. "
                "Give a file path, e.g. sqlite:///runs.db."
            )
        try:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"Cannot create the directory for SQLite store {self.path}: {exc}"
            ) from exc
        with self._translated("cannot open the file"):
            conn = sqlite3.connect(
                self.path,
                timeout=busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            open_schema(conn, self.path, synchronous, migrate=migrate)
        except sqlite3.Error as exc:
            conn.close()
            raise self._error(exc, "cannot open the database") from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._commits = SQLiteCommits(conn, write, self._error, group=group_commit)

    @property
    def stats(self) -> CommitStats:
        """Transactions and appends so far (how well group commit shares them)."""
        return self._commits.stats

    async def _append(self, batch: Batch) -> None:
        """With a lease, its owner and epoch are checked in the append's transaction, before
        the seq. With group commit, concurrent appends share that transaction (``_commit``);
        each returns once it is durable."""
        self._open_conn()
        try:
            await self._commits.append(Pending(batch))
        except LeaseLostError:
            if batch.lease is not None:
                self._flocks.drop(batch.run_id, batch.lease.epoch)  # let a live new holder have it
            raise

    async def load(self, run_id: str, *, after: int = -1) -> list[Event]:
        """See :meth:`TranscriptStore.load`."""
        conn = self._open_conn()
        with self._translated(f"cannot load run {run_label(run_id)} after seq {after}"):
            rows: list[tuple[int, int | None, str | None, str | bytes | None]] = conn.execute(
                _LOAD, (after, run_id)
            ).fetchall()
        if not rows:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")
        return decode_rows(run_id, after, rows[0][0], rows, self._corrupted)

    async def _truncate(self, run_id: str, after: int, dry_run: bool) -> list[tuple[int, str]]:
        """One ``BEGIN IMMEDIATE`` transaction (rolled back for a dry run)."""
        conn = self._open_conn()
        with (
            self._translated(
                f"cannot truncate run {run_label(run_id)} after seq {after}; nothing was deleted"
            ),
            immediate(conn, keep=lambda: not dry_run),
        ):
            removed = _delete_after(conn, run_id, after, self._key, self.url)
        if removed is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")
        return removed

    async def _list_runs(self, listing: Listing) -> list[RunSummary]:
        """Each filter combination walks an index in ``updated_at`` order (``_schema``,
        migration 4): no sort, no scan. A search tests each run's row in that order (id,
        task, metadata: migration 5) until ``limit`` runs matched."""
        conn = self._open_conn()
        sql, params = list_query(
            status=listing.status, tenant=listing.tenant, search=listing.search, after=listing.after
        )
        with self._translated("cannot list runs"):
            rows: list[
                tuple[str, str, str, float, float, int, str | None, str | None, float | None]
            ] = conn.execute(sql, (*params, listing.limit)).fetchall()
        return [RunSummary(*row) for row in rows]

    async def _prune(self, pruning: Pruning) -> list[str]:
        """One ``BEGIN IMMEDIATE`` transaction per chunk, which selects the runs (through
        the ``(status, updated_at)`` index) and deletes their events and rows
        (``_listing``)."""
        conn = self._open_conn()
        pruned: list[str] = []
        with self._translated(
            lambda: f"cannot prune runs ({len(pruned)} pruned before the failure)"
        ):
            prune(conn, pruning, pruned)
        return pruned

    async def quota_usage(self, keys: Sequence[str]) -> Mapping[str, float]:
        """See :meth:`QuotaStore.quota_usage`."""
        conn = self._open_conn()
        with self._translated("cannot read quota counters"):
            return read_counters(conn, keys)

    async def list_quota_usage(
        self, *, tenant: str | None = None, quota: str | None = None
    ) -> list[QuotaUsage]:
        """See :meth:`QuotaStore.list_quota_usage`."""
        conn = self._open_conn()
        with self._translated("cannot list quota counters"):
            return list_counters(conn, tenant=tenant, quota=quota)

    async def prune_quota_usage(self, before: float) -> int:
        """See :meth:`QuotaStore.prune_quota_usage`: one ``BEGIN IMMEDIATE`` transaction per
        chunk of counters."""
        conn = self._open_conn()
        with self._translated("cannot prune quota counters"):
            return prune_counters(conn, before)

    async def request_cancel(self, run_id: str, *, by: str, reason: str | None = None) -> None:
        """See :meth:`TranscriptStore.request_cancel`."""
        conn = self._open_conn()
        with self._translated(f"cannot record a cancel request for run {run_label(run_id)}"):
            cur = conn.execute(_REQUEST_CANCEL, (by, reason, time.time(), run_id))
        if cur.rowcount == 0:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")

    async def cancel_request(self, run_id: str) -> CancelRequest | None:
        """See :meth:`TranscriptStore.cancel_request`."""
        conn = self._open_conn()
        with self._translated(f"cannot read the cancel request of run {run_label(run_id)}"):
            row: tuple[str | None, str | None, float | None] | None = conn.execute(
                "SELECT cancel_by, cancel_reason, cancel_at FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        if row is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")
        by, reason, at = row
        if by is None or at is None:
            return None
        return CancelRequest(by=by, reason=reason, at=at)

    async def acquire(self, run_id: str, *, owner: str, ttl_s: float) -> Lease:
        """See :meth:`TranscriptStore.acquire`. Also takes the run's flock when it is free,
        which voids at once the lease of a holder that had it (its process is gone); when
        another process holds the flock (alive, perhaps stalled), its lease must have
        expired or been released, and the run is taken without the flock."""
        check_lease_request(owner, ttl_s)
        conn = self._open_conn()
        fd: int | None = None
        if self._flocks.epoch(run_id) is not None:
            flock = Flock.OURS
        else:
            fd = try_flock(self.path, run_id)
            flock = Flock.BUSY if fd is None else Flock.NEW
        try:
            lease = take_lease(conn, run_id, owner=owner, ttl_s=ttl_s, flock=flock, where=self.url)
        except BaseException as exc:
            if fd is not None:
                os.close(fd)
            if isinstance(exc, _SQLITE_ERRORS):
                raise self._error(exc, f"cannot acquire run {run_label(run_id)}") from exc
            raise
        if fd is not None:
            self._flocks.keep(run_id, lease.epoch, fd)
        elif flock is Flock.OURS:
            self._flocks.move(run_id, lease.epoch)
        return lease

    async def renew(self, lease: Lease) -> Lease:
        """See :meth:`TranscriptStore.renew`. A lease taken without the run's flock takes
        the flock too once it has come free."""
        conn = self._open_conn()
        held = self._flocks.epoch(lease.run_id)
        fd: int | None = None
        if held is None:
            with contextlib.suppress(StoreError):  # the flock is an optimisation here
                fd = try_flock(self.path, lease.run_id)
        try:
            renewed = renew_lease(conn, lease, flocked=held == lease.epoch or fd is not None)
            error = None if renewed is not None else lost(conn, lease, what="It was not renewed")
        except _SQLITE_ERRORS as exc:
            if fd is not None:
                os.close(fd)
            what = f"cannot renew the lease of run {run_label(lease.run_id)}"
            raise self._error(exc, what) from exc
        if renewed is None:
            if fd is not None:
                os.close(fd)
            self._flocks.drop(lease.run_id, lease.epoch)
            assert error is not None
            raise error
        if fd is not None:
            self._flocks.keep(lease.run_id, lease.epoch, fd)
        return renewed

    async def release(self, lease: Lease) -> None:
        """See :meth:`TranscriptStore.release`. Also lets go of the run's flock (and removes
        its lock file once the run has finished)."""
        conn = self._open_conn()
        finished = False
        try:
            finished = release_lease(conn, lease)
        except _SQLITE_ERRORS as exc:
            raise self._error(
                exc, f"cannot release the lease of run {run_label(lease.run_id)}"
            ) from exc
        finally:
            self._flocks.drop(lease.run_id, lease.epoch, unlink=finished)

    async def verify_chain(self, run_id: str) -> ChainReport:
        """See :meth:`ChainVerifier.verify_chain` (the row and the events in one
        statement)."""
        conn = self._open_conn()
        with self._translated(f"cannot read run {run_label(run_id)} to verify it"):
            found = chain_rows(conn, run_id)
        if found is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")
        report = check_chain(run_id, *found, self._key)
        return audit(report, self._key, run_id, self._snapshot_rows(run_id))

    async def _run_page(self, after: str, page: int) -> list[str]:
        conn = self._open_conn()
        with self._translated("cannot list runs to verify them"):
            return run_page(conn, after, page)

    def guard_call(self, run_id: str, key: str) -> AbstractAsyncContextManager[bool]:
        """See :meth:`CallGuardStore.guard_call`: a flock in ``<database>.locks/``, dropped
        by the kernel when the holding process dies."""
        return self._guards.guard_call(run_id, key)

    async def call_running(self, run_id: str, key: str) -> bool:
        """See :meth:`CallGuardStore.call_running`."""
        return await self._guards.call_running(run_id, key)

    async def close(self) -> None:
        """Close the connection and let go of the leases' flocks (the leases stay recorded;
        another process voids them at once). Idempotent; the store is unusable afterwards.
        Appends queued on this loop are committed first."""
        if self._conn is not None:
            self._commits.flush()
        self._flocks.close()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _open_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"The store {self.url} is closed; open a new one")
        return self._conn

    async def save_snapshot(self, run_id: str, snapshot: Snapshot, *, lease: Lease) -> None:
        """See :meth:`SnapshotStore.save_snapshot`: one ``BEGIN IMMEDIATE`` transaction
        that checks the lease, reads event ``seq``'s digest and replaces the run's
        snapshots from ``snapshot.start`` on."""
        check_snapshot(run_id, snapshot)
        conn = self._open_conn()
        with self._translated(
            f"cannot save a snapshot of run {run_label(run_id)} at seq {snapshot.seq}"
        ):
            save_snapshot(conn, run_id, snapshot, lease, self._key)

    async def load_snapshot(self, run_id: str) -> list[Snapshot]:
        """See :meth:`SnapshotStore.load_snapshot`."""
        return usable(self._key, run_id, self._snapshot_rows(run_id))

    def _snapshot_rows(self, run_id: str) -> list[StoredRow]:
        conn = self._open_conn()
        with self._translated(f"cannot read the snapshots of run {run_label(run_id)}"):
            return snapshot_rows(conn, run_id)

    def _translated(self, what: str | Callable[[], str]) -> AbstractContextManager[None]:
        """sqlite3's errors (and a value it cannot bind) leave the block as :meth:`_error`."""
        return translated(_SQLITE_ERRORS, self._error, what)

    def _error(self, exc: Exception, what: str) -> StoreError:
        """Our error for a sqlite3 error: corrupted for a damaged file, else StoreError."""
        name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
        code = getattr(exc, "sqlite_errorcode", None)  # absent on errors sqlite3 raises itself
        if isinstance(code, int) and (code & 0xFF) in _CORRUPT_CODES:
            return StoreCorruptedError(
                printable(
                    f"SQLite store {self.path} is not a usable database ({exc}; {name}): "
                    f"{what}. The file was left untouched: restore it from a backup or move it "
                    "aside."
                )
            )
        return StoreError(printable(f"SQLite store {self.path}: {what}: {exc} ({name})"))

    def _corrupted(self, run_id: str, seq: int, why: str) -> StoreCorruptedError:
        return StoreCorruptedError(
            f"Run {run_label(run_id)} in {self.url} is corrupted at seq {seq}: {why}. The "
            "transcript is not guessed at: repair or remove the bad event explicitly."
        )


def _append_if_at(
    conn: sqlite3.Connection,
    batch: Batch,
    *,
    key: ChainKey | None,
    written: WrittenHeads,
    seen: Callable[[str, CancelRequest | None], None],
) -> int:
    """Append ``events`` inside the caller's transaction if the run is at ``expected_seq``
    (and, with a lease, held by it); the caller commits or rolls back (``_commit``).
    Their digests extend the chain head read here, in the same transaction (``_chain``),
    and the run's cancel request read with it is handed to ``seen``.

    Returns:
        The run's next seq before the call: ``expected_seq`` when the events were written,
        anything else when nothing was.

    Raises:
        LeaseLostError: ``lease`` is not the run's lease (nothing was written).
        QuotaExceededError: a charge of the batch would pass its limit (nothing was
            written: the counters are charged first).
        StoreCorruptedError, StoreError: the run's chain head does not fit, or is signed
            and there is no key (``_chain.extend``; nothing was written).
        sqlite3.Error: perhaps after some rows were written (IntegrityError: an event row
            is there already).
    """
    run_id, expected_seq, events = batch.run_id, batch.expected_seq, batch.events
    row: _AppendRow | None = conn.execute(_APPEND_STATE, (run_id,)).fetchone()
    if batch.lease is not None:
        check_lease(None if row is None else row[2:5], batch.lease, what="Nothing was written")
    current, before = (0, "running") if row is None else row[:2]
    if current != expected_seq:
        return current
    if batch.charges:
        charge(conn, batch.charges)  # QuotaExceededError: nothing written yet
    stored_head = None if row is None else row[5]
    previous_chained = False
    if stored_head is None and expected_seq > 0:  # written before chaining, or head removed
        previous_chained = (
            conn.execute(
                "SELECT 1 FROM events WHERE run_id = ? AND seq = ? AND chain IS NOT NULL",
                (run_id, expected_seq - 1),
            ).fetchone()
            is not None
        )
    chains, head = extend(
        key, batch, stored_head, previous_chained=previous_chained, written=written
    )
    rows = [
        (run_id, ev.seq, ev.type, ev.at, body, chain)
        for ev, body, chain in zip(events, batch.bodies, chains, strict=True)
    ]
    status = before
    for ev in events:
        status = status_after(status, ev)
    first, end = events[0], expected_seq + len(events)
    conn.executemany(_INSERT_EVENT, rows)
    if row is None:
        task, tenant = (first.task, first.tenant) if isinstance(first, RunStarted) else ("", None)
        metadata = metadata_text(first)
        conn.execute(
            _INSERT_RUN,
            (run_id, status, task, first.at, events[-1].at, end, tenant, metadata, head),
        )
    elif status != before:
        conn.execute(_ADVANCE_RUN_STATUS, (status, events[-1].at, end, head, run_id))
    else:
        conn.execute(_ADVANCE_RUN, (events[-1].at, end, head, run_id))
    by, reason, at = (None, None, None) if row is None else row[6:]
    seen(run_id, None if by is None or at is None else CancelRequest(by=by, reason=reason, at=at))
    return expected_seq


_APPEND_STATE = """SELECT next_seq, status, owner, epoch, lease_until, chain_head,
    cancel_by, cancel_reason, cancel_at FROM runs WHERE run_id = ?"""
_AppendRow = tuple[
    int, str, str | None, int, float | None, str | None, str | None, str | None, float | None
]


def _delete_after(
    conn: sqlite3.Connection, run_id: str, after: int, key: ChainKey | None, where: str
) -> list[tuple[int, str]] | None:
    """Delete events after ``after`` inside the caller's transaction; ``None``: no such run.
    The chain head is moved back to the last kept event and signed again (``_chain``)."""
    found: tuple[str | None] | None = conn.execute(
        "SELECT chain_head FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    if found is None:
        return None
    rows: list[tuple[int, str | bytes]] = conn.execute(
        "SELECT seq, CAST(body AS BLOB) FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
    ).fetchall()
    chains: list[tuple[int, bytes | None]] = conn.execute(
        "SELECT seq, chain FROM events WHERE run_id = ? AND seq <= ? ORDER BY seq",
        (run_id, after),
    ).fetchall()
    head = truncated_head(key, run_id, found[0], chains)
    status, kept = kept_status(run_id, where, rows, after)
    conn.execute("DELETE FROM events WHERE run_id = ? AND seq > ?", (run_id, after))
    conn.execute("DELETE FROM snapshots WHERE run_id = ? AND seq > ?", (run_id, after))
    conn.execute(
        "UPDATE runs SET next_seq = ?, status = ?, chain_head = ? WHERE run_id = ?",
        (kept, status, head, run_id),
    )
    return [
        (seq, body.decode("utf-8", "replace") if isinstance(body, bytes) else body)
        for seq, body in rows
        if seq > after
    ]
