"""AnthropicAdapter in native tool-calling mode, against a fake Messages API on loopback.

litellm's real Anthropic code builds the request from our OpenAI-format history; the tests
check the converted body (``tool_use`` / ``tool_result`` blocks keyed by our call ids, the
``auto`` tool choice, no ``output_config``) and what the adapter made of Anthropic's
documented ``tool_use`` answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from agentcore import Agent, RunStatus, tool
from agentcore.adapters import BreakerPolicy, CompletionRequest, PartialAction, RetryPolicy
from agentcore.adapters.anthropic import AnthropicAdapter
from agentcore.contracts import (
    FinishAction,
    PlanAction,
    ToolAction,
    ToolSpec,
    compile_action_schema,
    compile_parameters,
)
from agentcore.errors import ModelRefusedError, ModelTruncatedError
from agentcore.events import ModelCalled

from .conftest import TOOLS
from .fakes import FakeProvider, JsonReply, SseReply, anthropic_message
from .native_payloads import anthropic_tool_stream, anthropic_tool_use

RequestFactory = Callable[..., CompletionRequest]
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
def adapter(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> AnthropicAdapter:
    return AnthropicAdapter(
        "claude-sonnet-4-5",
        api_base=fake.url,
        api_key="sk-ant-test",
        retry=retry,
        breaker=breaker,
        mode="native",
    )


def forced(body: dict[str, Any]) -> bool:  # Any: JSON
    """Whether a request forces a tool call (``tool_choice`` ``any`` or ``tool``)."""
    choice = body.get("tool_choice")
    return isinstance(choice, dict) and choice.get("type") in ("any", "tool")


# --------------------------------------------------------------------------- the wire


async def test_request_offers_tools_with_auto_choice_and_no_output_config(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(JsonReply(anthropic_tool_use([("get_order", {"order_id": "A1"})], "Looking.")))
    completion = await adapter.complete_structured(make_request())

    request = fake.last
    body = request.body
    assert request.path == "/v1/messages"
    assert "output_config" not in body
    assert "output_format" not in body
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert not forced(body)
    assert "structured-outputs" not in request.headers.get("anthropic-beta", "")
    assert [t["name"] for t in body["tools"]] == ["get_order", "add_note", "plan", "finish"]
    assert body["tools"][0] == {
        "name": "get_order",
        "description": "Look up one order by id. (effect: read)",
        "input_schema": compile_parameters(TOOLS[0].args_schema, "anthropic"),
    }
    assert all("strict" not in t for t in body["tools"])
    assert body["system"][0]["cache_control"] == EPHEMERAL
    assert "calling exactly one function" in body["system"][0]["text"]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Task: where is order A1?\n\nNote: be brief."}
                | {"cache_control": EPHEMERAL}
            ],
        }
    ]
    assert completion.mode == "native"
    assert completion.action == ToolAction(
        thought="Looking.", tool="get_order", args={"order_id": "A1"}
    )
    assert completion.finish_reason == "tool_calls"
    assert completion.usage.input_tokens == 120


async def test_parallel_tool_use_blocks_take_the_first(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        JsonReply(
            anthropic_tool_use(
                [("get_order", {"order_id": "A1"}), ("get_order", {"order_id": "B2"})]
            )
        )
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.action == ToolAction(thought="", tool="get_order", args={"order_id": "A1"})
    assert completion.dropped_calls == ('get_order({"order_id": "B2"})',)


async def test_a_text_reply_with_end_turn_is_a_finish(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(JsonReply(anthropic_message("Order A1 shipped.", stop_reason="end_turn")))
    completion = await adapter.complete_structured(make_request())
    assert completion.action == FinishAction(thought="", answer="Order A1 shipped.")


class GcdArgs(BaseModel):
    a: int
    b: int


async def test_dotted_names_and_a_finish_only_step(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    schema = compile_action_schema([ToolSpec("math.gcd", "GCD.", GcdArgs)])
    fake.queue(
        JsonReply(anthropic_tool_use([("math_gcd", {"a": 4, "b": 6})])),
        JsonReply(anthropic_tool_use([("finish", {"thought": "t", "answer": "2"})])),
    )
    gcd = await adapter.complete_structured(make_request(schema=schema))
    assert [t["name"] for t in fake.last.body["tools"]] == ["math_gcd", "plan", "finish"]
    assert gcd.action == ToolAction(thought="", tool="math.gcd", args={"a": 4, "b": 6})
    last = compile_action_schema(schema.tools, finish_only=True)
    done = await adapter.complete_structured(make_request(schema=last))
    assert [t["name"] for t in fake.last.body["tools"]] == ["finish"]
    assert fake.last.body["tool_choice"]["type"] == "auto"
    assert done.action == FinishAction(thought="t", answer="2")


async def test_max_tokens_inside_a_tool_use_is_truncation(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    cut = anthropic_tool_use([("add_note", {"order_id": "A1"})], stop_reason="max_tokens")
    fake.queue(JsonReply(cut), JsonReply(cut))
    with pytest.raises(ModelTruncatedError):
        await adapter.complete_structured(make_request())
    assert [b["max_tokens"] for b in fake.bodies] == [1024, 2048]


async def test_refusal_stop_reason_raises(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(JsonReply(anthropic_message(None, stop_reason="refusal")))
    with pytest.raises(ModelRefusedError):
        await adapter.complete_structured(make_request())


async def test_streamed_tool_use_shows_the_tool_then_validates(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    events = anthropic_tool_stream(("plan", {"thought": "Two steps.", "steps": ["a", "b"]}))
    fake.queue(SseReply(events, done=False, named=True))
    seen: list[PartialAction] = []
    completion = await adapter.complete_structured(make_request(on_partial=seen.append))
    assert fake.last.body["stream"] is True
    assert seen[0].type == "plan"
    assert seen[-1] == PartialAction(type="plan", thought="Two steps.")
    assert completion.action == PlanAction(thought="Two steps.", steps=["a", "b"])
    assert completion.usage.output_tokens == 30


# --------------------------------------------------------------------------- history


@tool(effect="read")
def get_order(order_id: str) -> dict[str, Any]:  # Any: JSON
    """Look up one order.

    Args:
        order_id: the order's id, e.g. A1.
    """
    return {"order_id": order_id, "status": "shipped"}


async def test_history_is_tool_use_and_tool_result_blocks_with_our_ids(
    adapter: AnthropicAdapter, fake: FakeProvider
) -> None:
    fake.queue(
        JsonReply(anthropic_tool_use([("get_order", {"order_id": "A1"})], "Find it.")),
        JsonReply(
            anthropic_tool_use(
                [("get_order", {"order_id": "A1"}), ("get_order", {"order_id": "C3"})]
            )
        ),
        JsonReply(anthropic_message("A1 has shipped.")),
    )
    agent = Agent(tools=[get_order], model=adapter, store="memory://")
    try:
        result = await agent.run("Where is A1?")
        events = await agent.transcript(result.run_id)
    finally:
        await agent.close()
    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.answer == "A1 has shipped."
    called = [ev for ev in events if isinstance(ev, ModelCalled)]
    assert [ev.mode for ev in called] == ["native"] * 3
    assert called[1].dropped_calls == ['get_order({"order_id": "C3"})']

    messages = fake.bodies[2]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Find it."},
        {"type": "tool_use", "id": "c1", "name": "get_order", "input": {"order_id": "A1"}},
    ]
    (first_result,) = messages[2]["content"]  # the step notes are not history
    assert first_result["type"] == "tool_result"
    assert first_result["tool_use_id"] == "c1"
    assert first_result["content"].startswith("[c1] get_order returned: ")
    assert messages[3]["content"] == [
        {"type": "tool_use", "id": "c2", "name": "get_order", "input": {"order_id": "A1"}},
    ]
    result_block, note = messages[4]["content"]  # the result first, then this step's note
    assert result_block["tool_use_id"] == "c2"
    assert "not executed: get_order" in result_block["content"]
    assert note == {"type": "text", "text": "Step 3 of 25.", "cache_control": EPHEMERAL}
    assert result_block["cache_control"] == EPHEMERAL  # the last two blocks: breakpoints
    text = json.dumps(fake.bodies[2])
    assert "toolu_" not in text  # the provider's ids are not kept
    assert not any(forced(b) for b in fake.bodies)
    assert all("output_config" not in b for b in fake.bodies)
