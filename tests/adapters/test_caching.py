"""Prompt caching: the request prefix is identical across the steps of a run.

One three-step run per provider family, against its fake. Across consecutive steps the
system text (or instructions) and the schema are byte-identical, the history sent at one
step is the start of the next step's (up to the runner's per-step status note), Anthropic's
cache breakpoints are where its next request reads them, and the cached input tokens each
fake reports land in ``model_called.cached_input_tokens``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agentcore import Agent, RunStatus, tool
from agentcore.adapters import BreakerPolicy, ModelAdapter, RetryPolicy
from agentcore.adapters.anthropic import AnthropicAdapter
from agentcore.adapters.deepseek import DeepSeekAdapter
from agentcore.adapters.gemini import GeminiAdapter
from agentcore.adapters.local import LocalAdapter
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.events import ModelCalled

from .conftest import wrapped
from .fakes import (
    FakeProvider,
    JsonReply,
    RecordedRequest,
    Reply,
    anthropic_message,
    chat_completion,
    gemini_response,
    ok,
    responses_response,
)

Action = dict[str, Any]  # Any: JSON
JSON = Any  # Any: a decoded JSON body

SCRIPT: list[Action] = [
    {"type": "tool", "thought": "Look A1 up.", "tool": "get_order", "args": {"order_id": "A1"}},
    {"type": "tool", "thought": "And B2.", "tool": "get_order", "args": {"order_id": "B2"}},
    {"type": "finish", "thought": "Both known.", "answer": "A1 and B2 shipped."},
]
CACHED = [0, 1536, 1792]  # what each step's fake reports as read from the cache


@tool(effect="read")
def get_order(order_id: str) -> dict[str, str]:
    """Look up one order.

    Args:
        order_id: the order's id, e.g. A1.
    """
    return {"order_id": order_id, "status": "shipped"}


@dataclass(frozen=True)
class Family:
    """One provider family: its adapter, its answers, and where its prefix lives."""

    name: str
    build: Callable[[FakeProvider, RetryPolicy, BreakerPolicy], ModelAdapter]
    answer: Callable[[Action, int], Reply]  # (action, cached tokens) -> reply
    prefix: Callable[[JSON], JSON]  # the system text (or instructions) and the schema
    history: Callable[[JSON], list[str]]  # the conversation's texts, in order


def _chat_prefix(body: JSON) -> JSON:
    return [body["messages"][0], body["response_format"]]


def _chat_history(body: JSON) -> list[str]:
    return [m["content"] for m in body["messages"][1:]]


def _deepseek_answer(action: Action, cached: int) -> Reply:
    body = chat_completion(action, model="deepseek-chat")
    # DeepSeek's context caching fields (https://api-docs.deepseek.com/guides/kv_cache).
    body["usage"] = {
        "prompt_tokens": 2048,
        "completion_tokens": 30,
        "total_tokens": 2078,
        "prompt_cache_hit_tokens": cached,
        "prompt_cache_miss_tokens": 2048 - cached,
    }
    return JsonReply(body)


FAMILIES = [
    Family(
        "openai-chat",
        lambda f, r, b: OpenAIAdapter(
            "gpt-4.1-mini", api_base=f.base_url, api_key="k", retry=r, breaker=b
        ),
        lambda a, c: ok(wrapped(a), prompt_tokens=2048, cached_tokens=c),
        _chat_prefix,
        _chat_history,
    ),
    Family(
        "openai-responses",
        lambda f, r, b: OpenAIAdapter(
            "gpt-4.1-mini", api_base=f.base_url, api_key="k", retry=r, breaker=b, api="responses"
        ),
        lambda a, c: JsonReply(responses_response(wrapped(a), input_tokens=2048, cached_tokens=c)),
        lambda body: [body["instructions"], body["text"]],
        lambda body: [m["content"] for m in body["input"]],
    ),
    Family(
        "anthropic",
        lambda f, r, b: AnthropicAdapter(
            "claude-sonnet-4-5", api_base=f.url, api_key="k", retry=r, breaker=b
        ),
        lambda a, c: JsonReply(
            anthropic_message({"action": a}, input_tokens=2048 - c, cache_read=c)
        ),
        lambda body: [body["system"], body["output_config"]],
        lambda body: [block["text"] for m in body["messages"] for block in m["content"]],
    ),
    Family(
        "gemini",
        lambda f, r, b: GeminiAdapter(
            "gemini-2.5-flash", api_base=f.url, api_key="k", retry=r, breaker=b
        ),
        lambda a, c: JsonReply(gemini_response(a, prompt_tokens=2048, cached_tokens=c)),
        lambda body: [body["systemInstruction"], body["generationConfig"]],
        lambda body: [p["text"] for c in body["contents"] for p in c["parts"]],
    ),
    Family(
        "deepseek",
        lambda f, r, b: DeepSeekAdapter(
            "deepseek-chat", api_base=f.base_url, api_key="k", retry=r, breaker=b
        ),
        _deepseek_answer,
        lambda body: [body["messages"][0], body["response_format"]],
        _chat_history,
    ),
    Family(
        "local",
        lambda f, r, b: LocalAdapter("smollm2", api_base=f.base_url, retry=r, breaker=b),
        lambda a, c: ok(wrapped(a), model="smollm2", prompt_tokens=2048, cached_tokens=c),
        _chat_prefix,
        _chat_history,
    ),
]


def _without_note(texts: list[str], step: int) -> list[str]:
    """The history without the runner's status note ("Step N of 25."), which ends the last
    message (merged into it, or its own block on Anthropic)."""
    note = f"Step {step} of 25."
    last = texts[-1]
    assert last.endswith(note)
    rest = last.removesuffix(note).removesuffix("\n\n")
    return [*texts[:-1], rest] if rest else texts[:-1]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
async def test_prefix_is_identical_across_steps_and_cached_tokens_are_reported(
    family: Family,
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
) -> None:
    fake.queue(*[family.answer(a, c) for a, c in zip(SCRIPT, CACHED, strict=True)])
    agent = Agent(tools=[get_order], model=family.build(fake, retry, breaker), store="memory://")
    try:
        result = await agent.run("Where are orders A1 and B2?")
        events = await agent.transcript(result.run_id)
    finally:
        await agent.close()
    assert result.status is RunStatus.COMPLETED, result.reason

    steps: list[RecordedRequest] = fake.requests
    assert len(steps) == 3
    prefixes = [json.dumps(family.prefix(r.body)) for r in steps]
    assert prefixes[0] == prefixes[1] == prefixes[2]
    for step, (sent, following) in enumerate(itertools.pairwise(steps), start=1):
        # What one step sent, short of its status note, starts the next step's history.
        before = _without_note(family.history(sent.body), step)
        after = family.history(following.body)
        assert after[: len(before) - 1] == before[:-1]
        assert after[len(before) - 1].startswith(before[-1])

    called = [ev for ev in events if isinstance(ev, ModelCalled)]
    assert [ev.cached_input_tokens for ev in called] == CACHED
    assert all(ev.input_tokens == 2048 for ev in called)


async def test_chat_request_bytes_share_their_prefix_up_to_the_status_note(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    """On the wire (Chat Completions): each request's bytes up to its status note are the
    first bytes of the next request, so the provider's prefix cache can reuse all of it."""
    family = FAMILIES[0]
    fake.queue(*[family.answer(a, c) for a, c in zip(SCRIPT, CACHED, strict=True)])
    agent = Agent(tools=[get_order], model=family.build(fake, retry, breaker), store="memory://")
    try:
        await agent.run("Where are orders A1 and B2?")
    finally:
        await agent.close()
    raws = [r.raw for r in fake.requests]
    for step, (raw, following) in enumerate(itertools.pairwise(raws), start=1):
        common = next(
            (i for i, (x, y) in enumerate(zip(raw, following, strict=False)) if x != y),
            min(len(raw), len(following)),
        )
        first_user = raw.index(b'{"role":"user"')
        note = raw.index(b"\\n\\nStep %d of 25." % step)  # the JSON-escaped separator
        assert common > first_user  # the model name and the whole system text are shared
        assert common == note  # ... and all the history, up to this step's status note


async def test_anthropic_breakpoints_are_read_by_the_next_step(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    family = FAMILIES[2]
    fake.queue(*[family.answer(a, c) for a, c in zip(SCRIPT, CACHED, strict=True)])
    agent = Agent(tools=[get_order], model=family.build(fake, retry, breaker), store="memory://")
    try:
        await agent.run("Where are orders A1 and B2?")
    finally:
        await agent.close()
    ephemeral = {"type": "ephemeral"}
    for sent, following in itertools.pairwise(fake.requests):
        assert sent.body["system"][0]["cache_control"] == ephemeral
        blocks = [b for m in sent.body["messages"] for b in m["content"]]
        marked = [i for i, b in enumerate(blocks) if "cache_control" in b]
        assert marked == [len(blocks) - 2, len(blocks) - 1]
        # The block before the status note is where this request writes the cache; the
        # next request holds the same blocks up to there, so it reads that entry.
        nxt = [b["text"] for m in following.body["messages"] for b in m["content"]]
        upto = len(blocks) - 1
        assert nxt[:upto] == [b["text"] for b in blocks[:upto]]
