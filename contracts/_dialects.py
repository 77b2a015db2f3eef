"""Schema dialects: the per-step action schema in the form each provider family accepts.

:meth:`ActionSchema.json_schema` is pydantic's JSON Schema of the action union. Providers
accept different subsets of JSON Schema, so each dialect compiler rewrites a deep copy of
it (never the original). Whatever a dialect strips is still enforced: every reply goes
through :meth:`ActionSchema.parse`, which validates against the full pydantic models, so a
bound the provider could not enforce is checked client-side and the model is re-asked.

Common to every dialect: ``title`` and ``discriminator`` are dropped (noise to a model;
pydantic's validator still uses the discriminator), ``oneOf`` becomes ``anyOf`` and a
union nested in a union is flattened into it, and a ``$ref`` with sibling keywords is
inlined (the definitions stay in ``$defs`` otherwise). A keyword a dialect cannot send is
moved into the node's ``description`` as text ("Constraints: at least 1; at most 1000."),
unless the description already says so.

``openai_strict``
    OpenAI Structured Outputs, ``strict: true``
    (https://platform.openai.com/docs/guides/structured-outputs#supported-schemas):
    the root must be an object and not ``anyOf``, so the union is wrapped as
    ``{"action": <union>}`` (:meth:`WireSchema.unwrap` takes it out again); every object
    gets ``additionalProperties: false`` and lists every property in ``required``; the
    supported bounds are kept (``pattern``, ``format`` from the documented list,
    ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``,
    ``minItems``, ``maxItems``), everything else (``minLength``, ``maxLength``, ...) moves
    into descriptions; ``default`` is dropped. An optional property whose type admits
    ``null`` stays nullable; one whose type does not (``limit: int = 10``) becomes a
    required property of its own type with "Default: 10." in its description, because a
    ``null`` there would be a valid wire reply that pydantic then rejects (openai-python's
    ``to_strict_json_schema`` makes the same choice). Tool variants are grouped under one
    ``tool`` variant whose ``call`` is a union of ``{tool, args}`` objects, so no two
    members of a union start with the same key and value: OpenAI answers 400 "Objects
    provided via 'anyOf' must not share identical first keys" otherwise. That rule is not
    in OpenAI's documentation; it is an error message reported by users
    (https://engineering.fractional.ai/openai-structured-output-fixes). ``unwrap`` turns
    the grouped reply back into the flat action.
``anthropic``
    Claude structured outputs, ``output_config.format`` ``json_schema``
    (https://platform.claude.com/docs/en/build-with-claude/structured-outputs#json-schema-limitations):
    ``additionalProperties: false`` on every object; numeric bounds, ``minLength``,
    ``maxLength``, ``maxItems`` and ``minItems`` above 1 are not supported and move into
    descriptions; ``format`` is kept for the documented list; ``pattern`` is kept unless it
    uses a documented unsupported regex feature (backreferences, lookaround, ``\\b``).
    Optional properties stay optional (Anthropic allows them; each counts toward the limit
    of 24). An optional property that defaults to ``None`` loses its ``null`` branch
    (omitting it means ``None``), so it does not count toward the 16 union-typed
    parameters. Those limits are per request, across all strict schemas; see
    :func:`anthropic_limits`. The documentation does not say whether a root ``anyOf`` is
    accepted here (a tool's ``input_schema`` rejects one), so the union is wrapped as for
    OpenAI.
``gemini``
    Gemini ``generationConfig.responseJsonSchema`` (JSON Schema, not the OpenAPI subset of
    ``responseSchema``; https://ai.google.dev/api/generate-content#FIELDS.response_json_schema,
    whose field documentation Google's genai SDKs reproduce). Kept close to pydantic's
    output. The documented supported keywords are ``$id``,
    ``$defs``, ``$ref``, ``$anchor``, ``type``, ``format``, ``title``, ``description``,
    ``enum`` (strings and numbers), ``items``, ``prefixItems``, ``minItems``, ``maxItems``,
    ``minimum``, ``maximum``, ``anyOf``, ``oneOf``, ``properties``,
    ``additionalProperties``, ``required`` and ``propertyOrdering``; a ``$ref`` may have no
    sibling keywords. So ``const`` becomes a one-value ``enum``, other bounds and defaults
    move into descriptions, and ``propertyOrdering`` pins the key order (``thought`` before
    the rest). The root union is not wrapped.
``json_prompt``
    JSON mode (DeepSeek ``response_format: {"type": "json_object"}``,
    https://api-docs.deepseek.com/guides/json_mode, and local servers): nothing constrains
    decoding, so :attr:`WireSchema.prompt` carries the compact schema and one instruction
    line, and contains the word "json" (DeepSeek requires it). Bounds and defaults are kept
    (they are instructions here). DeepSeek also asks for an example of the JSON: the
    contract document's worked examples provide them.

Adapters call :func:`choose_form` first (the typed form falls back to the generic form when
it exceeds a dialect's documented limits or holds an open object a strict dialect cannot
express), then :func:`compile_wire_schema`, and pass every reply through
:meth:`WireSchema.unwrap` before :meth:`ActionSchema.parse`.
"""

