"""A worker process for the sub-agent fault tests: a parent agent whose one tool is a
child agent that pays once.

Run as ``python subagent_worker.py <start|resume|resume-child|runs> <store> <ledger>``,
usually with ``AGENTCORE_CRASH_AT`` set; ``<store>`` is a SQLite file or a PostgreSQL URL
(schema ``SUBAGENT_SCHEMA``). Prints the parent's status and answer (``resume-child``: the
child's, resuming it until no other worker holds it; ``runs``: the store's run ids). The
ledger is a file outside agentcore with one line per real payment (the call's idempotency
key), fsynced; the payment is not idempotent and reconciles from the ledger.

Environment: ``SUBAGENT_PAY_S`` (the payment takes this long, after touching
``SUBAGENT_MARK`` when it begins), ``SUBAGENT_PARENT_LEASE`` and ``SUBAGENT_CHILD_LEASE``
(the agents' ``lease_s``, 2 s by default).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentcore import Agent, Policy, RunStatus, ToolContext, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.stores import SQLiteStore, TranscriptStore

CMD, STORE, LEDGER = sys.argv[1:4]
PAY_S = float(os.environ.get("SUBAGENT_PAY_S", "0"))
MARK = os.environ.get("SUBAGENT_MARK", "")


def lines() -> list[str]:
    path = Path(LEDGER)
    return path.read_text().splitlines() if path.exists() else []


@tool(effect="write", reconcile=lambda key: "paid" if key in lines() else None)
def pay(amount: int, ctx: ToolContext) -> str:
    """Pay."""
    if MARK:
        Path(MARK).touch()
    time.sleep(PAY_S)
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


def open_store() -> TranscriptStore:
    if STORE.startswith("postgresql://"):
        from agentcore.stores.postgres import PostgresStore

        return PostgresStore(STORE, schema=os.environ.get("SUBAGENT_SCHEMA") or None)
    return SQLiteStore(STORE)


store = open_store()
child = Agent(
    tools=[pay],
    model=then_finish(
        {"type": "tool", "thought": "p", "tool": "pay", "args": {"amount": 5}}, "paid 5"
    ),
    store=store,
    policy=Policy(plan_before_writes=False),
    lease_s=float(os.environ.get("SUBAGENT_CHILD_LEASE", "2")),
)
payer = child.as_tool("payer", "Pay what the task says.")
parent = Agent(
    tools=[payer],
    model=then_finish(
        {"type": "tool", "thought": "d", "tool": "payer", "args": {"task": "pay 5"}}, "all paid"
    ),
    store=store,
    policy=Policy(plan_before_writes=False),
    lease_s=float(os.environ.get("SUBAGENT_PARENT_LEASE", "2")),
)


async def main() -> None:
    if CMD == "runs":
        print(" ".join(sorted(r.run_id for r in await store.list_runs())))
        await store.close()
        return
    if CMD == "start":
        result = await parent.run("pay 5 through the payer", run_id="p1")
    else:  # resumed until the dead worker's lease on the run has expired
        agent, run_id = (child, "p1:1/payer") if CMD == "resume-child" else (parent, "p1")
        until = time.monotonic() + 30
        result = await agent.resume(run_id)
        while result.status is RunStatus.RUNNING and time.monotonic() < until:
            await asyncio.sleep(0.2)
            result = await agent.resume(run_id)
    print(result.status.value, result.answer or result.reason)
    await store.close()


asyncio.run(main())
