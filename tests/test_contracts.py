"""The next-action contract: per-run schema, one parse path, the versioned contract document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Toolbox
from pydantic import BaseModel, ValidationError

from agentcore import tool
from agentcore.contracts import (
    DEFAULT_MAX_REPLY_BYTES,
    ActionSchema,
    ContractDocument,
    FinishAction,
    PlanAction,
    ToolAction,
    ToolSpec,
    WorkedExample,
    compile_action_schema,
    load_contract,
    model_from_json_schema,
)
from agentcore.errors import (
    ConfigurationError,
    InvalidActionError,
    ToolDefinitionError,
    UnknownToolError,
)


def tool_reply(name: str, args: dict[str, Any], thought: str = "because") -> str:
    return json.dumps({"type": "tool", "thought": thought, "tool": name, "args": args})


FINISH = json.dumps({"type": "finish", "thought": "done", "answer": "42"})
PLAN = json.dumps({"type": "plan", "thought": "first think", "steps": ["look", "answer"]})


@pytest.fixture
def typed(tools: Toolbox) -> ActionSchema:
    return compile_action_schema([tools.lookup.spec, tools.update_note.spec])


def _defs(schema: dict[str, Any]) -> dict[str, Any]:
    return schema.get("$defs", {})


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    return _defs(schema)[ref.rsplit("/", 1)[-1]]


def _variants(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Every object variant of the union, nested unions flattened, refs resolved."""
    out: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        node = _resolve(schema, node)
        options = node.get("oneOf") or node.get("anyOf")
        if options:
            for option in options:
                walk(option)
        else:
            out.append(node)

    walk(schema)
    return out


def _tool_variant(schema: dict[str, Any], name: str) -> dict[str, Any]:
    for v in _variants(schema):
        tool_prop = v.get("properties", {}).get("tool", {})
        if tool_prop.get("const") == name or tool_prop.get("enum") == [name]:
            return v
    raise AssertionError(f"no variant for tool {name!r}")


# --------------------------------------------------------------------------- typed form


def test_typed_schema_offers_plan_tool_finish(typed: ActionSchema) -> None:
    assert typed.offered_types == ("plan", "tool", "finish")
    assert typed.tool_names == ("lookup", "update_note")
    kinds = sorted({v["properties"]["type"]["const"] for v in _variants(typed.json_schema())})
    assert kinds == ["finish", "plan", "tool"]


def test_typed_schema_uses_each_tools_args_schema(typed: ActionSchema, tools: Toolbox) -> None:
    schema = typed.json_schema()
    for spec in (tools.lookup.spec, tools.update_note.spec):
        variant = _tool_variant(schema, spec.name)
        args = _resolve(schema, variant["properties"]["args"])
        assert args["properties"] == spec.args_schema["properties"]
        assert args["required"] == spec.args_schema["required"]
        assert args["additionalProperties"] is False


def test_typed_schema_does_not_represent_other_tools(typed: ActionSchema, tools: Toolbox) -> None:
    text = json.dumps(typed.json_schema())
    assert "delete_order" not in text
    with pytest.raises(UnknownToolError) as info:
        typed.parse(tool_reply("delete_order", {"order_id": "A1"}))
    assert info.value.tool == "delete_order"
    assert "lookup" in str(info.value)
    assert "update_note" in str(info.value)


def test_type_is_required_in_every_variant(typed: ActionSchema) -> None:
    variants = _variants(typed.json_schema())
    assert len(variants) == 4  # plan, two tools, finish
    for v in variants:
        assert "type" in v["required"], v["title"]
        assert v["required"][0] == "type"
        # thought comes first among the content fields
        assert next(iter(p for p in v["properties"] if p != "type")) == "thought"


