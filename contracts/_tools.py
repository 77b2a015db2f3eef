"""What the contract needs to know about a tool: a name, a description, an argument model."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel

from ._actions import Effect
from .errors import ToolDefinitionError

__all__ = ["TOOL_NAME_PATTERN", "ToolSpec"]

TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
"""Tool names: a letter or underscore first, then letters, digits, ``_``, ``.`` or ``-``;
at most 64 characters (the strictest provider limit)."""


@dataclass(frozen=True, eq=False)
class ToolSpec:
    """The provider-neutral description of one tool, as the contract compiles it.

    Attributes:
        name: the name the model uses to call the tool.
        description: what the tool does and when to use it (sent to the model).
        args_model: a pydantic model of the arguments; validation uses it.
        effect: ``read``, ``write`` or ``destructive``.
        idempotent: whether running the tool twice with the same arguments is harmless.
        source: for a tool defined elsewhere (an MCP server's), its definition as the source
            lists it (server, name, description, input schema, annotations): untrusted data,
            pinned in the run's manifest so that a change there is a changed tool. ``None``
            for a local tool.
        bindings: the parameters the model neither sees nor sets, and what fills each
            (``metadata:customer_id``, ``tenant``, ``secret:NAME``): part of the manifest,
            so a deploy that binds a parameter elsewhere is a changed tool.
    """

    name: str
    description: str
    args_model: type[BaseModel]
    effect: Effect = "read"
    idempotent: bool = field(default=True)
    source: dict[str, Any] | None = None  # Any: JSON values
    bindings: Mapping[str, str] = field(default_factory=dict[str, str])

    def __post_init__(self) -> None:
        if not TOOL_NAME_PATTERN.match(self.name):
            raise ToolDefinitionError(
                f"Invalid tool name {self.name!r}: use letters, digits, '_', '.' or '-', "
                "start with a letter or '_', at most 64 characters."
            )
        if self.effect not in ("read", "write", "destructive"):
            raise ToolDefinitionError(
                f"Invalid effect {self.effect!r} for tool {self.name!r}. "
                "Valid effects: 'read', 'write', 'destructive'."
            )

    @cached_property
    def args_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments."""
        return self.args_model.model_json_schema()

    @cached_property
    def manifest_hash(self) -> str:
        """A hash of what the model and the dispatcher see: name, schema, effect, idempotency
        (and the source's definition, for a tool that has one; the bindings, for a tool
        that has some)."""
        if not self.bindings:
            return self.unbound_hash
        doc = {"unbound": self.unbound_hash, "bindings": dict(self.bindings)}
        blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @cached_property
    def unbound_hash(self) -> str:
        """:attr:`manifest_hash` without the bindings: what a manifest recorded before
        bindings were part of it holds."""
        doc: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "schema": self.args_schema,
            "effect": self.effect,
            "idempotent": self.idempotent,
        }
        if self.source is not None:
            doc["source"] = self.source
        blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]
