"""A run's integrity on the file: its snapshots (bound to a chained event, saved under
the run's lease, read back for loading and for audit) and what verification reads (the
run's row and chained events in one statement, the run ids a page at a time)."""

from __future__ import annotations

import sqlite3

from .._chain import ChainKey, ChainRow
from .._lease import Lease
from .._snapshots import Snapshot, StoredRow, no_event, row_for
from ._leases import check_lease
from ._transaction import immediate

__all__ = ["chain_rows", "run_page", "save_snapshot", "snapshot_rows"]

# One statement, so the run's row and its events come from one snapshot.
_CHAIN_ROWS = """SELECT r.next_seq, r.chain_head, e.seq, e.type, CAST(e.body AS BLOB), e.chain
    FROM runs AS r LEFT JOIN events AS e ON e.run_id = r.run_id
    WHERE r.run_id = ?
    ORDER BY e.seq"""
_INSERT_SNAPSHOT = """INSERT INTO snapshots (run_id, seq, start, tag, chain, seal, state, history)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)"""
_LOAD_SNAPSHOTS = """SELECT s.seq, s.start, s.tag, s.chain, e.chain, s.seal, s.state, s.history
    FROM snapshots AS s LEFT JOIN events AS e ON e.run_id = s.run_id AND e.seq = s.seq
    WHERE s.run_id = ? ORDER BY s.seq"""
_RUN_PAGE = "SELECT run_id FROM runs WHERE run_id > ? ORDER BY run_id LIMIT ?"


def save_snapshot(
    conn: sqlite3.Connection, run_id: str, snap: Snapshot, lease: Lease, key: ChainKey | None
) -> None:
    """In one ``BEGIN IMMEDIATE`` transaction: check the lease, read event ``snap.seq``'s
    digest and replace the run's snapshots from ``snap.start`` on.

    Raises:
        LeaseLostError: ``lease`` is not the run's lease (nothing was saved).
        StoreError: no chained event at ``snap.seq``.
        sqlite3.Error: the database failed (rolled back).
    """
    with immediate(conn):
        row: tuple[str | None, int, float | None] | None = conn.execute(
            "SELECT owner, epoch, lease_until FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        check_lease(row, lease, what="The snapshot was not saved")
        found: tuple[bytes | None] | None = conn.execute(
            "SELECT chain FROM events WHERE run_id = ? AND seq = ?", (run_id, snap.seq)
        ).fetchone()
        if found is None or found[0] is None:
            raise no_event(run_id, snap.seq)
        conn.execute("DELETE FROM snapshots WHERE run_id = ? AND seq >= ?", (run_id, snap.start))
        conn.execute(_INSERT_SNAPSHOT, row_for(key, run_id, snap, bytes(found[0])))


def snapshot_rows(conn: sqlite3.Connection, run_id: str) -> list[StoredRow]:
    """The run's stored snapshots in seq order, each with its event's digest now."""
    rows: list[StoredRow] = conn.execute(_LOAD_SNAPSHOTS, (run_id,)).fetchall()
    return rows


def chain_rows(
    conn: sqlite3.Connection, run_id: str
) -> tuple[int, str | None, list[ChainRow]] | None:
    """The run's next seq, stored chain head and chained events, or ``None``: no such run."""
    rows: list[tuple[int, str | None, int | None, str | None, bytes | None, bytes | None]] = (
        conn.execute(_CHAIN_ROWS, (run_id,)).fetchall()
    )
    if not rows:
        return None
    events: list[ChainRow] = [
        (seq, type_ or "", body or b"", chain)
        for _, _, seq, type_, body, chain in rows
        if seq is not None
    ]
    return rows[0][0], rows[0][1], events


def run_page(conn: sqlite3.Connection, after: str, page: int) -> list[str]:
    """Up to ``page`` run ids above ``after``, in order."""
    ids: list[tuple[str]] = conn.execute(_RUN_PAGE, (after, page)).fetchall()
    return [run_id for (run_id,) in ids]