def test_tool_discriminator_is_required_in_typed_variants(typed: ActionSchema) -> None:
    """The union is discriminated on ``tool`` too: a reply the schema allows must validate."""
    schema = typed.json_schema()
    for name in ("lookup", "update_note"):
        variant = _tool_variant(schema, name)
        assert "tool" in variant["required"], variant["required"]
        assert "args" in variant["required"]


def test_typed_parse_normalises_to_tool_action(typed: ActionSchema) -> None:
    action = typed.parse(tool_reply("lookup", {"order_id": "A1"}, thought="check it"))
    assert action == ToolAction(thought="check it", tool="lookup", args={"order_id": "A1"})
    assert isinstance(typed.parse(PLAN), PlanAction)
    finish = typed.parse(FINISH)
    assert isinstance(finish, FinishAction)
    assert finish.answer == "42"


def test_typed_parse_fills_defaults_of_args() -> None:
    @tool(effect="read")
    def page(query: str, limit: int = 5) -> list[str]:
        """Search a page."""
        return [query] * limit

    schema = compile_action_schema([page.spec])
    action = schema.parse(tool_reply("page", {"query": "q"}))
    assert isinstance(action, ToolAction)
    assert action.args == {"query": "q", "limit": 5}


def test_no_tools_offers_plan_and_finish() -> None:
    schema = compile_action_schema([])
    assert schema.offered_types == ("plan", "finish")
    with pytest.raises(InvalidActionError, match="not allowed at this step"):
        schema.parse(tool_reply("lookup", {"order_id": "A1"}))


def test_finish_only_schema_offers_only_finish(tools: Toolbox) -> None:
    schema = compile_action_schema([tools.lookup.spec], finish_only=True)
    assert schema.offered_types == ("finish",)
    variants = _variants(schema.json_schema())
    assert [v["properties"]["type"]["const"] for v in variants] == ["finish"]
    assert "lookup" not in json.dumps(schema.json_schema())
    assert isinstance(schema.parse(FINISH), FinishAction)
    with pytest.raises(InvalidActionError, match="allowed action types: finish"):
        schema.parse(tool_reply("lookup", {"order_id": "A1"}))
    with pytest.raises(InvalidActionError, match="allowed action types: finish"):
        schema.parse(PLAN)


def test_plan_can_be_withheld(tools: Toolbox) -> None:
    schema = compile_action_schema([tools.lookup.spec], allow_plan=False)
    assert schema.offered_types == ("tool", "finish")
    with pytest.raises(InvalidActionError, match="plan action is not allowed"):
        schema.parse(PLAN)


def test_unknown_schema_form_is_a_configuration_error(tools: Toolbox) -> None:
    with pytest.raises(ConfigurationError, match="'typed', 'generic'"):
        compile_action_schema([tools.lookup.spec], form="loose")  # type: ignore[arg-type]


def test_duplicate_tool_names_refused(tools: Toolbox) -> None:
    with pytest.raises(ConfigurationError, match="share a name"):
        compile_action_schema([tools.lookup.spec, tools.lookup.spec])


# --------------------------------------------------------------------------- generic form


@pytest.fixture
def generic(tools: Toolbox) -> ActionSchema:
    return compile_action_schema([tools.lookup.spec, tools.update_note.spec], form="generic")


def generic_reply(name: str, args_json: str) -> str:
    return json.dumps({"type": "tool", "thought": "t", "tool": name, "args_json": args_json})


def test_generic_schema_has_enum_of_names_and_args_json(generic: ActionSchema) -> None:
    schema = generic.json_schema()
    text = json.dumps(schema)
    tool_variants = [v for v in _variants(schema) if v["properties"]["type"]["const"] == "tool"]
    assert len(tool_variants) == 1
    variant = tool_variants[0]
    assert variant["properties"]["tool"]["enum"] == ["lookup", "update_note"]
    assert variant["properties"]["args_json"]["type"] == "string"
    assert "args" not in variant["properties"]
    assert {"type", "tool", "args_json"} <= set(variant["required"])
    assert "delete_order" not in text
    # No free-form object anywhere: every object closes its properties.
    for v in _variants(schema):
        assert v["additionalProperties"] is False


