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

import json
import re
import weakref
from dataclasses import dataclass
from typing import Final, Literal, get_args

from ._dialect_compiler import compile_schema
from ._dialect_limits import (
    ANTHROPIC_MAX_OPTIONAL_PARAMS,
    ANTHROPIC_MAX_UNION_PARAMS,
    AnthropicLimitReport,
    anthropic_limits,
    expressible,
    fits_openai,
    recursive,
)
from ._schema import ActionSchema
from ._schema_nodes import JsonSchema, as_schema
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

Dialect = Literal["openai_strict", "anthropic", "gemini", "json_prompt"]
_DIALECTS: Final[tuple[str, ...]] = get_args(Dialect)

_WIRE_SCHEMA_NAME: Final = "next_action"


_FENCE: Final = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)
_JSON_PROMPT: Final = (
    "Your reply must be json that conforms to this JSON Schema:\n"
    "{schema}\n"
    "Reply with exactly one JSON object that matches the schema: no prose, no code fences."
)


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
        prompt: the text to append to the system prompt, or ``None``: for ``json_prompt``,
            the schema; for the generic form under a contract that shows tools as
            signatures, each tool's argument schema.
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
        outer = as_schema(data)
        if outer is None or "type" in outer:
            return reply
        inner = as_schema(outer.get("action"))
        if inner is None:
            return reply
        call = as_schema(inner.get("call"))
        if inner.get("type") == "tool" and call is not None and "tool" not in inner:
            flat = {k: v for k, v in inner.items() if k != "call"}
            inner = {**flat, "tool": call.get("tool"), "args": call.get("args")}
        return json.dumps(inner, ensure_ascii=False)


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
        # A contract that shows tools as signatures names each tool and describes it and the
        # actions in its text: the wire schema then leaves those descriptions out
        compact = schema.tool_args == "signature"
        body, wrapped = compile_schema(schema.json_schema(), dialect, compact=compact)
        prompts: list[str] = []
        if schema.form == "generic" and schema.tool_args == "signature" and schema.tools:
            prompts.append(_generic_args_prompt(schema, dialect))
        if dialect == "json_prompt":
            compact = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
            prompts.append(_JSON_PROMPT.format(schema=compact))
        prompt = "\n\n".join(prompts) or None
        wire = WireSchema(
            dialect=dialect, name=_WIRE_SCHEMA_NAME, schema=body, wrapped=wrapped, prompt=prompt
        )
        per_schema[dialect] = wire
    return wire


def _generic_args_prompt(schema: ActionSchema, dialect: Dialect) -> str:
    """Each tool's argument schema, for the generic form under a contract that shows tools
    as signatures: that form's ``args_json`` is a string, so its wire schema holds none of
    the descriptions and enums the signatures leave to the schema."""
    lines = ["The JSON object in args_json, for each tool:"]
    for spec in schema.tools:
        params = compile_schema(spec.args_schema, dialect)[0]
        lines.append(
            f"- {spec.name}: {json.dumps(params, ensure_ascii=False, separators=(',', ':'))}"
        )
    return "\n".join(lines)


def compile_parameters(schema: JsonSchema, dialect: Dialect) -> JsonSchema:
    """One tool's argument schema (an object) compiled for ``dialect``: the parameters of a
    native tool definition. The source is not changed."""
    _check_dialect(dialect)
    return compile_schema(schema, dialect)[0]


def fits_anthropic(schema: ActionSchema) -> bool:
    """Whether ``schema``'s ``anthropic`` wire schema is within Anthropic's limits."""
    return anthropic_limits(compile_wire_schema(schema, "anthropic").schema).fits


def choose_form(schema: ActionSchema, dialect: Dialect) -> ActionSchema:
    """The form of ``schema`` to send in ``dialect``: typed when it fits, else generic.

    The typed form falls back to the generic form (``args_json`` as a string, validated
    client-side) when a strict dialect cannot express it (a tool argument that is an open
    object or any JSON value; on Anthropic, a recursive model) or when its wire schema
    exceeds the dialect's documented limits: Anthropic's 16 union-typed and 24 optional
    parameters, OpenAI's 5000 properties, 10 nesting levels, 1000 enum values and 120,000
    characters of names and values. Gemini and JSON mode document no such limits: their
    schema is returned as is. The generic form is returned even if it also exceeds a limit
    (it holds one union and no optional parameter, so only a huge tool count can: a typed
    output's answer is ``answer_json`` there, a string, like the tools' arguments).

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
    if expressible(source) and not (dialect == "anthropic" and recursive(source)):
        wire = compile_wire_schema(schema, dialect).schema
        within = anthropic_limits(wire).fits if dialect == "anthropic" else fits_openai(wire)
        if within:
            return schema
    return schema.with_form("generic")
