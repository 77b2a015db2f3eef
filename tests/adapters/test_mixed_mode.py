"""One run, two modes, three providers, one transcript; and the same governance in native mode.

The conformance scenario (plan, read, write, read, finish) runs with each step answered in a
different mode or by a different provider's fake: OpenAI structured, Anthropic native,
OpenAI native (the same adapter, ``with_mode("native")``), Gemini native, Anthropic
structured (``with_mode("structured")``). As in ``test_conformance``, each fake answers
once and then HTTP 400 (not retried), the run stops as ``failed`` and the next adapter
resumes it with ``agent.configured(model=...).resume(...)``. The transcript must have the
shape of the same scenario on ScriptedModel, and every request must carry the history the
transcript renders: as text in structured mode, as tool calls and tool results with our call
ids in native mode.

Governance does not depend on the mode: in native mode a write proposed before a plan is
refused with ``needs_plan`` (and the model is told so in that call's tool result), and a
destructive call waits for a person.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentcore import Agent, RunStatus, tool
from agentcore.adapters import BreakerPolicy, ModelAdapter, RetryPolicy, ScriptedModel
from agentcore.adapters._native import native_messages, native_note
from agentcore.adapters.anthropic import AnthropicAdapter
from agentcore.adapters.gemini import GeminiAdapter
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.events import ActionProposed, Decision, Event, ModelCalled

from .conftest import wrapped
from .fakes import (
    FakeProvider,
    JsonReply,
    Reply,
    anthropic_error,
    anthropic_message,
    error_reply,
    google_error,
    ok,
)
from .native_payloads import Call, anthropic_tool_use, chat_tool_calls, gemini_function_calls
from .test_conformance import (
    NOTES,
    SCRIPT,
    Action,
    add_note,
    expected_turns,
    get_order,
    run_switching,
    shape,
)


def native_call(action: Action) -> tuple[Call, str | None]:
    """An action as a native function call and the text before it."""
    if action["type"] == "tool":
        return (action["tool"], action["args"]), action["thought"]
    fields = {k: v for k, v in action.items() if k != "type"}
    return (action["type"], fields), None


def openai_native(action: Action) -> Reply:
    call, text = native_call(action)
    return JsonReply(chat_tool_calls([call], text))


def anthropic_native(action: Action) -> Reply:
    call, text = native_call(action)
    return JsonReply(anthropic_tool_use([call], text))


def gemini_native(action: Action) -> Reply:
    call, text = native_call(action)
    return JsonReply(gemini_function_calls([call], text))


OPENAI_400 = error_reply(400, "no more replies", code="fake_empty")
ANTHROPIC_400 = anthropic_error(400, "no more replies", kind="invalid_request_error")
GOOGLE_400 = google_error(400, "no more replies", grpc_status="INVALID_ARGUMENT")


def chat_turns(body: Any) -> list[tuple[str, str]]:  # Any: JSON
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]


def anthropic_turns(body: Any) -> list[tuple[str, str]]:  # Any: JSON
    return [(m["role"], "\n\n".join(b["text"] for b in m["content"])) for m in body["messages"]]


async def test_a_run_alternating_modes_and_providers_keeps_one_transcript(
    retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    with FakeProvider() as openai_fake, FakeProvider() as claude_fake, FakeProvider() as g_fake:
        openai = OpenAIAdapter(
            "gpt-4.1-mini", api_base=openai_fake.base_url, api_key="k", retry=retry, breaker=breaker
        )
        claude = AnthropicAdapter(
            "claude-sonnet-4-5",
            api_base=claude_fake.url,
            api_key="k",
            retry=retry,
            breaker=breaker,
            mode="native",
        )
        gemini = GeminiAdapter(
            "gemini-2.5-flash",
            api_base=g_fake.url,
            api_key="k",
            retry=retry,
            breaker=breaker,
            mode="native",
        )
        plan, look, write, check, finish = SCRIPT
        openai_fake.queue(ok(wrapped(plan)), OPENAI_400, openai_native(write), OPENAI_400)
        claude_fake.queue(
            anthropic_native(look),
            ANTHROPIC_400,
            JsonReply(anthropic_message({"action": finish})),
        )
        g_fake.queue(gemini_native(check), GOOGLE_400)
        steps: Sequence[ModelAdapter] = [
            openai,
            claude,
            openai.with_mode("native"),
            gemini,
            claude.with_mode("structured"),
        ]
        events, result = await run_switching(steps)
        bodies = {
            "openai": openai_fake.bodies,
            "anthropic": claude_fake.bodies,
            "gemini": g_fake.bodies,
        }

    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.answer == "A1 shipped; the call is noted."
    assert NOTES == {"A1": ["customer called"]}
    answered = [
        (ev.model, ev.mode) for ev in events if isinstance(ev, ModelCalled) and ev.outcome == "ok"
    ]
    assert answered == [
        ("openai/gpt-4.1-mini", "structured"),
        ("anthropic/claude-sonnet-4-5", "native"),
        ("openai/gpt-4.1-mini", "native"),
        ("gemini/gemini-2.5-flash", "native"),
        ("anthropic/claude-sonnet-4-5", "structured"),
    ]

    scripted = [ScriptedModel([action], name=f"scripted-{i}") for i, action in enumerate(SCRIPT)]
    baseline, baseline_result = await run_switching(scripted)
    assert baseline_result.status is RunStatus.COMPLETED
    assert shape(events) == shape(baseline)
    given = [model.requests[0] for model in scripted]  # what each step's model was shown

    # Step 1, OpenAI structured: the conversation as text, a strict json_schema.
    first = bodies["openai"][0]
    assert "response_format" in first and "tools" not in first
    assert chat_turns(first) == expected_turns(given[0].messages)

    # Step 2, Anthropic native: the plan as a tool_use block with our id, its result first.
    second = bodies["anthropic"][0]
    assert "output_config" not in second
    assert second["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert second["messages"][1]["content"] == [
        {
            "type": "tool_use",
            "id": "c1",
            "name": "plan",
            "input": {k: plan[k] for k in ("thought", "steps")},
        }
    ]
    assert second["messages"][2]["content"][0]["tool_use_id"] == "c1"
    assert second["messages"][2]["content"][0]["content"] == "[c1] Plan approved. Go ahead with it."

    # Step 3, OpenAI native: exactly the native rendering of the transcript so far.
    third = bodies["openai"][2]
    assert "response_format" not in third
    expected = native_messages(given[2].system, given[2].messages, given[2].schema)
    assert third["messages"][1:] == expected[1:]
    # a route with a native model gets the native system text too (the tools not listed)
    assert given[2].native_system is not None
    assert third["messages"][0]["content"] == (
        f"{given[2].native_system}\n\n{native_note(given[2].schema)}"
    )
    ids = [m["tool_calls"][0]["id"] for m in third["messages"] if m.get("tool_calls")]
    assert ids == ["c1", "c2"]
    assert [m["tool_call_id"] for m in third["messages"] if m["role"] == "tool"] == ["c1", "c2"]

    # Step 4, Gemini native: function calls and responses paired by name, in order.
    fourth = bodies["gemini"][0]
    parts = [p for c in fourth["contents"] for p in c["parts"]]
    called = [p["function_call"]["name"] for p in parts if "function_call" in p]
    answered_names = [p["function_response"]["name"] for p in parts if "function_response" in p]
    assert called == answered_names == ["plan", "get_order", "add_note"]

    # Step 5, Anthropic structured again: the same history as text, output_config, no tools.
    fifth = bodies["anthropic"][2]
    assert "output_config" in fifth and "tools" not in fifth
    assert anthropic_turns(fifth) == expected_turns(given[4].messages)

    for name, sent in bodies.items():
        text = json.dumps(sent)
        for foreign in ("call_fake", "toolu_fake", "chatcmpl-", "msg_fake", "gemini-resp"):
            assert foreign not in text, (name, foreign)


# --------------------------------------------------------------------------- governance


@tool(effect="destructive")
def delete_order(order_id: str) -> str:
    """Delete an order for good.

    Args:
        order_id: the order's id.
    """
    return f"deleted {order_id}"


GOVERNED: list[Action] = [
    {
        "type": "tool",
        "thought": "Note it straight away.",
        "tool": "add_note",
        "args": {"order_id": "A1", "note": "customer called"},
    },
    {"type": "plan", "thought": "Note, then delete.", "steps": ["add_note A1", "delete A1"]},
    {
        "type": "tool",
        "thought": "Note it.",
        "tool": "add_note",
        "args": {"order_id": "A1", "note": "customer called"},
    },
    {"type": "tool", "thought": "Delete it.", "tool": "delete_order", "args": {"order_id": "A1"}},
    {"type": "finish", "thought": "Done.", "answer": "Noted and deleted."},
]


async def governed_run(model: ModelAdapter) -> tuple[list[Event], list[Any]]:  # Any: results
    NOTES.clear()
    agent = Agent(tools=[get_order, add_note, delete_order], model=model, store="memory://")
    try:
        first = await agent.run("Note the call on A1, then delete the order.")
        confirmed = await agent.confirm(first.run_id, approve=True, by="ops")
        return await agent.transcript(first.run_id), [first, confirmed]
    finally:
        await agent.close()


async def test_governance_is_the_same_in_native_mode(
    retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    with FakeProvider() as fake:
        adapter = OpenAIAdapter(
            "gpt-4.1-mini",
            api_base=fake.base_url,
            api_key="k",
            retry=retry,
            breaker=breaker,
            mode="native",
        )
        fake.queue(*(openai_native(a) for a in GOVERNED))
        events, (paused, done) = await governed_run(adapter)
        bodies = fake.bodies

    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    assert done.status is RunStatus.COMPLETED, done.reason
    assert done.answer == "Noted and deleted."
    verdicts = [(ev.call_id, ev.verdict) for ev in events if isinstance(ev, Decision)]
    assert verdicts[:4] == [
        ("c1", "needs_plan"),
        ("c2", "execute"),
        ("c3", "execute"),
        ("c4", "needs_confirmation"),
    ]
    assert [a.call_id for a in events if isinstance(a, ActionProposed)] == [
        "c1",
        "c2",
        "c3",
        "c4",
        "c5",
    ]
    assert all(ev.mode == "native" for ev in events if isinstance(ev, ModelCalled))
    # The refusal reached the model as the result of its own call, c1.
    second = bodies[1]["messages"]
    assert second[2]["tool_calls"][0]["id"] == "c1"
    assert second[3]["role"] == "tool"
    assert second[3]["tool_call_id"] == "c1"
    assert second[3]["content"].startswith("[c1] Not run: ")
    # The approval reached it as part of the destructive call's result.
    last_results = [m for m in bodies[4]["messages"] if m["role"] == "tool"]
    assert last_results[-1]["tool_call_id"] == "c4"
    assert last_results[-1]["content"].startswith("[c4] Approved by ops.")

    baseline, (b_paused, b_done) = await governed_run(ScriptedModel(GOVERNED))
    assert (b_paused.status, b_done.status) == (paused.status, done.status)
    assert shape(events) == shape(baseline)
