"""One scenario, five provider families, one transcript.

A run plans, reads, writes, reads again and finishes; each of its five steps is answered by
a different provider family's fake (OpenAI, Anthropic, Gemini, DeepSeek, a local
llama-cpp-python server), in that family's wire format, through the public API. After its
one reply a fake answers HTTP 400 (not retried), the run stops as ``failed``, and the next
family resumes it: ``agent.configured(model=<next adapter>).resume(run_id, by=...)``.

The final transcript must have the same shape (event types, actions, verdicts, tool
outcomes) as the same scenario run on ScriptedModel, and every request each fake received
must carry the full history rendered from our events: the same messages ScriptedModel was
given at that point, our call ids (``[c1]``, ``[c2]``, ...) included, and nothing of any
provider's response ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentcore import Agent, RunStatus, tool
from agentcore.adapters import BreakerPolicy, Message, ModelAdapter, RetryPolicy, ScriptedModel
from agentcore.adapters._litellm import merge_messages
from agentcore.adapters.anthropic import AnthropicAdapter
from agentcore.adapters.deepseek import DeepSeekAdapter
from agentcore.adapters.gemini import GeminiAdapter
from agentcore.adapters.local import LocalAdapter
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.events import (
    ActionProposed,
    Decision,
    Event,
    ModelCalled,
    RunFinished,
    RunResumed,
    ToolFinished,
)

from .conftest import wrapped
from .fakes import FakeProvider, JsonReply, Reply, anthropic_message, gemini_response, ok

Action = dict[str, Any]  # Any: JSON
Turns = list[tuple[str, str]]

SCRIPT: list[Action] = [
    {
        "type": "plan",
        "thought": "Look the order up, note the call, then check the note is there.",
        "steps": ["get_order A1", "add_note A1", "get_order A1"],
    },
    {"type": "tool", "thought": "Find the order.", "tool": "get_order", "args": {"order_id": "A1"}},
    {
        "type": "tool",
        "thought": "Record the call.",
        "tool": "add_note",
        "args": {"order_id": "A1", "note": "customer called"},
    },
    {"type": "tool", "thought": "Check the note.", "tool": "get_order", "args": {"order_id": "A1"}},
    {"type": "finish", "thought": "All done.", "answer": "A1 shipped; the call is noted."},
]

NOTES: dict[str, list[str]] = {}


@tool(effect="read")
def get_order(order_id: str) -> dict[str, Any]:  # Any: JSON
    """Look up one order.

    Args:
        order_id: the order's id, e.g. A1.
    """
    return {"order_id": order_id, "status": "shipped", "notes": NOTES.get(order_id, [])}


@tool(effect="write")
def add_note(order_id: str, note: str) -> str:
    """Add a note to an order.

    Args:
        order_id: the order's id.
        note: the note's text.
    """
    NOTES.setdefault(order_id, []).append(note)
    return "noted"


@dataclass(frozen=True)
class Family:
    """How one provider family is built, answers, and shows the conversation it was sent."""

    name: str
    build: Callable[[FakeProvider, RetryPolicy, BreakerPolicy], ModelAdapter]
    answer: Callable[[Action], Reply]
    turns: Callable[[Any], Turns]  # Any: a captured JSON body


def _chat_turns(body: Any) -> Turns:  # Any: JSON
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]


def _anthropic_turns(body: Any) -> Turns:  # Any: JSON
    return [
        (m["role"], "\n\n".join(block["text"] for block in m["content"])) for m in body["messages"]
    ]


def _gemini_turns(body: Any) -> Turns:  # Any: JSON
    role = {"user": "user", "model": "assistant"}
    return [(role[c["role"]], "\n\n".join(p["text"] for p in c["parts"])) for c in body["contents"]]


FAMILIES = [
    Family(
        "openai",
        lambda f, r, b: OpenAIAdapter(
            "gpt-4.1-mini", api_base=f.base_url, api_key="k", retry=r, breaker=b
        ),
        lambda a: ok(wrapped(a)),
        _chat_turns,
    ),
    Family(
        "anthropic",
        lambda f, r, b: AnthropicAdapter(
            "claude-sonnet-4-5", api_base=f.url, api_key="k", retry=r, breaker=b
        ),
        lambda a: JsonReply(anthropic_message({"action": a})),
        _anthropic_turns,
    ),
    Family(
        "gemini",
        lambda f, r, b: GeminiAdapter(
            "gemini-2.5-flash", api_base=f.url, api_key="k", retry=r, breaker=b
        ),
        lambda a: JsonReply(gemini_response(a)),
        _gemini_turns,
    ),
    Family(
        "deepseek",
        lambda f, r, b: DeepSeekAdapter(
            "deepseek-chat", api_base=f.base_url, api_key="k", retry=r, breaker=b
        ),
        lambda a: ok(a, model="deepseek-chat"),
        _chat_turns,
    ),
    Family(
        "local",
        lambda f, r, b: LocalAdapter("smollm2", api_base=f.base_url, retry=r, breaker=b),
        lambda a: ok(wrapped(a), model="smollm2"),
        _chat_turns,
    ),
]


async def run_switching(models: Sequence[ModelAdapter]) -> tuple[list[Event], Any]:  # Any: result
    """Run the scenario, one step per model: each model's failure hands the run to the next."""
    NOTES.clear()
    agent = Agent(tools=[get_order, add_note], model=models[0], store="memory://")
    try:
        result = await agent.run("Note that the customer called about order A1.")
        for model in models[1:]:
            assert result.status is RunStatus.FAILED, result.reason
            result = await agent.configured(model=model).resume(result.run_id, by="conformance")
        return await agent.transcript(result.run_id), result
    finally:
        await agent.close()


