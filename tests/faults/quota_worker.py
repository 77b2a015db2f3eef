"""A worker process for the quota fault tests: one agent refunding 1 EUR at a time under a
daily per-customer sum quota, over a shared store.

Run as ``python quota_worker.py <cmd>``, configured by environment variables (the test sets
them, see ``test_quota_faults.py``), usually with ``AGENTCORE_CRASH_AT`` set. It prints one
JSON line on stdout: ``{"status", "reason", "pid"}``, or ``{"error", "message"}`` with exit
code 1 when the library raised.

Commands: ``start`` (``Agent.run`` for customer ``C1`` of tenant ``acme``), ``resume``,
``resolve-fail``, ``resolve-rerun``, ``resolve-result`` (a person settles the lost call),
``compensate``.

The model asks for a refund of ``QUOTA_AMOUNT`` (default 1) EUR, again after each outcome
(ran, failed or refused), ``QUOTA_ASKS`` times, then finishes. The tool is
``refund(order_id, amount)``; its real effect is a line ``pay <key> <amount> <pid> <now>`` in the
ledger file (fsynced), and its undo's ``undo <key> <amount> <pid> <now>`` (``now``: the
agent's clock then). Kinds:

- ``idempotent``: ``idempotent=True``, and the payment system deduplicates by key (a second
  payment with a key it has seen writes nothing), as a keyed API does;
- ``non_idempotent``: not idempotent, no ``reconcile``: a lost call is put to a person;
- ``failing``: not idempotent, raises before any effect (the bank is down).

Environment:

- ``QUOTA_STORE``: ``sqlite:///<file>`` or a ``postgresql://`` DSN; ``QUOTA_SCHEMA``: the
  PostgreSQL schema;
- ``QUOTA_RUN_ID``, ``QUOTA_LEDGER``, ``QUOTA_KIND``, ``QUOTA_ASKS`` (default 1),
  ``QUOTA_LIMIT`` (default 10), ``QUOTA_LEASE_S`` (default 1);
- ``QUOTA_CLOCK_FILE``: a file holding the agent's "now" (Unix seconds), read at every tick
  (the test moves it); unset: ``time.time``;
- ``QUOTA_HOLD=<dir>:<n>``: before the model's reply that follows the n-th outcome, create
  ``<dir>/entered`` and wait for ``<dir>/release`` (the test moves the clock meanwhile);
- ``QUOTA_BARRIER=<dir>:<n>``: wait until ``n`` workers reached the barrier before the
  command, so that they all start together.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

from _barrier import wait_at_barrier  # the worker's folder is on sys.path

from agentcore import (
    Agent,
    CommittedCall,
    Compensation,
    Policy,
    Quota,
    RunResult,
    ToolContext,
    tool,
)
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import AgentcoreError
from agentcore.stores import PostgresStore, TranscriptStore

CUSTOMER = "C1"
TENANT = "acme"
KINDS = ("idempotent", "non_idempotent", "failing")
_WAIT_S = 60.0


def env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        raise SystemExit(f"{name} is not set")
    return value


def quota() -> Quota:
    """What the test declares: at most ``QUOTA_LIMIT`` EUR refunded per customer per day."""
    limit = float(env("QUOTA_LIMIT", "10"))
    return Quota("refunds", limit=limit, count="sum:amount", per=("customer_id",))


def ledger_lines(ledger: Path) -> list[list[str]]:
    """The ledger's entries, split: ``[what, key, amount, pid, now]`` (``now``: the agent's
    clock when the effect happened)."""
    if not ledger.exists():
        return []
    return [line.split() for line in ledger.read_text().splitlines() if line]


def _write(ledger: Path, line: str) -> None:
    with ledger.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def make_tool(kind: str, ledger: Path) -> Any:  # Any: a Tool (kept loose for the factory)
    if kind not in KINDS:
        raise SystemExit(f"unknown tool kind {kind!r}; valid: {', '.join(KINDS)}")

    def refund(order_id: str, amount: float, ctx: ToolContext) -> str:
        """Refund an order (a real, countable side effect).

        Args:
            order_id: the order.
            amount: EUR.
        """
        del order_id
        if kind == "failing":
            raise RuntimeError("the bank is down")
        key = ctx.idempotency_key
        if kind == "idempotent" and any(e[:2] == ["pay", key] for e in ledger_lines(ledger)):
            return "refunded already"  # the payment system deduplicates by key
        _write(ledger, f"pay {key} {amount:g} {os.getpid()} {clock():.0f}")
        return "refunded"

    def undo(call: CommittedCall) -> str:
        amount = call.args["amount"]
        _write(ledger, f"undo {call.idempotency_key} {amount:g} {os.getpid()} {clock():.0f}")
        return "refund reversed"

    return tool(
        effect="write",
        idempotent=kind == "idempotent",
        compensate=Compensation(undo),
        name="refund",
    )(refund)


def _touch(path: str) -> None:
    Path(path).touch()


def _exists(path: str) -> bool:
    return Path(path).exists()


async def _hold(outcomes: int) -> None:
    """With ``QUOTA_HOLD=<dir>:<n>``, before the reply that follows the n-th outcome: create
    ``<dir>/entered`` and wait for ``<dir>/release``."""
    spec = os.environ.get("QUOTA_HOLD")
    if not spec:
        return
    folder, _, nth = spec.rpartition(":")
    if outcomes != int(nth):
        return
    _touch(os.path.join(folder, "entered"))
    deadline = time.monotonic() + _WAIT_S
    while not _exists(os.path.join(folder, "release")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{folder}/release did not appear within {_WAIT_S:g}s")
        await asyncio.sleep(0.01)


def make_model() -> ScriptedModel:
    asks = int(env("QUOTA_ASKS", "1"))
    amount = float(env("QUOTA_AMOUNT", "1"))

    async def reply(messages: Sequence[Message]) -> dict[str, Any]:  # Any: a JSON action
        outcomes = sum(m.role == "user" and m.call_id is not None for m in messages)
        await _hold(outcomes)
        if outcomes < asks:
            args = {"order_id": f"O-{outcomes}", "amount": amount}
            return {"type": "tool", "thought": "refund", "tool": "refund", "args": args}
        return {"type": "finish", "thought": "done", "answer": "done"}

    def step(messages: Sequence[Message]) -> Awaitable[dict[str, Any]]:  # Any: a JSON action
        return reply(messages)

    return ScriptedModel(step)


def clock() -> float:
    """Now: the clock file's value when ``QUOTA_CLOCK_FILE`` is set (re-read every time)."""
    path = os.environ.get("QUOTA_CLOCK_FILE")
    return float(Path(path).read_text()) if path else time.time()


