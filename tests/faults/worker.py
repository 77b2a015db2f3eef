"""A worker process for the fault-injection suite: one scripted agent over a SQLite store.

Run as ``python worker.py <cmd> <db> <ledger> <tool_kind> [run_id]`` (usually with
``AGENTCORE_CRASH_AT`` set, so that it SIGKILLs itself at a named crash point). It prints
the final :class:`RunResult` as one JSON line on stdout, or ``{"error": ..., "message": ...}``
and exit code 1 when the library raises.

The model is a callable of the rendered messages, so any process can continue the run:
until the tool's outcome is in the conversation it calls the tool under test; then it
finishes.

Commands: ``start``, ``resume``, ``resume-by`` (by ``alice``), ``resolve-rerun``,
``resolve-result``, ``resolve-fail``, ``confirm`` (approve by ``alice``), ``result``.

Tool kinds (all append one line, the idempotency key, to the ledger file: one real side
effect, fsynced):

- ``idempotent``: effect ``write``, ``idempotent=True``;
- ``non_idempotent``: effect ``write``, ``idempotent=False``, no ``reconcile``;
- ``reconcile``: effect ``write``, ``idempotent=False``, ``reconcile`` looks the key up in
  the ledger;
- ``destructive``: effect ``destructive``, non-idempotent, no ``reconcile`` (waits for
  confirmation);
- ``destructive_idempotent``: effect ``destructive``, ``idempotent=True``.

Environment knobs (all optional):

- ``FAULT_DEAD_LETTER_AFTER``: ``Policy.dead_letter_after`` (recorded when the run starts);
- ``FAULT_MODEL_LOG``: a file that gets one line per model request (asks, recorded or not);
- ``FAULT_INVALID_FIRST``: the first reply is not a valid action (recorded, then re-asked);
- ``FAULT_BARRIER=<dir>:<n>``: before its command, wait until ``n`` workers reached the
  barrier (each drops a file in ``dir``), so that several workers act at the same moment;
- ``FAULT_TOOL_HOLD=<dir>``: inside the tool, before the side effect, create
  ``<dir>/entered`` and wait for ``<dir>/release``.

``idempotent_tool``, ``non_idempotent_tool`` and ``reconcile_tool`` are the tools by
reference for :func:`agentcore.testing.crash_test`, writing to ``FAULT_LEDGER``.

``cli_agent`` builds the same agent for ``agentcore ... --agent worker:cli_agent`` from
``FAULT_LEDGER`` and ``FAULT_TOOL_KIND`` (with this directory on ``PYTHONPATH``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__:  # imported as faults.worker (the crash tests' tools)
    from ._barrier import wait_at_barrier
else:  # run as a script: its folder is on sys.path
    from _barrier import wait_at_barrier

from agentcore import Agent, Policy, RunResult, ToolContext, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import AgentcoreError

TOOL_NAME = "record_entry"
ENTRY = "order A1 refunded"
ANSWER = "The entry is recorded."
TOOL_KINDS = ("idempotent", "non_idempotent", "reconcile", "destructive", "destructive_idempotent")
_WAIT_S = 30.0


def ledger_lines(ledger: str | os.PathLike[str]) -> list[str]:
    """The ledger's lines (one per real side effect); none when the file does not exist."""
    path = Path(ledger)
    return path.read_text().splitlines() if path.exists() else []


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {_WAIT_S:g}s")
        time.sleep(0.005)


