"""Quotas in a run (``agentcore.quotas``): what a call or a model request charges, what is
over a limit and what happens then, and what is given back.

Pure but for the store reads the driver makes with them: the store applies the charges in
the append that records them (``stores._quota``); these functions only say which.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentcore.contracts import ToolAction
from agentcore.contracts.errors import ConfigurationError

from .._dispatch import Ruling
from .._state import OpenCall, RunState, RunStatus
from ..events import (
    Charge,
    CompensationFinished,
    Confirmation,
    Event,
    RunFinished,
    ToolFinished,
)
from ..quotas import Quota, QuotaOver, counter_words
from ..tools import Tool

__all__ = [
    "REQUEST_OUTPUT_ESTIMATE",
    "QuotaCheck",
    "call_charges",
    "charge_approvals",
    "over",
    "over_ruling",
    "released",
    "request_charges",
]

_RANK: Mapping[QuotaOver, int] = {"confirm": 0, "attention": 1, "refuse": 2}

REQUEST_OUTPUT_ESTIMATE = 4_096
"""The reply's tokens counted before a request whose cap is the adapter's default."""


@dataclass(frozen=True, slots=True)
class QuotaCheck:
    """A call's charges, or why it cannot be charged (a ``sum:`` argument that is not a
    finite number >= 0)."""

    charges: tuple[Charge, ...] = ()
    refused: str | None = None


def call_charges(
    quotas: Sequence[Quota],
    state: RunState,
    call: OpenCall,
    tools: Mapping[str, Tool],
    now: float,
    args: Mapping[str, object] | None = None,
) -> QuotaCheck:
    """What ``call`` charges to the quotas that count it, at ``now`` (with ``args``: as it
    runs with them, a person's edit)."""
    action = call.action
    if not isinstance(action, ToolAction) or action.tool not in tools:
        return QuotaCheck()
    tool = tools[action.tool]
    args = call.run_args() if args is None else args
    charges: list[Charge] = []
    for quota in quotas:
        if not quota.counts(tool):
            continue
        amount = 1.0
        name = quota.argument
        if name is not None:
            value: object = args.get(name, 0)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                return QuotaCheck(
                    refused=f"quota {quota.name!r} adds up {name!r}, which must be a number >= 0: "
                    f"got {value!r}"
                )
            amount = float(value)
        charges.append(quota.charge(state, tool.name, amount, now))
    return QuotaCheck(tuple(charges))


def request_charges(
    quotas: Sequence[Quota], state: RunState, tokens: int, cost: float | None, now: float
) -> list[Charge]:
    """A model request's tokens and cost charged to the quotas that count them (recorded
    with what it used: never refused, it was spent)."""
    out: list[Charge] = []
    for quota in quotas:
        amount = tokens if quota.count == "tokens" else cost if quota.count == "cost" else None
        if amount:
            out.append(
                quota.charge(state, None, float(amount), now).model_copy(update={"limit": None})
            )
    return out


def over(charges: Sequence[Charge], used: Mapping[str, float]) -> list[tuple[Charge, float]]:
    """The charges that would pass their limit, with what their counter holds (charges to
    one counter add up)."""
    adding: dict[str, float] = {}
    found: list[tuple[Charge, float]] = []
    for charge in charges:
        held = used.get(charge.key, 0.0) + adding.get(charge.key, 0.0)
        adding[charge.key] = adding.get(charge.key, 0.0) + charge.amount
        if charge.limit is not None and held + charge.amount > charge.limit + 1e-9:
            found.append((charge, held))
    return found


def over_ruling(
    quotas: Sequence[Quota], passing: Sequence[tuple[Charge, float]], tool: str
) -> tuple[Ruling, QuotaOver]:
    """What happens to a call of ``tool`` whose ``passing`` charges are over their limits:
    the strictest of their quotas' ``over`` (refuse, then attention, then confirm)."""
    by_name = {q.name: q for q in quotas}
    parts: list[str] = []
    strictest: QuotaOver = "confirm"
    for charge, held in passing:
        quota = by_name[charge.quota]
        if _RANK[quota.over] > _RANK[strictest]:
            strictest = quota.over
        parts.append(
            f"quota {charge.quota!r} ({counter_words(charge.key)}): {held:g} of {charge.limit:g} "
            f"used, and this call adds {charge.amount:g}"
        )
    why = f"tool {tool!r} is over its quota: " + "; ".join(parts)
    match strictest:
        case "refuse":
            return Ruling("deny", f"{why}. It cannot run now; do without it or finish."), strictest
        case "attention":
            return Ruling("deny", why), strictest
        case "confirm":
            return Ruling(
                "needs_confirmation", f"{why}: a person may let this call pass"
            ), strictest


def charge_approvals(
    events: Sequence[Event],
    state: RunState,
    quotas: Sequence[Quota],
    tools: Mapping[str, Tool],
    now: float,
) -> list[Event]:
    """``events`` (a person's answer to the waiting call) with what an approval charges:
    the quotas that count the call, as it runs (edited arguments included); those its
    decision found over their limits are let pass by the approver (no limit,
    ``lifted_by``), for this call only.

    Raises:
        ConfigurationError: the arguments as approved give a ``sum:`` quota no number.
    """
    call = state.call
    out: list[Event] = []
    for ev in events:
        if isinstance(ev, Confirmation) and ev.approved and call is not None:
            check = call_charges(quotas, state, call, tools, now, ev.args)
            if check.refused is not None:
                raise ConfigurationError(f"{check.refused}; nothing was recorded")
            lifted = set(call.decision.over_quota) if call.decision is not None else set[str]()
            charges = [
                c.model_copy(update={"limit": None, "lifted_by": ev.by}) if c.quota in lifted else c
                for c in check.charges
            ]
            if charges:
                out.append(ev.model_copy(update={"charges": charges}))
                continue
        out.append(ev)
    return out


def released(state: RunState, event: Event) -> tuple[str, list[Charge], str] | None:
    """What ``event`` (just folded) gives back: the call id, its charges negated, and why;
    ``None`` when it gives nothing back. A call whose outcome is unknown keeps its charge
    (its effect may have happened)."""
    match event:
        case ToolFinished(ok=False, outcome_unknown=False) if event.call_id in state.charged:
            return _back(state, event.call_id, f"{event.tool} failed")
        case CompensationFinished(outcome="undone" | "not_needed") if (
            event.call_id in state.charged
        ):
            return _back(state, event.call_id, f"{event.tool} was undone")
        case RunFinished(status=RunStatus.CANCELLED.value):
            call = state.call
            if call is not None and call.call_id in state.charged and call.started is None:
                return _back(state, call.call_id, "the run ended before it ran")
            return None
        case _:
            return None


def _back(state: RunState, call_id: str, why: str) -> tuple[str, list[Charge], str]:
    charges = [
        c.model_copy(update={"amount": -c.amount, "limit": None, "lifted_by": None})
        for c in state.charged[call_id]
    ]
    return call_id, charges, why
