"""Typed extraction on the agent's side: which model extracts, and where its tokens go.

:meth:`Agent.extract <agentcore.Agent.extract>` hands the work to
:func:`agentcore.adapters.extract` (instructor over litellm, with its validation re-asks).
Called from inside a tool of a run (the case that matters for budgets), the extraction is
recorded in that run: the runner opens an :class:`ExtractionLog` around every tool call,
and each extraction made during the call, failed ones included, becomes a ``model_called``
event with ``role="extract"`` before the call's ``tool_finished``. Its tokens are then in
the run's usage and count against the run's token budget like any model call. Outside a
run nothing is recorded.

Extraction is not a plan or act step: a model refused for those by a route's
``min_score`` may still extract (it picks no action).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import BaseModel

from agentcore.adapters import ModelAdapter
from agentcore.contracts import Usage
from agentcore.contracts.errors import ModelError

if TYPE_CHECKING:
    from agentcore.adapters import Extraction

__all__ = ["ExtractionLog", "LoggedExtraction", "extract_with", "extraction_log"]

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class LoggedExtraction:
    """One extraction made during a tool call, as the run records it."""

    model: str
    usage: Usage
    attempts: int
    latency_ms: float
    error: str | None = None
    role: Literal["extract", "child"] = "extract"
    """``child``: the usage of a sub-agent's run during the call (``Agent.as_tool``)."""
    tool_calls: int = 0
    """``child``: the sub-agent's tool calls during the call."""
    steps: int = 0
    """``child``: the sub-agent's steps during the call."""


@dataclass(slots=True)
class ExtractionLog:
    """The extractions made during one tool call (appended from any thread of the call)."""

    entries: list[LoggedExtraction] = field(default_factory=list[LoggedExtraction])


_LOG: ContextVar[ExtractionLog | None] = ContextVar("agentcore_extraction_log", default=None)


def current_log() -> ExtractionLog | None:
    """The log of the tool call running here, if any."""
    return _LOG.get()


@contextmanager
def extraction_log() -> Generator[ExtractionLog]:
    """Collect the extractions made in this context (a tool call; threads started with
    ``asyncio.to_thread`` copy the context, so a sync tool's extractions land here too)."""
    log = ExtractionLog()
    token = _LOG.set(log)
    try:
        yield log
    finally:
        _LOG.reset(token)


async def extract_with(
    adapter: ModelAdapter,
    output: type[T],
    text: str,
    *,
    instructions: str | None,
    max_reasks: int,
    max_output_tokens: int | None,
) -> T:
    """Extract with ``adapter`` and log it where a tool call is collecting."""
    log = _LOG.get()
    started = time.perf_counter()
    try:
        from agentcore.adapters import extract  # first use: loads the litellm adapter modules

        done: Extraction[T] = await extract(
            adapter,
            output,
            text,
            instructions=instructions,
            max_reasks=max_reasks,
            max_output_tokens=max_output_tokens,
        )
    except ModelError as exc:
        if log is not None:
            log.entries.append(
                LoggedExtraction(
                    model=exc.model or getattr(adapter, "name", type(adapter).__name__),
                    usage=Usage(input_tokens=exc.input_tokens, output_tokens=exc.output_tokens),
                    attempts=exc.attempts,
                    latency_ms=(time.perf_counter() - started) * 1000,
                    error=f"{type(exc).__name__}: {exc}",
                )
            )
        raise
    if log is not None:
        log.entries.append(LoggedExtraction(done.model, done.usage, done.attempts, done.latency_ms))
    return done.value
