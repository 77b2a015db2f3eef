"""A run's status and the one rule that derives it from events.

Below both the run (``_state``, whose fold calls :func:`status_after`) and the stores
(whose listings keep the status on the run's row, computed by the same function), so the
two cannot disagree and neither layer imports the other for it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from .events import Event, RunFinished

__all__ = [
    "CLOSED_STATUSES",
    "FINISHED_STATUSES",
    "REPLY_STATUSES",
    "RunStatus",
    "status_after",
]


class RunStatus(StrEnum):
    """Where a run stands.

    ``completed`` and ``cancelled`` are closed: no command but a reply moves the run
    again (:data:`CLOSED_STATUSES`). A ``completed`` run's turn ended with its answer and
    the run takes the user's next message (``Agent.reply``: a new turn); a ``cancelled``
    one never does. ``failed`` is finished too (:data:`FINISHED_STATUSES`), but a person
    can still resume it by hand. ``awaiting_confirmation`` waits for ``confirm``;
    ``awaiting_input`` waits for the user's answer to the model's question (``reply``);
    ``budget_exhausted`` and ``needs_attention`` wait for ``resume``. ``running`` is a run
    being advanced, or one whose process died (resume it).
    """

    RUNNING = "running"
    COMPLETED = "completed"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    AWAITING_INPUT = "awaiting_input"
    NEEDS_ATTENTION = "needs_attention"
    BUDGET_EXHAUSTED = "budget_exhausted"
    FAILED = "failed"
    CANCELLED = "cancelled"


CLOSED_STATUSES: Final = frozenset({RunStatus.COMPLETED, RunStatus.CANCELLED})
"""The closed statuses: statuses no command but a reply drives further (``completed``,
``cancelled``). A resume or a cancel returns such a run's result as it is, the loop
honours no cancel request after one, and no tool call may be left open before one. A
``completed`` run still takes the user's next message (``Agent.reply``, which starts a
new turn); a ``cancelled`` one refuses it."""

REPLY_STATUSES: Final = frozenset(
    {RunStatus.COMPLETED, RunStatus.AWAITING_INPUT, RunStatus.BUDGET_EXHAUSTED}
)
"""The statuses in which a run takes the user's next message (``Agent.reply``): its turn
ended with an answer, with a question for the user, or out of the turn's budget (the new
turn has a budget of its own)."""

FINISHED_STATUSES: Final = (
    RunStatus.COMPLETED.value,
    RunStatus.CANCELLED.value,
    RunStatus.FAILED.value,
)
"""Runs that ended (closed, or failed: only a person resumes those); what ``prune``
removes unless told otherwise."""

_RUNNING = RunStatus.RUNNING.value
_CONTINUES = frozenset({"run_started", "run_resumed", "confirmation", "resolution", "user_message"})


def status_after(current: str, event: Event) -> str:
    """The one rule for a run's status: its status after ``event``, given the one before.

    ``run_finished`` sets the status it names; a start, a resume, a person's confirmation
    or resolution, or the user's next message sets the run running again; every other
    event leaves it as it was. The state fold and every store's run listing call this, so
    they cannot disagree.
    """
    if isinstance(event, RunFinished):
        return event.status
    if event.type in _CONTINUES:
        return _RUNNING
    return current
