"""A run's integrity in the database: its snapshots (bound to a chained event, saved
under the run's lease, read back for loading and for audit) and what verification reads
(the run's row and its events in one statement)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._chain import ChainKey, ChainRow
from .._codec import run_label
from .._errors import lost_error
from .._lease import Lease
from .._snapshots import Snapshot, StoredRow, no_event, row_for
from ._schema import Statements

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["chain_rows", "save_snapshot", "snapshot_rows"]


async def save_snapshot(
    conn: AsyncConnection[Any],
    sql: Statements,
    key: ChainKey | None,
    run_id: str,
    snapshot: Snapshot,
    lease: Lease,
) -> None:
    """In one transaction that locks the run's row: check the lease, read event
    ``snapshot.seq``'s digest and replace the run's snapshots from ``snapshot.start`` on
    (Any: psycopg's row type).

    Raises:
        LeaseLostError: ``lease`` is not the run's lease (nothing was saved).
        StoreError: no chained event at ``snapshot.seq``.
        psycopg.Error: the database failed (rolled back).
    """
    async with conn.transaction():
        found = await (await conn.execute(sql.snapshot_target, (snapshot.seq, run_id))).fetchone()
        owner, epoch, until, now, chain = (None,) * 5 if found is None else found
        if owner != lease.owner or epoch != lease.epoch:
            raise lost_error(
                run_label(run_id),
                lease,
                owner,
                None if found is None else epoch,
                until,
                now if now is not None else until or 0.0,
                what="The snapshot was not saved",
            )
        if chain is None:
            raise no_event(run_id, snapshot.seq)
        await conn.execute(sql.snapshots_from, (run_id, snapshot.start))
        await conn.execute(sql.snapshot_insert, row_for(key, run_id, snapshot, bytes(chain)))


async def snapshot_rows(
    conn: AsyncConnection[Any], sql: Statements, run_id: str
) -> list[StoredRow]:
    """The run's stored snapshots in seq order, each with its event's digest now."""
    found = await (await conn.execute(sql.snapshots_load, (run_id,))).fetchall()
    return [
        (
            int(seq),
            int(start),
            str(tag),
            bytes(saved),
            None if now is None else bytes(now),
            bytes(sealed),
            str(state),
            str(history),
        )
        for seq, start, tag, saved, now, sealed, state, history in found
    ]


async def chain_rows(
    conn: AsyncConnection[Any], sql: Statements, run_id: str
) -> tuple[int, str | None, list[ChainRow]] | None:
    """The run's next seq, stored chain head and chained events, or ``None``: no such run."""
    rows = await (await conn.execute(sql.chain_rows, (run_id,))).fetchall()
    if not rows:
        return None
    events: list[ChainRow] = [
        (int(seq), str(type_), _body_bytes(body), None if chain is None else bytes(chain))
        for _, _, seq, type_, body, chain in rows
        if seq is not None
    ]
    return int(rows[0][0]), rows[0][1], events


def _body_bytes(body: str) -> bytes:
    """A stored body as the chain hashed it (a lone surrogate, never written by a store,
    still hashes: it then fails to match)."""
    return body.encode("utf-8", "surrogatepass")
