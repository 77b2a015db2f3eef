"""Logging: structlog, imported on first use (it pulls in rich, which costs ~100 ms).

Library code only gets loggers and binds ``run_id`` and ``step``; the application (or the
CLI) configures structlog.
"""

from __future__ import annotations

from typing import Any

__all__ = ["get_logger"]


def get_logger() -> Any:  # Any: structlog's BoundLoggerLazyProxy, typed loosely by structlog
    """The ``agentcore`` structlog logger."""
    import structlog

    return structlog.get_logger("agentcore")
