"""What ``list_runs`` and ``prune`` run on the database: the listing statement for a
request (a prepared one for the common shapes, one built for a search or a page cursor),
the rows as summaries, and the prune, one ``DELETE ... RETURNING`` per chunk."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from agentcore.contracts.errors import StoreCorruptedError

from .._base import PRUNE_CHUNK, Listing, Pruning, like_escape
from .._codec import run_label
from .._protocol import RunSummary
from ._schema import Statements

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["list_statement", "prune", "summaries", "text_in", "text_out"]


def text_in(value: str) -> str:
    """Free text as the row keeps it: a JSON string literal (no NUL can reach the column)."""
    return json.dumps(value, ensure_ascii=False)


def text_out(stored: str) -> str:
    """Free text from the row (:func:`text_in`'s literal).

    Raises:
        ValueError, TypeError: the stored value is not a JSON string literal.
    """
    value = json.loads(stored)
    if not isinstance(value, str):
        raise TypeError(f"expected a JSON string, found {type(value).__name__}")
    return value


def list_statement(sql: Statements, listing: Listing) -> tuple[bytes, tuple[object, ...]]:
    """The statement for ``listing`` and its values, the limit last."""
    status, tenant, limit = listing.status, listing.tenant, listing.limit
    if listing.search or listing.after is not None:
        return _list_query(sql.runs, listing)
    return {
        (False, False): (sql.list_all, (limit,)),
        (True, False): (sql.list_status, (status, limit)),
        (False, True): (sql.list_tenant, (tenant, limit)),
        (True, True): (sql.list_tenant_status, (tenant, status, limit)),
    }[status is not None, tenant is not None]


def _list_query(runs: str, listing: Listing) -> tuple[bytes, tuple[object, ...]]:
    """A listing with a search or a page cursor (the common shapes are prepared)."""
    conds: list[str] = []
    params: list[object] = []
    if listing.tenant is not None:
        conds.append("tenant = %s")
        params.append(listing.tenant)
    if listing.status is not None:
        conds.append("status = %s")
        params.append(listing.status)
    if (after := listing.after) is not None:
        # ``<=`` first: a range on the index, so a deep page starts at the cursor.
        conds.append("updated_at <= %s AND (updated_at < %s OR run_id > %s)")
        params += [after[0], after[0], after[1]]
    if search := listing.search:
        text = like_escape(search)
        # The row's task is a JSON string literal (NUL-safe), so its text is searched
        # as JSON, like the metadata (on the row: migration 3); ILIKE ignores case.
        conds.append("(run_id LIKE %s OR task ILIKE %s OR metadata ILIKE %s)")
        quoted = like_escape(json.dumps(search, ensure_ascii=False)[1:-1])  # as in JSON
        params += [f"{text}%", f"%{quoted}%", f"%{quoted}%"]
    clause = f"WHERE {' AND '.join(conds)} " if conds else ""
    statement = (
        "SELECT run_id, status, task, created_at, updated_at, next_seq, tenant, owner, "
        f"extract(epoch FROM lease_until)::float8 FROM {runs} AS r {clause}"
        "ORDER BY updated_at DESC, run_id LIMIT %s"
    )
    return statement.encode(), (*params, listing.limit)


def summaries(rows: Iterable[Sequence[Any]], display: str) -> list[RunSummary]:
    """The listing's rows as summaries (Any: a database row).

    Raises:
        StoreCorruptedError: a row's task is not a JSON string literal.
    """
    out: list[RunSummary] = []
    for run_id, st, task, created, updated, events, owner, holder, until in rows:
        try:
            text = text_out(task)
        except (ValueError, TypeError) as exc:
            raise StoreCorruptedError(
                f"Run {run_label(run_id)} in {display} is corrupted: its row's task is "
                f"not a JSON string ({exc}); its events are not affected"
            ) from exc
        out.append(
            RunSummary(
                run_id,
                st,
                text,
                float(created),
                float(updated),
                int(events),
                owner,
                holder,
                None if until is None else float(until),
            )
        )
    return out


async def prune(
    conn: AsyncConnection[Any], sql: Statements, pruning: Pruning, pruned: list[str]
) -> None:
    """Prune the runs ``pruning`` names on ``conn`` (Any: psycopg's row type), adding
    each chunk's run ids to ``pruned`` once it committed (so that a failure can say how
    many went before it)."""
    params: dict[str, Any] = {  # Any: query parameters of several types
        "statuses": list(pruning.statuses),
        "before": float(pruning.before),
        "tenant": pruning.tenant,
        "limit": PRUNE_CHUNK,
    }
    ids = pruning.run_ids
    statement = sql.prune(
        tenant=pruning.tenant is not None, run_ids=ids is not None, dry_run=pruning.dry_run
    )
    if ids is not None:
        for i in range(0, len(ids), PRUNE_CHUNK):
            params["run_ids"] = ids[i : i + PRUNE_CHUNK]
            rows = await (await conn.execute(statement, params)).fetchall()
            pruned += [str(row[0]) for row in rows]
    elif pruning.dry_run:
        rows = await (await conn.execute(statement, params)).fetchall()
        pruned += [str(row[0]) for row in rows]
    else:
        while True:
            rows = await (await conn.execute(statement, params)).fetchall()
            pruned += [str(row[0]) for row in rows]
            if len(rows) < PRUNE_CHUNK:
                break
