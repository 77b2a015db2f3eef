"""Streaming for every litellm-backed adapter family, over each provider's streaming format.

Each family's fake streams its documented format: OpenAI ``chat.completion.chunk`` (with
the final usage chunk), Responses API events, Anthropic ``message_start`` ...
``message_stop``, Gemini ``streamGenerateContent?alt=sse`` chunks, Ollama NDJSON. The
partial actions arrive while the server is still sending; the final action is validated
exactly as a non-streamed one; a stream cut mid-object is sent again whole.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from threading import Event
from typing import Any

import pytest

from agentcore import Agent, RunEnded, RunStatus, ThoughtDelta, tool
from agentcore.adapters import BreakerPolicy, CompletionRequest, PartialAction, RetryPolicy
from agentcore.adapters._litellm import LiteLLMAdapter
from agentcore.adapters.anthropic import AnthropicAdapter
from agentcore.adapters.deepseek import DeepSeekAdapter
from agentcore.adapters.gemini import GeminiAdapter
from agentcore.adapters.local import LocalAdapter
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.contracts import FinishAction, ToolAction
from agentcore.errors import ModelTruncatedError, ProviderUnavailableError
from agentcore.events import ActionProposed, ToolStarted

from .conftest import NOTE_CALL, FakeTime, wrapped
from .fakes import (
    FakeProvider,
    JsonReply,
    NdjsonReply,
    RecordedRequest,
    Reply,
    SseReply,
    anthropic_stream,
    chat_stream,
    gemini_stream,
    ollama_stream,
    responses_stream,
)

RequestFactory = Callable[..., CompletionRequest]
Action = dict[str, Any]  # Any: JSON

THOUGHT = "The customer called about order A1, so I will record that on the order."
CALL: Action = {**NOTE_CALL, "thought": THOUGHT}
PACE = 0.01  # seconds between streamed events: partials must arrive before the end


@dataclass(frozen=True)
class Family:
    """One adapter family: how to build it, encode a reply, and stream it."""

    id: str
    build: Callable[[FakeProvider, RetryPolicy, BreakerPolicy], LiteLLMAdapter]
    encode: Callable[[Action], str]
    stream: Callable[..., Reply]  # (text, complete, reset, hold=None) -> reply
    usage: tuple[int, int, int]  # input, output, cached tokens of a complete stream
    check: Callable[[RecordedRequest], None]


def _held(count: int) -> int:
    """Where a hold goes: before the last two events (the final ones, once content ends)."""
    return max(0, count - 2)


def _chat_stream(text: str, complete: bool, reset: bool, hold: Event | None = None) -> Reply:
    events = chat_stream(text, cached_tokens=64)
    kept = events if complete else events[:-2]
    return SseReply(
        kept, done=complete, reset=reset, delay=PACE, hold=hold, hold_at=_held(len(kept))
    )


def _responses(text: str, complete: bool, reset: bool, hold: Event | None = None) -> Reply:
    events = responses_stream(text, cached_tokens=64)
    kept = events if complete else events[:-3]
    at = _held(len(kept)) - 1  # before output_text.done: the deltas came first
    return SseReply(kept, done=False, named=True, reset=reset, delay=PACE, hold=hold, hold_at=at)


def _anthropic(text: str, complete: bool, reset: bool, hold: Event | None = None) -> Reply:
    events = anthropic_stream(text, input_tokens=120, cache_read=400, complete=complete)
    at = _held(len(events)) - 1  # before content_block_stop
    return SseReply(events, done=False, named=True, reset=reset, delay=PACE, hold=hold, hold_at=at)


def _gemini(text: str, complete: bool, reset: bool, hold: Event | None = None) -> Reply:
    events = gemini_stream(text, cached_tokens=64, complete=complete)
    at = len(events) - 1  # before the chunk with finishReason and usage
    return SseReply(events, done=False, reset=reset, delay=PACE, hold=hold, hold_at=at)


def _ollama(text: str, complete: bool, reset: bool, hold: Event | None = None) -> Reply:
    del reset  # NDJSON over a closed connection: cut by leaving the final line out
    lines = ollama_stream(text).lines
    kept = lines if complete else lines[:-1]
    return NdjsonReply(kept, delay=PACE, hold=hold, hold_at=len(kept) - 1)


def _openai_chat(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> LiteLLMAdapter:
    return OpenAIAdapter(
        "gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=retry, breaker=breaker
    )


def _openai_responses(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> LiteLLMAdapter:
    return OpenAIAdapter(
        "gpt-4.1-mini",
        api_base=fake.base_url,
        api_key="k",
        retry=retry,
        breaker=breaker,
        api="responses",
    )


def _claude(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> LiteLLMAdapter:
    return AnthropicAdapter(
        "claude-sonnet-4-5", api_base=fake.url, api_key="k", retry=retry, breaker=breaker
    )


def _gemini_adapter(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> LiteLLMAdapter:
    return GeminiAdapter(
        "gemini-2.5-flash", api_base=fake.url, api_key="k", retry=retry, breaker=breaker
    )


def _deepseek(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> LiteLLMAdapter:
    return DeepSeekAdapter(
        "deepseek-chat", api_base=fake.base_url, api_key="k", retry=retry, breaker=breaker
    )


def _llama(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> LiteLLMAdapter:
    return LocalAdapter("smollm2", api_base=fake.base_url, retry=retry, breaker=breaker)


def _ollama_adapter(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> LiteLLMAdapter:
    fake.fixed["/api/show"] = JsonReply({"details": {"family": "llama"}, "model_info": {}})
    return LocalAdapter("smollm2", api_base=fake.url, server="ollama", retry=retry, breaker=breaker)


def _chat_wire(sent: RecordedRequest) -> None:
    assert sent.path.endswith("/chat/completions")
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}


def _responses_wire(sent: RecordedRequest) -> None:
    assert sent.path == "/v1/responses"
    assert sent.body["stream"] is True
    assert "stream_options" not in sent.body


def _anthropic_wire(sent: RecordedRequest) -> None:
    assert sent.path == "/v1/messages"
    assert sent.body["stream"] is True
    assert "tools" not in sent.body and "tool_choice" not in sent.body
    assert "output_config" in sent.body


def _gemini_wire(sent: RecordedRequest) -> None:
    assert sent.path == "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert "responseJsonSchema" in sent.body["generationConfig"]


def _ollama_wire(sent: RecordedRequest) -> None:
    assert sent.path == "/api/chat"
    assert sent.body["stream"] is True


def _strict(action: Action) -> str:
    return json.dumps(wrapped(action))


def _anthropic_text(action: Action) -> str:
    return json.dumps({"action": action})


def _plain(action: Action) -> str:
    return json.dumps(action)


FAMILIES = [
    Family("openai-chat", _openai_chat, _strict, _chat_stream, (120, 30, 64), _chat_wire),
    Family(
        "openai-responses",
        _openai_responses,
        _strict,
        _responses,
        (120, 30, 64),
        _responses_wire,
    ),
    Family("anthropic", _claude, _anthropic_text, _anthropic, (520, 30, 400), _anthropic_wire),
    Family("gemini", _gemini_adapter, _plain, _gemini, (120, 30, 64), _gemini_wire),
    Family("deepseek", _deepseek, _plain, _chat_stream, (120, 30, 64), _chat_wire),
    Family("local-llama-cpp-python", _llama, _strict, _chat_stream, (120, 30, 64), _chat_wire),
    Family("local-ollama", _ollama_adapter, _strict, _ollama, (26, 10, 0), _ollama_wire),
]


class Partials:
    """Records every partial action with the time it arrived, and releases ``first`` on the
    first one (a fake holding the end of its stream waits for it)."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, PartialAction]] = []
        self.first = Event()

    def __call__(self, partial: PartialAction) -> None:
        self.seen.append((time.monotonic(), partial))
        self.first.set()

    @property
    def thoughts(self) -> list[str]:
        return [p.thought for _, p in self.seen]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.id)
