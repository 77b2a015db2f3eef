"""What a run tells the outside world: log lines, and OpenTelemetry spans and metrics.

The :class:`~agentcore._run.Driver` calls one :class:`Observer` at five points: around
an advance of the run, when a step begins, around each model call and each tool call, and
for each event it records. Which observer it gets is decided once per advance:

- nothing listens (the usual test and benchmark setting): a shared no-op observer;
- the logger's level lets the events through: one log event per transcript event;
- OpenTelemetry is configured (:func:`configure_telemetry`, or the application set
  OpenTelemetry's global providers): spans and metrics too (``agentcore._otel``).

OpenTelemetry is never imported by ``import agentcore``: only when telemetry is configured
explicitly, or when the application has already imported it itself.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Awaitable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._log import get_logger, is_enabled
from .events import ActionProposed, ContextAdded, Event, ModelCalled, RunFinished

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from agentcore.adapters import Completion

    from ._state import RunState
    from .tools import ToolOutcome

__all__ = ["NOOP", "Observer", "configure_telemetry", "log_events", "observer", "trace_headers"]


class Observer:
    """The hook the driver calls. This base observes nothing and costs a method call."""

    __slots__ = ()

    def advance(self, first: Iterable[Event], agent: str | None) -> AbstractContextManager[None]:
        """Around one advance of the run (a turn under its lease). ``first``: the events the
        command that started it records first (a confirmation, a resume, ...)."""
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


def _log_observer(log: Any) -> LogObserver | None:  # Any: a structlog bound logger
    if is_enabled(log, logging.INFO):
        return LogObserver(log, logging.INFO)
    if is_enabled(log, logging.WARNING):
        return LogObserver(log, logging.WARNING)
    return None


# -- telemetry settings ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Settings:
    enabled: bool = True
    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None


_settings = _Settings()


def configure_telemetry(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    enabled: bool = True,
) -> None:
    """Choose where agentcore reports OpenTelemetry spans and metrics (extra ``[otel]``).

    Without this call, agentcore reports to OpenTelemetry's global providers once the
    application has set them (``trace.set_tracer_provider(...)``, or the
    ``opentelemetry-instrument`` launcher), and costs nothing when it has not: it never
    imports OpenTelemetry itself then. ``configure_telemetry()`` restores that default.

    Args:
        tracer_provider: report spans here instead of the global tracer provider.
        meter_provider: report metrics here instead of the global meter provider.
        enabled: ``False``: report nothing, whatever is configured.

    Raises:
        ConfigurationError: a provider is given and ``opentelemetry-api`` is not installed.

    Takes effect from the next advance of each run (a run advancing keeps its observer).
    """
    global _settings  # noqa: PLW0603  # the process-wide choice, made once at the edge
    if (tracer_provider is not None or meter_provider is not None) and enabled:
        try:
            import opentelemetry.trace  # noqa: F401  # pyright: ignore[reportUnusedImport]
        except ImportError as exc:
            from agentcore.contracts.errors import ConfigurationError

            raise ConfigurationError(
                "OpenTelemetry is not installed: pip install 'agentcore[otel]' "
                "(and opentelemetry-sdk for the providers)."
            ) from exc
    _settings = _Settings(enabled, tracer_provider, meter_provider)


def _telemetry() -> tuple[TracerProvider | None, MeterProvider | None] | None:
    """The providers to report to, or ``None`` when nothing listens. Cheap: a dict lookup
    when the application never imported OpenTelemetry."""
    settings = _settings
    if not settings.enabled:
        return None
    explicit = settings.tracer_provider is not None or settings.meter_provider is not None
    if not explicit and "opentelemetry.trace" not in sys.modules:
        return None  # nobody imported OpenTelemetry, so nobody configured it
    from ._otel import configured_providers

    return configured_providers(settings.tracer_provider, settings.meter_provider)


# -- the factory ------------------------------------------------------------------------------


def observer(state: RunState, log: Any) -> Observer:  # Any: a structlog bound logger
    """The observer for one advance of the run ``state``, logging through ``log`` (bound to
    the run id)."""
    logs = _log_observer(log)
    providers = _telemetry()
    if providers is None:
        return NOOP if logs is None else logs
    from ._otel import OtelObserver

    return OtelObserver(state, providers, logs)


def log_events(run_id: str, events: Iterable[Event]) -> None:
    """Events recorded outside a driver (a new run's ``run_started``): logged like the rest
    (they have no step, model or tool to trace)."""
    logs = _log_observer(get_logger().bind(run_id=run_id))
    if logs is not None:
        for event in events:
            logs.event(event)


def trace_headers() -> dict[str, str]:
    """W3C trace context headers of the current span (``traceparent``, ``tracestate``);
    empty when OpenTelemetry is not in use."""
    if "opentelemetry.trace" not in sys.modules:
        return {}
    from opentelemetry.propagate import inject

    headers: dict[str, str] = {}
    inject(headers)
    return headers
