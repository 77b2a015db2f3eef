"""Logging: structlog events bound to ``run_id`` and ``step``; configured by the application.

structlog is imported on first use (it pulls in rich, ~100 ms). If the application has
configured structlog, agentcore logs through that configuration. If it has not, agentcore
does not print: events go to the standard ``logging`` logger ``"agentcore"``, which by
Python's defaults shows warnings and errors on stderr and drops the rest.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["get_logger"]


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
