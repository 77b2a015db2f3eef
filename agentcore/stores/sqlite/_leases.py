"""Leases for the SQLite store: a row's owner, epoch and expiry, backed by a per-run flock.

Every process that opens one SQLite file runs on the same machine, so the store's clock is
the machine's (``time.time()``). Two mechanisms work together:

- The lease (``runs.owner``, ``epoch``, ``lease_until``) orders holders: every acquire bumps
  the epoch, and an append made with a lease checks owner and epoch in its transaction.
- The run's flock in ``<database>.locks/`` tells when a holder is gone: the OS drops it when
  the process dies. A holder that took the flock with its lease marks the row
  (``lease_flock = 1``); whoever gets the flock later knows that holder is gone and takes
  the run at once, whatever the lease's expiry says.

A holder that is alive but stalled (SIGSTOP, a debugger) keeps its flock. Once its lease
has expired, an acquirer takes the run without the flock (``lease_flock = 0``: that lease
only ends by release or expiry); the stalled holder, resumed, is fenced by the epoch. A
holder without the flock takes it on its next renew when it has come free.

The flock is tried without waiting and before the transaction; the decision is made inside
one ``BEGIN IMMEDIATE`` transaction, so racing acquirers in any number of processes get
exactly one winner.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
from enum import Enum
from pathlib import Path

from agentcore.contracts.errors import LeaseLostError, RunNotFoundError, StoreError

from .._codec import run_label
from .._errors import busy_error, lost_error
from .._guards import flock
from .._lease import Lease
from ._transaction import immediate

__all__ = [
    "Flock",
    "HeldFlocks",
    "check_lease",
    "lock_name",
    "lock_path",
    "lost",
    "release_lease",
    "renew_lease",
    "take_lease",
    "try_flock",
]

_ROW = "SELECT owner, epoch, lease_until, lease_flock, status FROM runs WHERE run_id = ?"
_TAKE = "UPDATE runs SET owner = ?, epoch = ?, lease_until = ?, lease_flock = ? WHERE run_id = ?"
_RENEW = """UPDATE runs SET lease_until = ?, lease_flock = max(lease_flock, ?)
    WHERE run_id = ? AND owner = ? AND epoch = ?"""
_RELEASE = """UPDATE runs SET owner = NULL, lease_until = NULL, lease_flock = 0
    WHERE run_id = ? AND owner = ? AND epoch = ?"""

_FINISHED = ("completed", "cancelled")


class Flock(Enum):
    """What the acquirer knows about the run's flock."""

    NEW = "new"
    """It just took the flock: a holder whose lease was backed by the flock is gone."""
    OURS = "ours"
    """This store object already held it for an earlier lease of its own."""
    BUSY = "busy"
    """Another open file holds it: its holder is alive (perhaps stalled)."""


def lock_name(run_id: str) -> str:
    """The run's lock file name; any str has one (surrogates pass through, never raise)."""
    return hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def lock_path(db_path: str, run_id: str) -> str:
    """The run's lock file, in ``<database>.locks/``."""
    return f"{db_path}.locks/{lock_name(run_id)}.lock"