def test_generic_args_json_is_validated_client_side(generic: ActionSchema) -> None:
    action = generic.parse(generic_reply("update_note", '{"order_id": "A1", "note": "hi"}'))
    assert action == ToolAction(
        thought="t", tool="update_note", args={"order_id": "A1", "note": "hi"}
    )
    with pytest.raises(InvalidActionError, match="note") as info:
        generic.parse(generic_reply("update_note", '{"order_id": "A1"}'))
    assert "update_note" in str(info.value)
    with pytest.raises(InvalidActionError, match="args_json"):
        generic.parse(generic_reply("lookup", "{not json"))
    with pytest.raises(InvalidActionError):
        generic.parse(generic_reply("lookup", '{"order_id": "A1", "surprise": 1}'))


def test_generic_unknown_tool(generic: ActionSchema) -> None:
    with pytest.raises(UnknownToolError) as info:
        generic.parse(generic_reply("delete_order", "{}"))
    assert info.value.tool == "delete_order"
    assert "lookup, update_note" in str(info.value)


# --------------------------------------------------------------------------- parse errors


@pytest.mark.parametrize("reply", ["{not json", "[1, 2", "finish now please", '{"type": "finish",'])
def test_invalid_json(typed: ActionSchema, reply: str) -> None:
    with pytest.raises(InvalidActionError, match="not valid JSON"):
        typed.parse(reply)


@pytest.mark.parametrize("reply", ["", "   ", "\n\t"])
def test_empty_reply(typed: ActionSchema, reply: str) -> None:
    with pytest.raises(InvalidActionError, match="empty"):
        typed.parse(reply)


def test_oversized_reply_refused_before_parsing(tools: Toolbox) -> None:
    schema = compile_action_schema([tools.lookup.spec], max_reply_bytes=100)
    big_valid = json.dumps({"type": "finish", "thought": "t", "answer": "x" * 200})
    with pytest.raises(InvalidActionError, match="limit is 100") as info:
        schema.parse(big_valid)
    assert str(len(big_valid)) in str(info.value)
    # Refused before parsing: broken JSON over the cap gets the size error, not a JSON error.
    with pytest.raises(InvalidActionError, match="limit is 100"):
        schema.parse("{" * 500)
    assert isinstance(schema.parse(FINISH), FinishAction)


def test_reply_size_cap_counts_bytes(tools: Toolbox) -> None:
    """The cap is in bytes: multi-byte characters count as the bytes they take."""
    schema = compile_action_schema([tools.lookup.spec], max_reply_bytes=200)
    reply = json.dumps({"type": "finish", "thought": "t", "answer": "é" * 150}, ensure_ascii=False)
    assert len(reply) < 200 < len(reply.encode("utf-8"))
    with pytest.raises(InvalidActionError, match="limit is 200"):
        schema.parse(reply)


def test_default_reply_cap() -> None:
    assert compile_action_schema([]).max_reply_bytes == DEFAULT_MAX_REPLY_BYTES


def test_wrong_args_message_names_the_field(typed: ActionSchema) -> None:
    with pytest.raises(InvalidActionError) as info:
        typed.parse(tool_reply("update_note", {"order_id": "A1"}))
    assert not isinstance(info.value, UnknownToolError)
    assert "note" in str(info.value)
    assert "Field required" in str(info.value)
    with pytest.raises(InvalidActionError, match="order_id"):
        typed.parse(tool_reply("lookup", {"order_id": 17}))


def test_unknown_field_refused(typed: ActionSchema) -> None:
    reply = json.dumps({"type": "finish", "thought": "t", "answer": "a", "extra": True})
    with pytest.raises(InvalidActionError, match="extra"):
        typed.parse(reply)


