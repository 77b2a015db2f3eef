"""A worker process for the compensation fault tests: pays twice, then asks to close an
account (a destructive call that waits); cancelled, then compensated.

Run as ``python compensation_worker.py <cmd> <store> <schema> <ledger> <kind> [settle]``
(``<schema>``: the PostgreSQL schema, or ``-``), usually with ``AGENTCORE_CRASH_AT`` set.
Prints the run's status and exits 0; a library error prints ``error: ...`` and exits 1.

Commands: ``start`` (runs until the close waits), ``cancel``, ``compensate`` (``settle``:
``c2=done`` and the like, comma-separated).

``COMPENSATION_HOLD=<dir>``: while ``<dir>/hold`` exists, an undo about to refund writes
``<dir>/entered`` and waits (the test stops or kills the process there, before the refund).

``UNDO_SLEEP_S=<s>``: an undo sleeps that long before it refunds; ``UNDO_TIMEOUT_S=<s>``:
the compensation's ``timeout`` (a sync undo then outlives it in its thread).

The ledger is a file outside agentcore, one line per real effect, fsynced: ``pay <key>``
for a payment and ``undo <key>`` for its refund. Compensation kinds:

- ``reconcile``: not idempotent; ``reconcile`` looks the undo's key up in the ledger;
- ``idempotent``: ``Compensation(idempotent=True)``, and the refund system deduplicates by
  key (a second refund with a key it has seen writes nothing), as a keyed API does;
- ``plain``: not idempotent, no reconcile: a lost undo is put to a person.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from agentcore import Agent, CommittedCall, Compensation, Policy, tool
from agentcore.adapters import ScriptedModel
from agentcore.errors import AgentcoreError
from agentcore.stores import SQLiteStore, TranscriptStore

CMD, STORE, SCHEMA, LEDGER, KIND = sys.argv[1:6]
SETTLE = sys.argv[6] if len(sys.argv) > 6 else ""


def lines() -> list[str]:
    path = Path(LEDGER)
    return path.read_text().splitlines() if path.exists() else []


def write(line: str) -> None:
    with open(LEDGER, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def hold() -> None:
    where = os.environ.get("COMPENSATION_HOLD")
    if not where or not (Path(where) / "hold").exists():
        return
    (Path(where) / "entered").write_text(str(os.getpid()))
    while (Path(where) / "hold").exists():
        time.sleep(0.02)


def refund(call: CommittedCall) -> str:
    from agentcore import ToolContext

    hold()
    time.sleep(float(os.environ.get("UNDO_SLEEP_S", "0")))

    ctx = ToolContext.current()
    assert ctx is not None
    line = f"undo {ctx.idempotency_key}"
    if KIND == "idempotent" and line in lines():
        return "already refunded"  # the refund system deduplicates by key
    write(line)
    return "refunded"


def reconcile(key: str) -> str | None:
    return "refunded" if f"undo {key}" in lines() else None


TIMEOUT = float(os.environ["UNDO_TIMEOUT_S"]) if os.environ.get("UNDO_TIMEOUT_S") else None
if KIND == "reconcile":
    UNDO: Any = Compensation(refund, reconcile=reconcile, timeout=TIMEOUT)
elif KIND == "idempotent":
    UNDO = Compensation(refund, idempotent=True, timeout=TIMEOUT)
else:
    UNDO = Compensation(refund, timeout=TIMEOUT)


@tool(effect="write", compensate=UNDO)
def pay(to: str, amount: int) -> str:
    """Pay someone."""
    from agentcore import ToolContext

    ctx = ToolContext.current()
    assert ctx is not None
    write(f"pay {ctx.idempotency_key}")
    return "paid"


@tool(effect="destructive")
def close(account: str) -> str:
    """Close an account."""
    return "closed"


def store() -> TranscriptStore:
    if STORE.startswith("postgresql://"):
        from agentcore.stores.postgres import PostgresStore

        return PostgresStore(STORE, schema=SCHEMA)
    return SQLiteStore(STORE)


SCRIPT = [
    {"type": "tool", "thought": "pay a", "tool": "pay", "args": {"to": "a", "amount": 1}},
    {"type": "tool", "thought": "pay b", "tool": "pay", "args": {"to": "b", "amount": 2}},
    {"type": "tool", "thought": "close", "tool": "close", "args": {"account": "x"}},
]


async def main() -> int:
    agent = Agent(
        tools=[pay, close],
        model=ScriptedModel(SCRIPT),
        store=store(),
        policy=Policy(plan_before_writes=False),
        lease_s=2.0,
    )
    try:
        if CMD == "start":
            result = await agent.run("pay twice, close", run_id="comp-run")
        elif CMD == "cancel":
            result = await agent.cancel("comp-run", by="ops")
        else:
            settle: dict[str, Any] = dict(item.split("=", 1) for item in SETTLE.split(",") if item)
            result = await agent.compensate("comp-run", by="ops", settle=settle)
    except AgentcoreError as exc:
        print(f"error: {type(exc).__name__}: {exc}")
        return 1
    finally:
        await agent.close()
    print(result.status.value)
    print(result.reason or "")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
