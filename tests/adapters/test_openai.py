"""OpenAIAdapter against a fake OpenAI on loopback, through the real litellm/openai code.

Each test queues the provider's documented payloads and checks both what left the process
(the captured request) and what the adapter made of the answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentcore import Agent, RunStatus, tool
from agentcore.adapters import BreakerPolicy, CompletionRequest, RetryPolicy, resolve_model
from agentcore.adapters.deepseek import DeepSeekAdapter
from agentcore.adapters.local import LocalAdapter
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.contracts import (
    FinishAction,
    ToolAction,
    ToolSpec,
    compile_action_schema,
    compile_wire_schema,
)
from agentcore.errors import (
    ConfigurationError,
    ModelRefusedError,
    ModelTruncatedError,
    UnknownToolError,
)
from agentcore.events import ModelCalled

from .conftest import FINISH, NOTE_CALL, TOOLS, strict_schema, wrapped
from .fakes import (
    FakeProvider,
    JsonReply,
    SseReply,
    chat_chunk,
    error_reply,
    ok,
    responses_response,
)

RequestFactory = Callable[..., CompletionRequest]


@pytest.fixture
def adapter(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> OpenAIAdapter:
    return OpenAIAdapter(
        "gpt-4.1-mini",
        api_base=fake.base_url,
        api_key="sk-test",
        timeout=5,
        extra_headers={"X-Trace": "t-1"},
        retry=retry,
        breaker=breaker,
    )


@pytest.fixture
def responses(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> OpenAIAdapter:
    return OpenAIAdapter(
        "openai/gpt-4.1-mini",
        api_base=fake.base_url,
        api_key="sk-test",
        timeout=5,
        retry=retry,
        breaker=breaker,
        api="responses",
    )


# --------------------------------------------------------------------------- the wire


async def test_chat_request_sends_strict_json_schema(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(ok(wrapped(FINISH)))
    request = make_request()
    await adapter.complete_structured(request)

    (sent,) = fake.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["x-trace"] == "t-1"
    assert sent.headers["x-stainless-retry-count"] == "0"
    body = sent.body
    assert body["model"] == "gpt-4.1-mini"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "next_action",
            "schema": strict_schema(request.schema),
            "strict": True,
        },
    }
    # No union at the root: the action is wrapped in an object.
    root = body["response_format"]["json_schema"]["schema"]
    assert root["type"] == "object" and root["required"] == ["action"]
    assert "anyOf" not in root
    assert body["max_completion_tokens"] == 1024
    # The system text first; consecutive user messages merged into one.
    assert body["messages"] == [
        {"role": "system", "content": "You are a careful support agent."},
        {"role": "user", "content": "Task: where is order A1?\n\nNote: be brief."},
    ]
    # Only provider fields left the process: litellm's own options stayed home.
    assert set(body) == {"model", "messages", "max_completion_tokens", "response_format"}


async def test_wrapped_union_answer_parses_into_the_tool_action(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        ok(
            wrapped(NOTE_CALL),
            prompt_tokens=900,
            completion_tokens=40,
            cached_tokens=768,
            response_id="chatcmpl-abc",
        )
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.action == ToolAction(
        thought="Record it.", tool="add_note", args={"order_id": "A1", "note": "customer called"}
    )
    assert completion.error is None
    # The text is the unwrapped, flat action (the core classifies and records it).
    assert json.loads(completion.text) == NOTE_CALL
    assert completion.model == "openai/gpt-4.1-mini"
    assert completion.attempts == 1
    assert completion.finish_reason == "stop"
    assert completion.response_id == "chatcmpl-abc"
    usage = completion.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (900, 40, 768)
    assert usage.cost is not None and usage.cost > 0  # gpt-4.1-mini is in litellm's price map
    assert completion.latency_ms > 0


async def test_finish_answer_and_unknown_model_has_no_cost(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    adapter = OpenAIAdapter(
        "my-private-finetune",
        api_base=fake.base_url,
        api_key="sk-test",
        retry=retry,
        breaker=breaker,
    )
    fake.queue(ok(wrapped(FINISH), model="my-private-finetune"))
    completion = await adapter.complete_structured(make_request())
    assert completion.action == FinishAction(thought="I know it.", answer="It shipped.")
    assert completion.usage.cost is None


async def test_invalid_reply_is_reported_not_raised(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    teleport = {"type": "tool", "thought": "go", "tool": "teleport", "args": {}}
    fake.queue(ok(wrapped(teleport)))
    completion = await adapter.complete_structured(make_request())
    assert completion.action is None
    assert isinstance(completion.error, UnknownToolError)
    assert completion.error.tool == "teleport"
    assert json.loads(completion.text)["tool"] == "teleport"
    assert completion.usage.input_tokens == 120


async def test_generic_form_is_sent_and_parsed_when_the_typed_one_cannot_be_strict(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    class TagArgs(BaseModel):
        labels: dict[str, str]  # an open object: strict mode cannot express it

    schema = compile_action_schema([*TOOLS, ToolSpec("tag", "Tag an order.", TagArgs)])
    args_json = json.dumps({"labels": {"priority": "high"}})
    reply = {"action": {"type": "tool", "thought": "tag", "tool": "tag", "args_json": args_json}}
    fake.queue(ok(reply))
    completion = await adapter.complete_structured(make_request(schema=schema))
    sent_schema = fake.last.body["response_format"]["json_schema"]["schema"]
    assert sent_schema == compile_wire_schema(schema.with_form("generic"), "openai_strict").schema
    assert "args_json" in json.dumps(sent_schema)
    assert completion.action == ToolAction(
        thought="tag", tool="tag", args={"labels": {"priority": "high"}}
    )


# --------------------------------------------------------------------------- stop reasons


async def test_refusal_raises_model_refused_with_the_text(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(ok(None, refusal="I can't help with that.", prompt_tokens=50, completion_tokens=7))
    with pytest.raises(ModelRefusedError, match="I can't help with that") as caught:
        await adapter.complete_structured(make_request())
    err = caught.value
    assert err.retryable
    assert err.model == "openai/gpt-4.1-mini"
    assert (err.attempts, err.input_tokens, err.output_tokens) == (1, 50, 7)
    assert len(fake.requests) == 1


async def test_truncation_is_retried_once_with_twice_the_tokens(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        ok('{"action": {"type": "fin', finish_reason="length", completion_tokens=64),
        ok(wrapped(FINISH), completion_tokens=30),
    )
    completion = await adapter.complete_structured(make_request(max_output_tokens=64))
    assert [b["max_completion_tokens"] for b in fake.bodies] == [64, 128]
    assert completion.action == FinishAction(thought="I know it.", answer="It shipped.")
    assert completion.attempts == 2
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (240, 94)


async def test_truncated_twice_raises_and_counts_both(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        ok('{"action": {"type": "fin', finish_reason="length", completion_tokens=1024),
        ok('{"action": {"type": "finish", "tho', finish_reason="length", completion_tokens=2048),
    )
    with pytest.raises(ModelTruncatedError, match="cut off twice") as caught:
        await adapter.complete_structured(make_request())
    err = caught.value
    assert err.retryable
    assert (err.attempts, err.input_tokens, err.output_tokens) == (2, 240, 3072)
    assert [b["max_completion_tokens"] for b in fake.bodies] == [1024, 2048]


async def test_content_filter_counts_as_refusal(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(ok(None, finish_reason="content_filter"))
    with pytest.raises(ModelRefusedError, match="content_filter"):
        await adapter.complete_structured(make_request())


# --------------------------------------------------------------------------- Responses API


async def test_responses_api_request_and_answer(
    responses: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        JsonReply(
            responses_response(wrapped(NOTE_CALL), cached_tokens=64, response_id="resp_abc123")
        )
    )
    request = make_request()
    completion = await responses.complete_structured(request)

    (sent,) = fake.requests
    assert sent.path == "/v1/responses"
    body = sent.body
    assert body["model"] == "gpt-4.1-mini"
    assert body["instructions"] == "You are a careful support agent."
    assert body["input"] == [
        {"role": "user", "content": "Task: where is order A1?\n\nNote: be brief."}
    ]
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "next_action",
            "schema": strict_schema(request.schema),
            "strict": True,
        }
    }
    assert body["max_output_tokens"] == 1024
    assert body["store"] is False
    assert set(body) == {"model", "instructions", "input", "max_output_tokens", "store", "text"}
    assert completion.action is not None and completion.action.type == "tool"
    assert completion.response_id == "resp_abc123"  # litellm's encoded id, decoded
    assert (completion.usage.input_tokens, completion.usage.cached_input_tokens) == (120, 64)
    assert completion.finish_reason == "completed"


async def test_responses_incomplete_is_truncation(
    responses: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    cut = responses_response(
        '{"action": {', status="incomplete", incomplete_reason="max_output_tokens"
    )
    fake.queue(JsonReply(cut), JsonReply(cut))
    with pytest.raises(ModelTruncatedError) as caught:
        await responses.complete_structured(make_request())
    assert [b["max_output_tokens"] for b in fake.bodies] == [1024, 2048]
    assert caught.value.attempts == 2
    assert caught.value.output_tokens == 60


async def test_responses_refusal_part_raises_refused(
    responses: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(JsonReply(responses_response(None, refusal="I won't do that.")))
    with pytest.raises(ModelRefusedError, match="I won't do that"):
        await responses.complete_structured(make_request())


# --------------------------------------------------------------------------- configuration


def test_registry_resolves_provider_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCORE_LOCAL_API_BASE", "http://127.0.0.1:9/v1")
    openai = resolve_model("openai/gpt-4.1-mini")
    assert isinstance(openai, OpenAIAdapter) and openai.name == "openai/gpt-4.1-mini"
    deepseek = resolve_model("deepseek/deepseek-chat")
    assert isinstance(deepseek, DeepSeekAdapter) and deepseek.model == "deepseek/deepseek-chat"
    for route, server, model in [
        ("ollama_chat/llama3.2", "ollama", "ollama_chat/llama3.2"),
        ("hosted_vllm/qwen", "vllm", "hosted_vllm/qwen"),
        ("local/smollm2", "llama_cpp_python", "openai/smollm2"),
    ]:
        adapter = resolve_model(route)
        assert isinstance(adapter, LocalAdapter)
        assert (adapter.name, adapter.server, adapter.model) == (route, server, model)


def test_bad_options_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="Valid: 'chat', 'responses'"):
        OpenAIAdapter("gpt-4.1-mini", api="assistants")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="timeout"):
        OpenAIAdapter("gpt-4.1-mini", timeout=0)
    with pytest.raises(ConfigurationError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(TypeError):
        OpenAIAdapter("gpt-4.1-mini", temperature=0.2)  # type: ignore[call-arg]


@pytest.mark.subprocess
def test_litellm_is_not_imported_until_a_model_is_called(tmp_path: Path) -> None:
    code = (
        "import sys, agentcore, agentcore.adapters\n"
        "from agentcore.adapters.openai import OpenAIAdapter\n"
        "from agentcore.adapters.deepseek import DeepSeekAdapter\n"
        "from agentcore.adapters.local import LocalAdapter\n"
        "OpenAIAdapter('gpt-4.1-mini'); DeepSeekAdapter('deepseek-chat')\n"
        "LocalAdapter('m', api_base='http://127.0.0.1:1/v1')\n"
        "agentcore.Agent(tools=[], model=['openai/gpt-4.1-mini', 'ollama_chat/x'],"
        " store='memory://')\n"
        "print([m for m in ('litellm', 'openai', 'httpx', 'aiohttp') if m in sys.modules])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=env,
    )
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- through Agent


async def test_route_moves_to_the_next_model_after_retries(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    down = FakeProvider()
    try:
        down.default = error_reply(500, "The server had an error.", type="server_error")

        @tool(effect="read")
        def get_order(order_id: str) -> dict[str, str]:
            """Look up one order.

            Args:
                order_id: the order's id.
            """
            return {"order_id": order_id, "status": "shipped"}

        lookup = {
            "type": "tool",
            "thought": "Look.",
            "tool": "get_order",
            "args": {"order_id": "A1"},
        }
        fake.queue(ok(wrapped(lookup)), ok(wrapped(FINISH)))
        first = OpenAIAdapter(
            "gpt-4.1-mini", api_base=down.base_url, api_key="sk-a", retry=retry, breaker=breaker
        )
        second = OpenAIAdapter(
            "gpt-4.1", api_base=fake.base_url, api_key="sk-b", retry=retry, breaker=breaker
        )
        agent = Agent(tools=[get_order], model=[first, second], store="memory://")
        try:
            result = await agent.run("Where is order A1?")
            events = await agent.transcript(result.run_id)
        finally:
            await agent.close()
    finally:
        down.close()

    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.answer == "It shipped."
    called = [e for e in events if isinstance(e, ModelCalled)]
    # Each step starts at the head of the route: error then ok, twice (tool step, finish).
    assert [(c.model, c.outcome) for c in called] == [
        ("openai/gpt-4.1-mini", "error"),
        ("openai/gpt-4.1", "ok"),
    ] * 2
    failed = called[0]
    assert failed.attempts == 4
    assert failed.error is not None and "ProviderUnavailableError" in failed.error
    assert "HTTP 500" in failed.error
    assert len(down.requests) == 8  # two steps, four attempts each
    assert called[1].response_id is not None and called[1].input_tokens == 120
    # The second model saw the same transcript the first was given.
    assert down.requests[0].body["messages"] == fake.requests[0].body["messages"]


# --------------------------------------------------------------------------- the fake itself


# litellm's streaming code makes pydantic warn (a TypedDict with ReadOnly items; instance
# access to model_fields and model_computed_fields); under filterwarnings=error litellm turns
# those warnings into a MidStreamFallbackError. They come from litellm, not the fake or us.
@pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211")
async def test_fake_streams_server_sent_events_through_litellm(fake: FakeProvider) -> None:
    """SSE replies work through litellm's streaming path (for the streaming adapters)."""
    from agentcore.adapters._litellm import get_field, litellm

    usage = {"prompt_tokens": 90, "completion_tokens": 5, "total_tokens": 95}
    fake.queue(
        SseReply(
            [
                chat_chunk({"role": "assistant", "content": ""}),
                chat_chunk({"content": '{"action": '}),
                chat_chunk({"content": '{"type": "finish"}}'}, finish_reason="stop"),
                chat_chunk({}, usage=usage),
            ]
        )
    )
    stream = await litellm().acompletion(
        model="openai/gpt-4.1-mini",
        messages=[{"role": "user", "content": "hi"}],
        api_base=fake.base_url,
        api_key="k",
        stream=True,
        stream_options={"include_usage": True},
        num_retries=0,
        max_retries=0,
    )
    text, seen_usage = "", None
    async for chunk in stream:
        for choice in chunk.choices:
            text += get_field(choice.delta, "content") or ""
        seen_usage = get_field(chunk, "usage") or seen_usage
    assert text == '{"action": {"type": "finish"}}'
    assert get_field(seen_usage, "prompt_tokens") == 90
    assert fake.last.body["stream"] is True