def test_thought_length_enforced(typed: ActionSchema) -> None:
    reply = json.dumps({"type": "finish", "thought": "x" * 401, "answer": "a"})
    with pytest.raises(InvalidActionError, match="thought"):
        typed.parse(reply)


def test_plan_steps_bounds(typed: ActionSchema) -> None:
    with pytest.raises(InvalidActionError, match="steps"):
        typed.parse(json.dumps({"type": "plan", "thought": "t", "steps": []}))
    with pytest.raises(InvalidActionError, match="steps"):
        typed.parse(json.dumps({"type": "plan", "thought": "t", "steps": ["s"] * 9}))


def test_unknown_action_type(typed: ActionSchema) -> None:
    with pytest.raises(InvalidActionError, match="plan, tool, finish"):
        typed.parse(json.dumps({"type": "dance", "thought": "t"}))


@pytest.mark.parametrize(
    "reply",
    [
        f"```json\n{FINISH}\n```",
        f"```\n{FINISH}\n```",
        f"  ```json\n{FINISH}```  ",
    ],
)
def test_code_fenced_json_accepted(typed: ActionSchema, reply: str) -> None:
    action = typed.parse(reply)
    assert isinstance(action, FinishAction)
    assert action.answer == "42"


def test_bytes_reply_accepted(typed: ActionSchema) -> None:
    assert isinstance(typed.parse(FINISH.encode()), FinishAction)


# --------------------------------------------------------------------------- contract document


def test_load_default_contract() -> None:
    doc = load_contract()
    assert isinstance(doc, ContractDocument)
    assert doc.version == "2"
    assert "JSON" in doc.system
    assert doc.examples
    assert load_contract("2") == doc
    assert load_contract("2").hash == doc.hash
    # v2 is v1 with each tool's arguments as a signature (the rules and examples are v1's)
    assert (doc.tool_args, load_contract("1").tool_args) == ("signature", "json_schema")
    assert doc.model_copy(update={"version": "1", "tool_args": "json_schema"}) == (
        load_contract("1")
    )


def test_unknown_contract_version() -> None:
    with pytest.raises(ConfigurationError, match="99"):
        load_contract("99")


def test_contract_from_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"version": "custom-1", "system": "Be brief.", "examples": []}))
    doc = load_contract(path)
    assert doc.version == "custom-1"
    assert doc.system == "Be brief."
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "x"}')
    with pytest.raises(ConfigurationError, match=r"bad\.json"):
        load_contract(bad)
    with pytest.raises(ConfigurationError):
        load_contract(tmp_path / "missing.json")


def test_hash_is_stable() -> None:
    first = load_contract().hash
    assert len(first) == 16
    int(first, 16)
    assert load_contract().hash == first


def test_hash_changes_when_text_changes() -> None:
    doc = load_contract()
    edited = ContractDocument(
        version=doc.version, system=doc.system + " Be kind.", examples=doc.examples
    )
    assert edited.hash != doc.hash
    renamed = ContractDocument(version="2", system=doc.system, examples=doc.examples)
    assert renamed.hash != doc.hash


def test_hash_of_a_copy_reflects_the_copy() -> None:
    """A derived document (new text, added examples) never carries its parent's hash."""
    doc = load_contract()
    original = doc.hash  # computed (and cached) before copying
    edited = doc.model_copy(update={"system": "Something else entirely."})
    assert edited.system != doc.system
    assert edited.hash != original
    extra = WorkedExample(
        title="Just answer",
        task="Say hi.",
        turns=[{"action": {"type": "finish", "thought": "easy", "answer": "hi"}}],  # type: ignore[list-item]
    )
    assert doc.with_examples([extra]).hash != original


def test_lint_passes_on_shipped_document() -> None:
    assert load_contract().lint() == []


