"""Quotas: limits that span runs, kept by the store and enforced by every worker at once.

A :class:`Budget` bounds one run. A :class:`Quota` bounds what many runs spend together:
per tenant, per customer (a value bound to the run), per tool, per hour, per day, for all
time, or per run (a conversation's turns and its sub-agents' runs included). For example::

    Quota("refunds", limit=500, count="sum:amount", tools=("refund",), per=("customer_id",))
    Quota("emails", limit=100, tools=("send_email",), window="hour")  # per tenant
    Quota("tokens", limit=2_000_000, count="tokens")  # per tenant and day
    Quota("upstream", limit=10_000, tools=("geocode",), shared=True)  # all tenants at once

Every counter is kept per tenant (one tenant's use never counts against or unlocks
another's), and per whatever ``per`` adds, unless the quota is ``shared``.

**How it holds.** A call a quota counts is charged in the store's transaction that records
the decision letting it run (or the approval, for a call that waited for a person): the
store adds the call's amount to the quota's counter and refuses the whole append when the
counter would pass the limit, so ten workers racing for the last units of a limit cannot
together pass it. The charge is given back (``quota_released``, in the same append as the
event that says why) when the call fails, is undone by a compensation, is settled as
failed, or never runs; a call that ran keeps it. A crash at any point leaves the counter
equal to the charges of what was written: nothing leaks, nothing counts twice.

**Over a limit**, ``over`` says what happens to the call: ``"refuse"`` (the model is told
why and can do something else or finish), ``"confirm"`` (the run waits for a person, the
limit, its window and what is used in the reason; an approval lets that one call pass the
limit, recorded with the approver's name), or ``"attention"`` (the run stops as
``needs_attention`` for the operator). Tokens and cost are checked before each model
request: a request that would pass the quota (its estimated input plus the reply's
budget) is not sent, and the run stops as ``budget_exhausted`` naming the quota; what a
request used is charged when it returns.

Windows are fixed UTC calendar windows (``hour``, ``day``) on the agent's clock
(``Agent(clock=...)``, ``time.time`` by default; inject one in tests).
"""

from __future__ import annotations

import calendar
import json
import math
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from agentcore.contracts import canonical_json
from agentcore.contracts.errors import ConfigurationError

from ._tree import root_of

if TYPE_CHECKING:
    from ._state import RunState
    from .events import Charge
    from .tools import Tool

__all__ = [
    "MAX_LIMIT",
    "Clock",
    "Quota",
    "QuotaCount",
    "QuotaOver",
    "QuotaWindow",
    "counter_parts",
    "counter_words",
]

QuotaWindow = Literal["run", "hour", "day", "all"]
QuotaOver = Literal["refuse", "confirm", "attention"]
QuotaCount = str
"""``"calls"``, ``"tokens"``, ``"cost"`` (US dollars, where the adapter reports it) or
``"sum:<argument>"`` (the sum of a tool argument, e.g. ``"sum:amount"``)."""
Clock = Callable[[], float]
"""Unix seconds now (``time.time``)."""

MAX_LIMIT: Final = 1e12
"""The largest limit a quota may have (counters hold whole millionths in 64 bits)."""

_WINDOWS = ("run", "hour", "day", "all")
_OVER = ("refuse", "confirm", "attention")
_SPECIAL_PER = ("tenant", "run", "tool")
_MAX_NAME = 100


def _checked_name(value: object, what: str) -> str:
    """A printable identifier-like text of at most 100 characters, no surrounding space."""
    if not isinstance(value, str) or not value or len(value) > _MAX_NAME:
        raise ConfigurationError(
            f"{what} must be text of 1 to {_MAX_NAME} characters, got {value!r}"
        )
    if value != value.strip() or any(
        unicodedata.category(ch).startswith(("C", "Z")) and ch != " " for ch in value
    ):
        raise ConfigurationError(
            f"{what} {value!r} holds a control, format or separator character, or surrounding "
            "space: use plain printable text"
        )
    return value