def try_flock(db_path: str, run_id: str) -> int | None:
    """Take the run's flock without waiting: its descriptor, or ``None`` when it is held.

    Raises:
        StoreError: the lock folder or file cannot be created or locked.
    """
    try:
        Path(f"{db_path}.locks").mkdir(exist_ok=True)
        fd = os.open(lock_path(db_path, run_id), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(f"SQLite store {db_path}: cannot create a run lock: {exc}") from exc
    try:
        flock(fd)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError as exc:
        os.close(fd)
        raise StoreError(
            f"SQLite store {db_path}: cannot lock run {run_label(run_id)}: {exc}"
        ) from exc
    return fd


class HeldFlocks:
    """The flocks one store object holds for its leases: run id -> (epoch, descriptor)."""

    def __init__(self, db_path: str) -> None:
        self._path = db_path
        self._held: dict[str, tuple[int, int]] = {}

    def epoch(self, run_id: str) -> int | None:
        """The epoch of the lease this object holds the run's flock for, if any."""
        held = self._held.get(run_id)
        return None if held is None else held[0]

    def keep(self, run_id: str, epoch: int, fd: int) -> None:
        """Hold ``fd`` (the run's flock) for the lease of ``epoch``."""
        old = self._held.get(run_id)
        self._held[run_id] = (epoch, fd)
        if old is not None and old[1] != fd:
            os.close(old[1])

    def move(self, run_id: str, epoch: int) -> None:
        """The flock held for an earlier lease now backs the lease of ``epoch``."""
        held = self._held.get(run_id)
        if held is not None:
            self._held[run_id] = (epoch, held[1])

    def drop(self, run_id: str, epoch: int, *, unlink: bool = False) -> None:
        """Let go of the run's flock if it is held for the lease of ``epoch``.

        Args:
            unlink: remove the lock file first, while still holding it (a finished run is
                never advanced again, so its lock file need not pile up).
        """
        held = self._held.get(run_id)
        if held is None or held[0] != epoch:
            return
        del self._held[run_id]
        try:
            if unlink:
                with contextlib.suppress(OSError):
                    os.unlink(lock_path(self._path, run_id))
        finally:
            os.close(held[1])  # closing the descriptor drops the lock

    def close(self) -> None:
        """Let go of every flock (the leases stay in the rows; others void them at once)."""
        held, self._held = self._held, {}
        for _, fd in held.values():
            with contextlib.suppress(OSError):
                os.close(fd)


def take_lease(
    conn: sqlite3.Connection,
    run_id: str,
    *,
    owner: str,
    ttl_s: float,
    flock: Flock,
    where: str,
) -> Lease:
    """Acquire the run in one ``BEGIN IMMEDIATE`` transaction.

    Args:
        flock: what the caller knows about the run's flock.
        where: the store's URL, for the not-found message.

    Raises:
        RunNotFoundError: no such run.
        RunBusyError: someone holds it.
        sqlite3.Error: the database failed (rolled back).
    """
    with immediate(conn):
        row: tuple[str | None, int, float | None, int, str] | None = conn.execute(
            _ROW, (run_id,)
        ).fetchone()
        lease = _grant(run_id, row, owner=owner, ttl_s=ttl_s, flock=flock, where=where)
        backed = 0 if flock is Flock.BUSY else 1
        conn.execute(_TAKE, (owner, lease.epoch, lease.expires_at, backed, run_id))
    return lease


def _grant(
    run_id: str,
    row: tuple[str | None, int, float | None, int, str] | None,
    *,
    owner: str,
    ttl_s: float,
    flock: Flock,
    where: str,
) -> Lease:
    """The lease to record, given the run's row; or why not (RunNotFoundError, RunBusyError)."""
    if row is None:
        raise RunNotFoundError(f"No run {run_label(run_id)} in {where}")
    holder, epoch, until, flocked, _ = row
    now = time.time()
    free = holder is None or until is None or until < now
    if flock is Flock.NEW and flocked:
        free = True  # its holder's flock is ours now: that holder is gone
    if flock is Flock.BUSY and holder is None and epoch == 0:
        # Never leased, yet its flock is held: a claim() holder, or an acquirer between
        # taking the flock and its transaction. Either way, not ours to take.
        free = False
    if not free:
        raise busy_error(run_label(run_id), holder, epoch, until, now)
    return Lease(run_id, owner, epoch + 1, ttl_s, now + ttl_s, holder)


def renew_lease(conn: sqlite3.Connection, lease: Lease, *, flocked: bool) -> Lease | None:
    """Extend the lease from now; ``None`` when it is no longer the run's.

    Args:
        flocked: the caller holds the run's flock for this lease (the row is marked so).
    """
    expires_at = time.time() + lease.ttl_s
    cur = conn.execute(_RENEW, (expires_at, int(flocked), lease.run_id, lease.owner, lease.epoch))
    if cur.rowcount == 0:
        return None
    return Lease(lease.run_id, lease.owner, lease.epoch, lease.ttl_s, expires_at)


def release_lease(conn: sqlite3.Connection, lease: Lease) -> bool:
    """Clear the lease if it is still the run's; whether the run has finished (completed
    or cancelled), so its lock file can go."""
    conn.execute(_RELEASE, (lease.run_id, lease.owner, lease.epoch))
    row: tuple[str] | None = conn.execute(
        "SELECT status FROM runs WHERE run_id = ?", (lease.run_id,)
    ).fetchone()
    return row is not None and row[0] in _FINISHED


def lost(conn: sqlite3.Connection, lease: Lease, *, what: str) -> LeaseLostError:
    """LeaseLostError naming the run's holder now (read outside any transaction)."""
    row: tuple[str | None, int, float | None, int, str] | None = conn.execute(
        _ROW, (lease.run_id,)
    ).fetchone()
    owner, epoch, until = (None, None, None) if row is None else row[:3]
    return lost_error(run_label(lease.run_id), lease, owner, epoch, until, time.time(), what=what)


def check_lease(
    row: tuple[str | None, int, float | None] | None, lease: Lease, *, what: str
) -> None:
    """LeaseLostError unless the run's (owner, epoch, lease_until) ``row`` is ``lease``'s."""
    if row is not None and row[0] == lease.owner and row[1] == lease.epoch:
        return
    owner, epoch, until = (None, None, None) if row is None else row
    raise lost_error(run_label(lease.run_id), lease, owner, epoch, until, time.time(), what=what)