from __future__ import annotations

import copy
import json
import re
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal, cast, get_args

from ._schema import ActionSchema
from .errors import ConfigurationError

__all__ = [
    "ANTHROPIC_MAX_OPTIONAL_PARAMS",
    "ANTHROPIC_MAX_UNION_PARAMS",
    "AnthropicLimitReport",
    "Dialect",
    "WireSchema",
    "anthropic_limits",
    "choose_form",
    "compile_parameters",
    "compile_wire_schema",
    "fits_anthropic",
]

JsonSchema = dict[str, Any]  # Any: JSON Schema is arbitrary JSON data

Dialect = Literal["openai_strict", "anthropic", "gemini", "json_prompt"]
_DIALECTS: Final[tuple[str, ...]] = get_args(Dialect)

_WIRE_SCHEMA_NAME: Final = "next_action"
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


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Keywords every dialect drops: annotations that do not constrain the value.
_ANNOTATIONS: Final = _words(
    "title discriminator examples example deprecated readOnly writeOnly $comment $schema $id "
    "$anchor contentEncoding contentMediaType"
)
# Keywords the compiler rebuilds itself.
_STRUCTURE: Final = _words(
    "type description properties required additionalProperties items prefixItems anyOf oneOf "
    "allOf $ref $defs enum const default"
)
_NULL: Final[JsonSchema] = {"type": "null"}
_FENCE: Final = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)
# Regex features Anthropic documents as unsupported in ``pattern``.
_UNSUPPORTED_REGEX: Final = re.compile(r"\\[1-9]|\(\?<?[=!]|\\[bB]")

_JSON_PROMPT: Final = (
    "Your reply must be json that conforms to this JSON Schema:\n"
    "{schema}\n"
    "Reply with exactly one JSON object that matches the schema: no prose, no code fences."
)


@dataclass(frozen=True)
class _Rules:
    """What one dialect keeps, moves into descriptions, or rewrites."""

    kept: frozenset[str] | None = None  # constraint keywords sent as they are; None: all
    formats: frozenset[str] | None = None  # string formats sent; None: every format
    max_min_items: int | None = None  # a larger minItems moves into the description
    simple_patterns_only: bool = False  # a pattern with lookaround etc. moves too
    close_objects: bool = False  # additionalProperties: false on every object
    all_required: bool = False  # every property listed in required
    keep_optional_defaults: bool = False  # else a default moves into the description
    optional_none_drops_null: bool = False  # an optional None-default loses its null branch
    const_as_enum: bool = False
    property_ordering: bool = False
    wrap_union: bool = False  # the root must be an object: {"action": <union>}
    group_tool_calls: bool = False  # typed tool variants under one {type: tool, call}