def test_lint_fails_when_an_example_no_longer_validates() -> None:
    doc = load_contract()
    example_tools = {t.name for ex in doc.examples for t in ex.tools}
    assert "get_weather" in example_tools

    @tool(effect="read", name="get_weather")
    def weather_now(location: str, units: str) -> dict[str, str]:
        """Current weather for a place (the argument is now 'location', not 'city')."""
        return {"location": location, "units": units}

    problems = doc.lint([weather_now.spec])
    assert problems
    assert len(problems) == 1, problems
    assert "Read, then answer" in problems[0]
    assert "turn 0" in problems[0]
    assert "location" in problems[0]
    # The unchanged tool still lints clean.

    @tool(effect="read", name="get_weather")
    def weather_same(city: str) -> dict[str, str]:
        """Current weather for a city."""
        return {"city": city}

    assert doc.lint([weather_same.spec]) == []


def test_lint_catches_an_invalid_action_in_an_example() -> None:
    broken = WorkedExample.model_validate(
        {
            "title": "Broken",
            "task": "t",
            "tools": [
                {
                    "name": "ping",
                    "description": "Ping a host.",
                    "parameters": {"type": "object", "properties": {"host": {"type": "string"}}},
                }
            ],
            "turns": [
                {"action": {"type": "finish", "thought": "no answer field"}},
                {"observation": "..."},
                {"action": {"type": "tool", "thought": "t", "tool": "nope", "args": {}}},
            ],
        }
    )
    problems = load_contract().with_examples([broken]).lint()
    assert len(problems) == 2
    assert all("Broken" in p for p in problems)
    assert "turn 0" in problems[0]
    assert "turn 2" in problems[1]
    assert "nope" in problems[1]


def test_example_turn_needs_exactly_one_kind() -> None:
    with pytest.raises(ValidationError):
        WorkedExample.model_validate(
            {
                "title": "t",
                "task": "t",
                "turns": [{"action": {"type": "finish"}, "observation": "x"}],
            }
        )


def test_render_system_lists_tools_and_examples(tools: Toolbox) -> None:
    doc = load_contract("1")
    text = doc.render_system([tools.lookup.spec])
    assert text.startswith(doc.system)
    assert "- lookup (effect: read): Look up one order by id." in text
    assert '"order_id"' in text
    assert "Example: Read, then answer" in text
    assert "update_note" not in text


def test_the_default_contract_shows_each_tool_once_as_a_signature(tools: Toolbox) -> None:
    """v2 (the default): a tool's arguments are a one-line signature in the text; their
    schema (descriptions, enums) is the action schema's, not repeated in the text."""
    doc = load_contract()
    text = doc.render_system([tools.lookup.spec])
    assert "- lookup(order_id: str) (effect: read): Look up one order by id." in text
    assert "args schema" not in text and '"order_id"' not in text.split("Example:")[0]
    assert "Example: Read, then answer" in text
    assert "update_note" not in text


# --------------------------------------------------------------------------- JSON Schema tools


def test_model_from_json_schema_basics() -> None:
    model = model_from_json_schema(
        "search",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "what to look for"},
                "limit": {"type": "integer", "default": 5},
                "kind": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "where": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
                "maybe": {"type": ["string", "null"]},
            },
            "required": ["query"],
        },
    )
    assert issubclass(model, BaseModel)
    ok = model.model_validate({"query": "q", "kind": "a", "tags": ["x"], "where": {"city": "Lyon"}})
    dumped = ok.model_dump()
    assert dumped["query"] == "q"
    assert "limit" not in dumped  # left out: the schema's default is the tool's, not filled in
    assert model.model_json_schema()["properties"]["limit"]["default"] == 5  # shown, though
    assert dumped["where"] == {"city": "Lyon"}
    assert model.model_json_schema()["properties"]["query"]["description"] == "what to look for"
    assert model.model_json_schema()["required"] == ["query"]
    for bad in (
        {},  # query missing
        {"query": 1},
        {"query": "q", "kind": "c"},
        {"query": "q", "tags": [1]},
        {"query": "q", "where": {}},
    ):
        with pytest.raises(ValidationError):
            model.model_validate(bad)
    # The schema's own rules: it leaves additional properties open, so they are sent as they are.
    assert model.model_validate({"query": "q", "unknown": 1}).model_dump() == {
        "query": "q",
        "unknown": 1,
    }


