"""Schema dialects: what each provider family receives, and that nothing stripped goes unchecked.

The compiled wire schemas of a fixed tool set are checked in as golden files under
``tests/golden/dialects/<dialect>-<variant>.json``, so a type-hint change that alters what a
provider receives shows in review. After an intended change, regenerate them with::

    AGENTCORE_UPDATE_GOLDENS=1 pytest tests/test_dialects.py -p no:cacheprovider

and review the diff.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, cast, get_args

import pytest
from pydantic import BaseModel, Field, JsonValue, create_model

from agentcore.contracts import (
    ANTHROPIC_MAX_OPTIONAL_PARAMS,
    ANTHROPIC_MAX_UNION_PARAMS,
    ActionSchema,
    BatchAction,
    Dialect,
    FinishAction,
    PlanAction,
    ToolAction,
    ToolSpec,
    WireSchema,
    anthropic_limits,
    choose_form,
    compile_action_schema,
    compile_wire_schema,
    fits_anthropic,
    output_spec,
)
from agentcore.errors import ConfigurationError, InvalidActionError

GOLDEN_DIR = Path(__file__).parent / "golden" / "dialects"
UPDATE_GOLDENS = os.environ.get("AGENTCORE_UPDATE_GOLDENS") == "1"
DIALECTS: tuple[Dialect, ...] = get_args(Dialect)
OPENAI_FORMATS = (
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
)
JSON_SCHEMA_BOUNDS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
)


# The representative tool set of the golden files.
class ReadArgs(BaseModel):
    path: str = Field(description="File to read, relative to the workspace.")
    encoding: Literal["utf-8", "latin-1"] | None = None
    max_lines: int = Field(100, ge=1, le=10_000, description="How many lines to return.")


class Note(BaseModel):
    title: str = Field(max_length=80)
    body: str = ""


class SaveArgs(BaseModel):
    note: Note = Field(description="The note to save.")
    tags: list[str] = Field(min_length=1, max_length=5, description="Labels for the note.")


class PurgeArgs(BaseModel):
    pass


class Receipt(BaseModel):
    """What the run found: the typed answer of the ``typed_output`` golden files."""

    title: str = Field(max_length=80, description="A short title.")
    count: int = Field(ge=0)
    tags: list[str] = []
    status: Literal["ok", "partial"] | None = None
    notes: list[Note] = Field(default_factory=list[Note])


TOOLS = (
    ToolSpec("read_file", "Read a text file.", ReadArgs),
    ToolSpec("save_note", "Save a note.", SaveArgs, effect="write", idempotent=False),
    ToolSpec("purge_notes", "Delete every note.", PurgeArgs, effect="destructive"),
)


class ListArgs(BaseModel):
    folder: str = Field(description="Folder to list.")


BATCH_TOOLS = (*TOOLS, ToolSpec("list_files", "List a folder's files.", ListArgs))
VARIANTS: dict[str, ActionSchema] = {
    "typed": compile_action_schema(TOOLS),
    "generic": compile_action_schema(TOOLS, form="generic"),
    "finish_only": compile_action_schema(TOOLS, finish_only=True),
    "typed_output": compile_action_schema(TOOLS, output=output_spec(Receipt)),
    "generic_typed_output": compile_action_schema(
        TOOLS, form="generic", output=output_spec(Receipt)
    ),
    "batch": compile_action_schema(BATCH_TOOLS, max_batch=4),
    "ask": compile_action_schema(TOOLS, ask=True),
    # contract v2 (tools shown as signatures in the text): the compact wire schema
    "v2_typed": compile_action_schema(TOOLS, tool_args="signature"),
    "v2_generic": compile_action_schema(TOOLS, form="generic", tool_args="signature"),
    "v2_typed_output": compile_action_schema(
        TOOLS, output=output_spec(Receipt), tool_args="signature"
    ),
    "v2_batch": compile_action_schema(BATCH_TOOLS, max_batch=4, tool_args="signature"),
    "v2_ask": compile_action_schema(TOOLS, ask=True, tool_args="signature"),
}
GOOD_NOTE = {"note": {"title": "Groceries", "body": "milk"}, "tags": ["home"]}


def nodes(schema: Any, path: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema with its JSON pointer (independent of the module's own walker)."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in ("properties", "$defs"):
        for name, sub in (schema.get(key) or {}).items():
            yield from nodes(sub, f"{path}/{key}/{name}")
    for key in ("items", "additionalProperties"):
        yield from nodes(schema.get(key), f"{path}/{key}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(schema.get(key) or []):
            yield from nodes(sub, f"{path}/{key}/{i}")


def resolve(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    return root["$defs"][ref.removeprefix("#/$defs/")] if ref else node


def objects(root: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    return ((p, n) for p, n in nodes(root) if n.get("type") == "object" or "properties" in n)


def action_variants(wire: WireSchema) -> list[dict[str, Any]]:
    """The action variants on the wire (the members of the root union, resolved)."""
    root = wire.schema
    body = root["properties"]["action"] if wire.wrapped else root
    return [resolve(root, m) for m in body.get("anyOf", [body])]


def to_wire(wire: WireSchema, action: dict[str, Any]) -> str:
    """A reply in the shape ``wire`` asks for, carrying ``action``."""
    if wire.wrapped and wire.dialect == "openai_strict" and action["type"] == "tool":
        head = {"type": "tool", "thought": action["thought"]}
        return json.dumps(
            {"action": head | {"call": {"tool": action["tool"], "args": action["args"]}}}
        )
    return json.dumps({"action": action} if wire.wrapped else action)


def tool_action(name: str, args: dict[str, Any], thought: str = "Read it first.") -> dict[str, Any]:
    return {"type": "tool", "thought": thought, "tool": name, "args": args}


def read_args(**overrides: Any) -> dict[str, Any]:
    return {"path": "notes.txt", "encoding": None, "max_lines": 100} | overrides


# --- golden files ------------------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("dialect", DIALECTS)
def test_wire_schema_matches_golden(dialect: Dialect, variant: str) -> None:
    wire = compile_wire_schema(VARIANTS[variant], dialect)
    document = {
        "dialect": wire.dialect,
        "name": wire.name,
        "wrapped": wire.wrapped,
        "prompt": wire.prompt,
        "schema": wire.schema,
    }
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    path = GOLDEN_DIR / f"{dialect}-{variant}.json"
    if UPDATE_GOLDENS:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing: run with AGENTCORE_UPDATE_GOLDENS=1"
    assert path.read_text(encoding="utf-8") == text, (
        f"{path.name} differs from the compiled schema; if the change is intended, regenerate "
        "with AGENTCORE_UPDATE_GOLDENS=1 and review the diff"
    )


# --- general behaviour -------------------------------------------------------------------


def test_source_schema_is_never_mutated() -> None:
    schema = compile_action_schema(TOOLS)
    before = copy.deepcopy(schema.json_schema())
    for dialect in DIALECTS:
        compile_wire_schema(schema, dialect)
        choose_form(schema, dialect)
    assert schema.json_schema() == before


def test_cached_per_schema_object_and_dialect() -> None:
    schema = compile_action_schema(TOOLS)
    wire = compile_wire_schema(schema, "anthropic")
    assert compile_wire_schema(schema, "anthropic") is wire
    assert compile_wire_schema(schema, "gemini") is not wire
    other = ActionSchema(tools=TOOLS)  # an equal offer, another object
    assert compile_wire_schema(other, "anthropic") is not wire
    assert compile_wire_schema(other, "anthropic").schema == wire.schema


def test_unknown_dialect_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="Valid dialects: 'openai_strict'"):
        compile_wire_schema(VARIANTS["typed"], "claude")  # type: ignore[arg-type]  # on purpose
    with pytest.raises(ConfigurationError, match="Invalid schema dialect 'claude'"):
        choose_form(VARIANTS["typed"], "claude")  # type: ignore[arg-type]  # on purpose


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("dialect", DIALECTS)
def test_thought_comes_right_after_type_in_every_variant(dialect: Dialect, variant: str) -> None:
    for action in action_variants(compile_wire_schema(VARIANTS[variant], dialect)):
        assert list(action["properties"])[:2] == ["type", "thought"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_dialect_sends_titles_discriminators_or_ref_siblings(dialect: Dialect) -> None:
    for variant in VARIANTS.values():
        for path, node in nodes(compile_wire_schema(variant, dialect).schema):
            assert "title" not in node and "discriminator" not in node, path
            assert "oneOf" not in node, path
            if "$ref" in node:
                assert set(node) == {"$ref"}, path


# --- openai_strict -----------------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_openai_strict_invariants(variant: str) -> None:
    wire = compile_wire_schema(VARIANTS[variant], "openai_strict")
    root = wire.schema
    assert root["type"] == "object" and "anyOf" not in root
    assert wire.wrapped == (variant != "finish_only")
    for path, node in objects(root):
        assert node["additionalProperties"] is False, path
        assert node["required"] == list(node["properties"]), path
    for path, node in nodes(root):
        assert "default" not in node and "minLength" not in node and "maxLength" not in node, path
        assert node.get("format") in {None, *OPENAI_FORMATS}, path


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_openai_union_members_differ_in_their_first_key(variant: str) -> None:
    """OpenAI rejects an anyOf whose object members share the same first key and value."""
    root = compile_wire_schema(VARIANTS[variant], "openai_strict").schema
    for path, node in nodes(root):
        members = [resolve(root, m) for m in node.get("anyOf", [])]
        firsts = []
        for member in members:
            if member.get("type") != "object":
                continue
            key, first = next(iter(member["properties"].items()))
            firsts.append((key, json.dumps(first.get("const", first.get("enum")))))
        assert len(firsts) == len(set(firsts)), f"{path}: {firsts}"


def test_openai_optional_properties() -> None:
    read = compile_wire_schema(VARIANTS["typed"], "openai_strict").schema["$defs"]["ReadArgs"]
    props = read["properties"]
    # Nullable in Python: required and nullable on the wire; null means the default None.
    assert {"type": "null"} in props["encoding"]["anyOf"]
    # Not nullable in Python: required with its own type, the default in the description.
    assert props["max_lines"]["type"] == "integer"
    assert props["max_lines"]["description"].endswith("Default: 100.")
    assert (props["max_lines"]["minimum"], props["max_lines"]["maximum"]) == (1, 10_000)


def test_openai_grouped_tool_call_round_trip() -> None:
    schema = VARIANTS["typed"]
    wire = compile_wire_schema(schema, "openai_strict")
    reply = to_wire(wire, tool_action("read_file", read_args(encoding="utf-8")))
    assert '"call"' in reply
    action = schema.parse(wire.unwrap(reply))
    assert action == ToolAction(
        thought="Read it first.", tool="read_file", args=read_args(encoding="utf-8")
    )


# --- anthropic ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_anthropic_invariants(variant: str) -> None:
    wire = compile_wire_schema(VARIANTS[variant], "anthropic")
    root = wire.schema
    assert root["type"] == "object" and "anyOf" not in root
    for path, node in nodes(root):
        assert not set(JSON_SCHEMA_BOUNDS) & set(node), f"{path}: {node}"
        assert node.get("minItems", 0) <= 1, path
    for path, node in objects(root):
        assert node["additionalProperties"] is False, path


def test_anthropic_moves_bounds_into_descriptions() -> None:
    defs = compile_wire_schema(VARIANTS["typed"], "anthropic").schema["$defs"]
    max_lines = defs["ReadArgs"]["properties"]["max_lines"]
    assert max_lines["description"] == (
        "How many lines to return. Constraints: at least 1; at most 10000."
    )
    assert max_lines["default"] == 100  # documented as supported
    tags = defs["SaveArgs"]["properties"]["tags"]
    assert tags["minItems"] == 1 and "at most 5 items" in tags["description"]
    title = defs["SaveArgs"]["properties"]["note"]["properties"]["title"]
    assert title["description"] == "Constraints: at most 80 characters."
    thought = defs["FinishAction"]["properties"]["thought"]["description"]
    assert thought.count("at most 400 characters") == 1  # already said, not repeated


def test_anthropic_optional_none_loses_its_null_branch() -> None:
    schema = VARIANTS["typed"]
    wire = compile_wire_schema(schema, "anthropic")
    encoding = wire.schema["$defs"]["ReadArgs"]["properties"]["encoding"]
    assert encoding == {"type": "string", "enum": ["utf-8", "latin-1"]}
    reply = to_wire(wire, tool_action("read_file", {"path": "a.txt"}))
    action = schema.parse(wire.unwrap(reply))
    assert isinstance(action, ToolAction) and action.args["encoding"] is None


def test_anthropic_pattern_kept_only_when_simple() -> None:
    class Args(BaseModel):
        code: str = Field(pattern=r"^[A-Z]{2}\d+$")
        word: str = Field(pattern=r"^\w+\b$")

    schema = compile_action_schema([ToolSpec("lookup", "Look up.", Args)])
    props = compile_wire_schema(schema, "anthropic").schema["$defs"]["Args"]["properties"]
    assert props["code"]["pattern"] == r"^[A-Z]{2}\d+$"
    assert "pattern" not in props["word"]
    assert props["word"]["description"] == (
        "Constraints: must match the regular expression ^\\w+\\b$."
    )


def _union_tool(count: int) -> ToolSpec:
    fields: dict[str, Any] = {f"p{i}": (int | str, ...) for i in range(count)}
    return ToolSpec("many", "Many unions.", create_model("ManyUnions", **fields))


def _optional_tool(count: int) -> ToolSpec:
    fields: dict[str, Any] = {f"p{i}": (str, "x") for i in range(count)}
    return ToolSpec("many", "Many optionals.", create_model("ManyOptionals", **fields))


def test_anthropic_limit_report_counts_unions_and_optionals() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}, "b": {"$ref": "#/$defs/B"}},
        "required": ["b"],
        "$defs": {
            "B": {
                "type": "object",
                "properties": {"c": {"anyOf": [{"type": "integer"}, {"type": "string"}]}},
            }
        },
    }
    report = anthropic_limits(schema)
    assert report.union_paths == ("#/properties/a", "#/$defs/B/properties/c")
    assert report.optional_paths == ("#/properties/a", "#/$defs/B/properties/c")
    assert (report.union_params, report.optional_params, report.fits) == (2, 2, True)
    assert "2 union-typed parameters (limit 16)" in report.describe()


def test_seventeen_union_params_fall_back_to_the_generic_form() -> None:
    # 16 unions in the arguments plus the action union itself make 17.
    schema = compile_action_schema([_union_tool(ANTHROPIC_MAX_UNION_PARAMS)])
    report = anthropic_limits(compile_wire_schema(schema, "anthropic").schema)
    assert report.union_params == ANTHROPIC_MAX_UNION_PARAMS + 1
    assert not fits_anthropic(schema)
    chosen = choose_form(schema, "anthropic")
    assert chosen.form == "generic" and chosen is schema.with_form("generic")
    assert fits_anthropic(chosen)
    assert choose_form(schema, "gemini") is schema  # no documented limit there
    # The generic form parses the same action; its arguments are still validated.
    args = {f"p{i}": i for i in range(ANTHROPIC_MAX_UNION_PARAMS)}
    reply = {"type": "tool", "thought": "t", "tool": "many", "args_json": json.dumps(args)}
    assert chosen.parse(json.dumps(reply)) == ToolAction(thought="t", tool="many", args=args)


def test_too_many_optional_params_fall_back_to_the_generic_form() -> None:
    schema = compile_action_schema([_optional_tool(ANTHROPIC_MAX_OPTIONAL_PARAMS + 1)])
    assert not fits_anthropic(schema)
    assert choose_form(schema, "anthropic").form == "generic"
    assert choose_form(schema, "openai_strict") is schema  # OpenAI makes them required
    small = compile_action_schema([_optional_tool(ANTHROPIC_MAX_OPTIONAL_PARAMS)])
    assert fits_anthropic(small) and choose_form(small, "anthropic") is small


def test_typed_form_kept_when_it_fits() -> None:
    for dialect in DIALECTS:
        assert choose_form(VARIANTS["typed"], dialect) is VARIANTS["typed"]
        assert choose_form(VARIANTS["generic"], dialect) is VARIANTS["generic"]


@pytest.mark.parametrize(
    ("annotation", "default"),
    [(dict[str, int], {}), (JsonValue, None)],
    ids=["open-object", "any-json"],
)
def test_open_arguments_need_the_generic_form_in_strict_dialects(
    annotation: Any, default: Any
) -> None:
    args = create_model("OpenArgs", data=(annotation, default))
    schema = compile_action_schema([ToolSpec("store", "Store data.", args)])
    assert choose_form(schema, "openai_strict").form == "generic"
    assert choose_form(schema, "anthropic").form == "generic"
    assert choose_form(schema, "gemini") is schema


class TreeArgs(BaseModel):
    label: str
    children: list[TreeArgs] = []


def test_recursive_arguments_need_the_generic_form_on_anthropic_only() -> None:
    schema = compile_action_schema([ToolSpec("plant", "Plant a tree.", TreeArgs)])
    assert choose_form(schema, "anthropic").form == "generic"
    assert choose_form(schema, "openai_strict") is schema  # documented as supported
    wire = compile_wire_schema(schema, "openai_strict").schema
    assert wire["$defs"]["TreeArgs"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/TreeArgs"
    }


def test_openai_enum_limit_falls_back_to_the_generic_form() -> None:
    values = tuple(f"v{i}" for i in range(1001))
    args = create_model("BigEnum", choice=(Literal[values], ...))  # pyright: ignore[reportInvalidTypeForm]
    schema = compile_action_schema([ToolSpec("pick", "Pick one.", args)])
    assert choose_form(schema, "openai_strict").form == "generic"


def test_openai_nesting_limit_falls_back_to_the_generic_form() -> None:
    model: type[BaseModel] = create_model("Level0", leaf=(str, ...))
    for level in range(1, 9):
        model = create_model(f"Level{level}", inner=(model, ...))
    # root object, action variant, then nine levels of arguments: 11 levels in all
    schema = compile_action_schema([ToolSpec("deep", "Deep.", model)])
    assert choose_form(schema, "openai_strict").form == "generic"
    shallow = compile_action_schema([ToolSpec("deep", "Deep.", create_model("L", leaf=(str, ...)))])
    assert choose_form(shallow, "openai_strict") is shallow


# --- gemini ------------------------------------------------------------------------------

GEMINI_KEYWORDS = {
    "$defs",
    "$ref",
    "type",
    "format",
    "description",
    "enum",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "properties",
    "additionalProperties",
    "required",
    "propertyOrdering",
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_gemini_sends_only_documented_keywords(variant: str) -> None:
    wire = compile_wire_schema(VARIANTS[variant], "gemini")
    assert not wire.wrapped
    for path, node in nodes(wire.schema):
        assert set(node) <= GEMINI_KEYWORDS, f"{path}: {set(node) - GEMINI_KEYWORDS}"
        if node.get("properties"):
            assert node["propertyOrdering"] == list(node["properties"]), path


def test_gemini_turns_const_into_enum_and_keeps_numeric_bounds() -> None:
    defs = compile_wire_schema(VARIANTS["typed"], "gemini").schema["$defs"]
    assert defs["FinishAction"]["properties"]["type"] == {"type": "string", "enum": ["finish"]}
    max_lines = defs["ReadArgs"]["properties"]["max_lines"]
    assert (max_lines["minimum"], max_lines["maximum"]) == (1, 10_000)
    assert max_lines["description"] == "How many lines to return. Default: 100."
    note = defs["SaveArgs"]["properties"]["note"]  # a $ref with a description: inlined
    assert note["description"] == "The note to save." and "properties" in note


# --- json_prompt -------------------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_json_prompt_carries_the_compact_schema_and_one_instruction(variant: str) -> None:
    wire = compile_wire_schema(VARIANTS[variant], "json_prompt")
    assert wire.prompt is not None and not wire.wrapped
    assert "json" in wire.prompt  # DeepSeek's JSON mode requires the word
    # the generic form under v2 first lists each tool's argument schema (args_json's)
    first, schema_line, instruction = wire.prompt.split("\n\n")[-1].split("\n")
    assert json.loads(schema_line) == wire.schema
    assert schema_line == json.dumps(wire.schema, separators=(",", ":"), ensure_ascii=False)
    assert instruction == (
        "Reply with exactly one JSON object that matches the schema: no prose, no code fences."
    )
    assert first.endswith("JSON Schema:")


def test_json_prompt_keeps_bounds_as_instructions() -> None:
    defs = compile_wire_schema(VARIANTS["typed"], "json_prompt").schema["$defs"]
    assert defs["FinishAction"]["properties"]["thought"]["maxLength"] == 400
    assert defs["ReadArgs"]["properties"]["max_lines"]["default"] == 100


# --- client-side enforcement of what a dialect stripped ---------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_valid_replies_round_trip_through_every_dialect(dialect: Dialect) -> None:
    schema = VARIANTS["typed"]
    wire = compile_wire_schema(schema, dialect)
    plan = {"type": "plan", "thought": "Look first.", "steps": ["read", "answer"]}
    finish = {"type": "finish", "thought": "Done.", "answer": "42"}
    assert schema.parse(wire.unwrap(to_wire(wire, plan))) == PlanAction.model_validate(plan)
    assert schema.parse(wire.unwrap(to_wire(wire, finish))) == FinishAction.model_validate(finish)
    save = tool_action("save_note", GOOD_NOTE)
    assert schema.parse(wire.unwrap(to_wire(wire, save))) == ToolAction.model_validate(
        save | {"args": {"note": {"title": "Groceries", "body": "milk"}, "tags": ["home"]}}
    )
    purge = tool_action("purge_notes", {})
    assert schema.parse(wire.unwrap(to_wire(wire, purge))) == ToolAction.model_validate(purge)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_batch_of_reads_round_trips_through_every_dialect(dialect: Dialect) -> None:
    schema = VARIANTS["batch"]
    wire = compile_wire_schema(choose_form(schema, dialect), dialect)
    reads = {
        "type": "batch",
        "thought": "Both at once.",
        "calls": [
            {"tool": "read_file", "args": read_args()},
            {"tool": "list_files", "args": {"folder": "docs"}},
        ],
    }
    action = schema.parse(wire.unwrap(to_wire(wire, reads)))
    assert action == BatchAction.model_validate(reads)
    batch_def = [v for v in action_variants(wire) if "calls" in v.get("properties", {})]
    assert len(batch_def) == 1  # offered once, naming only the read tools
    assert "save_note" not in json.dumps(batch_def) and "purge_notes" not in json.dumps(batch_def)
    too_many = reads | {"calls": reads["calls"] * 3}
    with pytest.raises(InvalidActionError):
        schema.parse(wire.unwrap(to_wire(wire, too_many)))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    ("action", "error"),
    [
        ({"type": "finish", "thought": "x" * 401, "answer": "42"}, "thought"),
        (tool_action("read_file", read_args(max_lines=0)), "max_lines"),
        (tool_action("read_file", read_args(max_lines=10_001)), "max_lines"),
        (tool_action("save_note", GOOD_NOTE | {"tags": ["a"] * 6}), "tags"),
        (tool_action("save_note", GOOD_NOTE | {"tags": []}), "tags"),
        (tool_action("save_note", GOOD_NOTE | {"note": {"title": "t" * 81}}), "title"),
        ({"type": "plan", "thought": "x", "steps": [f"s{i}" for i in range(9)]}, "steps"),
    ],
    ids=["thought-401", "ge-1", "le-10000", "max-items", "min-items", "max-length", "plan-9"],
)
def test_stripped_rules_are_enforced_by_parse(
    dialect: Dialect, action: dict[str, Any], error: str
) -> None:
    schema = VARIANTS["typed"]
    wire = compile_wire_schema(schema, dialect)
    with pytest.raises(InvalidActionError, match=error):
        schema.parse(wire.unwrap(to_wire(wire, action)))


def test_anthropic_wire_lacks_the_thought_bound_that_parse_enforces() -> None:
    schema = VARIANTS["typed"]
    wire = compile_wire_schema(schema, "anthropic")
    thought = wire.schema["$defs"]["FinishAction"]["properties"]["thought"]
    assert "maxLength" not in thought
    too_long = {"type": "finish", "thought": "x" * 401, "answer": "42"}
    with pytest.raises(InvalidActionError, match="at most 400 characters"):
        schema.parse(wire.unwrap(to_wire(wire, too_long)))


# --- unwrap ------------------------------------------------------------------------------


def test_unwrap_tolerates_unwrapped_fenced_and_invalid_replies() -> None:
    wire = compile_wire_schema(VARIANTS["typed"], "anthropic")
    finish = json.dumps({"type": "finish", "thought": "t", "answer": "a"})
    assert wire.unwrap(finish) == finish
    assert json.loads(wire.unwrap(f'{{"action": {finish}}}')) == json.loads(finish)
    assert json.loads(wire.unwrap(f'```json\n{{"action": {finish}}}\n```')) == json.loads(finish)
    for junk in ("not json", "[1, 2]", '{"action": "finish"}', "", '{"action": {'):
        assert wire.unwrap(junk) == junk
    unicode = json.dumps({"action": {"type": "finish", "thought": "ü", "answer": "ß"}})
    assert "ü" in wire.unwrap(unicode)


def test_unwrap_is_identity_when_not_wrapped() -> None:
    finish = '{"action": {"type": "finish", "thought": "t", "answer": "a"}}'
    for dialect in ("gemini", "json_prompt"):
        assert compile_wire_schema(VARIANTS["typed"], dialect).unwrap(finish) == finish
    only = compile_wire_schema(VARIANTS["finish_only"], "openai_strict")
    assert not only.wrapped and only.unwrap(finish) == finish


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_typed_answer_round_trips_through_every_dialect(dialect: Dialect) -> None:
    schema = VARIANTS["typed_output"]
    wire = compile_wire_schema(choose_form(schema, dialect), dialect)
    assert '"count"' in json.dumps(wire.schema)  # the answer's own fields are on the wire
    answer = {"title": "Q3", "count": 2, "tags": [], "status": None, "notes": []}
    reply = to_wire(wire, {"type": "finish", "thought": "Done.", "answer": answer})
    action = schema.parse(wire.unwrap(reply))
    assert isinstance(action, FinishAction)
    assert json.loads(action.answer) == answer
    bad = to_wire(wire, {"type": "finish", "thought": "Done.", "answer": {"title": "Q3"}})
    with pytest.raises(InvalidActionError, match=r"finish\.answer\.count"):
        schema.parse(wire.unwrap(bad))


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


@pytest.mark.parametrize(
    ("output", "dialects"),
    [
        (dict[str, int], ("openai_strict", "anthropic")),
        (create_model("Blob", data=(JsonValue, ...)), ("openai_strict", "anthropic")),
        (Tree, ("anthropic",)),
        (
            create_model("Wide", **{f"f{i}": (int | None, None) for i in range(30)}),
            ("anthropic",),
        ),
    ],
    ids=["open-object", "any-json", "recursive", "30-optional"],
)
def test_an_answer_type_a_strict_dialect_cannot_send_goes_as_answer_json(
    output: Any, dialects: tuple[Dialect, ...]
) -> None:
    """The generic form carries the answer as a string, as it does a tool's arguments: in
    the typed form an open object would be closed with no properties (a constrained decoder
    could write only ``{}``) and Anthropic's limits would be exceeded all the same."""
    schema = compile_action_schema(TOOLS, output=output_spec(output))
    for dialect in DIALECTS:
        chosen = choose_form(schema, dialect)
        if dialect not in dialects:
            assert chosen is schema
            continue
        assert chosen.form == "generic"
        wire = compile_wire_schema(chosen, dialect)
        finish = wire.schema["$defs"]["FinishAction"]
        assert finish["properties"]["answer_json"]["type"] == "string"
        assert "answer" not in finish["properties"]
        if dialect == "anthropic":
            assert anthropic_limits(wire.schema).fits
        answer = output_spec(output).adapter.dump_python(
            output_spec(output).adapter.validate_python(
                {"label": "root", "children": [{"label": "leaf"}]}
                if output is Tree
                else {"data": {"any": [1, None]}}
                if "data" in getattr(output, "model_fields", {})
                else {"a": 1}
            ),
            mode="json",
        )
        reply = {"type": "finish", "thought": "Done.", "answer_json": json.dumps(answer)}
        action = chosen.parse(wire.unwrap(to_wire(wire, reply)))
        assert isinstance(action, FinishAction) and json.loads(action.answer) == answer
        bad = {"type": "finish", "thought": "Done.", "answer_json": "[1, 2"}
        with pytest.raises(InvalidActionError, match="answer_json is not a valid"):
            chosen.parse(wire.unwrap(to_wire(wire, bad)))