def shape(events: Sequence[Event]) -> list[tuple[Any, ...]]:  # Any: event fields
    """What must not depend on the provider: event types, actions, verdicts, outcomes."""
    out: list[tuple[Any, ...]] = []
    for ev in events:
        match ev:
            case ActionProposed():
                out.append((ev.type, ev.call_id, ev.action))
            case Decision():
                out.append((ev.type, ev.call_id, ev.verdict))
            case ToolFinished():
                out.append((ev.type, ev.call_id, ev.tool, ev.ok, json.dumps(ev.result)))
            case ModelCalled():
                out.append((ev.type, ev.step, ev.outcome))
            case RunFinished():
                out.append((ev.type, ev.status, ev.answer))
            case _:
                out.append((ev.type,))
    return out


def expected_turns(messages: Sequence[Message]) -> Turns:
    return [(m.role, m.content) for m in merge_messages(messages)]


async def test_one_transcript_across_five_provider_families(
    retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    fakes = [FakeProvider() for _ in FAMILIES]
    try:
        for family, fake, action in zip(FAMILIES, fakes, SCRIPT, strict=True):
            fake.queue(family.answer(action))
        adapters = [f.build(fake, retry, breaker) for f, fake in zip(FAMILIES, fakes, strict=True)]
        events, result = await run_switching(adapters)
    finally:
        for fake in fakes:
            fake.close()

    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.answer == "A1 shipped; the call is noted."
    assert NOTES == {"A1": ["customer called"]}
    answered = [ev.model for ev in events if isinstance(ev, ModelCalled) and ev.outcome == "ok"]
    assert answered == [
        "openai/gpt-4.1-mini",
        "anthropic/claude-sonnet-4-5",
        "gemini/gemini-2.5-flash",
        "deepseek/deepseek-chat",
        "local/smollm2",
    ]

    # The same scenario on ScriptedModel, switched the same way (a used-up script fails
    # like the fakes' 400), and straight through on one ScriptedModel.
    scripted = [ScriptedModel([action], name=f"scripted-{i}") for i, action in enumerate(SCRIPT)]
    baseline, baseline_result = await run_switching(scripted)
    assert baseline_result.status is RunStatus.COMPLETED
    assert shape(events) == shape(baseline)
    straight, _ = await run_switching([ScriptedModel(SCRIPT)])
    handover = (RunResumed, RunFinished)
    kept = [
        ev
        for ev in events
        if not (isinstance(ev, ModelCalled) and ev.outcome == "error")
        and not (isinstance(ev, handover) and getattr(ev, "status", "") != "completed")
    ]
    assert shape(kept) == shape(straight)

    # Every request carried the whole history, as rendered from our events.
    for family, fake, model in zip(FAMILIES, fakes, scripted, strict=True):
        assert len(fake.requests) == len(model.requests), family.name
        for sent, given in zip(fake.requests, model.requests, strict=True):
            assert family.turns(sent.body) == expected_turns(given.messages), family.name
            text = sent.raw.decode()
            for call in range(1, given.step):
                assert f"[c{call}]" in text, (family.name, given.step, call)
            for foreign in ("chatcmpl-", "msg_", "gemini-resp", "previous_response_id"):
                assert foreign not in text, (family.name, foreign)
