"""Quota counters in a store: what an append charges, and the counters it keeps.

An event may carry :class:`~agentcore.events.Charge` s (a decision or an approval that lets
a call run, a model call's tokens, a ``quota_released``). A store that keeps quotas applies
a batch's charges **in the transaction that appends the batch**: each charge adds its
amount to the counter named by its key (created at 0), and a charge with a ``limit`` that
would take its counter past it refuses the whole append with :class:`QuotaExceededError`
(nothing is written: neither the events nor any counter). So the counters always equal the
sum of the charges of the events that were written, and a call is charged exactly when the
event that lets it run is recorded: once, even across crashes and resumes (an append
happens once), and given back by the event that records its failure or its undo.

Amounts are kept as whole millionths (:func:`units`), so money sums add up exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentcore.contracts.errors import ConfigurationError, QuotaExceededError

from ..events import (
    Charge,
    Confirmation,
    Decision,
    Event,
    ModelCalled,
    QuotaReleased,
    QuotaReserved,
)

__all__ = [
    "UNITS",
    "Counter",
    "QuotaStore",
    "QuotaUsage",
    "apply_charges",
    "charges_of",
    "exceeded",
    "quota_store",
    "units",
]

UNITS = 1_000_000
"""Millionths: a counter holds whole units of this size."""


def units(amount: float) -> int:
    """``amount`` in whole millionths (how a counter holds it)."""
    return round(amount * UNITS)


def charges_of(events: Iterable[Event]) -> list[Charge]:
    """The charges a batch of events makes, in order."""
    found: list[Charge] = []
    for ev in events:
        if (
            isinstance(ev, Decision | Confirmation | ModelCalled | QuotaReleased | QuotaReserved)
            and ev.charges
        ):
            found.extend(ev.charges)
    return found


@dataclass(frozen=True, slots=True)
class QuotaUsage:
    """One counter as a store keeps it.

    Attributes:
        key: the counter (see :attr:`Charge.key`).
        quota: the quota's name.
        tenant: the tenant of the runs that charged it (``None``: none).
        used: what it holds.
        window_end: when its window closes (``None``: never).
    """

    key: str
    quota: str
    tenant: str | None
    used: float
    window_end: float | None


@dataclass(slots=True)
class Counter:
    """A counter in memory: whole units, and what to list it by."""

    quota: str
    tenant: str | None
    used: int
    window_end: float | None


def exceeded(charge: Charge, used: int) -> QuotaExceededError:
    """The error for ``charge`` on a counter holding ``used`` units."""
    have, add = used / UNITS, charge.amount
    limit = charge.limit if charge.limit is not None else 0.0
    return QuotaExceededError(
        f"quota {charge.quota!r}: {have:g} used of {limit:g}, and this would add {add:g} "
        f"(counter {charge.key}); nothing was written",
        quota=charge.quota,
        key=charge.key,
        used=have,
        amount=add,
        limit=limit,
    )


def apply_charges(counters: dict[str, Counter], charges: Sequence[Charge]) -> None:
    """Apply ``charges`` to ``counters`` all or none (the memory store's transaction; the
    SQL stores do the same in SQL).

    Raises:
        QuotaExceededError: a charge with a limit would pass it; ``counters`` unchanged.
    """
    staged: dict[str, int] = {}
    for charge in charges:
        row = counters.get(charge.key)
        used = staged.get(charge.key, 0 if row is None else row.used) + units(charge.amount)
        if charge.limit is not None and charge.amount > 0 and used > units(charge.limit):
            raise exceeded(charge, used - units(charge.amount))
        staged[charge.key] = used
    for charge in charges:
        row = counters.get(charge.key)
        if row is None:
            counters[charge.key] = Counter(charge.quota, charge.tenant, 0, charge.window_end)
    for key, used in staged.items():
        counters[key].used = used


def quota_store(store: object) -> QuotaStore:
    """``store`` as a :class:`QuotaStore`.

    Raises:
        ConfigurationError: it keeps no quota counters (a store of your own): quotas
            cannot be enforced on it.
    """
    if not isinstance(store, QuotaStore):
        raise ConfigurationError(
            f"{type(store).__name__} keeps no quota counters (quota_usage, list_quota_usage, "
            "prune_quota_usage, and charges applied in its appends): an agent with quotas= "
            "needs a store that does (memory, SQLite, PostgreSQL)"
        )
    return store


@runtime_checkable
class QuotaStore(Protocol):
    """A store that keeps quota counters (every built-in store): it applies each append's
    charges in the append's own transaction (see the module), and answers these."""

    async def quota_usage(self, keys: Sequence[str]) -> Mapping[str, float]:
        """What each counter holds (0 for a counter never charged)."""
        ...

    async def list_quota_usage(
        self, *, tenant: str | None = None, quota: str | None = None
    ) -> list[QuotaUsage]:
        """The counters, of one tenant or one quota if given, by key."""
        ...

    async def prune_quota_usage(self, before: float) -> int:
        """Delete the counters whose window closed at or before ``before``; how many."""
        ...
