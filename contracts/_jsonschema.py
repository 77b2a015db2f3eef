"""Build a pydantic argument model from a JSON Schema tool definition.

Tools defined as data (contract examples, evaluation datasets, MCP servers) arrive as JSON
Schema, not as Python functions. This turns the common subset into a pydantic model so they
are validated on the same path as decorated tools. Constructs outside the subset are
accepted as any JSON value rather than guessed at.

Three rules make the arguments those of the schema, not pydantic's reading of them:

* Types are exact (pydantic's strict mode): ``"5"`` is not an integer, ``5.0`` is not an
  integer, ``1`` is not a boolean; an integer is accepted for a number.
* Property names Python or pydantic cannot take as field names (``_class``, ``from``,
  ``Content-Type``, ``json``) get a field name of our own with the property name as its
  alias: the model sees, and the arguments carry, the schema's names.
* Only what was sent is dumped: an optional argument the model left out is absent, never
  filled with the schema's ``default`` (which is shown to the model, and is the tool's
  business). An explicit ``null`` is kept as sent.
"""

from __future__ import annotations

import keyword
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    create_model,
    model_serializer,
)

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
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    @model_serializer(mode="wrap")
    def _as_sent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:  # Any: JSON
        """The arguments that were sent, under the schema's property names."""
        data: dict[str, Any] = handler(self)  # Any: JSON; keyed by alias only if asked
        sent: dict[str, Any] = {}  # Any: JSON
        for name, info in type(self).model_fields.items():
            if name in self.model_fields_set:
                key = info.alias or name
                sent[key] = data[key] if key in data else data[name]
        return sent


_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def _field_name(prop: str, taken: set[str]) -> str | None:
    """A field name for property ``prop``, or ``None`` when the property name itself works."""
    if _IDENTIFIER.match(prop) and not keyword.iskeyword(prop) and not hasattr(BaseModel, prop):
        return None
    base = re.sub(r"[^A-Za-z0-9_]", "_", prop).strip("_") or "arg"
    name = f"arg_{base}" if not base[0].isalpha() else f"{base}_"
    while name in taken or hasattr(BaseModel, name) or keyword.iskeyword(name):
        name += "_"
    taken.add(name)
    return name


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
        ToolDefinitionError: the schema is not an object schema, or a property name is
            empty or not a string.
    """
    if schema.get("type", "object") != "object":
        raise ToolDefinitionError(f"{name}: a tool's parameters must be an object schema")
    props: dict[str, Any] = schema.get("properties") or {}
    required: set[str] = set(schema.get("required") or ())
    fields: dict[str, Any] = {}
    taken = set(props)
    for prop, sub in props.items():
        if not isinstance(prop, str) or not prop:  # pyright: ignore[reportUnnecessaryIsInstance]  # JSON data
            raise ToolDefinitionError(f"{name}: property name {prop!r} is not supported")
        field_name = _field_name(prop, taken)
        t = _type_for(sub, f"{name}_{field_name or prop}")
        extra = {"default": sub["default"]} if "default" in sub else None
        info = Field(
            ... if prop in required else None,
            alias=prop if field_name else None,
            description=sub.get("description"),
            json_schema_extra=extra,
        )
        fields[field_name or prop] = (t if prop in required else t | None, info)
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name) or "Args"
    return create_model(safe, __base__=_Args, **fields)
