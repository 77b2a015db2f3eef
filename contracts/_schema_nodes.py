"""Reading a JSON Schema as data: typed access to its nodes, the walk over every node, and
local ``$ref`` resolution, shared by the dialect compiler and the limit checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

from .errors import ConfigurationError

__all__ = ["JsonSchema", "as_list", "as_schema", "refs", "resolve_ref", "used_defs", "walk"]

JsonSchema = dict[str, Any]  # Any: JSON Schema is arbitrary JSON data


def as_schema(value: object) -> JsonSchema | None:
    """``value`` as a JSON object, or ``None``."""
    return cast("JsonSchema", value) if isinstance(value, dict) else None


def as_list(value: object) -> list[Any] | None:  # Any: JSON array items
    """``value`` as a JSON array, or ``None``."""
    return cast("list[Any]", value) if isinstance(value, list) else None


def resolve_ref(defs: JsonSchema, ref: str) -> JsonSchema:
    """The definition in ``defs`` that the local reference ``#/$defs/<name>`` points to."""
    prefix = "#/$defs/"
    target = as_schema(defs.get(ref[len(prefix) :])) if ref.startswith(prefix) else None
    if target is None:
        raise ConfigurationError(
            f"Cannot resolve $ref {ref!r}: only references into the schema's own $defs "
            "are supported."
        )
    return target


def walk(node: object, path: str = "#") -> Iterator[tuple[str, JsonSchema]]:
    """Every schema node under ``node`` (``$defs`` included), with its JSON pointer."""
    schema = as_schema(node)
    if schema is None:
        return
    yield path, schema
    for key in ("properties", "$defs"):
        children = as_schema(schema.get(key)) or {}
        for name, child in children.items():
            yield from walk(child, f"{path}/{key}/{name}")
    for key in ("items", "additionalProperties"):
        yield from walk(schema.get(key), f"{path}/{key}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, child in enumerate(as_list(schema.get(key)) or []):
            yield from walk(child, f"{path}/{key}/{i}")


def refs(node: object) -> Iterator[str]:
    """The ``$ref`` targets used under ``node`` (not following them)."""
    for _, schema in walk(node):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield ref


def used_defs(root: JsonSchema, defs: JsonSchema) -> JsonSchema:
    """The definitions reachable from ``root``, in their original order."""
    prefix = "#/$defs/"
    seen: set[str] = set()
    pending = [r[len(prefix) :] for r in refs(root) if r.startswith(prefix)]
    while pending:
        name = pending.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        pending += [r[len(prefix) :] for r in refs(defs[name]) if r.startswith(prefix)]
    return {name: d for name, d in defs.items() if name in seen}
