"""The console's quota view: the store's quota counters, per tenant, with the limits the
console's agents declare."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import groupby
from typing import Any

from agentcore import Agent
from agentcore.errors import ConfigurationError
from agentcore.quotas import counter_words
from agentcore.stores import TranscriptStore, quota_store

from ._approvals import ConsoleError

__all__ = ["counter_words", "limits_of", "quota_usage"]


def limits_of(agents: Iterable[Agent]) -> dict[str, float]:
    """The limits of the agents' quotas, by quota name (the first agent's, when two
    declare one name)."""
    found: dict[str, float] = {}
    for agent in agents:
        for q in agent.quotas:
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
    try:
        counters = quota_store(store)
    except ConfigurationError as exc:
        raise ConsoleError(501, str(exc)) from None
    rows = await counters.list_quota_usage(tenant=tenant, quota=quota)
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