async def test_partials_grow_before_the_stream_ends_and_the_action_validates(
    family: Family,
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
) -> None:
    adapter = family.build(fake, retry, breaker)
    partials = Partials()
    # The fake holds the end of its stream until the first partial action arrives.
    fake.queue(family.stream(family.encode(CALL), True, False, partials.first))
    completion = await adapter.complete_structured(make_request(on_partial=partials))

    family.check(fake.last)
    # The thought grew, piece by piece, and the first pieces came while the server was
    # still sending.
    assert fake.held_too_long == 0
    thoughts = partials.thoughts
    assert len(set(thoughts)) >= 3
    assert all(b.startswith(a) for a, b in itertools.pairwise(thoughts))
    assert thoughts[-1] == THOUGHT
    # the server thread notes the end just after its last write, which the client may
    # have read first: wait for the note (a loaded machine delays that thread)
    for _ in range(200):
        if fake.stream_ends:
            break
        await asyncio.sleep(0.01)
    assert partials.seen[0][0] < fake.stream_ends[0]
    assert {(p.type, p.tool) for _, p in partials.seen} >= {("tool", "add_note")}
    # The complete reply is validated as a non-streamed one would be.
    assert completion.action == ToolAction(
        thought=THOUGHT, tool="add_note", args={"order_id": "A1", "note": "customer called"}
    )
    assert completion.error is None
    assert completion.attempts == 1
    usage = completion.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == family.usage