def make_tool(kind: str, ledger: str | None) -> Any:  # Any: a Tool (kept loose for the factory)
    """The tool under test: appends its idempotency key to ``ledger`` (fsynced); with
    ``None``, to the file ``FAULT_LEDGER`` names when it runs."""
    if kind not in TOOL_KINDS:
        raise SystemExit(f"unknown tool kind {kind!r}; valid: {', '.join(TOOL_KINDS)}")

    def record_entry(entry: str, ctx: ToolContext) -> dict[str, Any]:
        """Record an entry in the ledger (a real, countable side effect).

        Args:
            entry: what to record.
        """
        hold = os.environ.get("FAULT_TOOL_HOLD")
        if hold:
            Path(hold, "entered").touch()
            _wait_for(Path(hold, "release"))
        with open(ledger or os.environ["FAULT_LEDGER"], "a", encoding="utf-8") as fh:
            fh.write(ctx.idempotency_key + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return {"key": ctx.idempotency_key, "entry": entry}

    def reconcile(key: str) -> dict[str, Any] | None:
        if key in ledger_lines(ledger or os.environ["FAULT_LEDGER"]):
            return {"key": key, "entry": ENTRY, "reconciled": True}
        return None

    effect = "destructive" if kind.startswith("destructive") else "write"
    return tool(
        effect=effect,
        idempotent=kind in ("idempotent", "destructive_idempotent"),
        reconcile=reconcile if kind == "reconcile" else None,
        name=TOOL_NAME,
    )(record_entry)


# The same tools by reference, for the crash kit (``faults.worker:reconcile_tool``).
idempotent_tool = make_tool("idempotent", None)
non_idempotent_tool = make_tool("non_idempotent", None)
reconcile_tool = make_tool("reconcile", None)


def next_action(messages: Sequence[Message]) -> dict[str, Any] | str:  # Any: a JSON action
    """Until the tool's outcome is in the conversation, call it once; then finish.

    With ``FAULT_INVALID_FIRST`` set, the first reply is not JSON (an invalid reply that is
    recorded and re-asked).
    """
    log = os.environ.get("FAULT_MODEL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    said = [m.content for m in messages if m.role == "user"]
    if os.environ.get("FAULT_INVALID_FIRST") and not any("not a valid action" in t for t in said):
        return "I will record it now."
    if not any(f"{TOOL_NAME} returned" in t or f"{TOOL_NAME} failed" in t for t in said):
        return {
            "type": "tool",
            "thought": "Record the entry.",
            "tool": TOOL_NAME,
            "args": {"entry": ENTRY},
        }
    return {"type": "finish", "thought": "Done.", "answer": ANSWER}


def build_agent(db: str, ledger: str, kind: str) -> Agent:
    """The agent under test over ``sqlite:///<db>``."""
    policy = Policy(
        plan_before_writes=False,
        dead_letter_after=int(os.environ.get("FAULT_DEAD_LETTER_AFTER", "5")),
    )
    return Agent(
        tools=[make_tool(kind, ledger)],
        model=ScriptedModel(next_action),
        store=f"sqlite:///{db}",
        policy=policy,
    )


def cli_agent(model: Any = None, store: str | None = None) -> Agent:  # Any: unused override
    """The same agent for the CLI (``--agent worker:cli_agent``), configured by env vars."""
    del model
    ledger, kind = os.environ["FAULT_LEDGER"], os.environ["FAULT_TOOL_KIND"]
    agent = build_agent("unused.db", ledger, kind)
    return agent.configured(store=store) if store else agent


def result_json(result: RunResult) -> dict[str, Any]:  # Any: JSON values
    """A RunResult as JSON values."""
    data = dataclasses.asdict(result)
    data["status"] = result.status.value
    return data


def _barrier() -> None:
    wait_at_barrier("FAULT_BARRIER", _WAIT_S)


async def _command(agent: Agent, cmd: str, run_id: str) -> RunResult:
    match cmd:
        case "start":
            return await agent.run("Record the refund of order A1.", run_id=run_id)
        case "resume":
            return await agent.resume(run_id)
        case "resume-by":
            return await agent.resume(run_id, by="alice")
        case "resolve-rerun":
            return await agent.resolve(run_id, by="alice", rerun=True, reason="it did not happen")
        case "resolve-result":
            found = {"key": f"{run_id}:1", "entry": ENTRY, "resolved": True}
            return await agent.resolve(run_id, by="alice", result=found, reason="it happened")
        case "resolve-fail":
            return await agent.resolve(run_id, by="alice", fail=True)
        case "confirm":
            return await agent.confirm(run_id, approve=True, by="alice")
        case "result":
            return await agent.result(run_id)
        case _:
            raise SystemExit(f"unknown command {cmd!r}")


async def main(argv: Sequence[str]) -> int:
    """Run one command; print the result (or the error) as one JSON line."""
    if len(argv) not in (4, 5):
        raise SystemExit(__doc__)
    cmd, db, ledger, kind = argv[:4]
    run_id = argv[4] if len(argv) == 5 else "fault-run"
    agent = build_agent(db, ledger, kind)
    try:
        _barrier()
        result = await _command(agent, cmd, run_id)
    except AgentcoreError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
        return 1
    finally:
        await agent.close()
    print(json.dumps(result_json(result)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
