"""Events and run ids for store tests: a run's first event, context, a finish, a tool
result, a run with every event type (each member of :data:`agentcore.events.Event`), and
text that stresses an encoder."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TypedDict

from agentcore.contracts import FinishAction, PlanAction, ToolAction
from agentcore.events import (
    ActionProposed,
    Approval,
    ApprovalExpired,
    Charge,
    CompensationFinished,
    CompensationStarted,
    Confirmation,
    ContextAdded,
    Decision,
    Event,
    ModelCalled,
    QuotaReleased,
    QuotaReserved,
    Resolution,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolFinished,
    ToolStarted,
    UserMessage,
)

from ..._status import status_after

UNICODE_SAMPLES = [
    "emoji 😀👩🏽‍💻🇺🇦",
    "RTL: שלום עולם, مرحبا بالعالم",
    "a NUL \u0000 in the middle, and \u0000 twice",
    "astral plane: \U0001d518\U0001d52b\U0001d526 \U00013000 \U0010fffd 😀",
    "combining: e\u0301 a\u0308, ZWJ \u200d, BOM \ufeff, bidi \u202e override",
    "controls: \t\n\r\x1b[31m \x7f \u2028 \u2029",
    'quotes and escapes: " \\ \\u0000 </script> {"json": true}',
]

_run_numbers = itertools.count()


def fresh_run_id(prefix: str = "run") -> str:
    """A run id no other test of this process uses."""
    return f"{prefix}-{next(_run_numbers)}"


def started(
    run_id: str, *, at: float = 1.0, task: str = "do the thing", tenant: str | None = None
) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        seq=0,
        at=at,
        task=task,
        scope=["lookup", "delete_order"],
        budget={"max_steps": 10},
        policy={"plan_before_writes": False},
        contract={"hash": "sha256:abc"},
        route=["scripted/a", "scripted/b"],
        tools={"lookup": {"effect": "read", "schema": {"type": "object"}}},
        metadata={"user": "ünïcødé ✓", "n": 3, "nested": {"a": [1, None, True, 2.5]}},
        tenant=tenant,
    )


def context(
    run_id: str, seq: int, *, at: float | None = None, content: str = "ctx"
) -> ContextAdded:
    return ContextAdded(
        run_id=run_id,
        seq=seq,
        at=at if at is not None else 1.0 + seq,
        step=1,
        source="files",
        content=content,
    )


def finished(run_id: str, seq: int, status: str, *, at: float) -> RunFinished:
    return RunFinished(run_id=run_id, seq=seq, at=at, status=status, reason="for the test")


def tool_result(run_id: str, seq: int, result: object, *, at: float | None = None) -> ToolFinished:
    return ToolFinished.model_validate(
        {
            "run_id": run_id,
            "seq": seq,
            "at": at if at is not None else 1.0 + seq,
            "step": 1,
            "call_id": "c1",
            "tool": "lookup",
            "ok": True,
            "result": result,
        }
    )


class _Stamp(TypedDict):
    """What every event carries: its run, its place in the run and its time."""

    run_id: str
    seq: int
    at: float


def _stamps(run_id: str, *, first_seq: int = 0) -> Callable[[float], _Stamp]:
    """Numbers a run's events in the order they are built: each call gives the next seq, at
    the time given (``Event(**stamp(2.5), ...)``)."""
    seqs = itertools.count(first_seq)
    return lambda at: {"run_id": run_id, "seq": next(seqs), "at": at}


def every_event_type(run_id: str) -> list[Event]:
    """A run that walks through every event type (:data:`agentcore.events.EVENT_TYPES`), with
    non-default optional fields, in an order the state fold accepts and
    :func:`~agentcore.check_transcript` finds sound; its status moves through every value
    but ``failed``: awaiting a person, needing attention, out of budget, completed, then
    cancelled by the compensation of a call."""
    stamp = _stamps(run_id, first_seq=1)
    return [
        started(run_id),
        ContextAdded(**stamp(2.5), step=1, source="files", content="a\nb"),
        ModelCalled(
            **stamp(3.25),
            step=1,
            model="scripted/a",
            outcome="invalid",
            attempts=2,
            input_tokens=100,
            output_tokens=20,
            cached_input_tokens=50,
            cost=0.00123,
            latency_ms=812.5,
            finish_reason="stop",
            response_id="resp_1",
            reply="{not json",
            error="bad reply",
        ),
        ActionProposed(
            **stamp(4.0),
            step=1,
            call_id="c1",
            action=PlanAction(thought="plan it", steps=["look", "delete"]),
        ),
        Decision(**stamp(4.25), step=1, call_id="c1", verdict="execute"),
        ActionProposed(
            **stamp(4.5),
            step=2,
            call_id="c2",
            action=ToolAction(thought="delete it", tool="delete_order", args={"id": "A1"}),
        ),
        Decision(
            **stamp(4.75),
            step=2,
            call_id="c2",
            verdict="needs_confirmation",
            reason="destructive",
            args_hash="h1",
        ),
        RunFinished(**stamp(5.0), status="awaiting_confirmation"),
        Confirmation(
            **stamp(5.5),
            step=2,
            call_id="c2",
            approved=True,
            by="alice",
            reason="ok",
            args={"id": "A2"},
            args_hash="h2",
        ),
        ToolStarted(
            **stamp(6.0),
            step=2,
            call_id="c2",
            tool="delete_order",
            args={"id": "A2"},
            idempotency_key=f"{run_id}:c2",
        ),
        RunFinished(**stamp(6.5), status="needs_attention", reason="outcome lost"),
        Resolution(
            **stamp(7.0),
            step=2,
            call_id="c2",
            decision="rerun",
            by="bob",
            reason="it did not happen",
        ),
        ToolFinished(
            **stamp(7.5),
            step=2,
            call_id="c2",
            tool="delete_order",
            ok=False,
            result={"partial": [1, 2.5, "x", None]},
            error="EIO",
            duration_ms=12.5,
        ),
        RunFinished(**stamp(8.0), status="budget_exhausted", reason="steps"),
        RunResumed(**stamp(8.5), budget={"max_steps": 20}, by="carol"),
        ActionProposed(
            **stamp(9.0),
            step=3,
            call_id="c3",
            action=ToolAction(thought="order it", tool="create_order", args={"id": "B1"}),
        ),
        Decision(
            **stamp(9.25),
            step=3,
            call_id="c3",
            verdict="needs_confirmation",
            reason="two people approve orders",
            args_hash="h3",
            approvals_needed=2,
            provenance={"/id": "model"},
            over_quota=["orders-per-day"],
        ),
        RunFinished(**stamp(9.5), status="awaiting_confirmation"),
        ApprovalExpired(
            **stamp(3609.5), step=3, call_id="c3", action="escalate", waited_s=3600.0, escalations=1
        ),
        Approval(
            **stamp(3610.0),
            step=3,
            call_id="c3",
            by="alice",
            reason="looks right",
            args={"id": "B2"},
            args_hash="h4",
        ),
        Confirmation(
            **stamp(3610.5),
            step=3,
            call_id="c3",
            approved=True,
            by="bob",
            args_hash="h4",
            approvers=["alice", "bob"],
            charges=[
                Charge(
                    quota="orders-per-day",
                    key='["orders-per-day",[["tenant","acme"]],"day:1970-01-01"]',
                    amount=1.0,
                    window_end=86400.0,
                    tenant="acme",
                    lifted_by="bob",
                )
            ],
        ),
        ToolStarted(
            **stamp(3611.0),
            step=3,
            call_id="c3",
            tool="create_order",
            args={"id": "B2"},
            idempotency_key=f"{run_id}:c3",
            guarded=True,
            bound={"tenant": "acme"},
        ),
        ToolFinished(
            **stamp(3611.5),
            step=3,
            call_id="c3",
            tool="create_order",
            ok=True,
            result={"order": "B2", "lines": ["ünïcødé ✓", 2.5, None]},
            duration_ms=40.0,
            untrusted=True,
        ),
        ActionProposed(
            **stamp(3612.0),
            step=4,
            call_id="c4",
            action=FinishAction(thought="done", answer="the answer"),
        ),
        RunFinished(**stamp(3612.5), status="completed", answer="the answer"),
        UserMessage(
            **stamp(3650.0),
            turn=2,
            text="And the other one? ✓",
            key="req-2",
            budget={"max_steps": 5},
        ),
        QuotaReserved(
            **stamp(3650.5),
            step=5,
            charges=[
                Charge(
                    quota="tokens",
                    key='["tokens",[["tenant","acme"]],"day:1970-01-01"]',
                    amount=4_200.0,
                    limit=2_000_000.0,
                    window_end=86400.0,
                    tenant="acme",
                )
            ],
        ),
        ActionProposed(
            **stamp(3651.0),
            step=5,
            call_id="c5",
            action=FinishAction(thought="same", answer="the second answer"),
        ),
        Decision(**stamp(3651.25), step=5, call_id="c5", verdict="execute"),
        RunFinished(**stamp(3651.5), status="completed", answer="the second answer"),
        CompensationStarted(
            **stamp(3700.0),
            step=3,
            call_id="c3",
            tool="create_order",
            idempotency_key=f"{run_id}:c3:undo",
            by="dave",
            guarded=True,
        ),
        CompensationFinished(
            **stamp(3700.5),
            step=3,
            call_id="c3",
            tool="create_order",
            outcome="undone",
            result={"cancelled": "B2"},
            duration_ms=25.0,
        ),
        QuotaReleased(
            **stamp(3700.75),
            call_id="c3",
            charges=[
                Charge(
                    quota="orders-per-day",
                    key='["orders-per-day",[["tenant","acme"]],"day:1970-01-01"]',
                    amount=-1.0,
                    window_end=86400.0,
                    tenant="acme",
                )
            ],
            reason="create_order was undone",
        ),
        RunFinished(
            **stamp(3701.0), status="cancelled", reason="compensated by dave: create_order undone"
        ),
    ]


def folded_status(events: Sequence[Event]) -> str:
    """The status a run has after ``events``: :func:`status_after` folded over them, as the
    run's state and the stores' listings compute it."""
    status = "running"
    for ev in events:
        status = status_after(status, ev)
    return status