@dataclass(frozen=True)
class Quota:
    """A limit that spans runs (see the module).

    Attributes:
        name: what the quota is called (in reasons, counters, ``agentcore usage``).
        limit: the most the counter may hold in one window (> 0, finite, at most
            :data:`MAX_LIMIT`).
        count: what is counted: ``"calls"`` (1 a call), ``"sum:<argument>"`` (a tool
            argument's value: a finite number >= 0, else the call is refused), ``"tokens"``
            or ``"cost"`` (of model requests).
        tools: the tools whose calls count (names, or ``"label:<label>"``); empty: every
            tool. Not used for tokens and cost.
        per: what the counter is kept per, beside the tenant: ``"run"`` (a conversation,
            its sub-agents' runs included), ``"tool"``, or the name of a value bound to the
            run (a ``metadata`` key, as ``FromRun`` reads it). Empty: one counter per
            tenant. **Every counter is kept per tenant** (one tenant's use never counts
            against or unlocks another's, even for a customer id both use), unless
            ``shared``.
        shared: one counter for all tenants (a limit of an upstream service everyone
            shares); its counters belong to no tenant.
        window: ``"hour"`` and ``"day"`` (UTC calendar windows), ``"run"`` (the run's life),
            ``"all"`` (never resets).
        over: what happens to a call over the limit: ``"refuse"``, ``"confirm"`` or
            ``"attention"`` (tokens and cost: the run stops as ``budget_exhausted``).

    Raises:
        ConfigurationError: a bad name, limit (negative, zero, NaN, infinite, huge), count,
            tool, key or window: at construction, before any run.
    """

    name: str
    limit: float
    count: QuotaCount = "calls"
    tools: tuple[str, ...] = ()
    per: tuple[str, ...] = ()
    window: QuotaWindow = "day"
    over: QuotaOver = "refuse"
    shared: bool = False

    def __post_init__(self) -> None:
        _checked_name(self.name, "A quota's name")
        limit: object = self.limit
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int | float)  # pyright: ignore[reportUnnecessaryIsInstance]  # user input
            or not math.isfinite(limit)
            or limit <= 0
            or limit > MAX_LIMIT
        ):
            raise ConfigurationError(
                f"quota {self.name!r}: limit must be a finite number > 0 and at most "
                f"{MAX_LIMIT:g}, got {limit!r}"
            )
        count = cast("object", self.count)  # user input
        known = isinstance(count, str) and (
            count in ("calls", "tokens", "cost")
            or (count.startswith("sum:") and count[4:].isidentifier())
        )
        if not known:
            raise ConfigurationError(
                f"quota {self.name!r}: count must be 'calls', 'tokens', 'cost' or "
                f"'sum:<argument>', got {count!r}"
            )
        for kind, values in (("tools", self.tools), ("per", self.per)):
            if isinstance(values, str) or not isinstance(values, tuple):  # pyright: ignore[reportUnnecessaryIsInstance]  # user input
                raise ConfigurationError(
                    f"quota {self.name!r}: {kind} must be a tuple of names, got {values!r}"
                )
            for value in values:
                _checked_name(value, f"quota {self.name!r}'s {kind} entry")
            if len(set(values)) != len(values):
                raise ConfigurationError(f"quota {self.name!r}: {kind} repeats a name")
        if not isinstance(self.shared, bool):  # pyright: ignore[reportUnnecessaryIsInstance]  # user input
            raise ConfigurationError(f"quota {self.name!r}: shared must be True or False")
        if self.shared and "tenant" in self.per:
            raise ConfigurationError(
                f"quota {self.name!r} is shared by all tenants: it cannot be kept per tenant"
            )
        if self.window not in _WINDOWS:
            raise ConfigurationError(
                f"quota {self.name!r}: window must be one of {', '.join(_WINDOWS)}, "
                f"got {self.window!r}"
            )
        if self.over not in _OVER:
            raise ConfigurationError(
                f"quota {self.name!r}: over must be one of {', '.join(_OVER)}, got {self.over!r}"
            )
        if self.counts_requests and (self.tools or "tool" in self.per):
            raise ConfigurationError(
                f"quota {self.name!r} counts {self.count} of model requests: tools and "
                "per=('tool',) do not apply"
            )

    @property
    def counts_requests(self) -> bool:
        """It counts model requests (tokens or cost), not tool calls."""
        return self.count in ("tokens", "cost")

    @property
    def argument(self) -> str | None:
        """The argument a ``sum:`` quota adds up."""
        return self.count[4:] if self.count.startswith("sum:") else None

    def bound_keys(self) -> tuple[str, ...]:
        """The run-bound values (``metadata`` keys) the counter is kept per."""
        return tuple(p for p in self.per if p not in _SPECIAL_PER)

    def counts(self, tool: Tool) -> bool:
        """Whether a call of ``tool`` counts against this quota."""
        if self.counts_requests:
            return False
        if not self.tools:
            return True
        return tool.name in self.tools or any(
            t.startswith("label:") and t[6:] in tool.labels for t in self.tools
        )

    def window_of(self, now: float) -> tuple[str, float | None]:
        """The window ``now`` falls in: its name and when it closes (``None``: never)."""
        match self.window:
            case "hour":
                start = math.floor(now / 3600) * 3600
                return time.strftime("hour:%Y-%m-%dT%H", time.gmtime(start)), start + 3600.0
            case "day":
                day = time.gmtime(now)
                start = calendar.timegm((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0))
                return time.strftime("day:%Y-%m-%d", day), start + 86400.0
            case "run" | "all":
                return self.window, None

    def charge(self, state: RunState, tool: str | None, amount: float, now: float) -> Charge:
        """The charge of ``amount`` to this quota's counter for ``state``'s run (a call of
        ``tool``, or a model request when ``None``), checked against the limit."""
        from .events import Charge

        window, ends = self.window_of(now)
        parts: list[list[Any]] = [] if self.shared else [["tenant", state.tenant]]  # Any: JSON
        for part in self.per:
            match part:
                case "tenant":  # always, unless shared
                    pass
                case "run":
                    parts.append([part, root_run(state)])
                case "tool":
                    parts.append([part, tool])
                case _:
                    parts.append([part, state.metadata.get(part)])
        if self.window == "run":
            window = f"run:{root_run(state)}"
        return Charge(
            quota=self.name,
            key=canonical_json([self.name, parts, window]),
            amount=amount,
            limit=self.limit,
            window_end=ends,
            tenant=None if self.shared else state.tenant,
        )


