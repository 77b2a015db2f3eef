"""Streaming a run: typed events as they happen (``Agent.stream`` and friends).

While the model writes, :class:`ThoughtDelta` carries new characters of the thought and
:class:`ActionDetected` says the action type (and tool) as soon as they are known; with a
typed output (``Agent(output=T)``), :class:`PartialOutput` carries the answer so far as it
grows, as partial JSON. Then
come the transcript events themselves as they are recorded (``action_proposed``,
``decision``, ``tool_started``, ``tool_finished``, ``run_finished``, ...), and finally
:class:`RunEnded` with the result. A partial action is only ever shown: the action that is
decided and executed is the complete one, validated after the reply ends, and the typed
answer is ``RunEnded.result.output``, never a partial one.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from agentcore.adapters import PartialAction

from ._state import RunResult
from .events import Event

__all__ = ["ActionDetected", "PartialOutput", "RunEnded", "StreamEvent", "ThoughtDelta"]


@dataclass(frozen=True, slots=True)
class ThoughtDelta:
    """New characters of the thought of the action being written at ``step``."""

    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ActionDetected:
    """The type (and, for a tool action, the tool) of the action being written."""

    step: int
    type: str
    tool: str | None = None


@dataclass(frozen=True, slots=True)
class PartialOutput:
    """The typed answer of the ``finish`` being written at ``step``, so far: partial JSON
    (a string cut short, an object missing its last keys), unvalidated. Only ever shown:
    the run's answer is the validated one in :class:`RunEnded`'s ``result.output``, and a
    ``finish`` whose answer turns out invalid is asked again."""

    step: int
    value: JsonValue


@dataclass(frozen=True, slots=True)
class RunEnded:
    """The last item of a stream: the run's result when it completed, stopped or paused."""

    result: RunResult[Any]  # Any: the output type of the agent that streamed it


StreamEvent = ThoughtDelta | ActionDetected | PartialOutput | Event | RunEnded
"""Anything a stream yields."""

Sink = Callable[[StreamEvent], None]
SINK: ContextVar[Sink | None] = ContextVar("agentcore_stream_sink", default=None)


class PartialTracker:
    """Turns successive partial actions of one step into deltas, once each."""

    def __init__(self, sink: Sink, step: int, *, answers: bool = False) -> None:
        self._sink = sink
        self._step = step
        self._thought = ""
        self._type: str | None = None
        self._tool: str | None = None
        self._answers = answers
        """Report a ``finish``'s answer as it grows (a typed output)."""
        self._answer: JsonValue = None

    def __call__(self, partial: PartialAction) -> None:
        thought = partial.thought
        if thought.startswith(self._thought) and len(thought) > len(self._thought):
            self._sink(ThoughtDelta(self._step, thought[len(self._thought) :]))
            self._thought = thought
        elif not thought.startswith(self._thought):  # a retried stream starts over
            self._thought = ""
            if thought:
                self._sink(ThoughtDelta(self._step, thought))
                self._thought = thought
        # The type first, then (for a tool action) again once the tool name is complete.
        if partial.type is not None and (partial.type, partial.tool) != (self._type, self._tool):
            self._sink(ActionDetected(self._step, partial.type, partial.tool))
            self._type, self._tool = partial.type, partial.tool
        if self._answers and partial.answer is not None and partial.answer != self._answer:
            self._sink(PartialOutput(self._step, partial.answer))
            self._answer = partial.answer