_RULES: Final[dict[str, _Rules]] = {
    "openai_strict": _Rules(
        kept=_words(
            "pattern format minimum maximum exclusiveMinimum exclusiveMaximum multipleOf "
            "minItems maxItems"
        ),
        formats=_words("date-time time date duration email hostname ipv4 ipv6 uuid"),
        close_objects=True,
        all_required=True,
        wrap_union=True,
        group_tool_calls=True,
    ),
    "anthropic": _Rules(
        kept=frozenset({"format", "minItems", "pattern"}),
        formats=_words("date-time time date duration email hostname uri ipv4 ipv6 uuid"),
        max_min_items=1,
        simple_patterns_only=True,
        close_objects=True,
        keep_optional_defaults=True,
        optional_none_drops_null=True,
        wrap_union=True,
    ),
    "gemini": _Rules(
        kept=frozenset({"format", "minItems", "maxItems", "minimum", "maximum"}),
        const_as_enum=True,
        property_ordering=True,
    ),
    "json_prompt": _Rules(keep_optional_defaults=True),
}


def _as_schema(value: object) -> JsonSchema | None:
    """``value`` as a JSON object, or ``None``."""
    return cast("JsonSchema", value) if isinstance(value, dict) else None


def _as_list(value: object) -> list[Any] | None:  # Any: JSON array items
    """``value`` as a JSON array, or ``None``."""
    return cast("list[Any]", value) if isinstance(value, list) else None


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _count(count: object, noun: str, nouns: str) -> str:
    return f"{_json(count)} {noun if count == 1 else nouns}"


def _phrase(key: str, value: object) -> str:
    """A constraint a dialect cannot send, as text for the description."""
    match key:
        case "minLength":
            return f"at least {_count(value, 'character', 'characters')}"
        case "maxLength":
            return f"at most {_count(value, 'character', 'characters')}"
        case "minimum":
            return f"at least {_json(value)}"
        case "maximum":
            return f"at most {_json(value)}"
        case "exclusiveMinimum":
            return f"greater than {_json(value)}"
        case "exclusiveMaximum":
            return f"less than {_json(value)}"
        case "multipleOf":
            return f"a multiple of {_json(value)}"
        case "minItems":
            return f"at least {_count(value, 'item', 'items')}"
        case "maxItems":
            return f"at most {_count(value, 'item', 'items')}"
        case "uniqueItems":
            return "items must be unique" if value else ""
        case "minProperties":
            return f"at least {_count(value, 'property', 'properties')}"
        case "maxProperties":
            return f"at most {_count(value, 'property', 'properties')}"
        case "pattern":
            return f"must match the regular expression {value}"
        case "format":
            return f"format {value}"
        case "const":
            return f"must be {_json(value)}"
        case _:
            return f"{key} {_json(value)}"


_PHRASE_ORDER: Final = ("at least", "greater than", "at most", "less than")


def _phrase_rank(phrase: str) -> int:
    """Lower bounds before upper bounds, then everything else (stable)."""
    starts = [i for i, prefix in enumerate(_PHRASE_ORDER) if phrase.startswith(prefix)]
    return starts[0] if starts else len(_PHRASE_ORDER)


def _describe(description: object, phrases: list[str], default_note: str | None) -> str | None:
    """The description with the moved constraints (and default) appended as sentences."""
    text = description if isinstance(description, str) else ""
    lowered = text.lower()
    missing = [p for p in dict.fromkeys(phrases) if p and p.lower() not in lowered]
    parts = [text.strip()] if text.strip() else []
    if parts and (missing or default_note) and not parts[0].endswith((".", "!", "?")):
        parts[0] += "."
    if missing:
        parts.append("Constraints: " + "; ".join(missing) + ".")
    if default_note:
        parts.append(default_note)
    return " ".join(parts) if parts else None


def _is_union_only(node: JsonSchema) -> bool:
    return set(node) == {"anyOf"}


def _admits_null(node: JsonSchema) -> bool:
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    members = _as_list(node.get("anyOf"))
    return members is not None and any(
        (m := _as_schema(member)) is not None and _admits_null(m) for member in members
    )


