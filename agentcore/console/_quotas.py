"""The console's quota view: the store's quota counters, per tenant, with the limits the
console's agents declare."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from itertools import groupby
from typing import Any

from agentcore import Agent
from agentcore.stores import TranscriptStore

from ._approvals import ConsoleError

__all__ = ["counter_words", "limits_of", "quota_usage"]


def counter_words(key: str) -> str:
    """What a counter (key ``[name, [[part, value], ...], window]``) is kept per and its
    window, in the words a run's reasons use (``per customer_id=C1, day 2026-05-04``)."""
    try:
        _, parts, window = json.loads(key)
        per = ", ".join(f"{p}={v}" for p, v in parts) or "everyone"
    except (ValueError, TypeError):
        return key
    return f"per {per}, {str(window).replace(':', ' ', 1)}"


def limits_of(agents: Iterable[Agent]) -> dict[str, float]:
    """The limits of the agents' quotas, by quota name (the first agent's, when two
    declare one name)."""
    found: dict[str, float] = {}
    for agent in agents:
        for q in agent._config.quotas:  # pyright: ignore[reportPrivateUsage]  # no public Agent.quotas yet
            found.setdefault(q.name, q.limit)
    return found


async def quota_usage(
    store: TranscriptStore,
    limits: Mapping[str, float],
    *,
    tenant: str | None = None,
    quota: str | None = None,
) -> list[dict[str, Any]]:  # Any: JSON values
    """The store's counters (of ``tenant`` and ``quota`` if given), by tenant then key, as
    JSON: key, quota, tenant, counter (in words), used, limit (``None``: no agent of the
    console declares the quota), share (used / limit), window_end.

    Raises:
        ConsoleError: 501 when the store keeps no quota counters.
    """
    listing = getattr(store, "list_quota_usage", None)
    if listing is None:
        raise ConsoleError(
            501, f"{type(store).__name__} keeps no quota counters: quotas need a store that does."
        )
    rows: list[Any] = await listing(tenant=tenant, quota=quota)  # Any: QuotaUsage rows
    out: list[dict[str, Any]] = []  # Any: JSON values
    for r in sorted(rows, key=lambda r: (r.tenant or "", r.key)):
        limit = limits.get(r.quota)
        out.append(
            {
                "key": r.key,
                "quota": r.quota,
                "tenant": r.tenant,
                "counter": counter_words(r.key),
                "used": r.used,
                "limit": limit,
                "share": None if limit is None else r.used / limit,
                "window_end": r.window_end,
            }
        )
    return out


Row = dict[str, Any]  # Any: JSON values


def by_tenant(rows: list[Row]) -> list[tuple[str | None, list[Row]]]:
    """``rows`` (sorted by tenant) grouped by tenant."""
    return [(t, list(group)) for t, group in groupby(rows, key=lambda r: r["tenant"])]