def test_a_generic_typed_answer_is_checked_against_the_type() -> None:
    schema = VARIANTS["generic_typed_output"]
    answer = {"title": "Q3", "count": 2, "tags": [], "status": None, "notes": []}
    good = {"type": "finish", "thought": "Done.", "answer_json": json.dumps(answer)}
    action = schema.parse(json.dumps(good))
    assert isinstance(action, FinishAction) and json.loads(action.answer) == answer
    # The same canonical answer as the typed form records.
    typed = {"type": "finish", "thought": "Done.", "answer": answer}
    assert VARIANTS["typed_output"].parse(json.dumps(typed)) == action
    bad = good | {"answer_json": json.dumps({"title": "Q3", "count": -1})}
    with pytest.raises(InvalidActionError, match=r"answer_json is not a valid Receipt: count"):
        schema.parse(json.dumps(bad))
    with pytest.raises(InvalidActionError):  # the typed field is not accepted here
        schema.parse(json.dumps(typed))


# --- contract v2's compact wire schema ----------------------------------------------------


def _mutants(value: Any) -> Iterator[Any]:
    """``value`` with one thing changed: each key dropped, each value replaced by one of
    several wrong-typed values, an unknown key added to each object, each list emptied."""
    wrong: list[Any] = [None, 7, 1.5, "x", True, [], {}]
    if isinstance(value, dict):
        value = cast("dict[str, Any]", value)
        yield {**value, "extra_key": 1}
        for key, sub in value.items():
            yield {k: v for k, v in value.items() if k != key}
            for replacement in [*wrong, *_mutants(sub)]:
                yield {**value, key: replacement}
    elif isinstance(value, list):
        items = cast("list[Any]", value)
        yield []
        for i, sub in enumerate(items):
            for replacement in [*wrong, *_mutants(sub)]:
                yield [*items[:i], replacement, *items[i + 1 :]]


