"""The dialect compiler: the rules table (what each dialect keeps, moves into descriptions,
or rewrites) and the rewrite of a pydantic JSON Schema that applies one row of it.

What each dialect's rules mean, and where they come from, is in :mod:`._dialects`.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any, Final, cast

from ._schema_nodes import JsonSchema, as_list, as_schema, refs, resolve_ref, used_defs

__all__ = ["compile_schema"]


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


# Regex features Anthropic documents as unsupported in ``pattern``.
_UNSUPPORTED_REGEX: Final = re.compile(r"\\[1-9]|\(\?<?[=!]|\\[bB]")


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
    members = as_list(node.get("anyOf"))
    return members is not None and any(
        (m := as_schema(member)) is not None and _admits_null(m) for member in members
    )


class _Compiler:
    """Rewrites one pydantic JSON Schema (read only) into a new one for one dialect."""

    def __init__(self, rules: _Rules, defs: JsonSchema) -> None:
        self._rules = rules
        self._defs = defs
        self._inlining: list[str] = []

    def resolve(self, ref: str) -> JsonSchema:
        """The definition a local ``#/$defs/...`` reference points to."""
        return resolve_ref(self._defs, ref)

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
        all_of = as_list(src.get("allOf"))
        if all_of is not None and len(all_of) == 1 and (only := as_schema(all_of[0])):
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
        members = as_list(src.get("anyOf", src.get("oneOf")))
        if members is None or _NULL not in members or len(members) < 2:
            return None
        rest = [m for m in members if m != _NULL]
        base = {k: v for k, v in src.items() if k not in ("anyOf", "oneOf", "default")}
        only = as_schema(rest[0]) if len(rest) == 1 else None
        if only is not None:
            return {**only, **base}
        return {**base, "anyOf": rest}

    def _build(self, src: JsonSchema, *, optional: bool, is_property: bool) -> JsonSchema:
        rules = self._rules
        out: JsonSchema = {}
        phrases: list[str] = []
        if "type" in src:
            out["type"] = src["type"]
        members = as_list(src.get("anyOf", src.get("oneOf")))
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
        items = as_schema(src.get("items"))
        if items is not None:
            out["items"] = self.node(items)
        prefix_items = as_list(src.get("prefixItems"))
        if prefix_items is not None:
            out["prefixItems"] = [self.node(cast("JsonSchema", p)) for p in prefix_items]
        all_of = as_list(src.get("allOf"))
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
        props = as_schema(src.get("properties")) or {}
        required_src = [r for r in as_list(src.get("required")) or [] if r in props]
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
            extra_schema = as_schema(extra)
            out["additionalProperties"] = self.node(extra_schema) if extra_schema else extra
        if rules.property_ordering and compiled:
            out["propertyOrdering"] = list(compiled)


def _is_tool_call(schema: JsonSchema) -> bool:
    props = as_schema(schema.get("properties")) or {}
    kind = as_schema(props.get("type")) or {}
    return kind.get("const") == "tool" and "tool" in props and "args" in props


def _group_tool_calls(source: JsonSchema, compiler: _Compiler) -> JsonSchema:
    """Replace the nested union of typed tool variants by one ``tool`` variant with ``call``.

    ``{type: "tool", thought, call: {tool, args}}``: every member of both unions then starts
    with a key whose value is unique in its union (see ``openai_strict`` in :mod:`._dialects`).
    """
    union_key = "oneOf" if "oneOf" in source else "anyOf"
    members = as_list(source.get(union_key))
    if members is None:
        return source
    grouped: list[Any] = []  # Any: JSON array items
    for member in members:
        inner = as_list((as_schema(member) or {}).get("oneOf"))
        if inner is None:
            inner = as_list((as_schema(member) or {}).get("anyOf"))
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


_ACTION_TYPES: Final = frozenset({"plan", "tool", "finish", "batch", "ask"})
_REF_PREFIX: Final = "#/$defs/"


def _is_action_node(node: JsonSchema) -> bool:
    """An action variant (``type`` a literal action kind) or a grouped call option (``tool``
    and ``args``)."""
    props = as_schema(node.get("properties")) or {}
    kind = as_schema(props.get("type")) or {}
    kinds = [kind.get("const"), *(as_list(kind.get("enum")) or [])]
    return any(k in _ACTION_TYPES for k in kinds) or set(props) == {"tool", "args"}


def _compact(root: JsonSchema) -> JsonSchema:
    """``root`` without what the system text already says: the descriptions of the action
    variants, of each call option (a tool's description) and of ``thought``; and with each
    definition used once, and not recursive, written in place of its reference.

    Neither changes what a reply may be (a grammar built from either form accepts the same
    JSON), only the tokens the schema costs when a provider shows it to the model."""
    defs = cast("JsonSchema", root.pop("$defs", {}))
    uses: dict[str, int] = {}
    for node in (root, *defs.values()):
        for ref in refs(node):
            uses[ref] = uses.get(ref, 0) + 1

    def recursive(name: str) -> bool:
        seen: set[str] = set()
        pending = [r for r in refs(defs.get(name)) if r.startswith(_REF_PREFIX)]
        while pending:
            ref = pending.pop()
            target = ref[len(_REF_PREFIX) :]
            if target == name:
                return True
            if target not in seen:
                seen.add(target)
                pending += [r for r in refs(defs.get(target)) if r.startswith(_REF_PREFIX)]
        return False

    inline = {
        ref[len(_REF_PREFIX) :]
        for ref, count in uses.items()
        if count == 1 and ref.startswith(_REF_PREFIX) and not recursive(ref[len(_REF_PREFIX) :])
    }

    def rewrite(node: object) -> object:
        if isinstance(node, list):
            return [rewrite(item) for item in cast("list[object]", node)]
        schema = as_schema(node)
        if schema is None:
            return node
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref[len(_REF_PREFIX) :] in inline and len(schema) == 1:
            return rewrite(defs[ref[len(_REF_PREFIX) :]])
        out = {k: rewrite(v) for k, v in schema.items()}
        if _is_action_node(schema):
            out.pop("description", None)
            props = as_schema(out.get("properties"))
            thought = as_schema(props.get("thought")) if props is not None else None
            if thought is not None:
                thought.pop("description", None)
        return out

    compacted = cast("JsonSchema", rewrite(root))
    kept = {name: rewrite(d) for name, d in defs.items() if name not in inline}
    used = used_defs(compacted, cast("JsonSchema", kept))
    if used:
        compacted["$defs"] = used
    return compacted


def compile_schema(
    source: JsonSchema, dialect: str, *, compact: bool = False
) -> tuple[JsonSchema, bool]:
    """The wire schema of ``source`` for ``dialect``, and whether replies are wrapped.

    With ``compact``, the descriptions the system text already gives are left out and
    definitions used once are written in place (:func:`_compact`)."""
    rules = _RULES[dialect]
    source = copy.deepcopy(source)  # the result shares nothing with pydantic's cached schema
    defs = as_schema(source.get("$defs")) or {}
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
    used = used_defs(root, compiled_defs)
    if used:
        root["$defs"] = used
    return (_compact(root) if compact else root), wrapped