def _resolve(defs: JsonSchema, ref: str) -> JsonSchema:
    """The definition in ``defs`` that the local reference ``#/$defs/<name>`` points to."""
    prefix = "#/$defs/"
    target = _as_schema(defs.get(ref[len(prefix) :])) if ref.startswith(prefix) else None
    if target is None:
        raise ConfigurationError(
            f"Cannot resolve $ref {ref!r}: only references into the schema's own $defs "
            "are supported."
        )
    return target


class _Compiler:
    """Rewrites one pydantic JSON Schema (read only) into a new one for one dialect."""

    def __init__(self, rules: _Rules, defs: JsonSchema) -> None:
        self._rules = rules
        self._defs = defs
        self._inlining: list[str] = []

    def resolve(self, ref: str) -> JsonSchema:
        """The definition a local ``#/$defs/...`` reference points to."""
        return _resolve(self._defs, ref)

    def source(self, src: JsonSchema) -> JsonSchema:
        """``src`` with a ``$ref`` resolved (siblings win), still in pydantic's form."""
        ref = src.get("$ref")
        if isinstance(ref, str):
            return {**self.resolve(ref), **{k: v for k, v in src.items() if k != "$ref"}}
        return src

    def node(
        self, src: JsonSchema, *, optional: bool = False, is_property: bool = False
    ) -> JsonSchema:
        """Compile one schema node.

        Args:
            src: the source node (not modified).
            optional: the node is a property not listed in its object's ``required``.
            is_property: the node is the value of an object property.
        """
        all_of = _as_list(src.get("allOf"))
        if all_of is not None and len(all_of) == 1 and (only := _as_schema(all_of[0])):
            rest = {k: v for k, v in src.items() if k != "allOf"}
            return self.node({**only, **rest}, optional=optional, is_property=is_property)
        ref = src.get("$ref")
        if isinstance(ref, str):
            siblings = {k: v for k, v in src.items() if k != "$ref" and k not in _ANNOTATIONS}
            if not siblings or ref in self._inlining:  # a cycle keeps the bare reference
                return {"$ref": ref}
            self._inlining.append(ref)
            try:
                merged = {**self.resolve(ref), **siblings}
                return self.node(merged, optional=optional, is_property=is_property)
            finally:
                self._inlining.pop()
        if optional and self._rules.optional_none_drops_null and src.get("default", 0) is None:
            dropped = self._drop_null(src)
            if dropped is not None:
                return self.node(dropped, optional=optional, is_property=is_property)
        return self._build(src, optional=optional, is_property=is_property)

    def _drop_null(self, src: JsonSchema) -> JsonSchema | None:
        """``src`` without its ``null`` branch and its ``None`` default, if it has one."""
        members = _as_list(src.get("anyOf", src.get("oneOf")))
        if members is None or _NULL not in members or len(members) < 2:
            return None
        rest = [m for m in members if m != _NULL]
        base = {k: v for k, v in src.items() if k not in ("anyOf", "oneOf", "default")}
        only = _as_schema(rest[0]) if len(rest) == 1 else None
        if only is not None:
            return {**only, **base}
        return {**base, "anyOf": rest}

    def _build(self, src: JsonSchema, *, optional: bool, is_property: bool) -> JsonSchema:
        rules = self._rules
        out: JsonSchema = {}
        phrases: list[str] = []
        if "type" in src:
            out["type"] = src["type"]
        members = _as_list(src.get("anyOf", src.get("oneOf")))
        if members is not None:
            out["anyOf"] = self._union(members)
        if "const" in src:
            value: object = src["const"]
            if not rules.const_as_enum:
                out["const"] = value
            elif isinstance(value, str | int | float) and not isinstance(value, bool):
                out["enum"] = [value]
            else:
                phrases.append(_phrase("const", value))
        if "enum" in src:
            out["enum"] = list(cast("list[Any]", src["enum"]))
        if "properties" in src or src.get("type") == "object":
            self._object(src, out)
        items = _as_schema(src.get("items"))
        if items is not None:
            out["items"] = self.node(items)
        prefix_items = _as_list(src.get("prefixItems"))
        if prefix_items is not None:
            out["prefixItems"] = [self.node(cast("JsonSchema", p)) for p in prefix_items]
        all_of = _as_list(src.get("allOf"))
        if all_of is not None:
            out["allOf"] = [self.node(cast("JsonSchema", m)) for m in all_of]
        for key, value in src.items():
            if key in _STRUCTURE or key in _ANNOTATIONS:
                continue
            if self._sends(key, value):
                out[key] = value
            else:
                phrases.append(_phrase(key, value))
        phrases.sort(key=_phrase_rank)
        default_note: str | None = None
        if "default" in src and is_property and optional:
            default: object = src["default"]
            if rules.keep_optional_defaults:
                out["default"] = default
            elif default is not None:
                default_note = f"Default: {_json(default)}."
        description = _describe(src.get("description"), phrases, default_note)
        if description is not None:
            out["description"] = description
        return out

    def _sends(self, key: str, value: object) -> bool:
        """Whether the dialect sends constraint ``key`` as it is."""
        rules = self._rules
        if rules.kept is None:
            return True
        if key not in rules.kept:
            return False
        if key == "format" and rules.formats is not None:
            return value in rules.formats
        if key == "minItems" and rules.max_min_items is not None:
            return isinstance(value, int) and value <= rules.max_min_items
        if key == "pattern" and rules.simple_patterns_only:
            return isinstance(value, str) and not _UNSUPPORTED_REGEX.search(value)
        return True

    def _union(self, members: list[Any]) -> list[JsonSchema]:  # Any: JSON array items
        compiled: list[JsonSchema] = []
        for member in members:
            item = self.node(cast("JsonSchema", member))
            if _is_union_only(item):
                compiled.extend(cast("list[JsonSchema]", item["anyOf"]))
            else:
                compiled.append(item)
        return compiled

    def _object(self, src: JsonSchema, out: JsonSchema) -> None:
        rules = self._rules
        props = _as_schema(src.get("properties")) or {}
        required_src = [r for r in _as_list(src.get("required")) or [] if r in props]
        compiled: JsonSchema = {}
        for name, sub in props.items():
            optional = name not in required_src
            compiled[name] = self.node(
                cast("JsonSchema", sub),
                optional=optional and not rules.all_required,
                is_property=True,
            )
            wire = compiled[name]
            if optional and rules.all_required and "$ref" not in wire and not _admits_null(wire):
                # Required on the wire with its own type: the model states the value.
                default: object = cast("JsonSchema", sub).get("default")
                if default is not None and "default" in cast("JsonSchema", sub):
                    note = f"Default: {_json(default)}."
                    wire["description"] = _describe(wire.get("description"), [], note)
        out.setdefault("type", "object")
        out["properties"] = compiled
        if rules.all_required:
            out["required"] = list(compiled)
        elif "required" in src:
            out["required"] = required_src
        if rules.close_objects:
            out["additionalProperties"] = False
        elif "additionalProperties" in src:
            extra: object = src["additionalProperties"]
            extra_schema = _as_schema(extra)
            out["additionalProperties"] = self.node(extra_schema) if extra_schema else extra
        if rules.property_ordering and compiled:
            out["propertyOrdering"] = list(compiled)


