"""A worker process for the multi-worker fault tests: one agent over a shared store.

Run as ``python fleet_worker.py <cmd>``, configured by environment variables (the test
harness, ``_fleet.py``, sets them). The process runs under
:func:`agentcore.run_until_signalled`, so SIGTERM cancels it cleanly (exit code 143, its
lease released). It prints one JSON line on stdout: the run's result with what this worker
did (``shifts``, ``busy``, ``first_shift_at``), or ``{"error": ..., "message": ...}`` with exit
code 1 when the library raised. Agent log events go to stderr as JSON lines (INFO and up).

Commands:

- ``start``: record the run (``Agent.submit`` without a queue: nothing advances it);
- ``resume``: ``Agent.resume`` once;
- ``advance``: like a queue worker, ``Agent.advance(max_steps=1)`` again and again (waiting
  while another worker holds the run) until the run is no longer ``running``.

The model calls the tool ``FLEET_STEPS`` times, one step each (``entry 1``, ``entry 2``,
...), then finishes. The tool appends ``<idempotency key> <pid>`` to the ledger, fsynced:
one line per real side effect, countable per key.

Environment:

- ``FLEET_STORE``: ``sqlite:///<file>`` or a ``postgresql://`` DSN;
- ``FLEET_SCHEMA``: the PostgreSQL schema; ``FLEET_APP``: its ``application_name``;
- ``FLEET_RUN_ID``, ``FLEET_LEDGER``, ``FLEET_KIND`` (``idempotent``, ``non_idempotent``,
  ``reconcile``), ``FLEET_STEPS`` (default 3), ``FLEET_LEASE_S`` (default 2);
- ``FLEET_MODEL_DELAY_S``: an await before every model reply (default 0);
- ``FLEET_HOLD=<dir>:<point>:<n>``: at the n-th tool step, create ``<dir>/entered`` and
  wait (asynchronously: the lease keeps being renewed) for ``<dir>/release``. Points:
  ``model`` (before the model's reply), ``tool`` (inside the tool, before its side effect),
  ``tool_after`` (inside the tool, after its side effect);
- ``FLEET_BARRIER=<dir>:<n>``: wait until ``n`` workers reached the barrier before the command;
- ``FLEET_SHIFT_PAUSE_S``: ``advance`` waits this long between its shifts (default 0);
- ``FLEET_BUSY_MARK=<file>``: ``advance`` creates it when it first finds the run busy.
- ``FLEET_LOST_CALL_WAIT_S``: ``Agent(lost_call_wait_s=...)`` (default 300).
- ``FLEET_SYNC_SLEEP_S``: the tool is a sync function that sleeps this long in its thread
  before its side effect; ``FLEET_TOOL_TIMEOUT_S``: the tool's ``timeout``.

``resolve-rerun`` (alice says the lost call did not happen: run it once) is a command too;
``AGENTCORE_CRASH_AT`` works as in every agentcore process (``Fleet.popen(crash=...)``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

import structlog
from _barrier import wait_at_barrier  # the worker's folder is on sys.path

from agentcore import Agent, Policy, RunResult, RunStatus, ToolContext, run_until_signalled, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import AgentcoreError, RunBusyError
from agentcore.stores import PostgresStore, TranscriptStore

TOOL_NAME = "record_entry"
KINDS = ("idempotent", "non_idempotent", "reconcile")
_WAIT_S = 60.0


def env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        raise SystemExit(f"{name} is not set")
    return value


def ledger_keys(ledger: Path) -> list[str]:
    """The idempotency key of every side effect so far."""
    if not ledger.exists():
        return []
    return [line.split()[0] for line in ledger.read_text().splitlines() if line]


def _hold_at(point: str, step: int) -> Path | None:
    """The hold directory when ``FLEET_HOLD`` names this point and tool step."""
    spec = os.environ.get("FLEET_HOLD")
    if not spec:
        return None
    folder, where, nth = spec.rsplit(":", 2)
    return Path(folder) if (where, int(nth)) == (point, step) else None


def _touch(path: str | Path) -> None:
    Path(path).touch()


async def _hold(folder: Path) -> None:
    _touch(folder / "entered")
    deadline = time.monotonic() + _WAIT_S
    while not (folder / "release").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{folder}/release did not appear within {_WAIT_S:g}s")
        await asyncio.sleep(0.01)


def make_tool(kind: str, ledger: Path) -> Any:  # Any: a Tool (kept loose for the factory)
    if kind not in KINDS:
        raise SystemExit(f"unknown tool kind {kind!r}; valid: {', '.join(KINDS)}")

    async def record_entry(entry: str, ctx: ToolContext) -> dict[str, Any]:
        """Record an entry in the ledger (a real, countable side effect).

        Args:
            entry: what to record, ``entry <n>``.
        """
        step = int(entry.rsplit(maxsplit=1)[-1])
        if hold := _hold_at("tool", step):
            await _hold(hold)
        with ledger.open("a", encoding="utf-8") as fh:
            fh.write(f"{ctx.idempotency_key} {os.getpid()}\n")
            fh.flush()
            os.fsync(fh.fileno())
        if hold := _hold_at("tool_after", step):
            await _hold(hold)
        return {"key": ctx.idempotency_key, "entry": entry}

    def record_entry_in_thread(entry: str, ctx: ToolContext) -> dict[str, Any]:
        """Record an entry in the ledger, slowly (a sync tool that outlives its timeout).

        Args:
            entry: what to record, ``entry <n>``.
        """
        time.sleep(float(env("FLEET_SYNC_SLEEP_S")))
        with ledger.open("a", encoding="utf-8") as fh:
            fh.write(f"{ctx.idempotency_key} {os.getpid()}\n")
            fh.flush()
            os.fsync(fh.fileno())
        return {"key": ctx.idempotency_key, "entry": entry}

    def reconcile(key: str) -> dict[str, Any] | None:
        return {"key": key, "reconciled": True} if key in ledger_keys(ledger) else None

    timeout = os.environ.get("FLEET_TOOL_TIMEOUT_S")
    return tool(
        effect="write",
        idempotent=kind == "idempotent",
        reconcile=reconcile if kind == "reconcile" else None,
        name=TOOL_NAME,
        timeout=float(timeout) if timeout else None,
    )(record_entry_in_thread if os.environ.get("FLEET_SYNC_SLEEP_S") else record_entry)


def make_model(steps: int) -> ScriptedModel:
    delay = float(os.environ.get("FLEET_MODEL_DELAY_S", "0"))

    async def reply(messages: Sequence[Message]) -> dict[str, Any]:  # Any: a JSON action
        done = sum(
            1
            for m in messages
            if m.role == "user"
            and (f"{TOOL_NAME} returned" in m.content or "reconciled" in m.content)
        )
        if delay:
            await asyncio.sleep(delay)
        if done >= steps:
            return {"type": "finish", "thought": "Done.", "answer": f"{steps} entries recorded."}
        if hold := _hold_at("model", done + 1):
            await _hold(hold)
        return {
            "type": "tool",
            "thought": "Record the next entry.",
            "tool": TOOL_NAME,
            "args": {"entry": f"entry {done + 1}"},
        }

    def next_action(messages: Sequence[Message]) -> Awaitable[dict[str, Any]]:
        return reply(messages)

    return ScriptedModel(next_action)


def make_store() -> str | TranscriptStore:
    url = env("FLEET_STORE")
    if not url.startswith("postgres"):
        return url
    app = os.environ.get("FLEET_APP")
    if app:
        url = f"{url}{'&' if '?' in url else '?'}application_name={app}"
    return PostgresStore(url, schema=os.environ.get("FLEET_SCHEMA") or None)


def build_agent(store: str | TranscriptStore) -> Agent:
    return Agent(
        tools=[make_tool(env("FLEET_KIND"), Path(env("FLEET_LEDGER")))],
        model=make_model(int(env("FLEET_STEPS", "3"))),
        store=store,
        policy=Policy(plan_before_writes=False),
        lease_s=float(env("FLEET_LEASE_S", "2")),
        lost_call_wait_s=float(env("FLEET_LOST_CALL_WAIT_S", "300")),
    )


def _barrier() -> None:
    wait_at_barrier("FLEET_BARRIER", _WAIT_S)


@dataclasses.dataclass
class Tally:
    """What this worker did."""

    shifts: int = 0
    busy: int = 0
    first_shift_at: float | None = None


async def _advance_until_settled(agent: Agent, run_id: str, tally: Tally) -> RunResult:
    deadline = time.monotonic() + _WAIT_S
    pause = float(os.environ.get("FLEET_SHIFT_PAUSE_S", "0"))
    while True:
        try:
            result = await agent.advance(run_id, max_steps=1)
        except RunBusyError:
            tally.busy += 1
            if tally.busy == 1 and (mark := os.environ.get("FLEET_BUSY_MARK")):
                _touch(mark)
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)
            continue
        tally.shifts += 1
        if tally.first_shift_at is None:
            tally.first_shift_at = time.time()
        if result.status is not RunStatus.RUNNING:
            return result
        await asyncio.sleep(pause)  # like a re-enqueued run: another worker may take it


async def _command(agent: Agent, cmd: str, run_id: str, tally: Tally) -> RunResult:
    match cmd:
        case "start":
            await agent.submit("Record the entries.", run_id=run_id)
            return await agent.result(run_id)
        case "resume":
            tally.shifts += 1
            return await agent.resume(run_id)
        case "advance":
            return await _advance_until_settled(agent, run_id, tally)
        case "resolve-rerun":
            return await agent.resolve(run_id, by="alice", rerun=True, reason="not made")
        case _:
            raise SystemExit(f"unknown command {cmd!r}")


def _configure_logging() -> None:
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


async def main(cmd: str) -> int:
    """Run one command; print the result (or the error) as one JSON line."""
    _configure_logging()
    store = make_store()
    agent = build_agent(store)
    tally = Tally()
    try:
        _barrier()
        result = await _command(agent, cmd, env("FLEET_RUN_ID"), tally)
    except AgentcoreError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
        return 1
    finally:
        await agent.close()  # closes a store it opened from a URL
        if not isinstance(store, str):
            await store.close()
    out: dict[str, Any] = dataclasses.asdict(result)  # Any: JSON values
    out |= {"status": result.status.value, "pid": os.getpid(), **dataclasses.asdict(tally)}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(run_until_signalled(main(sys.argv[1])))
