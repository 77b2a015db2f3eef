"""Build a pydantic argument model from a JSON Schema tool definition.

Tools defined as data (contract examples, evaluation datasets, MCP servers) arrive as JSON
Schema, not as Python functions. This turns the common subset into a pydantic model so they
are validated on the same path as decorated tools. Constructs outside the subset are
accepted as any JSON value rather than guessed at.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, create_model

from .errors import ToolDefinitionError

__all__ = ["model_from_json_schema"]

_PRIMITIVES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
}


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _type_for(schema: dict[str, Any], name: str) -> Any:  # Any: types built at run time
    if "enum" in schema:
        values = tuple(schema["enum"])
        if not values:
            raise ToolDefinitionError(f"{name}: an empty enum admits no value")
        return Literal[values]  # pyright: ignore[reportInvalidTypeForm]  # built from data
    if "anyOf" in schema or "oneOf" in schema:
        options: list[dict[str, Any]] = schema.get("anyOf") or schema["oneOf"]
        result: Any = None
        for i, option in enumerate(options):
            t = _type_for(option, f"{name}_{i}")
            result = t if result is None else result | t
        return result if result is not None else JsonValue
    kind: Any = schema.get("type")  # Any: JSON Schema "type" is a string or a list of them
    if isinstance(kind, list):
        kinds: list[str] = [str(k) for k in kind]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]  # JSON data
        options: list[dict[str, Any]] = [{**schema, "type": k} for k in kinds]
        return _type_for({"anyOf": options}, name)
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "array":
        items: Any = schema.get("items")  # Any: JSON data, checked below
        inner = _type_for(items, f"{name}_item") if isinstance(items, dict) else JsonValue  # pyright: ignore[reportUnknownArgumentType]  # a JSON object
        return list[inner]  # pyright: ignore[reportInvalidTypeForm]  # built from data
    if kind == "object" and "properties" in schema:
        return model_from_json_schema(name, schema)
    if kind == "object":
        return dict[str, JsonValue]
    return JsonValue


def model_from_json_schema(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """Make a pydantic model for an object schema (``properties``, ``required``, ...).

    Args:
        name: a name for the model (used in generated schemas).
        schema: a JSON Schema of ``type: object``.

    Raises:
        ToolDefinitionError: the schema is not an object schema.
    """
    if schema.get("type", "object") != "object":
        raise ToolDefinitionError(f"{name}: a tool's parameters must be an object schema")
    props: dict[str, Any] = schema.get("properties") or {}
    required: set[str] = set(schema.get("required") or ())
    fields: dict[str, Any] = {}
    for prop, sub in props.items():
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", prop):
            raise ToolDefinitionError(f"{name}: property name {prop!r} is not supported")
        t = _type_for(sub, f"{name}_{prop}")
        desc = sub.get("description")
        if prop in required:
            fields[prop] = (t, Field(..., description=desc))
        else:
            fields[prop] = (t | None, Field(sub.get("default"), description=desc))
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name) or "Args"
    return create_model(safe, __base__=_Args, **fields)
