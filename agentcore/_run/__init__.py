"""Running a run: what ``Agent``'s public methods are made of.

- ``_commands``: pure commands, from a run's folded state and a request to the events that
  carry it out (start, resume, advance, confirm, resolve, cancel) or an error;
- ``_session``: a worker's session with a run: its lease, loading it (snapshot, catch-up),
  recording a command's events and driving it, and what happens when the run was lost;
- ``_loop``: the :class:`Driver`, the one writer of a run's transcript: build context, ask
  for an action, decide, act, record, until the run stops, pauses or the worker's shift is over;
- ``_tool_calls``: running a tool call write-ahead under its guard, recovering one whose
  outcome was never recorded, settling a lost call;
- ``_compensation``: undoing a stopped run's committed effects, newest first, each once.
"""

from __future__ import annotations

from . import _commands as commands
from ._compensation import Settle
from ._loop import (
    PAUSE,
    ContextProvider,
    ContextRequest,
    Driver,
    History,
    RunSetup,
    Shift,
    UntrustedContext,
)
from ._session import NewRun, Session
from ._tool_calls import LOST_CALL_WAIT_S, refuse_rerun_while_running

__all__ = [
    "LOST_CALL_WAIT_S",
    "PAUSE",
    "ContextProvider",
    "ContextRequest",
    "Driver",
    "History",
    "NewRun",
    "RunSetup",
    "Session",
    "Settle",
    "Shift",
    "UntrustedContext",
    "commands",
    "refuse_rerun_while_running",
]
