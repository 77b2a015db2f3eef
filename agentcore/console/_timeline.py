"""A run's transcript as the console shows it: blocks of entries, one block per step.

Each event becomes one :class:`Entry` (what happened, in words, and its details); entries
of one step are grouped in a :class:`StepBlock` that totals the step's tokens, cost and
latency and names its model and mode. Events outside a step (the start, a resume, the
end) form blocks of their own, in transcript order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from agentcore import UNDO_SUFFIX, RunState, RunStatus
from agentcore import events as evt
from agentcore.contracts import AskAction, BatchAction, FinishAction, PlanAction, ToolAction

__all__ = ["Entry", "StepBlock", "TurnView", "conversation", "timeline"]


@dataclass(slots=True)
class Entry:
    """One event, in words.

    Attributes:
        seq: the event's seq.
        kind: its type (``action_proposed``, ...), for styling.
        title: one line saying what happened.
        thought: the model's stated reason (actions only).
        details: label and text pairs (JSON values pretty-printed).
        tone: ``ok``, ``bad``, ``wait`` or ``""``.
    """

    seq: int
    kind: str
    title: str
    thought: str | None = None
    details: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    tone: str = ""


@dataclass(slots=True)
class StepBlock:
    """The entries of one step (``step`` ``None``: events outside a step)."""

    step: int | None
    entries: list[Entry] = field(default_factory=list[Entry])
    continued: bool = False
    """The step began in an earlier block (it waited for a person in between)."""
    models: list[str] = field(default_factory=list[str])
    modes: list[str] = field(default_factory=list[str])
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    latency_ms: float = 0.0


def pretty(value: Any) -> str:  # Any: a JSON value from the transcript
    """A JSON value for people: strings as they are, everything else indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def timeline(events: Sequence[evt.Event]) -> list[StepBlock]:
    """The transcript as blocks, in order."""
    blocks: list[StepBlock] = []
    for ev in events:
        step = getattr(ev, "step", None)
        step = step if isinstance(step, int) else None
        if not blocks or blocks[-1].step != step or step is None:
            seen = any(b.step == step for b in blocks) and step is not None
            blocks.append(StepBlock(step, continued=seen))
        block = blocks[-1]
        if isinstance(ev, evt.ModelCalled):
            _count(block, ev)
        block.entries.append(entry(ev))
    return blocks


def _count(block: StepBlock, ev: evt.ModelCalled) -> None:
    if ev.model not in block.models:
        block.models.append(ev.model)
    if ev.mode not in block.modes:
        block.modes.append(ev.mode)
    block.input_tokens += ev.input_tokens
    block.output_tokens += ev.output_tokens
    block.latency_ms += ev.latency_ms
    if ev.cost is not None:
        block.cost = (block.cost or 0.0) + ev.cost


