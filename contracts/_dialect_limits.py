"""Provider schema limits: Anthropic's per-request parameter counts, OpenAI's documented
size limits, and what a strict dialect cannot express. :func:`~._dialects.choose_form`
reads them to decide whether the typed form fits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ._schema_nodes import JsonSchema, as_list, as_schema, refs, resolve_ref, walk

__all__ = [
    "ANTHROPIC_MAX_OPTIONAL_PARAMS",
    "ANTHROPIC_MAX_UNION_PARAMS",
    "AnthropicLimitReport",
    "anthropic_limits",
    "expressible",
    "fits_openai",
    "recursive",
]

ANTHROPIC_MAX_UNION_PARAMS: Final = 16
"""Anthropic: parameters using ``anyOf`` or type arrays, across all strict schemas of a
request (https://platform.claude.com/docs/en/build-with-claude/structured-outputs)."""
ANTHROPIC_MAX_OPTIONAL_PARAMS: Final = 24
"""Anthropic: parameters not listed in ``required``, across all strict schemas of a request."""

# OpenAI's documented schema limits
# (https://platform.openai.com/docs/guides/structured-outputs#objects-have-limitations-on-nesting-depth-and-size).
_OPENAI_MAX_PROPERTIES: Final = 5000
_OPENAI_MAX_DEPTH: Final = 10
_OPENAI_MAX_ENUM_VALUES: Final = 1000
_OPENAI_MAX_STRING_CHARS: Final = 120_000
_OPENAI_LARGE_ENUM: Final = 250
_OPENAI_LARGE_ENUM_CHARS: Final = 15_000


@dataclass(frozen=True)
class AnthropicLimitReport:
    """How a schema stands against Anthropic's strict-schema complexity limits.

    Both limits apply to the whole request, across all strict schemas: a request that also
    sends strict tools has less room than this report shows. Unions are counted where they
    are written (a definition used twice counts once).

    Attributes:
        union_paths: JSON pointers of the nodes that use ``anyOf``, ``oneOf`` or a type list.
        optional_paths: JSON pointers of the properties not listed in ``required``.
    """

    union_paths: tuple[str, ...]
    optional_paths: tuple[str, ...]

    @property
    def union_params(self) -> int:
        """Union-typed parameters (limit :data:`ANTHROPIC_MAX_UNION_PARAMS`)."""
        return len(self.union_paths)

    @property
    def optional_params(self) -> int:
        """Optional parameters (limit :data:`ANTHROPIC_MAX_OPTIONAL_PARAMS`)."""
        return len(self.optional_paths)

    @property
    def fits(self) -> bool:
        """Whether both counts are within Anthropic's limits."""
        return (
            self.union_params <= ANTHROPIC_MAX_UNION_PARAMS
            and self.optional_params <= ANTHROPIC_MAX_OPTIONAL_PARAMS
        )

    def describe(self) -> str:
        """One line for an error message or a log."""
        return (
            f"{self.union_params} union-typed parameters (limit {ANTHROPIC_MAX_UNION_PARAMS}), "
            f"{self.optional_params} optional parameters (limit {ANTHROPIC_MAX_OPTIONAL_PARAMS})"
        )


def anthropic_limits(schema: JsonSchema) -> AnthropicLimitReport:
    """Count what Anthropic limits in a JSON Schema (normally an ``anthropic`` wire schema).

    Args:
        schema: the JSON Schema, ``$defs`` included; it is only read.

    Returns:
        The union-typed and optional parameters found, with their paths.
    """
    unions: list[str] = []
    optional: list[str] = []
    for path, node in walk(schema):
        if "anyOf" in node or "oneOf" in node or isinstance(node.get("type"), list):
            unions.append(path)
        props = as_schema(node.get("properties"))
        if props is not None:
            required = set(as_list(node.get("required")) or [])
            optional += [f"{path}/properties/{name}" for name in props if name not in required]
    return AnthropicLimitReport(union_paths=tuple(unions), optional_paths=tuple(optional))


def expressible(source: JsonSchema) -> bool:
    """Whether a strict dialect can express every value ``source`` allows.

    An open object (``dict[str, X]``: ``additionalProperties`` true or a schema) or an
    untyped node (``JsonValue``: ``{}``) cannot be: strict dialects need closed objects.
    """
    typed = ("type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const", "properties")
    for _, node in walk(source):
        if not any(key in node for key in typed):
            return False
        if node.get("additionalProperties", False) is not False:
            return False
    return True


def recursive(source: JsonSchema) -> bool:
    """Whether a definition in ``source`` refers back to itself, directly or not."""
    prefix = "#/$defs/"
    defs = as_schema(source.get("$defs")) or {}
    edges = {
        name: {r[len(prefix) :] for r in refs(d) if r.startswith(prefix)}
        for name, d in defs.items()
    }
    for start, targets in edges.items():
        pending, seen = list(targets), set[str]()
        while pending:
            name = pending.pop()
            if name == start:
                return True
            if name not in seen:
                seen.add(name)
                pending += edges.get(name, ())
    return False


def _depth(node: object, defs: JsonSchema, seen: frozenset[str] = frozenset()) -> int:
    """Object nesting levels under ``node`` (the root object is level 1), through $refs."""
    schema = as_schema(node)
    if schema is None:
        return 0
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return 0 if ref in seen else _depth(resolve_ref(defs, ref), defs, seen | {ref})
    children: list[object] = list((as_schema(schema.get("properties")) or {}).values())
    children += [schema.get("items"), schema.get("additionalProperties")]
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        children += as_list(schema.get(key)) or []
    inner = max((_depth(child, defs, seen) for child in children), default=0)
    return inner + (1 if "properties" in schema else 0)


def fits_openai(schema: JsonSchema) -> bool:
    """Whether a wire schema is within OpenAI's documented size limits."""
    properties = 0
    enum_values = 0
    chars = sum(len(name) for name in as_schema(schema.get("$defs")) or {})
    for _, node in walk(schema):
        props = as_schema(node.get("properties")) or {}
        properties += len(props)
        chars += sum(len(name) for name in props)
        values = as_list(node.get("enum")) or []
        enum_values += len(values)
        enum_chars = sum(len(v) for v in values if isinstance(v, str))
        chars += enum_chars
        if len(values) > _OPENAI_LARGE_ENUM and enum_chars > _OPENAI_LARGE_ENUM_CHARS:
            return False
        const: object = node.get("const")
        if isinstance(const, str):
            chars += len(const)
    depth = _depth(schema, as_schema(schema.get("$defs")) or {})
    return (
        properties <= _OPENAI_MAX_PROPERTIES
        and depth <= _OPENAI_MAX_DEPTH
        and enum_values <= _OPENAI_MAX_ENUM_VALUES
        and chars <= _OPENAI_MAX_STRING_CHARS
    )
