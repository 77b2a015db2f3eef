"""A run's transcript on the command line: one line per event (``agentcore show``), and
a run shown live as it happens."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator

from rich.live import Live
from rich.table import Table
from rich.text import Text

from agentcore import (
    PAUSE,
    UNDO_SUFFIX,
    RunEnded,
    RunResult,
    RunStatus,
    StreamEvent,
    ThoughtDelta,
)
from agentcore import events as evt
from agentcore.contracts import (
    AskAction,
    BatchAction,
    FinishAction,
    NextAction,
    PlanAction,
    ToolAction,
)

from ._common import EXIT_INTERRUPTED, Interrupted, err, out, plain, print_rows, resume_command

__all__: list[str] = []  # private: see agentcore.cli


def action_detail(action: NextAction) -> str:
    match action:
        case PlanAction(steps=steps):
            return " | ".join(steps)
        case ToolAction(tool=name, args=args):
            return f"{name} {json.dumps(args)}"
        case FinishAction(answer=answer):
            return answer
        case BatchAction(calls=calls):
            return " | ".join(f"{c.tool} {json.dumps(c.args)}" for c in calls)
        case AskAction(question=question):
            return question


def describe(ev: evt.Event, *, full: bool = False) -> tuple[str, str]:
    """(step, text) for one event in the transcript table (``full``: nothing shortened)."""
    cap = None if full else 120
    match ev:
        case evt.RunStarted():
            return (
                "",
                f"task: {ev.task}  scope: {', '.join(ev.scope)}  "
                f"contract: {ev.contract.get('hash')}",
            )
        case evt.ContextAdded():
            return str(ev.step), f"{ev.source}: {ev.content[:cap]}"
        case evt.ModelCalled():
            tokens = f"{ev.input_tokens}+{ev.output_tokens} tokens"
            if ev.role == "extract":
                tokens = f"extraction, {tokens}"
            elif ev.role == "child":
                tokens = f"sub-agent, {tokens}"
            extra = f"  {ev.error}" if ev.error else ""
            return str(
                ev.step
            ), f"{ev.model}: {ev.outcome}, {tokens}, {ev.latency_ms:.1f} ms{extra}"
        case evt.ActionProposed():
            a = ev.action
            detail = action_detail(a)
            return str(ev.step), f"[{ev.call_id}] {a.type}: {detail}\n  thought: {a.thought}"
        case evt.Decision():
            by_rule = f" (rule {ev.rule})" if ev.rule else ""
            return str(ev.step), f"[{ev.call_id}] {ev.verdict}{by_rule}" + (
                f": {ev.reason}" if ev.reason else ""
            )
        case evt.Confirmation():
            verb = "approved" if ev.approved else "denied"
            edited = " (edited args)" if ev.args is not None else ""
            why = f": {ev.reason}" if ev.reason else ""
            who = ", ".join(ev.approvers) if ev.approvers else ev.by
            return str(ev.step), f"[{ev.call_id}] {verb} by {who}{edited}{why}"
        case evt.Approval():
            edited = " (edited args)" if ev.args is not None else ""
            why = f": {ev.reason}" if ev.reason else ""
            what = "undo " if ev.call_id.endswith(UNDO_SUFFIX) else ""
            line = f"[{ev.call_id}] {what}approved by {ev.by}{edited}{why} (more needed)"
            return str(ev.step), line
        case evt.CompensationStarted():
            return str(
                ev.step
            ), f"[{ev.call_id}] undoing {ev.tool} (by {ev.by})  key={ev.idempotency_key}"
        case evt.CompensationFinished():
            body = {
                "undone": "undone",
                "failed": f"undo FAILED {ev.error}",
                "not_needed": "nothing to undo",
            }[ev.outcome]
            why = f" ({ev.reason})" if ev.reason else ""
            return str(ev.step), f"[{ev.call_id}] {ev.tool}: {body}{why}"
        case evt.ApprovalExpired():
            what = "denied" if ev.action == "deny" else f"escalated ({ev.escalations})"
            return str(ev.step), f"[{ev.call_id}] no approval after {ev.waited_s:.0f}s: {what}"
        case evt.ToolStarted():
            return str(
                ev.step
            ), f"[{ev.call_id}] {ev.tool} {json.dumps(ev.args)}  key={ev.idempotency_key}"
        case evt.ToolFinished():
            body = json.dumps(ev.result) if ev.ok else f"ERROR {ev.error}"
            return str(ev.step), f"[{ev.call_id}] {ev.tool} -> {body[: None if full else 300]}"
        case evt.Resolution():
            why = f": {ev.reason}" if ev.reason else ""
            return str(ev.step), f"[{ev.call_id}] resolved by {ev.by}: {ev.decision}{why}"
        case evt.RunResumed():
            return "", "resumed" + (" with a new budget" if ev.budget else "")
        case evt.QuotaReserved():
            held = ", ".join(f"{c.quota} {c.amount:g}" for c in ev.charges)
            return str(ev.step), f"quota reserved for the request ({held})"
        case evt.QuotaReleased():
            given = ", ".join(f"{c.quota} {-c.amount:g}" for c in ev.charges)
            return "", f"[{ev.call_id}] quota given back ({given}): {ev.reason}"
        case evt.UserMessage():
            return "", f"turn {ev.turn}, the user: {ev.text[:cap]}"
        case evt.RunFinished():
            return "", f"{ev.status}: {ev.answer or ev.reason or ''}"
        case _:
            raise evt.unhandled_event(ev, "the CLI's transcript (agentcore show)")


def print_transcript(events: list[evt.Event]) -> None:
    if plain():
        print_rows(
            ("seq", "step", "event", "detail"),
            [(str(ev.seq), *_step_type_text(ev)) for ev in events],
        )
        return
    table = Table(show_lines=False, header_style="bold")
    table.add_column("seq", justify="right")
    table.add_column("step", justify="right")
    table.add_column("event")
    table.add_column("detail", overflow="fold")
    for ev in events:
        step, text = describe(ev)
        table.add_row(str(ev.seq), step, ev.type, Text(text))
    out.print(table)


def _step_type_text(ev: evt.Event) -> tuple[str, str, str]:
    step, text = describe(ev, full=True)
    return step, ev.type, text


async def live(
    stream: AsyncIterator[StreamEvent],
    *,
    agent: str | None = None,
    store: str | None = None,
    echo: bool = True,
) -> RunResult:
    """Show a run as it happens: the thought while the model writes, then each decision
    (``echo=False``: nothing, for output that must stay JSON).

    Ctrl-C (SIGINT, on the main thread) stops the run at its next safe point
    (:data:`agentcore.PAUSE`): a tool that is running finishes and its outcome is
    recorded, a model call in flight is answered and recorded, a proposed tool is not started;
    then :class:`Interrupted` is raised with the resume command (``agent`` and ``store``: the
    ``--agent`` and ``--store`` it must name). A second Ctrl-C exits at once (code 130); the
    run stays resumable once its lease expires.
    """
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    tool_running = False
    run_id: str | None = None

    def resume_hint() -> str | None:
        return resume_command(run_id, agent=agent, store=store) if run_id else None

    def on_sigint() -> None:
        if stopping.is_set():
            hint = resume_hint()
            err.print(
                "interrupted again: exiting now."
                + (f" The run is resumable (once its lease expires): {hint}" if hint else ""),
                highlight=False,
            )
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
        stopping.set()
        wait = "the running tool" if tool_running else "the step in progress"
        err.print(
            f"interrupted: stopping once {wait} is finished and recorded; Ctrl-C again exits "
            "at once.",
            highlight=False,
        )

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        handled = True
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, not Unix
        handled = False
    thought = Text()
    result: RunResult | None = None
    token = PAUSE.set(stopping)  # the run's task, created below, inherits it
    try:
        drawn = Live(thought, console=out, transient=True, refresh_per_second=20)
        with drawn if echo else contextlib.nullcontext(None) as view:
            async for ev in stream:
                if isinstance(seen := getattr(ev, "run_id", None), str):  # a transcript event
                    run_id = seen
                    tool_running = isinstance(ev, evt.ToolStarted)
                if view is None:  # not echoed: stdout carries only the command's JSON
                    if isinstance(ev, RunEnded):
                        result = ev.result
                    continue
                match ev:
                    case ThoughtDelta(step=step, text=text):
                        if not thought.plain:
                            thought.append(f"step {step} thinking: ", style="dim")
                        thought.append(text)
                        view.update(thought)
                    case (
                        evt.ActionProposed()
                        | evt.Decision()
                        | evt.ToolFinished()
                        | evt.Confirmation()
                        | evt.Resolution()
                    ):
                        if isinstance(ev, evt.ActionProposed):
                            thought = Text()
                            view.update(thought)
                        step, text = describe(ev, full=plain())
                        view.console.print(Text(f"{step:>3} {ev.type:<16} {text}"))
                    case RunEnded(result=final):
                        result = final
                    case _:
                        pass
    finally:
        PAUSE.reset(token)
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
    assert result is not None
    if stopping.is_set() and result.status is RunStatus.RUNNING:
        raise Interrupted(result.run_id, resume_hint())
    return result
