"""The observer hook the driver calls, and the observer that turns events into log lines."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from agentcore.events import ActionProposed, ContextAdded, Event, ModelCalled, RunFinished

from ._log import is_enabled

if TYPE_CHECKING:
    from agentcore.adapters import Completion
    from agentcore.tools import ToolOutcome

__all__ = ["NOOP", "LogObserver", "Observer", "log_observer"]


class Observer:
    """The hook the driver calls. This base observes nothing and costs a method call."""

    __slots__ = ()

    def advance(self, first: Iterable[Event], agent: str | None) -> AbstractContextManager[None]:
        """Around one advance of the run (a worker's shift under its lease). ``first``: the
        events the command that started it records first (a confirmation, a resume, ...)."""
        del first, agent
        return _NULL

    def step(self, step: int) -> None:
        """Step ``step`` begins (a new step; a step in progress is announced by its events)."""

    def model_call(
        self, model: str, step: int, call: Awaitable[Completion]
    ) -> Awaitable[Completion]:
        """Wrap the model call ``call`` (not yet started) to route entry ``model``."""
        del model, step
        return call

    def tool_call(
        self, call_id: str, step: int, tool: str, call: Awaitable[ToolOutcome]
    ) -> Awaitable[ToolOutcome]:
        """Wrap the tool call ``call`` (not yet started): the tool's own work runs inside."""
        del call_id, step, tool
        return call

    def event(self, event: Event) -> None:
        """``event`` was recorded (and folded into the state)."""


_NULL: AbstractContextManager[None] = contextlib.nullcontext()
NOOP = Observer()

# -- logging --------------------------------------------------------------------------------

# What a log line leaves out: the contents of a run (the task, what context providers and
# tools returned, the model's replies and answers, arguments) stay in the transcript; log
# lines carry the facts, so they can go to a log service without the run's data.
_CONTENTS = frozenset(
    {
        "run_id",  # bound to the logger
        "type",  # the event name
        "v",
        "at",
        "task",
        "content",
        "reply",
        "answer",
        "args",
        "result",
        "dropped_calls",
        "budget",
        "policy",
        "tools",
        "accepted_tools",
        "metadata",
        "result_sha256",
    }
)


def _fields(event: Event) -> dict[str, Any]:  # Any: JSON-ready log values
    fields: dict[str, Any] = {}  # Any: as above
    for name, value in event.__dict__.items():
        if name in _CONTENTS or value is None or value == []:
            continue
        if name == "action" and isinstance(event, ActionProposed):
            fields["action"] = event.action.type
            tool = getattr(event.action, "tool", None)
            if tool is not None:
                fields["tool"] = tool
        elif name == "contract" and isinstance(value, Mapping):
            fields["contract"] = value.get("version")  # pyright: ignore[reportUnknownMemberType]  # dict[str, str]
        else:
            fields[name] = value
    if isinstance(event, ContextAdded):
        fields["chars"] = len(event.content)
    return fields


def _level(event: Event) -> int:
    if isinstance(event, ModelCalled) and event.outcome == "error":
        return logging.WARNING  # a model in the route failed after its retries
    if isinstance(event, RunFinished) and event.status == "needs_attention":
        return logging.WARNING  # a person must act
    return logging.INFO


class LogObserver(Observer):
    """One log event per transcript event, named by the event type, with ``run_id`` (bound),
    ``step`` where the event has one, ``seq`` and the event's facts (not its contents)."""

    __slots__ = ("log", "min_level")

    def __init__(self, log: Any, min_level: int) -> None:  # Any: a structlog bound logger
        self.log = log
        self.min_level = min_level

    def event(self, event: Event) -> None:
        level = _level(event)
        if level < self.min_level:
            return  # the level check comes before any field is gathered
        if level >= logging.WARNING:
            self.log.warning(event.type, **_fields(event))
        else:
            self.log.info(event.type, **_fields(event))


def log_observer(log: Any) -> LogObserver | None:  # Any: a structlog bound logger
    if is_enabled(log, logging.INFO):
        return LogObserver(log, logging.INFO)
    if is_enabled(log, logging.WARNING):
        return LogObserver(log, logging.WARNING)
    return None
