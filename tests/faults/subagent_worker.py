"""A worker process for the sub-agent fault tests: a parent agent whose one tool is a
child agent that pays once.

Run as ``python subagent_worker.py <start|resume> <db> <ledger>``, usually with
``AGENTCORE_CRASH_AT`` set. Prints the parent's status and answer. The ledger is a file
outside agentcore with one line per real payment (the call's idempotency key), fsynced;
the payment is not idempotent and reconciles from the ledger.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentcore import Agent, Policy, ToolContext, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.stores import SQLiteStore

CMD, DB, LEDGER = sys.argv[1:4]


def lines() -> list[str]:
    path = Path(LEDGER)
    return path.read_text().splitlines() if path.exists() else []


@tool(effect="write", reconcile=lambda key: "paid" if key in lines() else None)
def pay(amount: int, ctx: ToolContext) -> str:
    """Pay."""
    with open(LEDGER, "a") as f:
        f.write(ctx.idempotency_key + "\n")
        f.flush()
        os.fsync(f.fileno())
    return "paid"


def then_finish(first: dict[str, Any], answer: str) -> ScriptedModel:
    def step(messages: Sequence[Message]) -> dict[str, Any]:
        said = "\n".join(m.content for m in messages if m.role == "user")
        if "returned" in said:
            return {"type": "finish", "thought": "done", "answer": answer}
        return first

    return ScriptedModel(step)


store = SQLiteStore(DB)
child = Agent(
    tools=[pay],
    model=then_finish(
        {"type": "tool", "thought": "p", "tool": "pay", "args": {"amount": 5}}, "paid 5"
    ),
    store=store,
    policy=Policy(plan_before_writes=False),
    lease_s=2.0,
)
payer = child.as_tool("payer", "Pay what the task says.")
parent = Agent(
    tools=[payer],
    model=then_finish(
        {"type": "tool", "thought": "d", "tool": "payer", "args": {"task": "pay 5"}}, "all paid"
    ),
    store=store,
    policy=Policy(plan_before_writes=False),
    lease_s=2.0,
)


async def main() -> None:
    if CMD == "start":
        result = await parent.run("pay 5 through the payer", run_id="p1")
    else:
        result = await parent.resume("p1")
    print(result.status.value, result.answer or result.reason)
    await store.close()


asyncio.run(main())