def test_model_from_json_schema_refuses_non_objects() -> None:
    with pytest.raises(ToolDefinitionError, match="object schema"):
        model_from_json_schema("x", {"type": "string"})
    with pytest.raises(ToolDefinitionError, match="not supported"):
        model_from_json_schema("x", {"type": "object", "properties": {"": {}}})


def test_model_from_json_schema_takes_any_property_name_exact_types_and_sent_args() -> None:
    names = ["_class", "from", "json", "Content-Type", "año", "model_config"]
    model = model_from_json_schema(
        "odd",
        {
            "type": "object",
            "properties": {
                **{n: {"type": "string"} for n in names},
                "count": {"type": "integer", "default": "3"},
                "ratio": {"type": "number"},
                "flag": {"type": "boolean", "default": "false"},
                "note": {"type": ["string", "null"]},
            },
            "required": ["_class"],
        },
    )
    assert list(model.model_json_schema()["properties"])[: len(names)] == names
    sent = {n: n.upper() for n in names} | {"ratio": 2}
    assert model.model_validate(sent).model_dump(mode="json") == sent | {"ratio": 2.0}
    assert model.model_validate({"_class": "x", "note": None}).model_dump() == {
        "_class": "x",
        "note": None,  # sent as null: kept; count was left out: absent, no default
    }
    # JSON Schema's types (Draft 2020-12): 5.0 is an integer; null only where the schema says.
    for wrong in ({"count": "5"}, {"count": 5.5}, {"flag": 1}, {"from": 5}, {"flag": None}):
        with pytest.raises(ValidationError):
            model.model_validate_json(json.dumps({"_class": "x", **wrong}))


def test_json_schema_tool_compiles_like_a_decorated_one() -> None:
    spec = ToolSpec(
        name="get_weather",
        description="Weather.",
        args_model=model_from_json_schema(
            "w",
            {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        ),
    )
    schema = compile_action_schema([spec])
    assert schema.parse(tool_reply("get_weather", {"city": "Lyon"})) == ToolAction(
        thought="because", tool="get_weather", args={"city": "Lyon"}
    )
    with pytest.raises(InvalidActionError, match="city"):
        schema.parse(tool_reply("get_weather", {}))


# -- contract options (v2 and the quality benchmark's variants) ------------------------------


def _weather() -> ToolSpec:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city."},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "integer"},
        },
        "required": ["city", "unit"],
    }
    return ToolSpec("get_weather", "Weather.", model_from_json_schema("w_args", schema))


def test_v1_keeps_its_hash_with_the_options_at_their_defaults() -> None:
    """The options added after v1 are left out of the hash at their defaults: runs recorded
    under v1 keep grouping with v1 in ``agentcore stats``."""
    assert load_contract("1").hash == "633624458a6517de"
    assert load_contract("1").model_copy(update={"thought_first": True}).hash != (
        "633624458a6517de"
    )


def test_thought_first_schema_orders_thought_before_type_and_parses_the_same() -> None:
    spec = _weather()
    first = compile_action_schema([spec], thought_first=True)
    plain = compile_action_schema([spec])
    assert first is not plain
    for variant in first.json_schema()["$defs"].values():
        if "thought" in variant.get("properties", {}):
            assert next(iter(variant["properties"])) == "thought"
    for variant in plain.json_schema()["$defs"].values():
        if "thought" in variant.get("properties", {}):
            assert next(iter(variant["properties"])) == "type"
    reply = tool_reply("get_weather", {"city": "Oslo", "unit": "c"})
    assert first.parse(reply) == plain.parse(reply)
    assert (
        first.parse(PLAN)
        == plain.parse(PLAN)
        == PlanAction(thought="first think", steps=["look", "answer"])
    )
    assert isinstance(first.parse(FINISH), FinishAction)
    assert first.with_form("generic").thought_first


