"""Streaming runs: typed events while the model writes, then the recorded events."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest

from agentcore import (
    ActionDetected,
    Agent,
    Budget,
    RunEnded,
    RunStatus,
    StreamEvent,
    ThoughtDelta,
    tool,
)
from agentcore.adapters import PartialAction, ScriptedModel, partial_action
from agentcore.events import ActionProposed, Event, ToolStarted
from agentcore.stores import MemoryStore

THOUGHT = "The customer gave an order id, so I will look that order up first."


@tool(effect="read")
def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"id": order_id, "status": "shipped"}


@tool(effect="destructive")
def purge(order_id: str) -> str:
    """Delete an order for good."""
    return "purged"


def script() -> list[Any]:
    return [
        {"type": "tool", "thought": THOUGHT, "tool": "lookup", "args": {"order_id": "A-1"}},
        {"type": "finish", "thought": "It shipped.", "answer": "Order A-1 has shipped."},
    ]


async def collect(stream: Any) -> list[StreamEvent]:
    return [ev async for ev in stream]


async def test_stream_yields_thought_then_action_then_recorded_events() -> None:
    agent = Agent(
        tools=[lookup], model=ScriptedModel(script(), stream_chunk_chars=5), store=MemoryStore()
    )
    items = await collect(agent.stream("Where is A-1?"))
    assert isinstance(items[-1], RunEnded)
    result = items[-1].result
    assert result.status is RunStatus.COMPLETED
    first_action = next(i for i, ev in enumerate(items) if isinstance(ev, ActionProposed))
    before = items[:first_action]
    deltas = [ev for ev in before if isinstance(ev, ThoughtDelta)]
    assert len(deltas) > 3  # it really streamed
    assert "".join(d.text for d in deltas) == THOUGHT
    assert {d.step for d in deltas} == {1}
    detected = [ev for ev in before if isinstance(ev, ActionDetected)]
    assert (detected[0].type, detected[0].tool) == ("tool", None)
    assert (detected[-1].type, detected[-1].tool) == ("tool", "lookup")
    # The type is known before the thought finished streaming.
    assert before.index(detected[0]) < before.index(deltas[-1])
    recorded = [ev for ev in items if not isinstance(ev, ThoughtDelta | ActionDetected | RunEnded)]
    assert recorded == await agent.transcript(result.run_id)  # run_started included


async def test_stream_confirm_and_resume_give_the_same_kinds_of_events() -> None:
    model = ScriptedModel(
        [
            {"type": "plan", "thought": "Plan the purge.", "steps": ["purge A-1"]},
            {
                "type": "tool",
                "thought": "Purging now.",
                "tool": "purge",
                "args": {"order_id": "A-1"},
            },
            {"type": "finish", "thought": "Gone.", "answer": "purged"},
        ]
    )
    agent = Agent(tools=[purge], model=model, store=MemoryStore())
    items = await collect(agent.stream("purge A-1"))
    paused = items[-1]
    assert isinstance(paused, RunEnded)
    assert paused.result.status is RunStatus.AWAITING_CONFIRMATION
    assert items[-2].type == "run_finished"  # type: ignore[union-attr]
    run_id = paused.result.run_id
    confirmed = await collect(agent.stream_confirm(run_id, approve=True, by="alice"))
    kinds = [type(ev).__name__ for ev in confirmed]
    assert kinds[0] == "Confirmation"
    assert "ToolStarted" in kinds
    assert "ThoughtDelta" in kinds  # the finish was streamed
    end = confirmed[-1]
    assert isinstance(end, RunEnded)
    assert end.result.status is RunStatus.COMPLETED
    again = await collect(agent.stream_resume(run_id))
    assert len(again) == 1  # a completed run: nothing happens, just the result
    assert isinstance(again[0], RunEnded)


async def test_leaving_a_stream_early_keeps_the_run_resumable() -> None:
    """Left while a (blocking) tool runs: a tool that answers within the pool's short
    wait completes on the spot, and the run may well be finished when the loop breaks."""
    store = MemoryStore()

    @tool(effect="read", name="lookup")
    def slow_lookup(order_id: str) -> dict[str, str]:
        """Look up an order."""
        time.sleep(0.05)
        return {"id": order_id, "status": "shipped"}

    def reply(messages: Any) -> Any:
        done = any("lookup returned" in m.content for m in messages)
        return script()[1 if done else 0]

    agent = Agent(tools=[slow_lookup], model=ScriptedModel(reply), store=store)
    run_id = ""
    # aclosing: leaving the loop closes the stream now, which cancels the run's task.
    async with contextlib.aclosing(agent.stream("Where is A-1?", run_id="early")) as stream:
        async for ev in stream:
            if isinstance(ev, ToolStarted):
                run_id = ev.run_id
                break
    assert run_id == "early"
    state = await agent.result("early")
    assert state.status is RunStatus.RUNNING
    done = await agent.resume("early")
    assert done.status is RunStatus.COMPLETED


async def test_a_reply_that_breaks_mid_object_executes_nothing() -> None:
    calls: list[str] = []

    @tool(effect="read")
    def spy(order_id: str) -> str:
        """Record calls."""
        calls.append(order_id)
        return "ok"

    broken = '{"type": "tool", "thought": "Looking it up", "tool": "spy", "args": {"order_'
    model = ScriptedModel(
        [broken, {"type": "finish", "thought": "t", "answer": "stopped"}], stream_chunk_chars=4
    )
    agent = Agent(tools=[spy], model=model, store=MemoryStore())
    items = await collect(agent.stream("go", budget=Budget(max_steps=3)))
    assert calls == []
    assert any(isinstance(ev, ActionDetected) and ev.tool == "spy" for ev in items)
    events: list[Event] = await agent.transcript(items[-1].result.run_id)  # type: ignore[union-attr]
    assert [e.type for e in events if e.type == "model_called"] == ["model_called"] * 2
    proposed = [e for e in events if isinstance(e, ActionProposed)]
    assert [p.action.type for p in proposed] == ["finish"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"type": "to', PartialAction(None, None, "")),
        ('{"type": "tool", "thought": "abc', PartialAction("tool", None, "abc")),
        ('{"type": "tool", "thought": "abc", "tool": "look', PartialAction("tool", None, "abc")),
        (
            '{"type": "tool", "thought": "abc", "tool": "lookup"',
            PartialAction("tool", "lookup", "abc"),
        ),
        ('{"action": {"type": "plan", "thought": "x"', PartialAction("plan", None, "x")),
        (
            '{"action": {"type": "tool", "thought": "x", "call": {"tool": "lookup",',
            PartialAction("tool", "lookup", "x"),
        ),
        ("", None),
        ("not json", None),
        ("[1, 2", None),
    ],
)
def test_partial_action(text: str, expected: PartialAction | None) -> None:
    assert partial_action(text) == expected