CUTS = [
    (f, how)
    for f in FAMILIES
    for how in ("reset", "end")
    if not (f.id == "local-ollama" and how == "reset")
]


@pytest.mark.parametrize(("family", "how"), CUTS, ids=[f"{f.id}-{how}" for f, how in CUTS])
async def test_a_stream_cut_mid_object_is_sent_again_whole(
    family: Family,
    how: str,
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    fake_time: FakeTime,
    make_request: RequestFactory,
) -> None:
    adapter = family.build(fake, retry, breaker)
    text = family.encode(CALL)
    fake.queue(
        family.stream(text[: len(text) // 2], False, how == "reset"),
        family.stream(text, True, False),
    )
    partials = Partials()
    completion = await adapter.complete_structured(make_request(on_partial=partials))

    assert len(fake.requests) == 2
    assert fake.requests[0].body == fake.requests[1].body  # the same request, whole
    assert completion.attempts == 2
    assert len(fake_time.waits) == 1  # one backoff, as for any retryable failure
    assert completion.action is not None and completion.action.thought == THOUGHT
    # The second attempt's partials start over from nothing.
    thoughts = partials.thoughts
    restart = next(
        i for i in range(1, len(thoughts)) if not thoughts[i].startswith(thoughts[i - 1])
    )
    assert len(thoughts[restart]) < len(thoughts[restart - 1])
    assert completion.usage.input_tokens >= family.usage[0]


@pytest.mark.parametrize(("family", "how"), CUTS, ids=[f"{f.id}-{how}" for f, how in CUTS])
async def test_a_broken_attempts_tokens_are_counted(
    family: Family,
    how: str,
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
) -> None:
    adapter = family.build(fake, retry, breaker)
    text = family.encode(CALL)
    fake.queue(
        family.stream(text[: len(text) // 2], False, how == "reset"),
        family.stream(text, True, False),
    )
    completion = await adapter.complete_structured(make_request(on_partial=Partials()))
    # the whole attempt's usage, plus the broken one's prompt and the half it sent
    usage = completion.usage
    assert usage.input_tokens > family.usage[0]
    assert usage.output_tokens > family.usage[1]


async def test_a_stream_that_keeps_breaking_fails_retryably_and_returns_nothing(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
) -> None:
    adapter = _openai_chat(fake, retry, breaker)
    half = _strict(CALL)[:40]
    fake.queue(*[_chat_stream(half, False, True)] * 4)
    with pytest.raises(ProviderUnavailableError) as caught:
        await adapter.complete_structured(make_request(on_partial=Partials()))
    assert caught.value.retryable
    assert caught.value.attempts == 4
    assert caught.value.input_tokens > 0 and caught.value.output_tokens > 0  # all four billed


async def test_truncated_streams_are_asked_again_and_their_usage_summed(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
) -> None:
    adapter = _openai_chat(fake, retry, breaker)
    text = _strict(CALL)
    cut = chat_stream(text[:30], finish_reason="length", prompt_tokens=100, completion_tokens=64)
    fake.queue(SseReply(cut), SseReply(chat_stream(text, prompt_tokens=100, completion_tokens=50)))
    completion = await adapter.complete_structured(
        make_request(on_partial=Partials(), max_output_tokens=64)
    )
    assert [b["max_completion_tokens"] for b in fake.bodies] == [64, 128]
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (200, 114)
    assert completion.attempts == 2
    assert completion.action is not None


async def test_truncated_twice_in_streams_raises(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
) -> None:
    adapter = _claude(fake, retry, breaker)
    cut = anthropic_stream('{"action": {"type": "tool", "thou', stop_reason="max_tokens")
    fake.queue(SseReply(cut, done=False, named=True), SseReply(cut, done=False, named=True))
    with pytest.raises(ModelTruncatedError) as caught:
        await adapter.complete_structured(make_request(on_partial=Partials()))
    assert caught.value.attempts == 2
    assert caught.value.output_tokens == 60


# --------------------------------------------------------------------------- through Agent


@tool(effect="read")
def get_order(order_id: str) -> dict[str, str]:
    """Look up one order.

    Args:
        order_id: the order's id.
    """
    STARTED.append(order_id)
    return {"order_id": order_id, "status": "shipped"}


STARTED: list[str] = []
LOOKUP: Action = {
    "type": "tool",
    "thought": "The customer asks about order A1; I will look it up before answering.",
    "tool": "get_order",
    "args": {"order_id": "A1"},
}
DONE: Action = {"type": "finish", "thought": "The order shipped.", "answer": "A1 shipped."}


async def test_agent_stream_shows_thought_deltas_before_the_action_is_proposed(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    STARTED.clear()
    fake.queue(_chat_stream(_strict(LOOKUP), True, False), _chat_stream(_strict(DONE), True, False))
    agent = Agent(tools=[get_order], model=_openai_chat(fake, retry, breaker), store="memory://")
    try:
        items = [ev async for ev in agent.stream("Where is order A1?")]
    finally:
        await agent.close()

    proposed = [i for i, ev in enumerate(items) if isinstance(ev, ActionProposed)]
    assert len(proposed) == 2
    for step, index in enumerate(proposed, start=1):
        deltas = [ev for ev in items[:index] if isinstance(ev, ThoughtDelta) and ev.step == step]
        assert len(deltas) >= 2
        action = items[index]
        assert isinstance(action, ActionProposed)
        assert "".join(d.text for d in deltas) == action.action.thought
    assert STARTED == ["A1"]


async def test_agent_executes_nothing_from_a_stream_that_broke(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    """The first stream breaks inside a tool call whose arguments are already complete; the
    retried stream answers differently. Only the complete, validated answer counts."""
    STARTED.clear()
    text = _strict(LOOKUP)
    fake.queue(
        _chat_stream(text[: text.index('"A1"') + 8], False, True),
        _chat_stream(_strict(DONE), True, False),
    )
    agent = Agent(tools=[get_order], model=_openai_chat(fake, retry, breaker), store="memory://")
    try:
        items = [ev async for ev in agent.stream("Where is order A1?")]
        ended = items[-1]
        assert isinstance(ended, RunEnded)
        result = ended.result
        events = await agent.transcript(result.run_id)
    finally:
        await agent.close()
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "A1 shipped."
    assert STARTED == []
    assert not any(isinstance(ev, ToolStarted) for ev in events)
    (proposed,) = [ev for ev in events if isinstance(ev, ActionProposed)]
    assert proposed.action == FinishAction(thought="The order shipped.", answer="A1 shipped.")


async def test_a_stream_without_usage_is_counted_by_litellm(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
) -> None:
    """llama-cpp-python's server ignores ``stream_options`` and sends no usage chunk: the
    tokens are litellm's own estimate, not zero (budgets still move)."""
    adapter = _llama(fake, retry, breaker)
    events = chat_stream(_strict(CALL))[:-1]  # no final usage chunk
    fake.queue(SseReply(events))
    completion = await adapter.complete_structured(make_request(on_partial=Partials()))
    assert completion.action is not None
    assert completion.usage.input_tokens > 0
    assert completion.usage.output_tokens > 0