def entry(ev: evt.Event) -> Entry:
    """One event in words."""
    match ev:
        case evt.RunStarted():
            details = [
                ("task", ev.task),
                ("scope", ", ".join(ev.scope) or "(none)"),
                (
                    "contract",
                    f"v{ev.contract.get('version', '?')} ({ev.contract.get('hash', '?')})",
                ),
                ("route", ", ".join(ev.route)),
                ("budget", pretty(ev.budget)),
            ]
            if ev.tenant is not None:
                details.append(("tenant", ev.tenant))
            if ev.metadata:
                details.append(("metadata", pretty(ev.metadata)))
            return Entry(ev.seq, ev.type, "run started", details=details)
        case evt.ContextAdded():
            return Entry(ev.seq, ev.type, f"context from {ev.source}", details=[("", ev.content)])
        case evt.ModelCalled():
            details = [
                ("model", f"{ev.model} ({ev.role}, {ev.mode})"),
                ("tokens", f"{ev.input_tokens} in, {ev.output_tokens} out"),
                ("latency", f"{ev.latency_ms:.0f} ms, {ev.attempts} attempt(s)"),
            ]
            if ev.cost is not None:
                details.append(("cost", f"${ev.cost:.6f}"))
            if ev.error:
                details.append(("error", ev.error))
            if ev.reply:
                details.append(("reply", ev.reply))
            tone = {"ok": "", "invalid": "bad", "error": "bad"}[ev.outcome]
            title = f"model {ev.model}: {'valid action' if ev.outcome == 'ok' else ev.outcome}"
            return Entry(ev.seq, ev.type, title, details=details, tone=tone)
        case evt.ActionProposed(action=action):
            match action:
                case PlanAction():
                    return Entry(
                        ev.seq,
                        ev.type,
                        f"plan ({ev.call_id})",
                        action.thought,
                        [(f"{i}.", s) for i, s in enumerate(action.steps, 1)],
                    )
                case ToolAction():
                    return Entry(
                        ev.seq,
                        ev.type,
                        f"tool {action.tool} ({ev.call_id})",
                        action.thought,
                        [("args", pretty(action.args))],
                    )
                case FinishAction():
                    return Entry(
                        ev.seq, ev.type, "finish", action.thought, [("answer", action.answer)]
                    )
                case AskAction():
                    return Entry(
                        ev.seq,
                        ev.type,
                        "question for the user",
                        action.thought,
                        [("question", action.question)],
                        tone="wait",
                    )
                case BatchAction():
                    return Entry(
                        ev.seq,
                        ev.type,
                        f"batch of {len(action.calls)} reads ({ev.call_id})",
                        action.thought,
                        [
                            (f"{ev.call_id}.{i}", f"{c.tool} {pretty(c.args)}")
                            for i, c in enumerate(action.calls, 1)
                        ],
                    )
        case evt.Decision():
            tone = {"execute": "ok", "deny": "bad", "needs_plan": "bad"}.get(ev.verdict, "wait")
            details = [("why", ev.reason)] if ev.reason else []
            if ev.rule:
                details.append(("rule", ev.rule))
            if ev.args_hash:
                details.append(("args hash", ev.args_hash))
            return Entry(ev.seq, ev.type, f"dispatcher: {ev.verdict}", details=details, tone=tone)
        case evt.Confirmation():
            verb = "approved" if ev.approved else "denied"
            details = [("reason", ev.reason)] if ev.reason else []
            if ev.args is not None:
                details.append(("edited args", pretty(ev.args)))
            if ev.args_hash:
                details.append(("args hash", ev.args_hash))
            if ev.accepted_tool_changes:
                details.append(("accepted tool changes", "; ".join(ev.accepted_tool_changes)))
            tone = "ok" if ev.approved else "bad"
            who = ", ".join(ev.approvers) if ev.approvers else ev.by
            return Entry(ev.seq, ev.type, f"{verb} by {who}", details=details, tone=tone)
        case evt.Approval():
            details = [("reason", ev.reason)] if ev.reason else []
            if ev.args is not None:
                details.append(("edited args", pretty(ev.args)))
            what = "its undo " if ev.call_id.endswith(UNDO_SUFFIX) else ""
            title = f"{what}approved by {ev.by}; more approvals needed"
            return Entry(ev.seq, ev.type, title, details=details, tone="wait")
        case evt.CompensationStarted():
            details = [("by", ev.by), ("idempotency key", ev.idempotency_key)]
            return Entry(ev.seq, ev.type, f"undoing {ev.tool} (step {ev.step})", details=details)
        case evt.CompensationFinished():
            details = [("reason", ev.reason)] if ev.reason else []
            if ev.error:
                details.append(("error", ev.error))
            elif ev.result is not None:
                details.append(("result", pretty(ev.result)))
            title = {
                "undone": f"{ev.tool} undone",
                "failed": f"undoing {ev.tool} failed",
                "not_needed": f"{ev.tool}: nothing to undo",
            }[ev.outcome]
            tone = "bad" if ev.outcome == "failed" else "ok"
            return Entry(ev.seq, ev.type, title, details=details, tone=tone)
        case evt.ApprovalExpired():
            what = "denied" if ev.action == "deny" else f"escalated (time {ev.escalations})"
            title = f"no approval after {ev.waited_s:.0f}s: {what}"
            return Entry(ev.seq, ev.type, title, tone="bad" if ev.action == "deny" else "wait")
        case evt.ToolStarted():
            details = [("args", pretty(ev.args)), ("idempotency key", ev.idempotency_key)]
            return Entry(ev.seq, ev.type, f"{ev.tool} started", details=details)
        case evt.ToolFinished():
            details = [("duration", f"{ev.duration_ms:.0f} ms")]
            if ev.ok:
                details.insert(0, ("result", pretty(ev.result)))
            else:
                details.insert(0, ("error", ev.error or ""))
            if ev.result_bytes is not None:
                details.append(("truncated", f"{ev.result_bytes} bytes, sha256 {ev.result_sha256}"))
            title = f"{ev.tool} {'returned' if ev.ok else 'failed'}"
            return Entry(ev.seq, ev.type, title, details=details, tone="ok" if ev.ok else "bad")
        case evt.RunResumed():
            details = [("by", ev.by)] if ev.by else []
            if ev.budget is not None:
                details.append(("budget", pretty(ev.budget)))
            title = "resumed after a worker died" if ev.recovery else "resumed"
            return Entry(ev.seq, ev.type, title, details=details)
        case evt.Resolution():
            details = [("reason", ev.reason)] if ev.reason else []
            return Entry(ev.seq, ev.type, f"resolved ({ev.decision}) by {ev.by}", details=details)
        case evt.QuotaReserved():
            details = [(c.quota, f"{c.amount:g} reserved") for c in ev.charges]
            return Entry(ev.seq, ev.type, "quota reserved for a model request", details=details)
        case evt.QuotaReleased():
            details = [(c.quota, f"{-c.amount:g} given back") for c in ev.charges]
            details.append(("why", ev.reason))
            return Entry(ev.seq, ev.type, f"quota given back ({ev.call_id})", details=details)
        case evt.UserMessage():
            details = [("message", ev.text)]
            if ev.key is not None:
                details.append(("idempotency key", ev.key))
            if ev.budget is not None:
                details.append(("budget", pretty(ev.budget)))
            return Entry(ev.seq, ev.type, f"turn {ev.turn}: the user says", details=details)
        case evt.RunFinished():
            details = [("answer", ev.answer)] if ev.answer else []
            if ev.reason:
                details.append(("reason", ev.reason))
            tone = {"completed": "ok", "awaiting_confirmation": "wait", "awaiting_input": "wait"}
            tone = tone.get(ev.status, "bad")
            return Entry(ev.seq, ev.type, f"run {ev.status}", details=details, tone=tone)
        case _:
            raise evt.unhandled_event(ev, "the console's timeline")


