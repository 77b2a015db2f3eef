"""Tools defined as data: a JSON Schema as the argument model, validated by ``jsonschema``.

Tools that arrive as JSON Schema rather than as Python functions (an MCP server's, an
evaluation dataset's, a contract document's examples, the console's edit form) get an
argument model whose schema *is* the given schema and whose validator is the reference
implementation of JSON Schema (``jsonschema``, Draft 2020-12 unless the schema's
``$schema`` names another draft it knows):

* What the model is shown is the schema as given: nested objects, ``$ref``/``$defs``,
  ``allOf``, ``const``, ``minimum``, ``maxLength``, ``pattern``, ``format``, enums. Each
  dialect compiler then treats it as it treats a decorated tool's (a bound a provider
  cannot take moves into the description). Keywords outside the JSON Schema vocabulary
  are left out of what the model is shown (they constrain nothing); ``$defs`` (and
  draft-07 ``definitions``) join the action schema's ``$defs`` under names prefixed with
  the model's (``shaped_book_trip_args_Place``), so no server can rename the contract's own.
* What is accepted is what the schema accepts, checked before the call is made: the
  model is told which rule an argument broke (``location.city: 'Paris, France' is too
  long``). ``format`` is asserted where ``jsonschema`` can check it.
* Only what was sent is kept: a property the model left out is absent (the schema's
  ``default`` is shown, and is the tool's business), an explicit ``null`` stays ``null``
  (and is refused where the schema does not admit it), property names are the schema's
  own (``from``, ``_class``, ``Content-Type``).

A schema from a server is untrusted data. It is refused, with the reason, when it is not
a valid JSON Schema, is larger than :data:`MAX_SCHEMA_BYTES` or nested deeper than
:data:`MAX_SCHEMA_DEPTH`, would expand beyond :data:`MAX_SCHEMA_NODES` nodes once its
references are inlined, refers outside itself (a ``$ref`` to a URL is never fetched:
nothing outside the schema is resolved, ever), uses ``$dynamicRef``, an embedded ``$id``
or an anchor reference, loops through references without descending into the value
(``{"$ref": "#"}``, which no value could ever be checked against), has an empty ``enum``,
or holds an object with a ``"$ref"`` key in a ``const``, ``enum``, ``default`` or
``examples`` value (JSON Schema tooling, pydantic's included, reads it as a reference).

``jsonschema``'s ``pattern`` is Python's ``re``: a pattern that backtracks badly on a
long argument costs time; an agent that calls servers it does not trust bounds its run
with a budget and a deadline.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator
from typing import Any, ClassVar, Final, cast

import jsonschema
import referencing
from jsonschema.exceptions import SchemaError, relevance
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, model_validator
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from .errors import ToolDefinitionError

__all__ = ["model_from_json_schema"]

JsonSchema = dict[str, Any]  # Any: JSON Schema is arbitrary JSON data

MAX_SCHEMA_BYTES: Final = 256 * 1024
"""The largest input schema accepted, as compact JSON (MCP servers' schemas are a few KB)."""
MAX_SCHEMA_DEPTH: Final = 64
"""The deepest nesting of JSON objects and arrays accepted in an input schema."""
MAX_SCHEMA_NODES: Final = 20_000
"""The most schema nodes an input schema may expand to when a dialect inlines the
references that carry sibling keywords."""
_MAX_ERRORS_SHOWN: Final = 5
_MAX_MESSAGE_CHARS: Final = 300

# Where a keyword's value holds subschemas: a map of them, one, or a list of them.
_SCHEMA_MAPS: Final = (
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
)
_SCHEMA_ONE: Final = (
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
)
_SCHEMA_LISTS: Final = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
# Keywords whose value is data (kept as is in what the model is shown).
_VALUE_KEYWORDS: Final = frozenset(
    (
        "type",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
        "format",
        "title",
        "description",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "examples",
        "contentEncoding",
        "contentMediaType",
    )
)
# Keywords that apply their subschemas to the value itself (not to a part of it): a loop
# through these never ends.
_IN_PLACE_ONE: Final = ("not", "if", "then", "else")
_IN_PLACE_LISTS: Final = ("allOf", "anyOf", "oneOf")
# Keywords whose value is data that may hold JSON objects.
_DATA_KEYWORDS: Final = ("const", "enum", "default", "examples")
# Bounds ``jsonschema``'s messages do not state ("is too long"): added to the message.
_UNSTATED_BOUNDS: Final = frozenset(
    (
        "maxLength",
        "minLength",
        "maxItems",
        "minItems",
        "maxProperties",
        "minProperties",
    )
)
# Keywords a dialect compiler ignores beside a ``$ref`` (it does not inline for them).
_ANNOTATIONS: Final = frozenset(
    (
        "title",
        "$comment",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
    )
)


# --------------------------------------------------------------------------- reading a schema


def _children(node: JsonSchema) -> Iterator[tuple[str, object]]:
    """The subschemas of ``node`` (those ``jsonschema`` applies), with their pointer step."""
    for key in _SCHEMA_MAPS:
        sub = node.get(key)
        if isinstance(sub, dict):
            for name, child in cast("dict[str, object]", sub).items():
                yield f"{key}/{_escape(name)}", child
    for key in _SCHEMA_ONE:
        yield_one = node.get(key)
        if isinstance(yield_one, dict | bool):
            yield key, yield_one
    for key in _SCHEMA_LISTS:
        items = node.get(key)
        if isinstance(items, list):
            for i, child in enumerate(cast("list[object]", items)):
                yield f"{key}/{i}", child
    deps = node.get("dependencies")  # draft 7: a schema, or a list of property names
    if isinstance(deps, dict):
        for name, child in cast("dict[str, object]", deps).items():
            if isinstance(child, dict | bool):
                yield f"dependencies/{_escape(name)}", child


def _walk(root: object, path: str = "#") -> Iterator[tuple[str, JsonSchema]]:
    """Every schema object under ``root`` with its JSON pointer (boolean schemas skipped)."""
    pending: list[tuple[str, object]] = [(path, root)]
    while pending:
        where, node = pending.pop()
        if isinstance(node, dict):
            schema = cast("JsonSchema", node)
            yield where, schema
            pending += [(f"{where}/{step}", child) for step, child in _children(schema)]


def _as_schema(value: object) -> JsonSchema | None:
    return cast("JsonSchema", value) if isinstance(value, dict) else None


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _depth(value: object) -> int:
    """How deeply JSON objects and arrays nest in ``value`` (without recursion)."""
    deepest = 0
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        node, level = pending.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            if level > MAX_SCHEMA_DEPTH:
                return level
            items = (
                cast("dict[str, object]", node).values()
                if isinstance(node, dict)
                else cast("list[object]", node)
            )
            pending += [(child, level + 1) for child in items]
    return deepest


def _target(root: JsonSchema, ref: str, name: str) -> object:
    """What the local reference ``ref`` (``#`` or ``#/a/b``) points to in ``root``."""
    node: object = root
    for raw in ref[2:].split("/") if ref != "#" else []:
        part = raw.replace("%25", "%").replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = cast("dict[str, object]", node)[part]
        elif isinstance(node, list) and part.isdigit():
            items = cast("list[object]", node)
            if int(part) >= len(items):
                raise ToolDefinitionError(f"{name}: $ref {ref!r} points to nothing in the schema")
            node = items[int(part)]
        else:
            raise ToolDefinitionError(f"{name}: $ref {ref!r} points to nothing in the schema")
    if not isinstance(node, dict | bool):
        raise ToolDefinitionError(f"{name}: $ref {ref!r} does not point to a schema")
    return cast("object", node)


def _check_nodes(root: JsonSchema, name: str) -> dict[str, object]:
    """Refuse what no tool schema may hold (references outside it, dynamic references,
    embedded resources, an empty enum); return its local references and their targets."""
    targets: dict[str, object] = {}
    for where, node in _walk(root):
        if "$dynamicRef" in node or "$recursiveRef" in node:
            raise ToolDefinitionError(
                f"{name}: {where} uses $dynamicRef/$recursiveRef, which tool schemas cannot "
                "use; use $ref into $defs"
            )
        for key in _DATA_KEYWORDS:
            if key in node and _holds_ref_key(node[key]):
                raise ToolDefinitionError(
                    f'{name}: {where}/{key} holds an object with a "$ref" key, which JSON '
                    "Schema tooling would read as a reference; it is not supported"
                )
        if node.get("enum") == []:
            raise ToolDefinitionError(f"{name}: {where} has an empty enum, which admits no value")
        if where != "#" and "$id" in node:
            raise ToolDefinitionError(
                f"{name}: {where} has an $id of its own (an embedded resource); tool "
                "schemas must be one resource, with $defs"
            )
        ref = node.get("$ref")
        if ref is None:
            continue
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            raise ToolDefinitionError(
                f"{name}: {where} has $ref {ref!r}; only references inside the schema "
                "(#/$defs/...) are used, and nothing outside it is ever fetched"
            )
        targets[ref] = _target(root, ref, name)
    return targets


def _holds_ref_key(value: object) -> bool:
    """Whether a JSON value has an object with a string ``$ref`` anywhere in it."""
    pending: list[object] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            members = cast("dict[str, object]", item)
            if isinstance(members.get("$ref"), str):
                return True
            pending += members.values()
        elif isinstance(item, list):
            pending += cast("list[object]", item)
    return False


def _in_place(node: JsonSchema, targets: dict[str, object]) -> Iterator[object]:
    """The subschemas applied to the same value as ``node`` itself."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref in targets:
        yield targets[ref]
    for key in _IN_PLACE_ONE:
        if isinstance(node.get(key), dict):
            yield node[key]
    for key in _IN_PLACE_LISTS:
        yield from cast("list[object]", node.get(key) or [])
    deps = node.get("dependentSchemas")
    if isinstance(deps, dict):
        yield from cast("dict[str, object]", deps).values()


def _check_loops(root: JsonSchema, targets: dict[str, object], name: str) -> None:
    """Refuse a chain of references that comes back to where it started on the same value."""
    done: set[int] = set()
    for candidate in [root, *targets.values()]:
        start = _as_schema(candidate)
        if start is None or id(start) in done:
            continue
        # depth-first, iterative: (node, its in-place children still to visit)
        on_path: set[int] = {id(start)}
        stack: list[tuple[JsonSchema, Iterator[object]]] = [(start, _in_place(start, targets))]
        while stack:
            node, pending = stack[-1]
            child = next(pending, None)
            if child is None:
                stack.pop()
                on_path.discard(id(node))
                done.add(id(node))
                continue
            sub = _as_schema(child)
            if sub is None or id(sub) in done:
                continue
            if id(sub) in on_path:
                raise ToolDefinitionError(
                    f"{name}: its $ref chain loops back to itself without descending into "
                    "the value (a schema no value can be checked against)"
                )
            on_path.add(id(sub))
            stack.append((sub, _in_place(sub, targets)))


def _expanded_nodes(root: JsonSchema, targets: dict[str, object]) -> int:
    """How many nodes the schema has once the references with sibling keywords are inlined
    (as a dialect compiler does), stopping early past :data:`MAX_SCHEMA_NODES`."""
    sizes: dict[int, int] = {}

    def size(node: object, inlining: frozenset[str]) -> int:
        if not isinstance(node, dict):
            return 1
        schema = cast("JsonSchema", node)
        if id(schema) in sizes:
            return sizes[id(schema)]
        total = 1
        ref = schema.get("$ref")
        siblings = set(schema) - {"$ref"} - _ANNOTATIONS
        if isinstance(ref, str) and siblings and ref not in inlining:
            total += size(targets[ref], inlining | {ref})
        for _, child in _children(schema):
            total += size(child, inlining)
            if total > MAX_SCHEMA_NODES:
                break
        if not inlining:
            sizes[id(schema)] = total
        return total

    return size(root, frozenset())


def _validator(schema: JsonSchema, text: str, name: str) -> Validator:
    """``jsonschema``'s validator for ``schema`` (``text``: its compact JSON): its draft,
    formats asserted, and a registry with nothing in it, so no reference is ever looked up
    outside the schema."""
    problem = _metaschema_problem(text)
    if problem is not None:
        raise ToolDefinitionError(f"{name}: the input schema is not a valid JSON Schema {problem}")
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    nothing: referencing.Registry[Any] = referencing.Registry()  # Any: JSON documents
    return cls(schema, registry=nothing, format_checker=cls.FORMAT_CHECKER)


@functools.lru_cache(maxsize=512)
def _metaschema_problem(text: str) -> str | None:
    """Where and why the schema ``text`` breaks its draft's metaschema, or ``None``. Cached:
    the check costs milliseconds, and a server lists the same schemas again on every
    reconnect and refresh."""
    schema: JsonSchema = json.loads(text)
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return f"at {where}: {_short(exc.message)}"
    return None


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE_CHARS else text[: _MAX_MESSAGE_CHARS - 3] + "..."


# ---------------------------------------------------------------- what the model is shown


def _shown(
    node: object, refs: dict[str, type[_SchemaDef]], handler: GetJsonSchemaHandler
) -> Any:  # Any: JSON Schema
    """A copy of schema ``node`` as the model is shown it: its references pointing into the
    action schema's ``$defs``, keywords outside the vocabulary left out, a boolean schema
    written as an object where the dialect compilers expect one (a property, a member)."""
    if node is True:
        return {}
    if node is False:
        return {"not": {}}
    if not isinstance(node, dict):
        return copy.deepcopy(node)
    src = cast("JsonSchema", node)
    out: JsonSchema = {}
    for key, value in src.items():
        if key == "$ref" and isinstance(value, str) and value in refs:
            ref_schema = core_schema.definition_reference_schema(refs[value].core_ref())
            # A list routes through pydantic's generator, which registers the reference.
            out["$ref"] = handler(core_schema.list_schema(ref_schema))["items"]["$ref"]
        elif (
            key in _SCHEMA_MAPS and key not in ("$defs", "definitions") and isinstance(value, dict)
        ):
            members = cast("dict[str, object]", value)
            out[key] = {k: _shown(v, refs, handler) for k, v in members.items()}
        elif key == "items" and isinstance(value, list):  # draft 7's tuple form
            out["prefixItems"] = [_shown(v, refs, handler) for v in cast("list[object]", value)]
        elif key == "additionalItems" and isinstance(src.get("items"), list):
            out["items"] = value if isinstance(value, bool) else _shown(value, refs, handler)
        elif key in _SCHEMA_ONE and key != "additionalItems":
            # true/false stay as they are here (additionalProperties: false closes an object)
            shown = value if isinstance(value, bool) else _shown(value, refs, handler)
            out.setdefault(key, shown)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_shown(v, refs, handler) for v in cast("list[object]", value)]
        elif key in _VALUE_KEYWORDS:
            out[key] = copy.deepcopy(value)
    return out


class _SchemaDef(BaseModel):
    """One definition of a data-defined schema, as a ``$defs`` entry of pydantic's output
    (a model only for its JSON Schema: nothing is validated with it)."""

    body: ClassVar[object] = None
    refs: ClassVar[dict[str, type[_SchemaDef]]] = {}

    @classmethod
    def core_ref(cls) -> str:
        """Pydantic's reference to this definition."""
        schema = cast("dict[str, Any]", cls.__pydantic_core_schema__)  # Any: a core schema
        return str(schema["ref"])

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchema:
        return _shown(cls.body, cls.refs, handler)


class _DataArgs(BaseModel):
    """The arguments of a tool defined as data: whatever its schema accepts, as sent."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    source_schema: ClassVar[JsonSchema] = {}
    schema_validator: ClassVar[Validator | None] = None
    refs: ClassVar[dict[str, type[_SchemaDef]]] = {}

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchema:
        for definition in cls.refs.values():  # every definition gets its $defs entry
            handler(core_schema.list_schema(definition.__pydantic_core_schema__))
        root = {k: v for k, v in cls.source_schema.items() if k not in ("$defs", "definitions")}
        ref = root.get("$ref")
        if isinstance(ref, str) and ref in cls.refs:  # a root that only names its definition
            target = _as_schema(cls.refs[ref].body) or {}
            root = {**target, **{k: v for k, v in root.items() if k != "$ref"}}
        return _shown(root, cls.refs, handler)

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: object) -> object:
        problems = cls.problems(data)
        if problems:
            raise PydanticCustomError("json_schema", "{problems}", {"problems": problems})
        return data

    @classmethod
    def problems(cls, data: object) -> str | None:
        """What ``data`` breaks of the schema, in words for the model; ``None``: valid."""
        validator = cls.schema_validator
        assert validator is not None
        try:
            errors = sorted(validator.iter_errors(cast("Any", data)), key=relevance)  # Any: JSON
        except RecursionError:
            return "the arguments are nested too deeply"
        if not errors:
            return None
        lines: list[str] = []
        for error in errors[:_MAX_ERRORS_SHOWN]:
            where = ".".join(str(p) for p in error.absolute_path)
            message = _short(error.message)
            if error.validator in _UNSTATED_BOUNDS:  # "'Lyons' is too long": say the bound
                message += f" ({error.validator} {json.dumps(error.validator_value)})"
            lines.append(f"{where}: {message}" if where else message)
        if len(errors) > _MAX_ERRORS_SHOWN:
            lines.append(f"... and {len(errors) - _MAX_ERRORS_SHOWN} more")
        return "; ".join(lines)


def _def_name(ref: str, model_name: str) -> str:
    """The ``$defs`` name of a reference's target: the model's name, then the schema's own
    definition name (``book_trip_args_Place``) or the pointer's steps. Prefixed, so that a
    server's definition can never share a name with the contract's own (``FinishAction``),
    another tool's or the run's output type (pydantic would rename both)."""
    parts = [p for p in ref[2:].split("/") if p] if ref != "#" else ["self"]
    if len(parts) == 2 and parts[0] in ("$defs", "definitions"):
        parts = parts[1:]
    base = "_".join([model_name, *parts]).replace("~1", "/").replace("~0", "~")
    return re.sub(r"[^A-Za-z0-9_.-]", "_", base)


def model_from_json_schema(name: str, schema: dict[str, Any]) -> type[BaseModel]:  # Any: JSON
    """Make the argument model of a tool defined as data (see the module's text).

    Args:
        name: a name for the model (used in generated schemas and errors).
        schema: a JSON Schema of ``type: object``; it is copied, not kept.

    Returns:
        A pydantic model whose JSON Schema is ``schema`` (its definitions in ``$defs``) and
        whose validation is ``jsonschema``'s against ``schema``; a dump gives the arguments
        as sent.

    Raises:
        ToolDefinitionError: the schema is not an object schema, is not a valid JSON
            Schema, is too large or deep, refers outside itself, or loops through
            references; the message says which.
    """
    if not isinstance(schema, dict):  # pyright: ignore[reportUnnecessaryIsInstance]  # JSON data
        raise ToolDefinitionError(f"{name}: a tool's parameters must be an object schema")
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise ToolDefinitionError(
            f"{name}: the input schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
        )
    try:
        text = json.dumps(schema, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"{name}: the input schema is not JSON: {exc}") from exc
    if len(text) > MAX_SCHEMA_BYTES:
        raise ToolDefinitionError(
            f"{name}: the input schema is {len(text)} bytes; the limit is {MAX_SCHEMA_BYTES}"
        )
    source: JsonSchema = json.loads(text)  # a copy the caller cannot change afterwards
    root = source
    kind: object = root.get("type", "object")
    if kind != "object" and not (isinstance(kind, list) and "object" in kind):
        raise ToolDefinitionError(f"{name}: a tool's parameters must be an object schema")
    props: object = root.get("properties") or {}
    for prop in cast("dict[str, object]", props) if isinstance(props, dict) else {}:
        if not prop:
            raise ToolDefinitionError(f"{name}: property name {prop!r} is not supported")
    validator = _validator(source, text, name)
    targets = _check_nodes(source, name)
    _check_loops(source, targets, name)
    if _expanded_nodes(source, targets) > MAX_SCHEMA_NODES:
        raise ToolDefinitionError(
            f"{name}: the input schema expands to more than {MAX_SCHEMA_NODES} nodes once "
            "its references are inlined"
        )
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name) or "Args"
    refs: dict[str, type[_SchemaDef]] = {}
    for ref, target in targets.items():
        body = target
        if ref == "#" and isinstance(target, dict):
            body = {
                k: v
                for k, v in cast("JsonSchema", target).items()
                if k not in ("$defs", "definitions")
            }
        namespace = {"body": body, "__module__": __name__}
        refs[ref] = type(_def_name(ref, safe), (_SchemaDef,), namespace)
    for definition in refs.values():
        definition.refs = refs
    namespace: dict[str, object] = {
        "source_schema": source,
        "schema_validator": validator,
        "refs": refs,
    }
    return type(safe, (_DataArgs,), namespace)
