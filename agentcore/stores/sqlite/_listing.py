"""What ``list_runs`` and ``prune`` run on the file: the listing statement for a filter,
the statement that picks the runs to prune, and the prune itself, one chunk per
``BEGIN IMMEDIATE`` transaction."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from .._base import PRUNE_CHUNK, Pruning, like_escape
from ._transaction import immediate

__all__ = ["list_query", "prune", "prune_chunk", "prune_query"]

_LIST_COLUMNS = "run_id, status, task, created_at, updated_at, next_seq, tenant, owner, lease_until"


def list_query(
    *,
    status: str | None,
    tenant: str | None,
    search: str | None = None,
    after: tuple[float, str] | None = None,
) -> tuple[str, tuple[str | float, ...]]:
    """The listing statement for a filter (without its ``LIMIT ?`` value) and its values.

    Each shape matches one index of migration 4 exactly (equality columns, then
    ``updated_at DESC, run_id``), so SQLite walks it in order and stops at the limit.
    """
    where: list[str] = []
    params: list[str | float] = []
    if tenant is not None:
        where.append("tenant = ?")
        params.append(tenant)
    if status is not None:
        where.append("status = ?")
        params.append(status)
    if after is not None:
        # ``<=`` first: a range on the index's leading column, so a page deep in the
        # listing starts where the cursor points instead of walking the runs before it.
        where.append("updated_at <= ? AND (updated_at < ? OR run_id > ?)")
        params += [after[0], after[0], after[1]]
    if search:
        text = like_escape(search)
        where.append(
            "(run_id LIKE ? ESCAPE '\\' OR task LIKE ? ESCAPE '\\' OR metadata LIKE ? ESCAPE '\\')"
        )
        params += [f"{text}%", f"%{text}%", f"%{text}%"]
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    sql = f"SELECT {_LIST_COLUMNS} FROM runs {clause}ORDER BY updated_at DESC, run_id LIMIT ?"
    return sql, tuple(params)


def prune_query(statuses: Sequence[str], *, tenant: bool, run_ids: int, limit: bool) -> str:
    """The statement that picks the runs to prune (one ``?`` per value: the statuses,
    ``before``, the lease clock, then the tenant, the run ids, the limit)."""
    marks = ", ".join("?" * len(statuses))
    sql = (
        f"SELECT run_id FROM runs WHERE status IN ({marks}) AND updated_at < ? "
        "AND (owner IS NULL OR lease_until IS NULL OR lease_until < ?)"
    )
    if tenant:
        sql += " AND tenant = ?"
    if run_ids:
        sql += f" AND run_id IN ({', '.join('?' * run_ids)})"
    # No ORDER BY: each status is a range of its (status, updated_at) index, read until
    # the limit; sorting across statuses would read every prunable run for every chunk.
    return sql + (" LIMIT ?" if limit else "")


def prune_chunk(
    conn: sqlite3.Connection,
    statuses: Sequence[str],
    before: float,
    tenant: str | None,
    run_ids: Sequence[str] | None,
    *,
    dry_run: bool,
    limit: int | None = None,
) -> list[str]:
    """Pick and delete one chunk of runs in one transaction (rolled back for a dry run)."""
    sql = prune_query(
        statuses,
        tenant=tenant is not None,
        run_ids=0 if run_ids is None else len(run_ids),
        limit=limit is not None,
    )
    params: list[object] = [*statuses, before, time.time()]
    params += [tenant] if tenant is not None else []
    params += list(run_ids or ())
    params += [limit] if limit is not None else []
    if run_ids is not None and not run_ids:
        return []
    with immediate(conn, keep=lambda: not dry_run):
        doomed: list[str] = [row[0] for row in conn.execute(sql, params).fetchall()]
        if not dry_run:
            gone = [(run_id,) for run_id in doomed]
            conn.executemany("DELETE FROM events WHERE run_id = ?", gone)
            conn.executemany("DELETE FROM snapshots WHERE run_id = ?", gone)
            conn.executemany("DELETE FROM runs WHERE run_id = ?", gone)
    return doomed


def prune(conn: sqlite3.Connection, pruning: Pruning, pruned: list[str]) -> None:
    """Prune the runs ``pruning`` names, adding each chunk's run ids to ``pruned`` once it
    committed (so that a failure can say how many went before it)."""
    wanted, before, tenant = pruning.statuses, pruning.before, pruning.tenant
    if pruning.run_ids is not None:
        ids = pruning.run_ids
        for i in range(0, len(ids), PRUNE_CHUNK):
            only = ids[i : i + PRUNE_CHUNK]
            pruned += prune_chunk(conn, wanted, before, tenant, only, dry_run=pruning.dry_run)
    elif pruning.dry_run:
        pruned += prune_chunk(conn, wanted, before, tenant, None, dry_run=True)
    else:
        while True:
            chunk = prune_chunk(
                conn, wanted, before, tenant, None, dry_run=False, limit=PRUNE_CHUNK
            )
            pruned += chunk
            if len(chunk) < PRUNE_CHUNK:
                break
