"""Quota counters on PostgreSQL: an append's charges as its statement's parameters, the
advisory locks its transaction takes first, and the refusal read back from the statement's
error (``_quota`` is the contract; ``_schema`` has the statement)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentcore.contracts.errors import QuotaExceededError
from agentcore.events import Charge

from .._quota import Counter, apply_charges, units
from ._arrays import Int8s, OptFloat8s, OptInt8s, OptTexts, Texts
from ._schema import lock_key

__all__ = ["quota_locks", "quota_params", "quota_refusal"]


def quota_params(charges: Sequence[Charge]) -> dict[str, Any]:
    """The ``%(q_*)b`` parameters of a charging append (Any: arrays of several types): one
    element per counter, by key, with its charges summed and its ``cap``, the most the
    counter may hold before the append for none of its limited charges to pass its limit
    (``NULL``: no charge of it has a limit to check). A charge passes when what the
    counter held plus the charges up to it, in order, exceed its limit, so the cap is the
    least of ``limit - (the charges up to it)`` (as :func:`~agentcore.stores._quota.
    apply_charges` checks them one by one)."""
    first: dict[str, Charge] = {}
    total: dict[str, int] = {}
    cap: dict[str, int] = {}
    for charge in charges:
        key = charge.key
        first.setdefault(key, charge)
        total[key] = total.get(key, 0) + units(charge.amount)
        if charge.limit is not None and charge.amount > 0:
            room = units(charge.limit) - total[key]
            cap[key] = min(cap.get(key, room), room)
    keys = sorted(first)
    return {
        "q_keys": Texts(keys),
        "q_quotas": Texts([first[k].quota for k in keys]),
        "q_tenants": OptTexts([first[k].tenant for k in keys]),
        "q_units": Int8s([total[k] for k in keys]),
        "q_caps": OptInt8s([cap.get(k) for k in keys]),
        "q_ends": OptFloat8s([first[k].window_end for k in keys]),
    }


def quota_locks(charges: Sequence[Charge], schema: str | None) -> list[int]:
    """The advisory lock of each counter the charges touch (``_commit`` takes a batch's in
    ascending order, before anything else)."""
    return sorted({lock_key("quota", schema or "", c.key) for c in charges})


def quota_refusal(charges: Sequence[Charge], detail: str | None) -> QuotaExceededError | None:
    """The error for an append whose statement refused its charges, from what each counter
    held before it (the error's detail: a JSON object of units by key); ``None`` when the
    detail does not say (then the caller reports a store error)."""
    try:
        before: object = json.loads(detail or "")
    except ValueError:
        return None
    if not isinstance(before, dict):
        return None
    counters: dict[str, Counter] = {}
    for key, used in before.items():  # pyright: ignore[reportUnknownVariableType]  # JSON
        if not isinstance(key, str) or not isinstance(used, int):
            return None
        counters[key] = Counter("", None, used, None)
    try:
        apply_charges(counters, charges)
    except QuotaExceededError as exc:
        return exc
    return None