def counter_parts(key: str) -> tuple[list[tuple[str, object]], str] | None:
    """A counter's key (canonical JSON ``[name, [[part, value], ...], window]``, as
    :meth:`Quota.charge` makes it) as what it is kept per and its window; ``None`` for a
    key of another shape."""
    try:
        _, parts, window = json.loads(key)
        per = [(str(p), v) for p, v in parts]
    except (ValueError, TypeError):
        return None
    return per, str(window)


def counter_words(key: str) -> str:
    """What a counter is kept per and its window, in words (``per customer_id=C1, day
    2026-05-04``), as a run's reasons, ``agentcore usage`` and the console say it."""
    found = counter_parts(key)
    if found is None:
        return key
    per, window = found
    kept = ", ".join(f"{p}={v}" for p, v in per if (p, v) != ("tenant", None)) or "everyone"
    return f"per {kept}, {window.replace(':', ' ', 1)}"


def root_run(state: RunState) -> str:
    """The run a ``per=("run",)`` or ``window="run"`` counter is kept for: the run tree's
    root (a sub-agent's run counts in its parent's), else the run itself."""
    return root_of(state.run_id, state.metadata)


def check_quotas(quotas: Sequence[Quota]) -> tuple[Quota, ...]:
    """``Agent(quotas=...)``, checked.

    Raises:
        ConfigurationError: not quotas, or two with one name.
    """
    found: dict[str, Quota] = {}
    for q in quotas:
        if not isinstance(q, Quota):  # pyright: ignore[reportUnnecessaryIsInstance]  # user input
            raise ConfigurationError(f"quotas= takes Quota objects, got {q!r}")
        if q.name in found:
            raise ConfigurationError(
                f"Two quotas are named {q.name!r}; quota names must be unique."
            )
        found[q.name] = q
    return tuple(found.values())
