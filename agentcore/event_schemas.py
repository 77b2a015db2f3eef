"""The transcript's event format as JSON Schema: generated from the event models, shipped in
the package as ``agentcore/schemas/events-v<N>.json``, described in ``docs/events.md``.

One file per :data:`~agentcore.events.EVENT_SCHEMA_VERSION`. The current version's file is
regenerated from the code; older versions' files are never rewritten, so a reader of an old
transcript can always find the format it was written in. After changing an event model,
either bump ``EVENT_SCHEMA_VERSION`` (an incompatible change: old events then need an
upgrade path) or record the compatible change in ``docs/events.md``, then regenerate::

    python -P -m agentcore.event_schemas           # rewrite the current version's file
    python -P -m agentcore.event_schemas --check   # exit 1 if the file differs from the code

(``-P`` keeps the working directory off ``sys.path``: in the repository root the source
folder ``agentcore/`` would otherwise shadow the installed package, whose
``agentcore.contracts`` lives in ``contracts/``.)

The schemas describe what agentcore accepts when it reads an event (pydantic's validation
schema), with ``run_id`` and ``seq`` included as in an export (``agentcore export``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from .events import EVENT_SCHEMA_VERSION, Event

__all__ = ["SCHEMA_DIR", "event_schema", "main", "render", "schema_path", "shipped_schema"]

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
"""Where the shipped schema files live (inside the installed package)."""

_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def event_schema() -> dict[str, Any]:  # Any: a JSON Schema document
    """The JSON Schema of every event type of the current version, generated from the code."""
    generated: dict[str, Any] = TypeAdapter(Event).json_schema(mode="validation")  # Any: JSON
    return {
        "$schema": _DRAFT,
        "title": f"agentcore transcript event, version {EVENT_SCHEMA_VERSION}",
        "description": (
            "One event of an agentcore transcript, as `agentcore export` writes it (one per "
            "line). Discriminated by `type`; `v` is the event schema version."
        ),
        **generated,
    }


def schema_path(version: int = EVENT_SCHEMA_VERSION) -> Path:
    """The shipped file of an event schema version."""
    return SCHEMA_DIR / f"events-v{version}.json"


def shipped_schema(version: int = EVENT_SCHEMA_VERSION) -> dict[str, Any]:  # Any: JSON Schema
    """The shipped schema of ``version``.

    Raises:
        FileNotFoundError: no file for that version.
    """
    loaded: dict[str, Any] = json.loads(schema_path(version).read_text(encoding="utf-8"))
    return loaded


def render(schema: dict[str, Any]) -> str:  # Any: JSON Schema
    """The file's text: stable, indented JSON with a final newline (reviewable diffs)."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate the current version's file, or with ``--check`` only compare it."""
    args = list(sys.argv[1:] if argv is None else argv)
    path = schema_path()
    text = render(event_schema())
    if args == ["--check"]:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == text:
            return 0
        sys.stderr.write(
            f"{path} differs from the event models: bump EVENT_SCHEMA_VERSION or document the "
            "upgrade in docs/events.md, then regenerate with python -P -m agentcore.event_schemas\n"
        )
        return 1
    if args:
        sys.stderr.write("usage: python -P -m agentcore.event_schemas [--check]\n")
        return 2
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
