"""Logging: structlog events bound to ``run_id`` and ``step``; configured by the application.

structlog is imported on first use (it pulls in rich, a slow import). If the application has
configured structlog (itself, or with :func:`configure_logging`), agentcore logs through
that configuration. If it has not, agentcore does not print: events go to the standard
``logging`` logger ``"agentcore"``, which by Python's defaults shows warnings and errors on
stderr and drops the rest. Nothing is configured at import.
"""

from __future__ import annotations

import io
import logging
import sys
from typing import Any, TextIO, cast

__all__ = ["configure_logging", "get_logger", "is_enabled"]


def get_logger() -> Any:  # Any: a structlog bound logger (structlog types it loosely)
    """The ``agentcore`` logger, honouring the application's structlog configuration."""
    import structlog

    if structlog.is_configured():
        return structlog.get_logger("agentcore")
    return structlog.wrap_logger(
        logging.getLogger("agentcore"),
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.processors.KeyValueRenderer(key_order=["event", "run_id", "step"]),
        ],
    )


def is_enabled(log: Any, level: int) -> bool:  # Any: a structlog bound logger
    """Whether ``log`` (a bound logger of :func:`get_logger`) lets ``level`` through: asked
    before gathering an event's fields, so a disabled level costs nothing more."""
    check = getattr(log, "is_enabled_for", None)  # structlog's filtering bound loggers
    if check is None:
        check = getattr(log, "isEnabledFor", None)  # structlog.stdlib.BoundLogger
    if check is None:
        return True  # a wrapper class without levels: it filters (or not) by itself
    return bool(check(level))


class _CurrentStderr(io.TextIOBase):
    """Writes to whatever ``sys.stderr`` is at the moment of the write."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def configure_logging(
    *, json: bool = True, level: int | str = logging.INFO, file: TextIO | None = None
) -> None:
    """Configure structlog for agentcore's log events (and the application's own).

    Call it once, at startup, in the application (the ``agentcore`` CLI calls it with
    ``json=False``); an application that configures structlog itself does not need it.
    Every transcript event becomes one log event named by its type (``model_called``,
    ``tool_finished``, ...) with ``run_id``, ``step`` (where the event has one), ``seq`` and
    the event's facts: models, tokens, verdicts, tool names, statuses, errors. Contents
    (the task, arguments, results, replies, answers) stay in the transcript.

    Args:
        json: one JSON object per line (production); ``False``: aligned, human-readable
            lines (a terminal).
        level: the lowest level written (``logging.INFO`` or ``"info"``: every event;
            ``"warning"``: failed model calls and runs that need a person). Below it,
            agentcore does not even gather an event's fields.
        file: where lines go (default ``sys.stderr``).

    Raises:
        ValueError: an unknown level name.
    """
    import structlog

    if isinstance(level, str):
        number = logging.getLevelNamesMapping().get(level.upper())
        if number is None:
            raise ValueError(
                f"Unknown log level {level!r}: use debug, info, warning, error or critical."
            )
        level = number
    processors: list[Any] = [  # Any: structlog processors are loosely typed callables
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # The default follows sys.stderr as it is at each write, not as it was when configured:
    # a host that swaps it (a test runner, a CLI runner, a daemon closing its terminal)
    # must not leave agentcore writing into a closed file.
    # cast: a TextIOBase with write/flush/isatty, all PrintLogger uses of a TextIO
    target = file if file is not None else cast("TextIO", _CurrentStderr())
    if json:
        processors += [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=target.isatty()))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(target),
        cache_logger_on_first_use=False,
    )
