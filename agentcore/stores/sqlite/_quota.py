"""Quota counters in a SQLite file: an append's charges applied in its transaction, and the
counters read, listed and pruned (``_quota`` is the contract).

An append holds the file's write lock (``BEGIN IMMEDIATE``) from its first statement, so
reading its counters, checking them and writing them back in that transaction is atomic
across every process on the file: no other append can charge in between."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from agentcore.events import Charge

from .._base import PRUNE_CHUNK
from .._quota import UNITS, Counter, QuotaUsage, apply_charges
from ._transaction import immediate

__all__ = ["charge", "list_counters", "prune_counters", "read_counters"]

_READ = "SELECT quota, tenant, used, window_end FROM quota_usage WHERE key = ?"
_WRITE = """INSERT INTO quota_usage (key, quota, tenant, used, window_end)
    VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET used = excluded.used"""
_PRUNE = """DELETE FROM quota_usage WHERE key IN (
    SELECT key FROM quota_usage WHERE window_end <= ? LIMIT ?)"""


def charge(conn: sqlite3.Connection, charges: Sequence[Charge]) -> None:
    """Apply ``charges`` inside the caller's write transaction, all or none.

    Raises:
        QuotaExceededError: a charge would pass its limit; nothing was written.
        sqlite3.Error: the file failed (the caller rolls back).
    """
    counters: dict[str, Counter] = {}
    for key in dict.fromkeys(c.key for c in charges):
        row: tuple[str, str | None, int, float | None] | None = conn.execute(
            _READ, (key,)
        ).fetchone()
        if row is not None:
            counters[key] = Counter(*row)
    apply_charges(counters, charges)  # raises before anything is written
    conn.executemany(
        _WRITE,
        [(key, row.quota, row.tenant, row.used, row.window_end) for key, row in counters.items()],
    )


def read_counters(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, float]:
    """What each counter holds (0 for one never charged)."""
    used: dict[str, float] = {}
    for key in keys:
        row: tuple[int] | None = conn.execute(
            "SELECT used FROM quota_usage WHERE key = ?", (key,)
        ).fetchone()
        used[key] = 0.0 if row is None else row[0] / UNITS
    return used


def list_counters(
    conn: sqlite3.Connection, *, tenant: str | None, quota: str | None
) -> list[QuotaUsage]:
    """The counters, of one tenant or one quota if given, by key (SQLite compares text
    byte by byte: code point order, as every store lists them)."""
    where: list[str] = []
    params: list[str] = []
    if tenant is not None:
        where.append("tenant = ?")
        params.append(tenant)
    if quota is not None:
        where.append("quota = ?")
        params.append(quota)
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    rows: list[tuple[str, str, str | None, int, float | None]] = conn.execute(
        f"SELECT key, quota, tenant, used, window_end FROM quota_usage {clause}ORDER BY key",
        params,
    ).fetchall()
    return [QuotaUsage(k, q, t, used / UNITS, end) for k, q, t, used, end in rows]


def prune_counters(conn: sqlite3.Connection, before: float) -> int:
    """Delete the counters whose window closed at or before ``before``, one chunk per
    ``BEGIN IMMEDIATE`` transaction; how many."""
    pruned = 0
    while True:
        with immediate(conn):
            count = conn.execute(_PRUNE, (before, PRUNE_CHUNK)).rowcount
        pruned += count
        if count < PRUNE_CHUNK:
            return pruned
