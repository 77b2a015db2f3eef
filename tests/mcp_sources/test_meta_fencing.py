"""An MCP call carries its idempotency key and fencing token in ``_meta``, seen by a real
server (``servers/ledger.py``, stdio, written with the SDK, which records the ``_meta`` of
every call).

The run is taken over for real: a worker process SIGKILLs itself after the call returned
(``AGENTCORE_CRASH_AT=after_tool_return``), leaving its lease on the SQLite run; once it
expired, a second agent takes the run and makes the call again: the same key, a greater
token. Run as a script, this file is that worker: ``python test_meta_fencing.py <database>
<ledger>``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentcore import Agent, Policy, RunStatus
from agentcore.adapters import Message, ScriptedModel
from agentcore.events import RunResumed
from agentcore.mcp import McpServer, ToolConfig
from agentcore.stores import SQLiteStore

LEDGER_SERVER = Path(__file__).resolve().parent / "servers" / "ledger.py"
KEY = "io.agentcore/idempotency-key"
TOKEN = "io.agentcore/fencing-token"
LEASE_S = 1.0


def ledger_server(ledger: Path) -> McpServer:
    return McpServer(
        "ledger",
        command=sys.executable,
        args=[str(LEDGER_SERVER)],
        env={**os.environ, "LEDGER_FILE": str(ledger)},
        # the server deduplicates by the key it is sent, so a call may run again
        tools={"refund": ToolConfig(effect="write", idempotent=True)},
    )


def script() -> ScriptedModel:
    """Refund A1, then finish; decided from the conversation so any agent can continue."""

    def next_action(messages: Sequence[Message]) -> dict[str, Any]:
        if any(m.role == "user" and "refunded A1" in m.content for m in messages):
            return {"type": "finish", "thought": "done", "answer": "refunded"}
        args = {"order_id": "A1"}
        return {"type": "tool", "thought": "refund", "tool": "ledger.refund", "args": args}

    return ScriptedModel(next_action)


def agent(server: McpServer, store: SQLiteStore | str) -> Agent:
    return Agent(
        tools=server.tools(),
        model=script(),
        store=store,
        policy=Policy(plan_before_writes=False),
        lease_s=LEASE_S,
    )


def entries(ledger: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ledger.read_text().splitlines()]


@pytest.mark.subprocess
async def test_a_takeover_sends_the_same_key_and_a_greater_token_in_meta(tmp_path: Path) -> None:
    db, ledger = tmp_path / "runs.db", tmp_path / "ledger.jsonl"
    env = {**os.environ, "AGENTCORE_CRASH_AT": "after_tool_return"}
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        str(db),
        str(ledger),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(worker.communicate(), 60)
    assert worker.returncode == -9, err.decode()  # SIGKILLed after the call returned
    (first,) = entries(ledger)
    store = SQLiteStore(str(db))
    (run,) = await store.list_runs()
    # Its worker died inside the run: nobody released the lease.
    assert run.status == "running" and run.owner is not None
    assert run.lease_expires_at is not None
    assert first["meta"][KEY] == "r1:1"
    await asyncio.sleep(max(0.0, run.lease_expires_at - time.time()) + 0.1)  # expired

    async with ledger_server(ledger) as server:
        result = await agent(server, store).resume("r1")
    assert result.status is RunStatus.COMPLETED
    resumed = [e for e in await store.load("r1") if isinstance(e, RunResumed)]
    assert [e.recovery for e in resumed] == [True]  # taken over from a worker that died
    first, again = entries(ledger)
    assert first["meta"][KEY] == again["meta"][KEY] == "r1:1"
    assert isinstance(first["meta"][TOKEN], int)
    assert again["meta"][TOKEN] > first["meta"][TOKEN]


async def _work(db: str, ledger: str) -> None:
    """The worker process: start run r1; AGENTCORE_CRASH_AT kills it after the call."""
    async with ledger_server(Path(ledger)) as server:
        await agent(server, f"sqlite:///{db}").run("refund A1", run_id="r1")


if __name__ == "__main__":
    asyncio.run(_work(sys.argv[1], sys.argv[2]))
