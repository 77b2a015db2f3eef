"""Transcript integrity: the invariants every stored transcript must satisfy."""

from __future__ import annotations

from collections.abc import Sequence

from . import events as evt
from ._state import COMPENSATION_ENDINGS, UNDO_SUFFIX, RunState, RunStatus
from ._status import CLOSED_STATUSES

__all__ = ["check_transcript"]


def check_transcript(events: Sequence[evt.Event]) -> list[str]:
    """Problems with a run's transcript; an empty list means it is sound.

    Checks: one run id; ``seq`` 0, 1, 2, ... with ``run_started`` first; the events fold
    into a run state; steps advance one at a time with our call ids; every ``tool_started``
    follows an ``execute`` decision, an approval or a ``rerun`` resolution for the same call,
    and every ``tool_finished`` follows a ``tool_started``; a final ``run_finished``
    (completed, cancelled) never leaves a started tool without its ``tool_finished`` (its
    outcome silently dropped); nothing follows a final ``run_finished`` but a compensation
    (``compensation_started`` of a started call, its ``compensation_finished``, and the
    ``run_finished`` that ends it) or, after a ``completed`` one, the user's next message
    (``user_message``: a new turn); no action follows a compensation.
    """
    problems: list[str] = []
    if not events:
        return ["the transcript is empty"]
    if not isinstance(events[0], evt.RunStarted):
        problems.append(f"seq 0 is {events[0].type}, not run_started")
    run_id = events[0].run_id
    state = RunState(run_id)
    last_step = 0
    cleared: set[str] = set()  # call ids allowed to start a tool
    started: set[str] = set()
    unfinished: dict[str, evt.ToolStarted] = {}  # started, outcome not recorded yet
    final_at: int | None = None
    final_status = ""
    compensating = False
    undoing: set[str] = set()  # call ids whose undo started
    for i, ev in enumerate(events):
        where = f"seq {ev.seq} ({ev.type})"
        if ev.run_id != run_id:
            problems.append(f"{where}: run id {ev.run_id!r} differs from {run_id!r}")
        if ev.seq != i:
            problems.append(f"{where}: expected seq {i}")
            break
        undo = (
            isinstance(ev, evt.CompensationStarted | evt.CompensationFinished)
            or (isinstance(ev, evt.Approval) and ev.call_id.endswith(UNDO_SUFFIX))
            or (  # a compensation's end, or its stop, with nothing to undo before it
                isinstance(ev, evt.RunFinished)
                and (ev.reason or "").startswith(COMPENSATION_ENDINGS)
            )
        )
        next_turn = (
            isinstance(ev, evt.UserMessage) and final_status == "completed" and not compensating
        )
        if next_turn:
            final_at = None
        if final_at is not None and not undo and not (compensating and ev.type == "run_finished"):
            problems.append(f"{where}: follows the final run_finished at seq {final_at}")
        if undo:
            compensating, final_at = True, None
        try:
            state.apply(ev)
        except ValueError as exc:
            problems.append(f"{where}: does not fold into the run state: {exc}")
            break
        match ev:
            case evt.ActionProposed() if compensating:
                problems.append(f"{where}: an action after the run's compensation began")
            case evt.CompensationStarted():
                if ev.call_id not in started:
                    problems.append(f"{where}: undoes {ev.call_id}, which never started")
                undoing.add(ev.call_id)
            case evt.CompensationFinished(outcome="undone" | "failed"):
                if ev.call_id not in undoing and ev.reason is None:
                    problems.append(f"{where}: no compensation_started for {ev.call_id}")
            case evt.ActionProposed():
                if ev.step != last_step + 1 or ev.call_id != f"c{ev.step}":
                    problems.append(
                        f"{where}: step {ev.step} / call {ev.call_id} after step {last_step}"
                    )
                last_step = ev.step
            case evt.Decision(verdict="execute"):
                cleared.add(ev.call_id)
            case evt.Confirmation(approved=True) | evt.Resolution(decision="rerun"):
                cleared.add(ev.call_id)
            case evt.ToolStarted():
                if ev.call_id not in cleared:
                    problems.append(f"{where}: no execute decision or approval for {ev.call_id}")
                started.add(ev.call_id)
                unfinished[ev.call_id] = ev
            case evt.ToolFinished():
                if ev.call_id not in started:
                    problems.append(f"{where}: no tool_started for {ev.call_id}")
                unfinished.pop(ev.call_id, None)
            case evt.RunFinished():
                if RunStatus(ev.status) in CLOSED_STATUSES:
                    final_at, final_status = ev.seq, ev.status
                    for lost in unfinished.values():
                        problems.append(
                            f"{where}: the run is {ev.status} but {lost.tool} started at seq "
                            f"{lost.seq} ({lost.call_id}, idempotency key "
                            f"{lost.idempotency_key}) has no tool_finished: its outcome was "
                            "dropped"
                        )
            case (
                evt.RunStarted()
                | evt.ContextAdded()
                | evt.ModelCalled()
                | evt.Decision()
                | evt.Confirmation()
                | evt.Approval()
                | evt.ApprovalExpired()
                | evt.CompensationFinished()
                | evt.RunResumed()
                | evt.Resolution()
                | evt.UserMessage()
                | evt.QuotaReleased()
                | evt.QuotaReserved()
            ):
                pass  # their order is the fold's to check (above)
            case _:
                raise evt.unhandled_event(ev, "the transcript check (check_transcript)")
    return problems
