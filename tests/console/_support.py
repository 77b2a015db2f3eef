"""An agent with a destructive tool and a model that reacts to approvals and denials, and
runs seeded in a store for the console tests."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from agentcore import Agent, Budget, Policy, RunResult, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.events import (
    ActionProposed,
    Decision,
    Event,
    ModelCalled,
    RunFinished,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from agentcore.stores import TranscriptStore

REFUND_DELAY_S = 0.0
"""How long the refund tool takes (the browser test slows it to watch the run continue)."""


@tool(effect="destructive")
async def refund(order_id: str, amount: int) -> dict[str, Any]:
    """Refund an order (destructive: a person approves it first)."""
    await asyncio.sleep(REFUND_DELAY_S)
    return {"refunded": order_id, "amount": amount}


@tool(effect="read")
def lookup(order_id: str) -> dict[str, str]:
    """Look an order up."""
    return {"order_id": order_id, "state": "shipped"}


def _next(messages: Sequence[Message]) -> dict[str, Any]:
    text = "\n".join(m.content for m in messages if m.role == "user")
    if "refund returned" in text:
        return {"type": "finish", "thought": "The refund went through.", "answer": "refunded"}
    if "lookup returned" in text:
        return {"type": "finish", "thought": "Told the customer.", "answer": "not refunded"}
    if "Denied by" in text:
        return {
            "type": "tool",
            "thought": "The refund was denied; check the order instead.",
            "tool": "lookup",
            "args": {"order_id": _order(messages)},
        }
    if "refund" in text.lower():
        return {
            "type": "tool",
            "thought": "The customer asked for a refund.",
            "tool": "refund",
            "args": {"order_id": _order(messages), "amount": 30},
        }
    return {"type": "finish", "thought": "Nothing to do.", "answer": "done"}


def _order(messages: Sequence[Message]) -> str:
    found = re.search(r"order (\w+)", "\n".join(m.content for m in messages))
    return found.group(1) if found else "?"


def make_agent(store: TranscriptStore | str, **kw: Any) -> Agent:  # Any: Agent's options
    """The agent whose runs the console approves."""
    return Agent(
        tools=[refund, lookup],
        model=ScriptedModel(_next),
        store=store,
        policy=Policy(plan_before_writes=False),
        **kw,
    )


async def seed(agent: Agent, n_plain: int = 3) -> tuple[RunResult, RunResult]:
    """``n_plain`` finished runs and two runs waiting for a refund approval."""
    for i in range(n_plain):
        await agent.run(f"Say hello {i}", tenant="acme" if i % 2 else None, metadata={"n": i})
    first = await agent.run(
        "Please refund order A1",
        tenant="acme",
        metadata={"ticket": "T-1"},
        budget=Budget(max_steps=6),
    )
    second = await agent.run(
        "Please refund order B2", metadata={"ticket": "T-2"}, budget=Budget(max_steps=6)
    )
    assert first.status is RunStatus.AWAITING_CONFIRMATION
    assert second.status is RunStatus.AWAITING_CONFIRMATION
    return first, second


MODELS = ("openai/gpt-4.1-mini", "anthropic/claude-sonnet-4")


def history_run(run_id: str, at: float, i: int, *, planning: bool) -> list[Event]:
    """A finished run as a real agent records it: a plan (when ``planning``), a tool call,
    a finish; every seventh model call before an action is invalid and re-asked."""
    model = MODELS[i % 2]
    version, digest = ("1", "5f1c9a0e") if planning else ("2", "b73d2e41")
    events: list[Event] = [
        RunStarted(
            run_id=run_id,
            seq=0,
            at=at,
            task=f"Where is order {i}?",
            scope=["lookup"],
            budget={"max_steps": 8},
            policy={},
            contract={"version": version, "hash": digest},
            route=[model],
            tools={},
            metadata={"ticket": f"T-{i}"},
            tenant=("acme", "globex", None)[i % 3],
        )
    ]

    def add(kind: type[Any], **fields: Any) -> None:  # Any: event fields
        events.append(kind.model_validate({"run_id": run_id, "seq": len(events), **fields}))

    actions: list[dict[str, Any]] = []
    if planning:
        actions.append(
            {"type": "plan", "thought": "Look it up, then answer.", "steps": ["look up"]}
        )
    actions.append(
        {"type": "tool", "thought": "Look it up.", "tool": "lookup", "args": {"order_id": str(i)}}
    )
    exhausted = not planning and i % 5 == 0  # v2 runs out of steps now and then
    if not exhausted:
        actions.append({"type": "finish", "thought": "Answer.", "answer": "It shipped."})
    for step, action in enumerate(actions, 1):
        t = at + step
        if (i + step) % (7 if planning else 4) == 0:
            add(ModelCalled, at=t, step=step, model=model, outcome="invalid", reply="{")
        add(
            ModelCalled,
            at=t,
            step=step,
            model=model,
            outcome="ok",
            input_tokens=900,
            output_tokens=60,
            latency_ms=800.0,
        )
        call = f"c{step}"
        add(ActionProposed, at=t, step=step, call_id=call, action=action)
        if action["type"] == "finish":
            break
        add(Decision, at=t, step=step, call_id=call, verdict="execute")
        if action["type"] == "tool":
            add(
                ToolStarted,
                at=t,
                step=step,
                call_id=call,
                tool="lookup",
                args=action["args"],
                idempotency_key=f"{run_id}:{call}",
            )
            add(
                ToolFinished,
                at=t,
                step=step,
                call_id=call,
                tool="lookup",
                ok=True,
                result={"state": "shipped"},
            )
    if exhausted:
        add(RunFinished, at=at + 5, status="budget_exhausted", reason="max_steps (8) reached")
    else:
        add(RunFinished, at=at + 5, status="completed", answer="It shipped.")
    return events


async def seed_history(store: TranscriptStore, n: int, *, days: float, now: float) -> None:
    """``n`` finished runs over the last ``days``: contract v1 plans; v2, from two thirds of
    the way on, stops planning (the drift the health charts exist to show)."""
    for i in range(n):
        at = now - days * 86400 * (1 - i / n)
        events = history_run(f"h{i:06d}", at, i, planning=i < n * 2 // 3)
        await store.append(events[0].run_id, 0, events)
