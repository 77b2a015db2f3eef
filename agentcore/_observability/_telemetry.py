"""Where spans and metrics go (:func:`configure_telemetry`), and the observer for one advance."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._log import get_logger
from ._observer import NOOP, Observer, log_observer

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from agentcore._state import RunState
    from agentcore.events import Event

__all__ = ["configure_telemetry", "log_events", "observer"]


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
            from agentcore.errors import ConfigurationError

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
    logs = log_observer(log)
    providers = _telemetry()
    if providers is None:
        return NOOP if logs is None else logs
    from ._otel import OtelObserver

    return OtelObserver(state, providers, logs)


def log_events(run_id: str, events: Iterable[Event]) -> None:
    """Events recorded outside a driver (a new run's ``run_started``): logged like the rest
    (they have no step, model or tool to trace)."""
    logs = log_observer(get_logger().bind(run_id=run_id))
    if logs is not None:
        for event in events:
            logs.event(event)
