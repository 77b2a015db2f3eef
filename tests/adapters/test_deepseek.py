"""DeepSeekAdapter: JSON mode with the schema in the prompt, against a fake DeepSeek."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from agentcore import Agent, Policy, RunStatus, tool
from agentcore.adapters import BreakerPolicy, CompletionRequest, RetryPolicy
from agentcore.adapters.deepseek import DeepSeekAdapter
from agentcore.contracts import FinishAction, ToolAction, compile_wire_schema
from agentcore.errors import SpendLimitError
from agentcore.events import ActionProposed, ToolFinished

from .conftest import FINISH, NOTE_CALL, FakeTime
from .fakes import FakeProvider, JsonReply, error_reply, ok
from .native_payloads import chat_tool_calls

RequestFactory = Callable[..., CompletionRequest]


@pytest.fixture
def adapter(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> DeepSeekAdapter:
    return DeepSeekAdapter(
        "deepseek/deepseek-chat",
        api_base=fake.base_url,
        api_key="sk-ds",
        retry=retry,
        breaker=breaker,
    )


async def test_json_mode_with_the_schema_in_the_system_prompt(
    adapter: DeepSeekAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(ok(NOTE_CALL, model="deepseek-chat"))
    request = make_request()
    completion = await adapter.complete_structured(request)

    (sent,) = fake.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-ds"
    body = sent.body
    assert body["model"] == "deepseek-chat"
    assert body["response_format"] == {"type": "json_object"}
    assert body["max_tokens"] == 1024
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are a careful support agent.\n\n")
    assert "json" in system["content"]  # DeepSeek requires the word
    wire = compile_wire_schema(request.schema, "json_prompt")
    assert wire.prompt is not None and system["content"].endswith(wire.prompt)
    assert body["messages"][1:] == [
        {"role": "user", "content": "Task: where is order A1?\n\nNote: be brief."}
    ]
    # json_prompt replies are not wrapped: the action itself.
    assert completion.action == ToolAction(
        thought="Record it.", tool="add_note", args={"order_id": "A1", "note": "customer called"}
    )
    assert completion.model == "deepseek/deepseek-chat"
    assert completion.usage.cost is not None  # deepseek-chat is in litellm's price map


async def test_blank_reply_is_an_invalid_reply_for_the_core_to_reask(
    adapter: DeepSeekAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(ok(""))
    completion = await adapter.complete_structured(make_request())
    assert completion.action is None
    assert completion.error is not None and "empty" in str(completion.error)
    assert completion.usage.input_tokens == 120  # the blank reply's tokens still count


async def test_fenced_reply_is_accepted(
    adapter: DeepSeekAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(ok("```json\n" + json.dumps(FINISH) + "\n```"))
    completion = await adapter.complete_structured(make_request())
    assert completion.action == FinishAction(thought="I know it.", answer="It shipped.")


async def test_insufficient_balance_is_a_spend_limit(
    adapter: DeepSeekAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        error_reply(402, "Insufficient Balance", type="unknown_error", code="invalid_request_error")
    )
    with pytest.raises(SpendLimitError, match="HTTP 402") as caught:
        await adapter.complete_structured(make_request())
    assert not caught.value.retryable
    assert caught.value.provider == "deepseek"
    assert len(fake.requests) == 1


async def test_server_overloaded_is_retried(
    adapter: DeepSeekAdapter, fake: FakeProvider, fake_time: FakeTime, make_request: RequestFactory
) -> None:
    fake.queue(error_reply(503, "Server overloaded, please retry shortly.", type="server_error"))
    fake.queue(ok(FINISH))
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2
    assert len(fake_time.waits) == 1


# --------------------------------------------------------------------------- parallel calls

LOOKUPS: list[str] = []


@tool(effect="read")
def get_order(order_id: str) -> dict[str, str]:
    """Look up one order.

    Args:
        order_id: the order's id, e.g. A1.
    """
    LOOKUPS.append(order_id)
    return {"order_id": order_id, "status": "shipped"}


@tool(effect="read")
def get_customer(customer_id: str) -> dict[str, str]:
    """Look up one customer.

    Args:
        customer_id: the customer's id, e.g. C-9.
    """
    LOOKUPS.append(customer_id)
    return {"customer_id": customer_id, "name": "Ada"}


async def test_deepseeks_parallel_tool_calls_are_one_batch_step(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    """DeepSeek's Chat Completions answer (OpenAI-compatible ``message.tool_calls``, two
    calls in one message), through litellm's real DeepSeek path in native mode: with
    batches offered it is one ``batch`` step whose calls each run and are recorded, and
    the run takes two model requests, not three."""
    LOOKUPS.clear()
    adapter = DeepSeekAdapter(
        "deepseek/deepseek-chat",
        api_base=fake.base_url,
        api_key="sk-ds",
        retry=retry,
        breaker=breaker,
        mode="native",
    )
    fake.queue(
        JsonReply(
            chat_tool_calls(
                [("get_order", {"order_id": "A1"}), ("get_order", {"order_id": "B2"})],
                "Both orders at once.",
                model="deepseek-chat",
            )
        ),
        ok("A1 and B2 have shipped.", model="deepseek-chat"),
    )
    agent = Agent(
        tools=[get_order, get_customer],  # batches are offered with two read tools
        model=adapter,
        store="memory://",
        policy=Policy(max_batch=4),
    )
    try:
        result = await agent.run("Where are A1 and B2?")
        events = await agent.transcript(result.run_id)
    finally:
        await agent.close()
    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.answer == "A1 and B2 have shipped."
    assert sorted(LOOKUPS) == ["A1", "B2"]
    assert len(fake.requests) == 2
    assert "parallel_tool_calls" not in fake.requests[0].body  # the API's default: allowed
    (batch,) = [ev.action for ev in events if isinstance(ev, ActionProposed)][:1]
    assert batch.type == "batch" and [c.args for c in batch.calls] == [
        {"order_id": "A1"},
        {"order_id": "B2"},
    ]
    finished = [ev for ev in events if isinstance(ev, ToolFinished)]
    assert sorted((ev.call_id, ev.ok) for ev in finished) == [("c1.1", True), ("c1.2", True)]
    second = [m for m in fake.requests[1].body["messages"] if m.get("tool_calls")]
    assert [c["id"] for c in second[0]["tool_calls"]] == ["c1.1", "c1.2"]