def test_signature_and_tool_examples_and_closing_render() -> None:
    doc = load_contract("1").model_copy(
        update={
            "tool_args": "signature",
            "tool_examples": True,
            "examples": [],
            "closing": "If no tool fits, finish.",
        }
    )
    text = doc.render_system([_weather()])
    assert "- get_weather(city: str, unit: str, days?: int) (effect: read): Weather." in text
    assert "args schema" not in text
    assert "The city." not in text  # descriptions and enums are left to the schema
    assert '"args":{"city":"<city>","unit":"c"}' in text
    assert text.endswith("If no tool fits, finish.")


def test_thought_first_document_shows_examples_thought_first() -> None:
    doc = load_contract("1").model_copy(update={"thought_first": True})
    replies = [line for line in doc.render_system([]).splitlines() if line.startswith("Reply: ")]
    assert replies
    assert all(line.startswith('Reply: {"thought":') for line in replies)


async def test_a_thought_first_contract_orders_a_runs_schema_too() -> None:
    """The document's ``thought_first`` reaches the schema a run sends, as in evals."""
    from agentcore import Agent, tool
    from agentcore.adapters import ScriptedModel

    @tool(effect="read")
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return "sunny"

    doc = load_contract("1").model_copy(update={"thought_first": True})
    model = ScriptedModel([{"type": "finish", "thought": "t", "answer": "done"}])
    result = await Agent(tools=[get_weather], model=model, contract=doc).run("weather?")
    assert result.answer == "done"
    schema = model.requests[0].schema
    assert schema.thought_first
    defs = schema.json_schema()["$defs"].values()
    actions = [list(d["properties"]) for d in defs if "thought" in d.get("properties", {})]
    assert len(actions) >= 3, actions  # plan, finish and the tool's call
    for props in actions:
        assert props.index("thought") < props.index("type"), props


def test_a_second_agent_compiles_no_action_schema_again(tools: Toolbox) -> None:
    """``Agent()`` lints the contract's worked examples against their own tools: the
    schemas that takes are compiled once per process, not once per agent (an agent made
    per request cost ~13 ms before)."""
    from agentcore import Agent
    from agentcore.adapters import ScriptedModel
    from agentcore.contracts import ExampleTool, _schema

    Agent(tools=tools.all, model=ScriptedModel([]))
    before = _schema._compile.cache_info()  # pyright: ignore[reportPrivateUsage]
    Agent(tools=tools.all, model=ScriptedModel([]))
    after = _schema._compile.cache_info()  # pyright: ignore[reportPrivateUsage]
    assert after.misses == before.misses
    assert after.hits > before.hits
    example = ExampleTool(name="lookup", description="d", parameters={"type": "object"})
    same = ExampleTool(name="lookup", description="d", parameters={"type": "object"})
    assert example.to_spec() is same.to_spec()
    other = ExampleTool(name="lookup", description="other", parameters={"type": "object"})
    assert other.to_spec() is not example.to_spec()
    assert other.to_spec().description == "other"


def test_a_built_in_contract_is_read_once_and_shared_a_file_is_read_each_time(
    tmp_path: Path,
) -> None:
    first = load_contract()
    assert load_contract() is first
    assert load_contract("v1") is load_contract("1")
    assert load_contract("v2") == first
    path = tmp_path / "mine.json"
    path.write_text(first.model_dump_json())
    mine = load_contract(path)
    assert mine == first and mine is not first
    data = json.loads(path.read_text())
    data["system"] = "changed"
    path.write_text(json.dumps(data))
    assert load_contract(path).system == "changed"  # read again, not cached
    with pytest.raises(ConfigurationError, match="No built-in contract version"):
        load_contract("v99")
