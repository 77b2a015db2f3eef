"""Native tool-calling mapping: our events as tool calls, replies back to one action."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, JsonValue

from agentcore._render import _INVALID_HINT as _INVALID_HINT_OF_RENDER  # pyright: ignore[reportPrivateUsage]
from agentcore._render import reask_messages
from agentcore.adapters import Message, PartialAction
from agentcore.adapters._native import (
    INVALID_HINT,
    NativeCall,
    native_messages,
    native_note,
    native_partial,
    native_reply,
    native_tool_specs,
    native_tools,
    strict_compatible,
    tool_name_map,
)
from agentcore.contracts import (
    FinishAction,
    PlanAction,
    ToolAction,
    ToolSpec,
    compile_action_schema,
)
from agentcore.errors import UnknownToolError


class GcdArgs(BaseModel):
    a: int
    b: int


class Empty(BaseModel):
    pass


SCHEMA = compile_action_schema(
    [
        ToolSpec("math.gcd", "Greatest common divisor.", GcdArgs),
        ToolSpec("math_gcd", "A clash after mapping.", GcdArgs),
        ToolSpec("ping", "Ping.", Empty),
    ]
)


def test_tool_names_are_mapped_for_providers_and_back() -> None:
    names = tool_name_map(SCHEMA)
    assert names == {"math.gcd": "math_gcd", "math_gcd": "math_gcd_2", "ping": "ping"}
    tools = native_tools(SCHEMA, "openai_strict", strict=True)
    wire = [t["function"]["name"] for t in tools]
    assert wire == ["math_gcd", "math_gcd_2", "ping", "plan", "finish"]
    gcd = tools[0]["function"]
    assert gcd["strict"] is True
    assert gcd["parameters"]["additionalProperties"] is False
    assert gcd["parameters"]["required"] == ["a", "b"]
    reply = native_reply(SCHEMA, None, [NativeCall("math_gcd", '{"a": 12, "b": 18}')])
    assert reply.action == ToolAction(thought="", tool="math.gcd", args={"a": 12, "b": 18})


def test_finish_only_step_offers_only_finish() -> None:
    last = compile_action_schema(SCHEMA.tools, finish_only=True)
    assert [t["function"]["name"] for t in native_tools(last, "anthropic", strict=False)] == [
        "finish"
    ]
    assert "strict" not in native_tools(last, "anthropic", strict=False)[0]["function"]


def test_first_call_is_taken_and_the_rest_reported() -> None:
    reply = native_reply(
        SCHEMA,
        "Checking both.",
        [NativeCall("ping", "{}"), NativeCall("math_gcd", '{"a": 1, "b": 2}')],
    )
    assert reply.action == ToolAction(thought="Checking both.", tool="ping", args={})
    assert reply.dropped == ('math.gcd({"a": 1, "b": 2})',)


def test_plan_finish_text_and_bad_replies() -> None:
    plan = native_reply(SCHEMA, None, [NativeCall("plan", '{"thought": "t", "steps": ["a"]}')])
    assert plan.action == PlanAction(thought="t", steps=["a"])
    text = native_reply(SCHEMA, "The answer is 6.", [])
    assert text.action == FinishAction(thought="", answer="The answer is 6.")
    empty = native_reply(SCHEMA, "  ", [])
    assert empty.action is None
    assert empty.error is not None
    bad_json = native_reply(SCHEMA, None, [NativeCall("ping", "{oops")])
    assert bad_json.action is None
    assert "not valid JSON" in str(bad_json.error)
    wrong_args = native_reply(SCHEMA, None, [NativeCall("math_gcd", '{"a": "x", "b": 2}')])
    assert wrong_args.action is None
    unknown = native_reply(SCHEMA, None, [NativeCall("delete_all", "{}")])
    assert isinstance(unknown.error, UnknownToolError)
    assert unknown.error.tool == "delete_all"


def test_history_becomes_tool_calls_and_results_with_our_call_ids() -> None:
    ping = ToolAction(thought="look", tool="ping", args={})
    gcd = ToolAction(thought="gcd", tool="math.gcd", args={"a": 4, "b": 6})
    messages = [
        Message("user", "Task: go"),
        Message("assistant", ping.model_dump_json(), call_id="c1", action=ping),
        Message("user", "[c1] ping returned: pong", call_id="c1"),
        Message("assistant", gcd.model_dump_json(), call_id="c2", action=gcd),
        Message("user", "[c2] Approved by alice.", call_id="c2"),
        Message("user", "[c2] math.gcd returned: 2", call_id="c2"),
        Message("assistant", "not json"),  # an invalid reply and its re-ask
        Message("user", "That reply is not a valid action: ..."),
        Message("user", "Step 4 of 8."),
    ]
    out = native_messages("SYSTEM", messages, SCHEMA)
    roles = [(m["role"], m.get("tool_call_id")) for m in out]
    assert roles == [
        ("system", None),
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("assistant", None),
        ("tool", "c2"),
        ("assistant", None),
        ("user", None),
    ]
    call = out[4]["tool_calls"][0]
    assert call["id"] == "c2"
    assert call["function"]["name"] == "math_gcd"
    assert json.loads(call["function"]["arguments"]) == {"a": 4, "b": 6}
    assert out[5]["content"] == "[c2] Approved by alice.\n[c2] math.gcd returned: 2"
    assert out[-1]["content"].endswith("Step 4 of 8.")  # consecutive user notes joined


def test_a_call_without_a_result_yet_gets_a_placeholder() -> None:
    ping = ToolAction(thought="look", tool="ping", args={})
    out = native_messages(
        "S",
        [
            Message("assistant", ping.model_dump_json(), call_id="c1", action=ping),
            Message("user", "Step 2 of 8."),
        ],
        SCHEMA,
    )
    assert [m["role"] for m in out] == ["system", "assistant", "tool", "user"]
    assert out[2]["content"] == "(no result yet)"


class Thinking(BaseModel):
    thought: str
    depth: int


def test_a_tool_argument_named_thought_stays_an_argument() -> None:
    schema = compile_action_schema([ToolSpec("ponder", "Think.", Thinking)])
    reply = native_reply(
        schema, "Why not.", [NativeCall("ponder", '{"thought": "deep", "depth": 3}')]
    )
    assert reply.action == ToolAction(
        thought="Why not.", tool="ponder", args={"thought": "deep", "depth": 3}
    )


class Open(BaseModel):
    payload: dict[str, Any]  # Any: an open object


class Loose(BaseModel):
    value: JsonValue


def test_strict_only_where_the_schema_can_be_closed() -> None:
    assert strict_compatible(GcdArgs.model_json_schema())
    assert strict_compatible({"type": "object"})  # no arguments
    assert not strict_compatible(Open.model_json_schema())
    assert not strict_compatible(Loose.model_json_schema())
    assert not strict_compatible(
        {"type": "object", "properties": {"p": {"type": "object"}}, "required": ["p"]}
    )
    schema = compile_action_schema([ToolSpec("blob", "B.", Open), ToolSpec("ping", "P.", Empty)])
    specs = {s.name: s.strict for s in native_tool_specs(schema, "openai_strict", strict=True)}
    assert specs == {"blob": False, "ping": True, "plan": True, "finish": True}


def test_the_native_note_names_renamed_tools() -> None:
    note = native_note(SCHEMA)
    assert "calling exactly one function" in note
    assert "math.gcd is math_gcd; math_gcd is math_gcd_2." in note
    plain = compile_action_schema([ToolSpec("ping", "Ping.", Empty)])
    assert "Function names" not in native_note(plain)


def test_a_reask_asks_for_a_function_call_and_empty_replies_are_shown() -> None:
    assert INVALID_HINT == _INVALID_HINT_OF_RENDER
    reask = reask_messages("", "The reply had no function call and no text.")
    out = native_messages("S", [Message("user", "Task: go"), *reask], SCHEMA)
    assert out[2] == {"role": "assistant", "content": "(empty reply)"}
    assert INVALID_HINT not in out[3]["content"]
    assert out[3]["content"].endswith(
        "Call exactly one of the offered functions again, with arguments that match its parameters."
    )


def test_partial_actions_while_a_call_streams() -> None:
    assert native_partial(SCHEMA, "Let me", None) == PartialAction(thought="Let me")
    tool_call = NativeCall("math_gcd", '{"a": 1')
    assert native_partial(SCHEMA, "Let me", tool_call) == PartialAction(
        type="tool", tool="math.gcd", thought="Let me"
    )
    finish = NativeCall("finish", '{"thought": "Almost th')
    assert native_partial(SCHEMA, "", finish) == PartialAction(type="finish", thought="Almost th")
