"""A run tree: how a sub-agent's run names the run it works for.

A leaf below the sub-agents (``_subagent``) and the quotas (``quotas``), which both read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

__all__ = ["PARENT_KEY", "root_of"]

PARENT_KEY: Final = "agentcore.parent"
"""The child's metadata key naming its parent: ``{"run_id": ..., "call_id": ..., "step":
..., "root": ...}`` (``root``: the tree's first run); ``agentcore runs --search
PARENT_RUN_ID`` lists a run's children."""


def root_of(run_id: str, metadata: Mapping[str, Any]) -> str:  # Any: JSON values
    """The first run of the tree ``run_id`` belongs to (itself, when it has no parent)."""
    parent: object = metadata.get(PARENT_KEY)
    if isinstance(parent, Mapping):
        named = cast("Mapping[str, object]", parent)
        found = named.get("root") or named.get("run_id")
        if isinstance(found, str):
            return found
    return run_id
