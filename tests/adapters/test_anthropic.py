"""AnthropicAdapter against a fake Anthropic Messages API on loopback.

The requests go through litellm's real Anthropic code; each test checks what left the
process and what the adapter made of Anthropic's documented answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentcore.adapters import BreakerPolicy, CompletionRequest, Message, RetryPolicy, resolve_model
from agentcore.adapters.anthropic import AnthropicAdapter
from agentcore.contracts import (
    FinishAction,
    ToolAction,
    ToolSpec,
    anthropic_limits,
    choose_form,
    compile_action_schema,
    compile_wire_schema,
)
from agentcore.errors import (
    AuthenticationError,
    ModelRefusedError,
    ModelTruncatedError,
    RateLimitedError,
    SpendLimitError,
)

from .conftest import FINISH, NOTE_CALL, TOOLS, FakeTime
from .fakes import FakeProvider, JsonReply, anthropic_error, anthropic_message

RequestFactory = Callable[..., CompletionRequest]
EPHEMERAL = {"type": "ephemeral"}


def claude(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    model: str = "claude-sonnet-4-5",
    **options: Any,  # Any: AnthropicAdapter options
) -> AnthropicAdapter:
    return AnthropicAdapter(
        model, api_base=fake.url, api_key="sk-ant-test", retry=retry, breaker=breaker, **options
    )


def wrapped(action: dict[str, Any]) -> dict[str, Any]:  # Any: JSON
    """An action as an ``anthropic`` dialect reply (wrapped, tool calls not grouped)."""
    return {"action": action}


@pytest.fixture
def adapter(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> AnthropicAdapter:
    return claude(fake, retry, breaker)


# --------------------------------------------------------------------------- the wire


@pytest.mark.parametrize(
    "model",
    [
        "claude-sonnet-4-5",  # litellm's map: supports_native_structured_output
        "claude-3-5-haiku-20241022",  # in the map without the flag
        "claude-future-9",  # unknown to litellm's map
    ],
)
async def test_native_output_config_and_never_a_tool(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
    model: str,
) -> None:
    adapter = claude(fake, retry, breaker, f"anthropic/{model}")
    fake.queue(JsonReply(anthropic_message(wrapped(FINISH))))
    request = make_request()
    completion = await adapter.complete_structured(request)

    (sent,) = fake.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "structured-outputs-2025-11-13" in sent.headers["anthropic-beta"]
    body = sent.body
    assert set(body) == {"model", "system", "messages", "max_tokens", "output_config"}
    assert "tools" not in body and "tool_choice" not in body
    assert body["model"] == model
    assert body["max_tokens"] == 1024
    assert body["output_config"] == {
        "format": {
            "type": "json_schema",
            "schema": compile_wire_schema(request.schema, "anthropic").schema,
        }
    }
    root = body["output_config"]["format"]["schema"]
    assert root["type"] == "object" and root["required"] == ["action"]
    assert body["system"] == [
        {"type": "text", "text": "You are a careful support agent.", "cache_control": EPHEMERAL}
    ]
    # Each message its own block (one user turn); breakpoints on the last two blocks.
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Task: where is order A1?", "cache_control": EPHEMERAL},
                {"type": "text", "text": "Note: be brief.", "cache_control": EPHEMERAL},
            ],
        }
    ]
    assert completion.action == FinishAction(thought="I know it.", answer="It shipped.")
    assert completion.model == f"anthropic/{model}"


@pytest.mark.parametrize(
    ("model", "forced"),
    [("claude-future-9", False), ("claude-3-5-haiku-20241022", True)],
)
async def test_litellm_response_format_would_send_a_tool_instead(
    fake: FakeProvider, model: str, forced: bool
) -> None:
    """Why the adapter sends ``output_config`` itself: litellm's own mapping of
    ``response_format`` turns the schema into a tool (``json_tool_call``) for a model its
    map does not flag, forced with ``tool_choice`` when the model is in the map."""
    from agentcore.adapters._litellm import litellm

    fake.queue(JsonReply(anthropic_message(wrapped(FINISH))))
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    await litellm().acompletion(
        model=f"anthropic/{model}",
        messages=[{"role": "user", "content": "hi"}],
        api_base=fake.url,
        api_key="k",
        max_tokens=64,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
        num_retries=0,
    )
    body = fake.last.body
    assert "output_config" not in body and "output_format" not in body
    assert [t["name"] for t in body["tools"]] == ["json_tool_call"]
    assert ("tool_choice" in body) is forced


async def test_history_turns_alternate_and_only_the_last_two_blocks_are_breakpoints(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(JsonReply(anthropic_message(wrapped(FINISH))))
    messages = [
        Message("user", "Task: where is order A1?"),
        Message("assistant", json.dumps(NOTE_CALL), call_id="c1"),
        Message("user", "[c1] add_note returned: ok", call_id="c1"),
        Message("assistant", ""),  # a blank reply being re-asked
        Message("user", "That reply is not a valid action: empty."),
        Message("user", "Step 3 of 25."),
    ]
    await adapter.complete_structured(make_request(messages=messages))
    sent = fake.last.body["messages"]
    assert [turn["role"] for turn in sent] == ["user", "assistant", "user", "assistant", "user"]
    blocks = [block for turn in sent for block in turn["content"]]
    assert [b["text"] for b in blocks] == [
        "Task: where is order A1?",
        json.dumps(NOTE_CALL),
        "[c1] add_note returned: ok",
        "(empty reply)",
        "That reply is not a valid action: empty.",
        "Step 3 of 25.",
    ]
    assert ["cache_control" in b for b in blocks] == [False] * 4 + [True] * 2


async def test_schema_past_anthropic_limits_is_sent_in_the_generic_form(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    class WideArgs(BaseModel):
        # 17 union-typed parameters: over Anthropic's limit of 16.
        a0: int | str
        a1: int | str
        a2: int | str
        a3: int | str
        a4: int | str
        a5: int | str
        a6: int | str
        a7: int | str
        a8: int | str
        a9: int | str
        b0: int | str
        b1: int | str
        b2: int | str
        b3: int | str
        b4: int | str
        b5: int | str
        b6: int | str

    schema = compile_action_schema([*TOOLS, ToolSpec("wide", "Many unions.", WideArgs)])
    assert not anthropic_limits(compile_wire_schema(schema, "anthropic").schema).fits
    generic = choose_form(schema, "anthropic")
    assert generic.form == "generic"
    args = {f"{p}{i}": i for p in "ab" for i in range(10) if not (p == "b" and i > 6)}
    reply = {
        "type": "tool",
        "thought": "wide",
        "tool": "wide",
        "args_json": json.dumps(args),
    }
    fake.queue(JsonReply(anthropic_message(wrapped(reply))))
    completion = await adapter.complete_structured(make_request(schema=schema))

    body = fake.last.body
    sent_schema = body["output_config"]["format"]["schema"]
    assert sent_schema == compile_wire_schema(generic, "anthropic").schema
    assert anthropic_limits(sent_schema).fits
    assert "tools" not in body and "tool_choice" not in body
    assert completion.action == ToolAction(thought="wide", tool="wide", args=args)


async def test_tool_answer_and_usage_with_cache_reads(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        JsonReply(
            anthropic_message(
                wrapped(NOTE_CALL),
                input_tokens=50,
                cache_read=900,
                cache_creation=0,
                output_tokens=40,
                message_id="msg_01ABC",
            )
        )
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.action == ToolAction(
        thought="Record it.", tool="add_note", args={"order_id": "A1", "note": "customer called"}
    )
    assert json.loads(completion.text) == NOTE_CALL
    usage = completion.usage
    # litellm's prompt_tokens: uncached input plus cache reads (and writes).
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (950, 40, 900)
    assert usage.cost is not None and usage.cost > 0  # claude-sonnet-4-5 is in the price map
    assert completion.response_id is None  # litellm keeps its own id, not Anthropic's
    assert completion.finish_reason == "stop"


# --------------------------------------------------------------------------- stop reasons


async def test_max_tokens_is_truncation_retried_once_with_twice_the_tokens(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    cut = anthropic_message('{"action": {"type": "fin', stop_reason="max_tokens")
    fake.queue(JsonReply(cut), JsonReply(cut))
    with pytest.raises(ModelTruncatedError, match="cut off twice") as caught:
        await adapter.complete_structured(make_request(max_output_tokens=100))
    assert [b["max_tokens"] for b in fake.bodies] == [100, 200]
    assert (caught.value.attempts, caught.value.output_tokens) == (2, 60)


async def test_refusal_stop_reason_raises_model_refused(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(JsonReply(anthropic_message("", stop_reason="refusal")))
    with pytest.raises(ModelRefusedError, match="refusal") as caught:
        await adapter.complete_structured(make_request())
    assert caught.value.retryable
    assert len(fake.requests) == 1


# --------------------------------------------------------------------------- errors


async def test_529_overloaded_is_retried(
    adapter: AnthropicAdapter,
    fake: FakeProvider,
    fake_time: FakeTime,
    make_request: RequestFactory,
) -> None:
    fake.queue(
        anthropic_error(529, "Overloaded", kind="overloaded_error"),
        JsonReply(anthropic_message(wrapped(FINISH))),
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2
    assert len(fake_time.waits) == 1


async def test_429_rate_limit_waits_for_retry_after(
    adapter: AnthropicAdapter,
    fake: FakeProvider,
    fake_time: FakeTime,
    make_request: RequestFactory,
) -> None:
    fake.queue(
        anthropic_error(
            429,
            "Number of request tokens has exceeded your per-minute rate limit.",
            kind="rate_limit_error",
            headers={"retry-after": "7"},
        ),
        JsonReply(anthropic_message(wrapped(FINISH))),
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2
    assert fake_time.waits == [7.0]


@pytest.mark.parametrize(
    ("message", "details"),
    [
        ("This request would exceed your account's monthly spend limit.", None),
        ("Rate limited", {"error_code": "enforced_spend_limit_reached"}),
    ],
)
async def test_spend_limit_429_is_not_retried(
    adapter: AnthropicAdapter,
    fake: FakeProvider,
    fake_time: FakeTime,
    make_request: RequestFactory,
    message: str,
    details: dict[str, str] | None,
) -> None:
    reply = anthropic_error(429, message, kind="rate_limit_error")
    if details is not None:
        reply.body["error"]["details"] = details
    fake.queue(reply, JsonReply(anthropic_message(wrapped(FINISH))))
    with pytest.raises(SpendLimitError) as caught:
        await adapter.complete_structured(make_request())
    assert not caught.value.retryable
    assert caught.value.provider == "anthropic"
    assert len(fake.requests) == 1
    assert fake_time.waits == []


async def test_plain_rate_limit_is_not_a_spend_limit(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(*[anthropic_error(429, "Rate limited", kind="rate_limit_error")] * 4)
    with pytest.raises(RateLimitedError):
        await adapter.complete_structured(make_request())
    assert len(fake.requests) == 4


async def test_authentication_error_names_the_key_variable(
    adapter: AnthropicAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(anthropic_error(401, "invalid x-api-key", kind="authentication_error"))
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        await adapter.complete_structured(make_request())
    assert len(fake.requests) == 1


@pytest.mark.subprocess
def test_anthropic_and_gemini_do_not_import_litellm_until_called(tmp_path: Path) -> None:
    code = (
        "import sys, agentcore\n"
        "from agentcore.adapters.anthropic import AnthropicAdapter\n"
        "from agentcore.adapters.gemini import GeminiAdapter\n"
        "AnthropicAdapter('claude-sonnet-4-5'); GeminiAdapter('gemini-2.5-flash')\n"
        "agentcore.Agent(tools=[], model=['anthropic/claude-sonnet-4-5',"
        " 'gemini/gemini-2.5-flash'], store='memory://')\n"
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


def test_registry_resolves_anthropic_routes() -> None:
    adapter = resolve_model("anthropic/claude-sonnet-4-5", timeout=30)
    assert isinstance(adapter, AnthropicAdapter)
    assert (adapter.name, adapter.model, adapter.timeout) == (
        "anthropic/claude-sonnet-4-5",
        "anthropic/claude-sonnet-4-5",
        30,
    )
