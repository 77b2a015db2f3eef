"""GeminiAdapter in native tool-calling mode, against a fake Gemini API on loopback.

litellm's real Gemini code turns our OpenAI-format history into ``contents``; the tests check
the converted body (``functionCall`` / ``functionResponse`` parts paired by name and order,
our ids on them for Gemini 3, ``functionDeclarations`` with ``parametersJsonSchema``, mode
``AUTO``, no ``responseJsonSchema``) and what the adapter made of ``functionCall`` parts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from agentcore.adapters import BreakerPolicy, CompletionRequest, Message, PartialAction, RetryPolicy
from agentcore.adapters.gemini import GeminiAdapter
from agentcore.contracts import (
    FinishAction,
    PlanAction,
    ToolAction,
    ToolSpec,
    compile_action_schema,
    compile_parameters,
)
from agentcore.errors import ModelRefusedError, ModelTruncatedError

from .conftest import TOOLS
from .fakes import FakeProvider, JsonReply, SseReply, gemini_response
from .native_payloads import gemini_call_stream, gemini_function_calls

RequestFactory = Callable[..., CompletionRequest]


def gemini(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, model: str = "gemini-2.5-flash"
) -> GeminiAdapter:
    return GeminiAdapter(
        model, api_base=fake.url, api_key="k", retry=retry, breaker=breaker, mode="native"
    )


@pytest.fixture
def adapter(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> GeminiAdapter:
    return gemini(fake, retry, breaker)


def declarations(body: dict[str, Any]) -> list[dict[str, Any]]:  # Any: JSON
    (group,) = body["tools"]
    return group["functionDeclarations"]


# --------------------------------------------------------------------------- the wire


async def test_request_declares_functions_with_json_schema_and_auto_mode(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(JsonReply(gemini_function_calls([("get_order", {"order_id": "A1"})], "Looking.")))
    completion = await adapter.complete_structured(make_request())

    body = fake.last.body
    assert fake.last.path.endswith("/models/gemini-2.5-flash:generateContent")
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    assert "responseJsonSchema" not in json.dumps(body)
    assert "responseMimeType" not in json.dumps(body)
    assert [d["name"] for d in declarations(body)] == ["get_order", "add_note", "plan", "finish"]
    assert declarations(body)[0] == {
        "name": "get_order",
        "description": "Look up one order by id. (effect: read)",
        "parametersJsonSchema": compile_parameters(TOOLS[0].args_schema, "gemini"),
    }
    assert all("parameters" not in d for d in declarations(body))
    assert "calling exactly one function" in body["systemInstruction"]["parts"][0]["text"]
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Task: where is order A1?\n\nNote: be brief."}]}
    ]
    assert completion.mode == "native"
    assert completion.action == ToolAction(
        thought="Looking.", tool="get_order", args={"order_id": "A1"}
    )
    assert completion.finish_reason == "STOP"
    assert completion.usage.input_tokens == 120


async def test_several_function_calls_take_the_first(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        JsonReply(
            gemini_function_calls(
                [("get_order", {"order_id": "A1"}), ("add_note", {"order_id": "A1", "note": "n"})]
            )
        )
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.action == ToolAction(thought="", tool="get_order", args={"order_id": "A1"})
    assert completion.dropped_calls == ('add_note({"order_id": "A1", "note": "n"})',)


async def test_a_text_reply_is_a_finish(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(JsonReply(gemini_response("It shipped on Monday.")))
    completion = await adapter.complete_structured(make_request())
    assert completion.action == FinishAction(thought="", answer="It shipped on Monday.")


class GcdArgs(BaseModel):
    a: int
    b: int


async def test_dotted_names_and_a_finish_only_step(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    schema = compile_action_schema([ToolSpec("math.gcd", "GCD.", GcdArgs)])
    fake.queue(
        JsonReply(gemini_function_calls([("math_gcd", {"a": 4, "b": 6})])),
        JsonReply(gemini_function_calls([("finish", {"thought": "t", "answer": "2"})])),
    )
    gcd = await adapter.complete_structured(make_request(schema=schema))
    assert [d["name"] for d in declarations(fake.last.body)] == ["math_gcd", "plan", "finish"]
    assert gcd.action == ToolAction(thought="", tool="math.gcd", args={"a": 4, "b": 6})
    last = compile_action_schema(schema.tools, finish_only=True)
    done = await adapter.complete_structured(make_request(schema=last))
    assert [d["name"] for d in declarations(fake.last.body)] == ["finish"]
    assert done.action == FinishAction(thought="t", answer="2")


async def test_max_tokens_is_truncation_and_safety_a_refusal(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    cut = gemini_function_calls([("get_order", {"order_id": "A1"})], finish_reason="MAX_TOKENS")
    fake.queue(
        JsonReply(cut), JsonReply(cut), JsonReply(gemini_response(None, finish_reason="SAFETY"))
    )
    with pytest.raises(ModelTruncatedError):
        await adapter.complete_structured(make_request())
    with pytest.raises(ModelRefusedError):
        await adapter.complete_structured(make_request())


async def test_streamed_function_call(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    events = gemini_call_stream(("add_note", {"order_id": "A1", "note": "n"}), "Writing it down.")
    fake.queue(SseReply(events, done=False))
    seen: list[PartialAction] = []
    completion = await adapter.complete_structured(make_request(on_partial=seen.append))
    assert ":streamGenerateContent" in fake.last.path
    assert seen[0] == PartialAction(thought="Writ")
    assert seen[-1] == PartialAction(type="tool", tool="add_note", thought="Writing it down.")
    assert completion.action == ToolAction(
        thought="Writing it down.", tool="add_note", args={"order_id": "A1", "note": "n"}
    )


# --------------------------------------------------------------------------- history


def history() -> list[Message]:
    plan = PlanAction(thought="Look, then note.", steps=["look", "note"])
    look = ToolAction(thought="Find it.", tool="get_order", args={"order_id": "A1"})
    note = ToolAction(thought="", tool="add_note", args={"order_id": "A1", "note": "n"})
    return [
        Message("user", "Task: note A1"),
        Message("assistant", plan.model_dump_json(), call_id="c1", action=plan),
        Message("user", "[c1] Plan approved. Go ahead with it.", call_id="c1"),
        Message("assistant", look.model_dump_json(), call_id="c2", action=look),
        Message("user", '[c2] get_order returned: {"status": "shipped"}', call_id="c2"),
        Message("assistant", note.model_dump_json(), call_id="c3", action=note),
        Message("user", "[c3] Refused: not now", call_id="c3"),
        Message("user", "Step 4 of 8."),
    ]


async def test_history_pairs_function_calls_and_responses_by_name_and_order(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(JsonReply(gemini_response("Done.")))
    await adapter.complete_structured(make_request(messages=history()))
    contents = fake.last.body["contents"]
    assert [c["role"] for c in contents] == [
        "user",
        "model",
        "user",
        "model",
        "user",
        "model",
        "user",
    ]
    assert contents[1]["parts"] == [  # plan's thought is its argument, not repeated as text
        {
            "function_call": {
                "name": "plan",
                "args": {"thought": "Look, then note.", "steps": ["look", "note"]},
            }
        },
    ]
    calls = [
        p["function_call"]["name"] for c in contents for p in c["parts"] if "function_call" in p
    ]
    responses = [
        p["function_response"] for c in contents for p in c["parts"] if "function_response" in p
    ]
    assert calls == ["plan", "get_order", "add_note"]
    assert [r["name"] for r in responses] == calls
    assert responses[0]["response"] == {"content": "[c1] Plan approved. Go ahead with it."}
    assert responses[1]["response"] == {"content": '[c2] get_order returned: {"status": "shipped"}'}
    # The step note after the last result travels inside it: roles keep alternating.
    assert responses[2]["response"] == {"content": "[c3] Refused: not now\n\nStep 4 of 8."}
    assert all("id" not in p.get("function_call", {}) for c in contents for p in c["parts"])
    assert "thoughtSignature" not in json.dumps(contents)


async def test_gemini_3_carries_our_call_ids(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    adapter = gemini(fake, retry, breaker, model="gemini-3-pro-preview")
    fake.queue(JsonReply(gemini_function_calls([("get_order", {"order_id": "B"})], ids=True)))
    completion = await adapter.complete_structured(make_request(messages=history()))
    contents = fake.last.body["contents"]
    call_ids = [
        p["function_call"]["id"] for c in contents for p in c["parts"] if "function_call" in p
    ]
    response_ids = [
        p["function_response"]["id"]
        for c in contents
        for p in c["parts"]
        if "function_response" in p
    ]
    assert call_ids == response_ids == ["c1", "c2", "c3"]
    # litellm's documented placeholder signature: the transcript keeps no provider signatures.
    signed = [p for c in contents for p in c["parts"] if "function_call" in p]
    assert all(p["thoughtSignature"] for p in signed)
    assert completion.action == ToolAction(thought="", tool="get_order", args={"order_id": "B"})
