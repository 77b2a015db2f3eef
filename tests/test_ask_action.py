"""The ``ask`` action: a question for the user, offered only at steps compiled with it.

Checked here: the variant itself (what it accepts and refuses, and that it reads back), that
a step without it refuses one with a reason the model can act on, that every dialect's wire
schema offers it when asked (and a reference JSON Schema validator accepts a valid ask reply
and refuses invalid ones), the system text's paragraph, and native function calling.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any, get_args

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field, ValidationError

from agentcore.adapters import Message, PartialAction
from agentcore.adapters._native import (
    ASK_TOOL,
    NativeCall,
    native_messages,
    native_partial,
    native_reply,
    native_tool_specs,
    native_tools,
    tool_name_map,
)
from agentcore.contracts import (
    MAX_QUESTION_CHARS,
    ActionSchema,
    AskAction,
    Dialect,
    FinishAction,
    ToolSpec,
    WireSchema,
    compile_action_schema,
    compile_wire_schema,
    dump_action,
    load_contract,
)
from agentcore.contracts._schema import action_problem, ask_note, load_action
from agentcore.errors import InvalidActionError

DIALECTS: tuple[Dialect, ...] = get_args(Dialect)


class LookupArgs(BaseModel):
    order_id: str = Field(description="The order's id.")


class RefundArgs(BaseModel):
    order_id: str
    amount: float = Field(gt=0)


TOOLS = (
    ToolSpec("get_order", "Look up an order.", LookupArgs),
    ToolSpec("refund", "Refund an order.", RefundArgs, effect="destructive"),
)
ASK = {"type": "ask", "thought": "Only they know which.", "question": "Which order, #12 or #13?"}


def _reply(wire: WireSchema, action: dict[str, Any]) -> dict[str, Any]:
    """``action`` in the shape ``wire`` asks for (wrapped where the dialect wraps)."""
    return {"action": action} if wire.wrapped else action


# --- the variant -------------------------------------------------------------------------


def test_an_ask_action_holds_a_question_and_reads_back() -> None:
    action = AskAction(thought="t", question="Which city?")
    assert action.type == "ask"
    text = dump_action(action)
    assert json.loads(text) == {"type": "ask", "thought": "t", "question": "Which city?"}
    assert load_action(text) == action
    longest = AskAction(thought="", question="q" * MAX_QUESTION_CHARS)
    assert load_action(dump_action(longest)) == longest


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"question": ""}, "at least 1 character"),
        ({"question": " \n\t "}, "the question is blank"),
        ({"question": "q" * (MAX_QUESTION_CHARS + 1)}, "at most 2000 characters"),
        ({"thought": "x" * 401}, "at most 400 characters"),
        ({"extra": 1}, "Extra inputs are not permitted"),
        ({"question": None}, "string"),
    ],
    ids=["empty", "blank", "over-long", "long-thought", "extra-key", "not-a-string"],
)
def test_the_variant_refuses_a_bad_question(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        AskAction.model_validate(ASK | fields)
    without = {k: v for k, v in ASK.items() if k != "question"}
    with pytest.raises(ValidationError, match="question"):
        AskAction.model_validate(without)


# --- offered only when the step allows it -------------------------------------------------


@pytest.mark.parametrize("form", ["typed", "generic"])
@pytest.mark.parametrize("thought_first", [False, True])
def test_a_step_compiled_with_ask_offers_it_and_parses_it(form: Any, thought_first: bool) -> None:
    schema = compile_action_schema(TOOLS, form=form, thought_first=thought_first, ask=True)
    assert schema.ask and schema.offered_types == ("plan", "tool", "ask", "finish")
    action = schema.parse(json.dumps(ASK))
    assert action == AskAction.model_validate(ASK)
    assert type(action) is AskAction  # normalised whatever the field order
    assert schema.with_form("generic").ask and schema.with_form("typed").ask
    variants = json.dumps(schema.json_schema())
    assert '"ask"' in variants


@pytest.mark.parametrize("form", ["typed", "generic"])
@pytest.mark.parametrize("thought_first", [False, True])
@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"question": ""}, r"ask\.question: String should have at least 1 character"),
        ({"question": "   "}, r"ask\.question: Value error, the question is blank"),
        ({"question": "q" * 2001}, r"ask\.question: String should have at most 2000"),
        ({"why": "x"}, r"ask\.why: Extra inputs are not permitted"),
    ],
    ids=["empty", "blank", "over-long", "extra-key"],
)
def test_a_bad_ask_reply_is_refused_with_a_reason(
    form: Any, thought_first: bool, fields: dict[str, Any], error: str
) -> None:
    schema = compile_action_schema(TOOLS, form=form, thought_first=thought_first, ask=True)
    with pytest.raises(InvalidActionError, match=error):
        schema.parse(json.dumps(ASK | fields))


def test_a_question_that_cannot_be_recorded_is_named() -> None:
    """JSON text cannot carry a lone surrogate to ``parse``, but an action built in Python
    (a scripted model, a snapshot) can: the check every parsed reply passes names it."""
    bad = AskAction.model_construct(type="ask", thought="t", question="Which \ud800?")
    assert "lone surrogate" in str(action_problem(bad))
    assert action_problem(AskAction(thought="t", question="Which?")) is None


@pytest.mark.parametrize("form", ["typed", "generic"])
@pytest.mark.parametrize("thought_first", [False, True])
def test_without_ask_an_ask_reply_is_refused_naming_what_is_allowed(
    form: Any, thought_first: bool
) -> None:
    schema = compile_action_schema(TOOLS, form=form, thought_first=thought_first)
    assert not schema.ask and "ask" not in schema.offered_types
    assert '"ask"' not in json.dumps(schema.json_schema())
    with pytest.raises(InvalidActionError, match="An ask action is not allowed at this step") as e:
        schema.parse(json.dumps(ASK))
    assert "allowed action types: plan, tool, finish" in str(e.value)


def test_a_finish_only_step_never_offers_ask() -> None:
    last = compile_action_schema(TOOLS, finish_only=True, ask=True)
    assert not last.ask and last.offered_types == ("finish",)
    assert last is compile_action_schema(TOOLS, finish_only=True)  # the same schema
    with pytest.raises(InvalidActionError, match="allowed action types: finish"):
        last.parse(json.dumps(ASK))
    assert [t.name for t in native_tool_specs(last, "openai_strict", strict=True)] == ["finish"]


def test_ask_off_is_the_schema_of_a_step_compiled_without_it() -> None:
    """``ask=False`` is the default: the same shared schema object, so every dialect's wire
    schema (the golden files) and validator are those of a step that never heard of it."""
    for form in ("typed", "generic"):
        plain = compile_action_schema(TOOLS, form=form)
        assert compile_action_schema(TOOLS, form=form, ask=False) is plain
        assert compile_action_schema(TOOLS, form=form, ask=True) is not plain


# --- every dialect ------------------------------------------------------------------------

_SHAPES = [
    pytest.param(form, thought_first, tool_args, id=f"{form}-{order}-{tool_args}")
    for form in ("typed", "generic")
    for thought_first, order in ((False, "type_first"), (True, "thought_first"))
    for tool_args in ("json_schema", "signature")
]


@pytest.mark.parametrize(("form", "thought_first", "tool_args"), _SHAPES)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_offers_ask_and_its_schema_accepts_exactly_valid_asks(
    dialect: Dialect, form: Any, thought_first: bool, tool_args: Any
) -> None:
    options: dict[str, Any] = {"form": form, "thought_first": thought_first, "tool_args": tool_args}
    schema = compile_action_schema(TOOLS, ask=True, **options)
    wire = compile_wire_schema(schema, dialect)
    check = Draft202012Validator(wire.schema)
    good = _reply(wire, ASK)
    assert check.is_valid(good), list(check.iter_errors(good))[:1]
    assert schema.parse(wire.unwrap(json.dumps(good))) == AskAction.model_validate(ASK)
    without_question = {k: v for k, v in ASK.items() if k != "question"}
    for bad in (without_question, ASK | {"why": "x"}, ASK | {"question": 7}):
        assert not check.is_valid(_reply(wire, bad)), bad
        with pytest.raises(InvalidActionError):
            schema.parse(wire.unwrap(json.dumps(_reply(wire, bad))))
    # Bounds a dialect cannot send are still enforced when the reply is parsed.
    empty = _reply(wire, ASK | {"question": ""})
    assert check.is_valid(empty) == (dialect != "json_prompt")  # only JSON mode keeps minLength
    with pytest.raises(InvalidActionError, match="question"):
        schema.parse(wire.unwrap(json.dumps(empty)))
    # The same step without ask: its wire schema refuses the reply.
    plain = compile_wire_schema(compile_action_schema(TOOLS, **options), dialect)
    assert not Draft202012Validator(plain.schema).is_valid(_reply(plain, ASK))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_ask_variant_costs_few_schema_tokens(dialect: Dialect) -> None:
    """One variant of three short fields: under 700 characters of compact JSON on the wire
    (about 110 tokens with the full descriptions, 60 with a signature contract's)."""

    def size(schema: ActionSchema) -> int:
        return len(json.dumps(compile_wire_schema(schema, dialect).schema, separators=(",", ":")))

    for tool_args in ("json_schema", "signature"):
        on = compile_action_schema(TOOLS, ask=True, tool_args=tool_args)
        off = compile_action_schema(TOOLS, tool_args=tool_args)
        assert 0 < size(on) - size(off) < 700


# --- the system text ---------------------------------------------------------------------


def test_the_ask_note_shows_a_reply_the_step_accepts() -> None:
    note = ask_note()
    example = json.loads(note[note.index("{") : note.index("}") + 1])
    assert example == {"type": "ask", "thought": "...", "question": "..."}
    schema = compile_action_schema(TOOLS, ask=True)
    assert schema.parse(json.dumps(example)) == AskAction(thought="...", question="...")
    assert "Do not ask what a tool can find out." in note


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_contract_documents_do_not_mention_ask(version: str) -> None:
    """The versioned text is unchanged: the paragraph is appended only when a run allows
    ``ask``, like the batch paragraph."""
    text = load_contract(version).render_system(TOOLS)
    assert '"ask"' not in text and ask_note() not in text


def test_the_ask_note_is_about_fifty_tokens() -> None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        pytest.skip("litellm (which ships tiktoken's encodings) is not installed")
    tiktoken = pytest.importorskip("tiktoken")
    bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    count = len(tiktoken.get_encoding("o200k_base").encode(ask_note()))
    assert 40 <= count <= 55, count


# --- native function calling ---------------------------------------------------------------


def test_native_mode_offers_an_ask_function_only_when_the_step_does() -> None:
    on = compile_action_schema(TOOLS, ask=True)
    tools = native_tools(on, "openai_strict", strict=True)
    assert [t["function"]["name"] for t in tools] == [
        "get_order",
        "refund",
        "plan",
        "ask",
        "finish",
    ]
    ask = tools[3]["function"]
    assert ask["strict"] is True
    assert set(ask["parameters"]["properties"]) == {"question", "thought"}
    assert ask["parameters"]["additionalProperties"] is False
    off = compile_action_schema(TOOLS)
    assert ASK_TOOL not in [
        t["function"]["name"] for t in native_tools(off, "anthropic", strict=False)
    ]
    for dialect in DIALECTS:  # question required, thought optional where the dialect allows
        (params,) = [
            s.parameters for s in native_tool_specs(on, dialect, strict=False) if s.name == "ask"
        ]
        assert "question" in params["required"]


def test_a_tool_named_ask_is_renamed_as_plan_and_finish_are() -> None:
    named = compile_action_schema(
        [
            ToolSpec("ask", "Ask the help desk.", LookupArgs),
            ToolSpec("plan", "Plan a trip.", LookupArgs),
        ],
        ask=True,
    )
    assert tool_name_map(named) == {"ask": "ask_2", "plan": "plan_2"}
    assert tool_name_map(compile_action_schema(named.tools)) == {"ask": "ask_2", "plan": "plan_2"}
    names = [s.name for s in native_tool_specs(named, "anthropic", strict=False)]
    assert names == ["ask_2", "plan_2", "plan", "ask", "finish"]
    tool_call = native_reply(named, "Desk.", [NativeCall("ask_2", '{"order_id": "7"}')])
    assert tool_call.action is not None and tool_call.action.type == "tool"
    question = native_reply(named, None, [NativeCall("ask", '{"question": "Which?"}')])
    assert question.action == AskAction(thought="", question="Which?")


def test_a_call_of_ask_is_the_ask_action() -> None:
    schema = compile_action_schema(TOOLS, ask=True)
    args = json.dumps({"question": "Which order?", "thought": "Two match."})
    reply = native_reply(schema, None, [NativeCall("ask", args)])
    assert reply.action == AskAction(thought="Two match.", question="Which order?")
    said = native_reply(schema, "Two match.", [NativeCall("ask", '{"question": "Which order?"}')])
    assert said.action == AskAction(thought="Two match.", question="Which order?")
    blank = native_reply(schema, None, [NativeCall("ask", '{"question": " "}')])
    assert blank.action is None and blank.error is not None
    assert "the question is blank" in str(blank.error)
    refused = native_reply(compile_action_schema(TOOLS), None, [NativeCall("ask", args)])
    assert refused.action is None
    assert "An ask action is not allowed at this step" in str(refused.error)


def test_an_ask_in_native_history_round_trips_through_its_function_call() -> None:
    schema = compile_action_schema(TOOLS, ask=True)
    action = AskAction(thought="Two orders match.", question="Which one, #12 or #13?")
    out = native_messages(
        "S",
        [
            Message("user", "Task: refund my order"),
            Message("assistant", dump_action(action), call_id="c1", action=action),
            Message("user", "#13", call_id="c1"),
        ],
        schema,
    )
    turn = out[2]
    assert "content" not in turn  # ask carries its thought as an argument, as plan does
    (call,) = turn["tool_calls"]
    assert call["id"] == "c1" and call["function"]["name"] == "ask"
    assert out[3] == {"role": "tool", "tool_call_id": "c1", "content": "#13"}
    back = native_reply(schema, None, [NativeCall("ask", call["function"]["arguments"])])
    assert back.action == action


def test_a_streaming_ask_call_reports_its_type_and_thought() -> None:
    schema = compile_action_schema(TOOLS, ask=True)
    partial = native_partial(schema, "", NativeCall("ask", '{"question": "Wh'))
    assert partial == PartialAction(type="ask", thought="")
    growing = native_partial(schema, "", NativeCall("ask", '{"question": "Which?", "thought": "Tw'))
    assert growing == PartialAction(type="ask", thought="Tw")
    spoken = native_partial(schema, "Two match.", NativeCall("ask", '{"thou'))
    assert spoken == PartialAction(type="ask", thought="Two match.")


def test_a_finish_still_reads_as_finish_beside_ask() -> None:
    schema = compile_action_schema(TOOLS, ask=True)
    reply = native_reply(schema, None, [NativeCall("finish", '{"thought": "t", "answer": "a"}')])
    assert reply.action == FinishAction(thought="t", answer="a")
