"""The tool manifest a run records, and what changed in a tool since the run started.

``run_started.tools[name]`` holds each tool's full definition as the run saw it:
``hash`` (of everything below), ``description``, ``schema`` (the arguments' JSON Schema),
``effect`` and ``idempotent``. A continuation (resume, confirm, resolve) compares the tools
it is about to use with it; a person or a console can validate edited arguments against
the schema the run started with. Transcripts written before ``description`` and
``schema`` were recorded are compared by hash (and by effect and idempotency, which were).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentcore.contracts import ToolSpec

__all__ = ["manifest_change", "manifest_entry"]


def manifest_entry(spec: ToolSpec) -> dict[str, Any]:  # Any: JSON values
    """What ``run_started`` records about one tool."""
    return {
        "hash": spec.manifest_hash,
        "description": spec.description,
        "schema": spec.args_schema,
        "effect": spec.effect,
        "idempotent": spec.idempotent,
    }


def manifest_change(
    name: str,
    recorded: Mapping[str, Any] | None,  # Any: JSON values from run_started
    current: ToolSpec | None,
) -> str | None:
    """``None`` when tool ``name`` is as the run recorded it; otherwise what changed, in
    words (``"pay (description changed; effect changed from write to destructive)"``)."""
    if current is None:
        return f"{name} (gone: no longer a tool of this agent)"
    if recorded is None or recorded.get("hash") in (None, current.manifest_hash):
        return None  # not recorded (a tool outside the run's scope), or unchanged
    parts: list[str] = []
    if "description" in recorded and recorded["description"] != current.description:
        parts.append("description changed")
    if "schema" in recorded and recorded["schema"] != current.args_schema:
        parts.append("argument schema changed")
    for key, label, now in (
        ("effect", "effect", current.effect),
        ("idempotent", "idempotency", current.idempotent),
    ):
        if key in recorded and recorded[key] != now:
            before = _word(recorded[key])
            parts.append(f"{label} changed from {before} to {_word(now)}")
    if not parts:
        # An older transcript without description and schema: only the hash tells.
        parts.append("description or argument schema changed")
    return f"{name} ({'; '.join(parts)})"


def _word(value: object) -> str:
    if isinstance(value, bool):
        return "idempotent" if value else "non-idempotent"
    return str(value)
