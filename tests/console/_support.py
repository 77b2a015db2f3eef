"""An agent with a destructive tool and a model that reacts to approvals and denials, and
runs seeded in a store for the console tests."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from agentcore import Agent, Budget, Policy, RunResult, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
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
