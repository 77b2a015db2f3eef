"""Typed results through real adapters, against the fake OpenAI on loopback.

``Agent(output=T)`` reaches the provider as the ``finish`` variant's answer schema (strict
json_schema in structured mode, the ``finish`` function's parameters in native mode), and
the provider's reply comes back as a ``T`` through the same validation path as any reply.
An answer type a strict dialect cannot send as it is (an open object, too many optional
fields for Anthropic) goes in the generic form as ``answer_json``, a string validated here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field, create_model

from agentcore import Agent, PartialOutput, RunEnded, RunStatus, tool
from agentcore.adapters import BreakerPolicy, RetryPolicy
from agentcore.adapters.anthropic import AnthropicAdapter
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.events import ModelCalled

from .conftest import wrapped
from .fakes import FakeProvider, JsonReply, SseReply, anthropic_stream, ok
from .native_payloads import chat_tool_calls, chat_tool_stream


class Invoice(BaseModel):
    customer: str
    total_cents: int = Field(ge=0)
    lines: list[str]


INVOICE = {"customer": "acme", "total_cents": 1250, "lines": ["2 x widget"]}


@tool(effect="read")
def get_order(order_id: str) -> dict[str, str]:
    """Look up an order.

    Args:
        order_id: the order's id.
    """
    return {"order_id": order_id, "customer": "acme"}


def gpt(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, **options: Any
) -> OpenAIAdapter:  # Any: OpenAIAdapter options
    return OpenAIAdapter(
        "gpt-4.1-mini",
        api_base=fake.base_url,
        api_key="sk-test",
        retry=retry,
        breaker=breaker,
        **options,
    )


def finish(answer: Any) -> dict[str, Any]:  # Any: JSON
    return {"type": "finish", "thought": "Billed.", "answer": answer}


def _resolve(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:  # Any: JSON Schema
    """``node``, or the definition its ``$ref`` names."""
    ref = node.get("$ref")
    return root["$defs"][ref.removeprefix("#/$defs/")] if isinstance(ref, str) else node


def _variant(root: dict[str, Any], kind: str) -> dict[str, Any]:  # Any: JSON Schema
    """The action variant whose ``type`` is ``kind``, in place or in ``$defs``."""
    union = (
        root["properties"]["action"]["anyOf"]
        if "action" in root.get("properties", {})
        else (root["anyOf"])
    )
    for member in union:
        variant = _resolve(root, member)
        if variant.get("properties", {}).get("type", {}).get("const") == kind:
            return variant
    raise AssertionError(f"no {kind} variant in {root}")


async def test_structured_mode_sends_the_answer_type_strictly_and_returns_it_typed(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    wrong = finish({"customer": "acme", "total_cents": "lots", "lines": []})
    fake.queue(ok(wrapped(wrong)), ok(wrapped(finish(INVOICE))))
    agent = Agent(
        tools=[get_order], model=gpt(fake, retry, breaker), store="memory://", output=Invoice
    )
    try:
        result = await agent.run("Bill order A1.")
        events = await agent.transcript(result.run_id)
    finally:
        await agent.close()

    assert result.status is RunStatus.COMPLETED, result.reason
    assert isinstance(result.output, Invoice) and result.output.total_cents == 1250
    assert [e.outcome for e in events if isinstance(e, ModelCalled)] == ["invalid", "ok"]
    sent = fake.bodies[0]["response_format"]["json_schema"]
    assert sent["strict"] is True
    answer = _variant(sent["schema"], "finish")["properties"]["answer"]
    invoice = _resolve(sent["schema"], answer)
    assert invoice["required"] == ["customer", "total_cents", "lines"]
    assert invoice["additionalProperties"] is False
    # The re-ask told the model what was wrong with its answer.
    reask = fake.bodies[1]["messages"][-1]["content"]
    assert "finish.answer.total_cents" in reask


async def test_native_mode_offers_finish_with_the_answer_type_and_returns_it_typed(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    fake.queue(
        JsonReply(chat_tool_calls([("get_order", {"order_id": "A1"})], "Look.")),
        JsonReply(chat_tool_calls([("finish", {"thought": "Billed.", "answer": INVOICE})])),
    )
    model = gpt(fake, retry, breaker, mode="native")
    agent = Agent(tools=[get_order], model=model, store="memory://", output=Invoice)
    try:
        result = await agent.run("Bill order A1.")
    finally:
        await agent.close()

    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.output == Invoice.model_validate(INVOICE)
    (finish_fn,) = [
        t["function"] for t in fake.bodies[0]["tools"] if t["function"]["name"] == "finish"
    ]
    answer = finish_fn["parameters"]["properties"]["answer"]
    assert answer["required"] == ["customer", "total_cents", "lines"]
    assert answer["properties"]["total_cents"]["type"] == "integer"


@pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211")
async def test_native_stream_yields_the_partial_output_then_the_typed_result(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    fake.queue(
        SseReply(
            chat_tool_stream([("finish", {"thought": "Billed.", "answer": INVOICE})], pieces=6)
        )
    )
    model = gpt(fake, retry, breaker, mode="native")
    agent = Agent(tools=[get_order], model=model, store="memory://", output=Invoice)
    try:
        seen = [item async for item in agent.stream("Bill order A1.")]
    finally:
        await agent.close()

    partials = [x.value for x in seen if isinstance(x, PartialOutput)]
    assert partials, [type(x).__name__ for x in seen]
    assert partials[-1] == INVOICE
    last = seen[-1]
    assert isinstance(last, RunEnded) and isinstance(last.result.output, Invoice)
    assert json.loads(last.result.answer or "") == INVOICE


# --------------------------------------------------------------- answers as JSON text (generic)


async def test_an_open_answer_type_is_sent_as_answer_json_and_returned_typed(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    """Strict OpenAI closes every object: ``dict[str, int]`` in the typed form would be an
    object with no properties, so a constrained decoder could only write ``{}``."""
    bad = {"type": "finish", "thought": "Counted.", "answer_json": '{"apples": "many"}'}
    good = {"type": "finish", "thought": "Counted.", "answer_json": '{"apples": 3, "pears": 0}'}
    fake.queue(ok(wrapped(bad)), ok(wrapped(good)))
    agent = Agent(
        tools=[get_order], model=gpt(fake, retry, breaker), store="memory://", output=dict[str, int]
    )
    try:
        result = await agent.run("Count the fruit.")
        events = await agent.transcript(result.run_id)
    finally:
        await agent.close()

    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.output == {"apples": 3, "pears": 0}
    assert [e.outcome for e in events if isinstance(e, ModelCalled)] == ["invalid", "ok"]
    sent = fake.bodies[0]["response_format"]["json_schema"]
    assert sent["strict"] is True
    finish_variant = _variant(sent["schema"], "finish")
    assert finish_variant["properties"]["answer_json"]["type"] == "string"
    assert "answer" not in finish_variant["properties"]
    reask = fake.bodies[1]["messages"][-1]["content"]
    assert "answer_json" in reask and "apples" in reask


Profile = create_model(
    "Profile", **{f"field_{i}": (str | None, None) for i in range(30)}
)  # 30 optional parameters: Anthropic accepts 24


async def test_anthropic_streams_an_answer_json_too_large_for_its_limits(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    answer = {"field_0": "Ada", "field_7": "London"}
    text = json.dumps(
        {"action": {"type": "finish", "thought": "Found.", "answer_json": json.dumps(answer)}}
    )
    fake.queue(SseReply(anthropic_stream(text, pieces=10), done=False, named=True))
    model = AnthropicAdapter(
        "claude-sonnet-4-5", api_base=fake.url, api_key="sk-ant-test", retry=retry, breaker=breaker
    )
    agent = Agent(tools=[get_order], model=model, store="memory://", output=Profile)
    try:
        seen = [item async for item in agent.stream("Who is it?")]
    finally:
        await agent.close()

    sent = fake.bodies[0]["output_config"]["format"]["schema"]
    assert _variant(sent, "finish")["properties"]["answer_json"]["type"] == "string"
    partials = [x.value for x in seen if isinstance(x, PartialOutput)]
    assert len(partials) >= 2 and partials[-1] == answer, partials
    last = seen[-1]
    assert isinstance(last, RunEnded) and isinstance(last.result.output, Profile)
    assert last.result.output.model_dump(exclude_none=True) == answer
