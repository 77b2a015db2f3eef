"""Rendering events into messages: what every adapter sees, and what native adapters use."""

from __future__ import annotations

from collections.abc import Sequence

from agentcore import Agent, Budget, Policy, tool
from agentcore.adapters import Completion, CompletionRequest, Message, ScriptedModel, parse_reply
from agentcore.contracts import Usage
from agentcore.stores import MemoryStore


@tool(effect="read")
def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"id": order_id}


@tool(effect="write")
def refund(order_id: str) -> str:
    """Refund an order."""
    return "refunded"


class NativeLike:
    """An adapter that answers like a native tool-calling model returning two calls."""

    name = "fake/native"

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.requests: list[CompletionRequest] = []

    async def complete_structured(self, request: CompletionRequest) -> Completion:
        self.requests.append(request)
        text = self.replies.pop(0)
        action, error = parse_reply(request, text)
        dropped = ('lookup({"order_id": "B"})',) if len(self.requests) == 1 else ()
        return Completion(text, action, error, Usage(10, 5), self.name, dropped_calls=dropped)


async def test_messages_carry_our_call_ids_and_actions() -> None:
    model = ScriptedModel(
        [
            {"type": "tool", "thought": "t", "tool": "refund", "args": {"order_id": "A"}},
            {"type": "plan", "thought": "p", "steps": ["refund A"]},
            {"type": "tool", "thought": "t", "tool": "lookup", "args": {"order_id": "A"}},
            {"type": "finish", "thought": "f", "answer": "done"},
        ]
    )
    agent = Agent(tools=[lookup, refund], model=model, store=MemoryStore())
    await agent.run("go", budget=Budget(max_steps=6))
    messages: Sequence[Message] = model.requests[-1].messages
    tagged = [(m.role, m.call_id, m.action.type if m.action else None) for m in messages]
    assert tagged[:7] == [
        ("user", None, None),  # the task
        ("assistant", "c1", "tool"),
        ("user", "c1", None),  # not run: needs a plan
        ("assistant", "c2", "plan"),
        ("user", "c2", None),  # plan approved
        ("assistant", "c3", "tool"),
        ("user", "c3", None),  # lookup returned
    ]
    assert messages[2].content.startswith("[c1] Not run:")
    assert messages[-1].call_id is None  # the budget note belongs to no call


async def test_dropped_native_calls_are_recorded_and_told_to_the_model() -> None:
    model = NativeLike(
        [
            '{"type": "tool", "thought": "t", "tool": "lookup", "args": {"order_id": "A"}}',
            '{"type": "finish", "thought": "f", "answer": "done"}',
        ]
    )
    agent = Agent(
        tools=[lookup], model=model, store=MemoryStore(), policy=Policy(plan_before_writes=False)
    )
    result = await agent.run("go")
    events = await agent.transcript(result.run_id)
    first_call = next(e for e in events if e.type == "model_called")
    assert first_call.dropped_calls == ['lookup({"order_id": "B"})']  # type: ignore[union-attr]
    seen = [m.content for m in model.requests[-1].messages]
    assert any("not executed: lookup" in c for c in seen)
