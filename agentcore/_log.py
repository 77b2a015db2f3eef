"""The ``agentcore`` logger under the module path the PostgreSQL store's retry imports it
from; its home is :mod:`agentcore._observability`."""

from ._observability import get_logger

__all__ = ["get_logger"]