def make_store() -> str | TranscriptStore:
    url = env("QUOTA_STORE")
    if not url.startswith("postgres"):
        return url
    return PostgresStore(url, schema=os.environ.get("QUOTA_SCHEMA") or None)


def build_agent(store: str | TranscriptStore) -> Agent:
    return Agent(
        tools=[make_tool(env("QUOTA_KIND"), Path(env("QUOTA_LEDGER")))],
        model=make_model(),
        store=store,
        policy=Policy(plan_before_writes=False, compensate_completed=True),
        quotas=[quota()],
        clock=clock,
        lease_s=float(env("QUOTA_LEASE_S", "1")),
    )


def _barrier() -> None:
    wait_at_barrier("QUOTA_BARRIER", _WAIT_S)


async def _command(agent: Agent, cmd: str, run_id: str) -> RunResult:
    match cmd:
        case "start":
            meta = {"customer_id": CUSTOMER}
            return await agent.run(
                "Refund the orders.", run_id=run_id, metadata=meta, tenant=TENANT
            )
        case "resume":
            return await agent.resume(run_id)
        case "resolve-fail":
            return await agent.resolve(run_id, by="alice", fail=True, reason="it did not happen")
        case "resolve-rerun":
            return await agent.resolve(run_id, by="alice", rerun=True, reason="it did not happen")
        case "resolve-result":
            return await agent.resolve(run_id, by="alice", result="refunded", reason="it happened")
        case "compensate":
            return await agent.compensate(run_id, by="ops")
        case _:
            raise SystemExit(f"unknown command {cmd!r}")


async def main(cmd: str) -> int:
    """Run one command; print the result (or the error) as one JSON line."""
    store = make_store()
    agent = build_agent(store)
    try:
        _barrier()
        result = await _command(agent, cmd, env("QUOTA_RUN_ID"))
    except AgentcoreError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
        return 1
    finally:
        await agent.close()
        if not isinstance(store, str):
            await store.close()
    out = {"status": result.status.value, "reason": result.reason, "pid": os.getpid()}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(asyncio.run(main(sys.argv[1])))
