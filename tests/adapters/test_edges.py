"""Providers at the edges: a missing key, a refusal inside a stream.

Through the real litellm and openai code against the loopback fake, like every adapter test.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from agentcore import Agent, RunEnded, RunStatus, tool
from agentcore.adapters import BreakerPolicy, CompletionRequest, RetryPolicy
from agentcore.adapters._litellm import LiteLLMAdapter
from agentcore.adapters.anthropic import AnthropicAdapter
from agentcore.adapters.deepseek import DeepSeekAdapter
from agentcore.adapters.gemini import GeminiAdapter
from agentcore.adapters.local import LocalAdapter
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.errors import AuthenticationError, ModelRefusedError
from agentcore.events import ModelCalled

from .conftest import FINISH, FakeTime, wrapped
from .fakes import FakeProvider, SseReply, chat_chunk, chat_stream, ok

RequestFactory = Callable[..., CompletionRequest]

# (adapter class, model, the key's variable, the other variables litellm reads)
FAMILIES: list[tuple[type[LiteLLMAdapter], str, str, tuple[str, ...]]] = [
    (OpenAIAdapter, "gpt-4.1-mini", "OPENAI_API_KEY", ()),
    (AnthropicAdapter, "claude-sonnet-4-5", "ANTHROPIC_API_KEY", ()),
    (GeminiAdapter, "gemini-2.5-flash", "GEMINI_API_KEY", ("GOOGLE_API_KEY",)),
    (DeepSeekAdapter, "deepseek-chat", "DEEPSEEK_API_KEY", ()),
]
KEY_CASES = [(*f, how) for f in FAMILIES for how in ("unset", "empty", "blank api_key")]


@pytest.mark.parametrize(
    ("cls", "model", "env", "others", "how"),
    KEY_CASES,
    ids=[f"{c[0].family}-{c[4]}" for c in KEY_CASES],
)
async def test_a_missing_key_is_an_authentication_error_before_any_request(
    cls: type[LiteLLMAdapter],
    model: str,
    env: str,
    others: tuple[str, ...],
    how: str,
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    fake_time: FakeTime,
    make_request: RequestFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (env, *others):
        monkeypatch.delenv(name, raising=False)
    if how == "empty":
        monkeypatch.setenv(env, "")
    api_key = "  " if how == "blank api_key" else None
    adapter = cls(model, api_base=fake.url, api_key=api_key, retry=retry, breaker=breaker)
    fake.queue(ok(wrapped(FINISH)))

    with pytest.raises(AuthenticationError) as caught:
        await adapter.complete_structured(make_request())

    err = caught.value
    assert env in str(err)
    assert not err.retryable
    assert err.attempts == 0
    assert fake.requests == []  # nothing was sent
    assert fake_time.waits == []  # and nothing waited for a retry


async def test_gemini_takes_googles_variable_too(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")
    GeminiAdapter("gemini-2.5-flash", api_base=fake.url, retry=retry, breaker=breaker).check_key()


def test_a_local_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTCORE_LOCAL_API_KEY", raising=False)
    LocalAdapter("ollama_chat/smollm2", server="ollama").check_key()


async def test_an_agent_with_no_key_fails_its_step_at_once_with_the_variable_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    @tool(effect="read")
    def ping() -> str:
        """Ping."""
        return "pong"

    agent = Agent(tools=[ping], model="openai/gpt-4.1-mini", store="memory://")
    try:
        result = await agent.run("ping")
        events = await agent.transcript(result.run_id)
    finally:
        await agent.close()
    assert result.status is RunStatus.FAILED
    assert result.reason is not None and "OPENAI_API_KEY" in result.reason
    called = [e for e in events if isinstance(e, ModelCalled)]
    assert len(called) == 1 and called[0].error is not None
    assert "AuthenticationError" in called[0].error
    assert "retried" not in result.reason


# --------------------------------------------------------------------------- streamed refusal


def _refusal_stream(text: str) -> SseReply:
    """OpenAI's streamed refusal: deltas that carry only ``refusal``, content null."""
    usage = {"prompt_tokens": 90, "completion_tokens": 6, "total_tokens": 96}
    return SseReply(
        [
            chat_chunk({"role": "assistant", "content": None, "refusal": ""}),
            *(chat_chunk({"refusal": piece}) for piece in (text[:10], text[10:])),
            chat_chunk({}, finish_reason="stop"),
            chat_chunk({}, usage=usage),
        ]
    )


async def test_a_streamed_refusal_raises_model_refused_like_a_plain_one(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
) -> None:
    adapter = OpenAIAdapter(
        "gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=retry, breaker=breaker
    )
    fake.queue(_refusal_stream("I can't help with that request."))
    with pytest.raises(ModelRefusedError, match="I can't help with that request") as caught:
        await adapter.complete_structured(make_request(on_partial=lambda _: None))
    assert caught.value.retryable
    assert (caught.value.input_tokens, caught.value.output_tokens) == (90, 6)
    assert len(fake.requests) == 1  # a refusal is not retried on the same model


async def test_a_streamed_refusal_moves_the_run_to_the_next_model(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    @tool(effect="read")
    def ping() -> str:
        """Ping."""
        return "pong"

    fake.queue(_refusal_stream("I can't help with that request."), SseReply(chat_stream("x")))
    second = FakeProvider()
    try:
        second.queue(SseReply(chat_stream(json.dumps(wrapped(FINISH)))))
        route = [
            OpenAIAdapter("gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=retry),
            OpenAIAdapter("gpt-4.1", api_base=second.base_url, api_key="k", retry=retry),
        ]
        agent = Agent(tools=[ping], model=route, store="memory://")
        try:
            ended = [e async for e in agent.stream("ping") if isinstance(e, RunEnded)]
            events = await agent.transcript(ended[0].result.run_id)
        finally:
            await agent.close()
    finally:
        second.close()
    result = ended[0].result
    assert result.status is RunStatus.COMPLETED, result.reason
    called = [(e.model, e.outcome) for e in events if isinstance(e, ModelCalled)]
    assert called == [("openai/gpt-4.1-mini", "error"), ("openai/gpt-4.1", "ok")]
    first = next(e for e in events if isinstance(e, ModelCalled))
    assert first.error is not None and "ModelRefusedError" in first.error