def _replies(wire: WireSchema, schema: ActionSchema) -> list[Any]:
    """Valid replies of every offered kind in ``wire``'s shape, and their mutants."""
    actions: list[dict[str, Any]] = [
        {"type": "finish", "thought": "Done.", "answer": "42"},
        {"type": "plan", "thought": "Look first.", "steps": ["read", "answer"]},
        tool_action("read_file", read_args(encoding="utf-8")),
        tool_action("save_note", GOOD_NOTE),
        tool_action("purge_notes", {}),
        {
            "type": "batch",
            "thought": "Both.",
            "calls": [
                {"tool": "read_file", "args": read_args()},
                {"tool": "list_files", "args": {"folder": "docs"}},
            ],
        },
        {"type": "ask", "thought": "Only they know.", "question": "Which account?"},
    ]
    if schema.form == "generic":
        for action in actions:
            if action["type"] == "tool":
                action["args_json"] = json.dumps(action.pop("args"))
    if schema.output is not None:
        actions[0] = {
            "type": "finish",
            "thought": "Found.",
            "answer": {"title": "T", "count": 1, "tags": [], "status": "ok", "notes": []},
        }
    valid = [
        json.loads(
            json.dumps({"action": a} if wire.wrapped else a)
            if schema.form == "generic"
            else to_wire(wire, a)
        )
        for a in actions
    ]
    return [*valid, *(m for v in valid for m in _mutants(v))]


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.startswith("v2_")])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_compact_wire_schema_accepts_exactly_what_the_full_one_does(
    dialect: Dialect, variant: str
) -> None:
    """v2 leaves descriptions the text gives out of the wire schema and writes definitions
    used once in place: a grammar built from it admits the same replies. Checked with the
    reference JSON Schema validator on valid replies of every kind and ~thousands of
    one-change mutants of them (a dropped key, a wrong type, an unknown key)."""
    from jsonschema import Draft202012Validator

    from agentcore.contracts._dialect_compiler import compile_schema

    schema = VARIANTS[variant]
    full, _ = compile_schema(schema.json_schema(), dialect)
    compact, _ = compile_schema(schema.json_schema(), dialect, compact=True)
    assert compact == compile_wire_schema(schema, dialect).schema
    assert len(json.dumps(compact)) < len(json.dumps(full))
    check_full, check_compact = Draft202012Validator(full), Draft202012Validator(compact)
    replies = _replies(compile_wire_schema(schema, dialect), schema)
    verdicts = [(check_full.is_valid(r), check_compact.is_valid(r)) for r in replies]
    assert all(a == b for a, b in verdicts), [
        r for r, (a, b) in zip(replies, verdicts, strict=True) if a != b
    ][:3]
    assert sum(a for a, _ in verdicts) >= 2  # valid replies were among them
    assert sum(not a for a, _ in verdicts) > 100


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_compact_wire_schema_keeps_argument_descriptions_and_drops_the_texts(
    dialect: Dialect,
) -> None:
    wire = compile_wire_schema(VARIANTS["v2_typed"], dialect).schema
    text = json.dumps(wire)
    assert "File to read, relative to the workspace." in text  # an argument's description
    for said_in_text in ("Read a text file.", "Save a note.", "at most 400 characters"):
        assert said_in_text not in text
    full = compile_wire_schema(VARIANTS["typed"], dialect).schema
    assert "Read a text file." in json.dumps(full)  # v1's wire schema is unchanged


def test_a_recursive_definition_stays_a_reference_in_the_compact_schema() -> None:
    from agentcore.contracts._dialect_compiler import compile_schema

    class Tree(BaseModel):
        name: str
        children: list[Tree] = []

    class TreeArgs(BaseModel):
        root: Tree

    schema = compile_action_schema(
        [ToolSpec("plant", "Plant a tree.", TreeArgs)], tool_args="signature"
    )
    compact, _ = compile_schema(schema.json_schema(), "openai_strict", compact=True)
    assert "Tree" in compact["$defs"]
    assert '"$ref": "#/$defs/Tree"' in json.dumps(compact)
