"""What a run tells the outside world: log lines, and OpenTelemetry spans and metrics.

The driver calls one :class:`Observer` at five points: around an advance of the run, when
a step begins, around each model call and each tool call, and for each event it records.
Which observer it gets is decided once per advance (:func:`observer`):

- nothing listens (the usual test and benchmark setting): a shared no-op observer;
- the logger's level lets the events through: one log event per transcript event
  (``_observer``, logging through ``_log``);
- OpenTelemetry is configured (:func:`configure_telemetry`, or the application set
  OpenTelemetry's global providers): spans and metrics too (``_otel``).

OpenTelemetry is never imported by ``import agentcore``: only when telemetry is configured
explicitly, or when the application has already imported it itself. ``_otel`` is the one
module that imports it at module level; nothing here imports ``_otel`` except
:func:`observer`, when telemetry is in use.
"""

from ._log import configure_logging, get_logger
from ._observer import NOOP, Observer
from ._telemetry import configure_telemetry, log_events, observer

__all__ = [
    "NOOP",
    "Observer",
    "configure_logging",
    "configure_telemetry",
    "get_logger",
    "log_events",
    "observer",
]