def _walk(node: object, path: str = "#") -> Iterator[tuple[str, JsonSchema]]:
    """Every schema node under ``node`` (``$defs`` included), with its JSON pointer."""
    schema = _as_schema(node)
    if schema is None:
        return
    yield path, schema
    for key in ("properties", "$defs"):
        children = _as_schema(schema.get(key)) or {}
        for name, child in children.items():
            yield from _walk(child, f"{path}/{key}/{name}")
    for key in ("items", "additionalProperties"):
        yield from _walk(schema.get(key), f"{path}/{key}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, child in enumerate(_as_list(schema.get(key)) or []):
            yield from _walk(child, f"{path}/{key}/{i}")


def _refs(node: object) -> Iterator[str]:
    """The ``$ref`` targets used under ``node`` (not following them)."""
    for _, schema in _walk(node):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield ref


def _used_defs(root: JsonSchema, defs: JsonSchema) -> JsonSchema:
    """The definitions reachable from ``root``, in their original order."""
    prefix = "#/$defs/"
    seen: set[str] = set()
    pending = [r[len(prefix) :] for r in _refs(root) if r.startswith(prefix)]
    while pending:
        name = pending.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        pending += [r[len(prefix) :] for r in _refs(defs[name]) if r.startswith(prefix)]
    return {name: d for name, d in defs.items() if name in seen}


def _is_tool_call(schema: JsonSchema) -> bool:
    props = _as_schema(schema.get("properties")) or {}
    kind = _as_schema(props.get("type")) or {}
    return kind.get("const") == "tool" and "tool" in props and "args" in props


def _group_tool_calls(source: JsonSchema, compiler: _Compiler) -> JsonSchema:
    """Replace the nested union of typed tool variants by one ``tool`` variant with ``call``.

    ``{type: "tool", thought, call: {tool, args}}``: every member of both unions then starts
    with a key whose value is unique in its union (see the module docstring).
    """
    union_key = "oneOf" if "oneOf" in source else "anyOf"
    members = _as_list(source.get(union_key))
    if members is None:
        return source
    grouped: list[Any] = []  # Any: JSON array items
    for member in members:
        inner = _as_list((_as_schema(member) or {}).get("oneOf"))
        if inner is None:
            inner = _as_list((_as_schema(member) or {}).get("anyOf"))
        calls = [compiler.source(cast("JsonSchema", m)) for m in inner or []]
        if len(calls) < 2 or not all(_is_tool_call(c) for c in calls):
            grouped.append(member)
            continue
        first = cast("JsonSchema", calls[0]["properties"])
        call_members: list[JsonSchema] = []
        for call in calls:
            props = cast("JsonSchema", call["properties"])
            option: JsonSchema = {
                "type": "object",
                "properties": {"tool": props["tool"], "args": props["args"]},
                "required": ["tool", "args"],
            }
            if "description" in call:
                option["description"] = call["description"]
            call_members.append(option)
        grouped.append(
            {
                "type": "object",
                "description": ("Call one tool: call.tool is its name, call.args its arguments."),
                "properties": {
                    "type": first["type"],
                    "thought": first["thought"],
                    "call": {"anyOf": call_members},
                },
                "required": ["type", "thought", "call"],
            }
        )
    return {**source, union_key: grouped}


def _compile(source: JsonSchema, dialect: str) -> tuple[JsonSchema, bool]:
    """The wire schema of ``source`` for ``dialect``, and whether replies are wrapped."""
    rules = _RULES[dialect]
    source = copy.deepcopy(source)  # the result shares nothing with pydantic's cached schema
    defs = _as_schema(source.get("$defs")) or {}
    compiler = _Compiler(rules, defs)
    if rules.group_tool_calls:
        source = _group_tool_calls(source, compiler)
    root = compiler.node({k: v for k, v in source.items() if k != "$defs"})
    wrapped = rules.wrap_union and root.get("type") != "object"
    if wrapped:
        root = {
            "type": "object",
            "properties": {"action": root},
            "required": ["action"],
            "additionalProperties": False,
        }
    compiled_defs = {name: compiler.node(cast("JsonSchema", d)) for name, d in defs.items()}
    used = _used_defs(root, compiled_defs)
    if used:
        root["$defs"] = used
    return root, wrapped


@dataclass(frozen=True)
class WireSchema:
    """An action schema compiled for one provider dialect.

    Build it with :func:`compile_wire_schema`. Do not mutate :attr:`schema`: it is cached
    and shared by every step that offers the same :class:`ActionSchema`.

    Attributes:
        dialect: the provider family it was compiled for.
        name: the schema's name where a provider asks for one (``next_action``).
        schema: what goes on the wire; for ``json_prompt``, the schema in the prompt.
        wrapped: replies are ``{"action": {...}}`` (the provider needs an object root).
        prompt: ``json_prompt`` only: the text to append to the system prompt.
    """

    dialect: Dialect
    name: str
    schema: JsonSchema
    wrapped: bool
    prompt: str | None

    def unwrap(self, reply: str) -> str:
        """The action JSON inside a reply, ready for :meth:`ActionSchema.parse`.

        For a wrapped dialect, ``{"action": {...}}`` becomes the inner object (and OpenAI's
        grouped ``{"type": "tool", "thought": ..., "call": {"tool": ..., "args": ...}}``
        the flat tool action). A reply whose top-level object already has ``type`` is
        returned unchanged, and so is anything that is not a JSON object: the parser then
        reports what is wrong with it.
        """
        if not self.wrapped:
            return reply
        fenced = _FENCE.match(reply)
        try:
            data: object = json.loads(fenced.group(1) if fenced else reply)
        except ValueError:
            return reply
        outer = _as_schema(data)
        if outer is None or "type" in outer:
            return reply
        inner = _as_schema(outer.get("action"))
        if inner is None:
            return reply
        call = _as_schema(inner.get("call"))
        if inner.get("type") == "tool" and call is not None and "tool" not in inner:
            flat = {k: v for k, v in inner.items() if k != "call"}
            inner = {**flat, "tool": call.get("tool"), "args": call.get("args")}
        return json.dumps(inner, ensure_ascii=False)


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
    for path, node in _walk(schema):
        if "anyOf" in node or "oneOf" in node or isinstance(node.get("type"), list):
            unions.append(path)
        props = _as_schema(node.get("properties"))
        if props is not None:
            required = set(_as_list(node.get("required")) or [])
            optional += [f"{path}/properties/{name}" for name in props if name not in required]
    return AnthropicLimitReport(union_paths=tuple(unions), optional_paths=tuple(optional))


_CACHE: weakref.WeakKeyDictionary[ActionSchema, dict[str, WireSchema]] = weakref.WeakKeyDictionary()


def _check_dialect(dialect: str) -> None:
    if dialect not in _DIALECTS:
        valid = ", ".join(repr(d) for d in _DIALECTS)
        raise ConfigurationError(f"Invalid schema dialect {dialect!r}. Valid dialects: {valid}.")


def compile_wire_schema(schema: ActionSchema, dialect: Dialect) -> WireSchema:
    """Compile an action schema into what ``dialect``'s providers accept.

    The result is cached per schema object and dialect (an :class:`ActionSchema` is frozen
    and lives as long as the run that uses it), so calling this every step is cheap and the
    schema text stays byte-identical across steps (prompt caches keep hitting).

    Args:
        schema: the step's action schema; its pydantic JSON Schema is read, never changed.
        dialect: ``openai_strict``, ``anthropic``, ``gemini`` or ``json_prompt``.

    Raises:
        ConfigurationError: an unknown dialect, or a ``$ref`` outside the schema's ``$defs``.
    """
    _check_dialect(dialect)
    per_schema = _CACHE.get(schema)
    if per_schema is None:
        per_schema = {}
        _CACHE[schema] = per_schema
    wire = per_schema.get(dialect)
    if wire is None:
        body, wrapped = _compile(schema.json_schema(), dialect)
        prompt = None
        if dialect == "json_prompt":
            compact = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
            prompt = _JSON_PROMPT.format(schema=compact)
        wire = WireSchema(
            dialect=dialect, name=_WIRE_SCHEMA_NAME, schema=body, wrapped=wrapped, prompt=prompt
        )
        per_schema[dialect] = wire
    return wire


def compile_parameters(schema: JsonSchema, dialect: Dialect) -> JsonSchema:
    """One tool's argument schema (an object) compiled for ``dialect``: the parameters of a
    native tool definition. The source is not changed."""
    _check_dialect(dialect)
    return _compile(schema, dialect)[0]


def fits_anthropic(schema: ActionSchema) -> bool:
    """Whether ``schema``'s ``anthropic`` wire schema is within Anthropic's limits."""
    return anthropic_limits(compile_wire_schema(schema, "anthropic").schema).fits


def _expressible(source: JsonSchema) -> bool:
    """Whether a strict dialect can express every value ``source`` allows.

    An open object (``dict[str, X]``: ``additionalProperties`` true or a schema) or an
    untyped node (``JsonValue``: ``{}``) cannot be: strict dialects need closed objects.
    """
    typed = ("type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const", "properties")
    for _, node in _walk(source):
        if not any(key in node for key in typed):
            return False
        if node.get("additionalProperties", False) is not False:
            return False
    return True


def _recursive(source: JsonSchema) -> bool:
    """Whether a definition in ``source`` refers back to itself, directly or not."""
    prefix = "#/$defs/"
    defs = _as_schema(source.get("$defs")) or {}
    edges = {
        name: {r[len(prefix) :] for r in _refs(d) if r.startswith(prefix)}
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
    schema = _as_schema(node)
    if schema is None:
        return 0
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return 0 if ref in seen else _depth(_resolve(defs, ref), defs, seen | {ref})
    children: list[object] = list((_as_schema(schema.get("properties")) or {}).values())
    children += [schema.get("items"), schema.get("additionalProperties")]
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        children += _as_list(schema.get(key)) or []
    inner = max((_depth(child, defs, seen) for child in children), default=0)
    return inner + (1 if "properties" in schema else 0)


def _fits_openai(schema: JsonSchema) -> bool:
    """Whether a wire schema is within OpenAI's documented size limits."""
    properties = 0
    enum_values = 0
    chars = sum(len(name) for name in _as_schema(schema.get("$defs")) or {})
    for _, node in _walk(schema):
        props = _as_schema(node.get("properties")) or {}
        properties += len(props)
        chars += sum(len(name) for name in props)
        values = _as_list(node.get("enum")) or []
        enum_values += len(values)
        enum_chars = sum(len(v) for v in values if isinstance(v, str))
        chars += enum_chars
        if len(values) > _OPENAI_LARGE_ENUM and enum_chars > _OPENAI_LARGE_ENUM_CHARS:
            return False
        const: object = node.get("const")
        if isinstance(const, str):
            chars += len(const)
    depth = _depth(schema, _as_schema(schema.get("$defs")) or {})
    return (
        properties <= _OPENAI_MAX_PROPERTIES
        and depth <= _OPENAI_MAX_DEPTH
        and enum_values <= _OPENAI_MAX_ENUM_VALUES
        and chars <= _OPENAI_MAX_STRING_CHARS
    )


def choose_form(schema: ActionSchema, dialect: Dialect) -> ActionSchema:
    """The form of ``schema`` to send in ``dialect``: typed when it fits, else generic.

    The typed form falls back to the generic form (``args_json`` as a string, validated
    client-side) when a strict dialect cannot express it (a tool argument that is an open
    object or any JSON value; on Anthropic, a recursive model) or when its wire schema
    exceeds the dialect's documented limits: Anthropic's 16 union-typed and 24 optional
    parameters, OpenAI's 5000 properties, 10 nesting levels, 1000 enum values and 120,000
    characters of names and values. Gemini and JSON mode document no such limits: their
    schema is returned as is. The generic form is returned even if it also exceeds a limit
    (it holds one union and no optional parameter, so only a huge tool count can).

    Args:
        schema: the step's action schema.
        dialect: the provider family it will be sent to.

    Returns:
        ``schema`` itself, or ``schema.with_form("generic")``.
    """
    _check_dialect(dialect)
    if schema.form == "generic" or dialect not in ("openai_strict", "anthropic"):
        return schema
    source = schema.json_schema()
    # Anthropic documents recursive schemas as unsupported; OpenAI supports them.
    if _expressible(source) and not (dialect == "anthropic" and _recursive(source)):
        wire = compile_wire_schema(schema, dialect).schema
        within = anthropic_limits(wire).fits if dialect == "anthropic" else _fits_openai(wire)
        if within:
            return schema
    return schema.with_form("generic")