@dataclass(frozen=True, slots=True)
class Relative:
    """A run linked to the one shown: its parent, or a sub-agent's run it started."""

    run_id: str
    label: str


def family(events: Sequence[evt.Event]) -> tuple[Relative | None, list[Relative]]:
    """The run's parent (a sub-agent's run records it in ``run_started.metadata``) and the
    sub-agent runs it started: each sub-agent call's tokens are recorded as a
    ``model_called`` of role ``child`` beside the call's ``tool_started``, whose
    idempotency key names the child run."""
    from agentcore import PARENT_KEY, child_run_id

    parent: Relative | None = None
    first = events[0] if events else None
    link: Any = (
        first.metadata.get(PARENT_KEY) if isinstance(first, evt.RunStarted) else None
    )  # Any: JSON
    if isinstance(link, dict) and isinstance(link.get("run_id"), str):  # pyright: ignore[reportUnknownMemberType]  # JSON
        where = cast("dict[str, Any]", link)  # Any: JSON
        parent = Relative(
            str(where["run_id"]), f"call {where.get('call_id')} at step {where.get('step')}"
        )
    started = {(ev.step, ev.tool): ev for ev in events if isinstance(ev, evt.ToolStarted)}
    children: list[Relative] = []
    for ev in events:
        if isinstance(ev, evt.ModelCalled) and ev.role == "child" and ev.model.startswith("agent:"):
            name = ev.model.removeprefix("agent:")
            call = started.get((ev.step, name))
            if call is not None:
                child = child_run_id(call.idempotency_key, name)
                if all(c.run_id != child for c in children):
                    children.append(Relative(child, f"{name}, step {ev.step}"))
    return parent, children


@dataclass(frozen=True, slots=True)
class TurnView:
    """One turn of a run's conversation as the run page shows it.

    Attributes:
        number: 1 for the task, then one per reply.
        message: what the user said (the task, for turn 1).
        status: how the turn ended (the run's status for the latest turn).
        answer: the turn's answer, when it completed.
        question: the model's question for the user, when the turn ended with one.
        reason: why it stopped otherwise.
        seq: the seq of the event that began it (a link into the timeline).
        people: what people decided during the turn, in order: the seq of each decision
            (a link into the timeline) and what it says.
    """

    number: int
    message: str
    status: str
    answer: str | None
    question: str | None
    reason: str | None
    seq: int
    people: list[tuple[int, str]]


def conversation(events: Sequence[evt.Event]) -> list[TurnView]:
    """The run's turns in order (the task, then each reply), each with what people decided
    on its calls: approvals, denials, settled calls."""
    turns = RunState.of(events).result().turns
    tools = {
        ev.call_id: ev.action.tool
        for ev in events
        if isinstance(ev, evt.ActionProposed) and isinstance(ev.action, ToolAction)
    }
    views: list[TurnView] = []
    for i, turn in enumerate(turns):
        end = turns[i + 1].seq if i + 1 < len(turns) else None
        people = [
            (ev.seq, said)
            for ev in events
            if ev.seq > turn.seq and (end is None or ev.seq < end)
            if (said := _decided(ev, tools)) is not None
        ]
        asked = turn.status is RunStatus.AWAITING_INPUT
        views.append(
            TurnView(
                turn.number,
                turn.message,
                turn.status.value,
                turn.answer,
                turn.reason if asked else None,
                None if asked else turn.reason,
                turn.seq,
                people,
            )
        )
    return views


def _decided(ev: evt.Event, tools: dict[str, str]) -> str | None:
    """What a person decided in ``ev``, in words, or ``None`` for an event of no person."""
    match ev:
        case evt.Confirmation():
            what = f"step {ev.step}" + (f" ({tools[ev.call_id]})" if ev.call_id in tools else "")
            verb = "approved" if ev.approved else "denied"
            return f"{ev.by} {verb} {what}" + (f": {ev.reason}" if ev.reason else "")
        case evt.Approval():
            what = f"step {ev.step}" + (f" ({tools[ev.call_id]})" if ev.call_id in tools else "")
            return f"{ev.by} approved {what}; it waited for more people"
        case evt.Resolution():
            return f"{ev.by} settled step {ev.step}: {ev.decision}"
        case _:
            return None
