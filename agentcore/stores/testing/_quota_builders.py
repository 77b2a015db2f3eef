"""Events that charge quota counters, for store tests: a charge, a call whose decision
charges it, and the release that gives a charge back."""

from __future__ import annotations

from collections.abc import Sequence

from agentcore.contracts import ToolAction
from agentcore.events import ActionProposed, Charge, Decision, Event, QuotaReleased

__all__ = ["charge", "charged_call", "released"]


def charge(
    key: str,
    amount: float,
    *,
    limit: float | None = None,
    quota: str = "refunds",
    tenant: str | None = None,
    window_end: float | None = None,
) -> Charge:
    """One charge of ``amount`` to counter ``key`` (checked against ``limit`` if given)."""
    return Charge(
        quota=quota, key=key, amount=amount, limit=limit, tenant=tenant, window_end=window_end
    )


def charged_call(
    run_id: str, seq: int, charges: Sequence[Charge], *, call_id: str | None = None
) -> list[Event]:
    """A tool call proposed at ``seq`` and its ``execute`` decision at ``seq + 1``, which
    charges ``charges``."""
    call = call_id or f"call-{seq}"
    return [
        ActionProposed(
            run_id=run_id,
            seq=seq,
            at=1.0 + seq,
            step=seq,
            call_id=call,
            action=ToolAction(thought="refund it", tool="refund", args={"amount": 1}),
        ),
        Decision(
            run_id=run_id,
            seq=seq + 1,
            at=1.5 + seq,
            step=seq,
            call_id=call,
            verdict="execute",
            charges=list(charges),
        ),
    ]


def released(run_id: str, seq: int, call_id: str, charges: Sequence[Charge]) -> QuotaReleased:
    """``call_id``'s charges given back (each ``amount`` should be negative)."""
    return QuotaReleased(
        run_id=run_id,
        seq=seq,
        at=1.0 + seq,
        call_id=call_id,
        charges=list(charges),
        reason="the call failed",
    )
