"""Harness for the multi-worker fault tests: worker processes (``fleet_worker.py``) over one
store, SQLite or PostgreSQL, and what the store and the ledger say afterwards."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agentcore.events import Event, ToolStarted
from agentcore.stores import PostgresStore, SQLiteStore

from ._support import TIMEOUT_S, Outcome, wait

FLEET_WORKER = Path(__file__).with_name("fleet_worker.py")
RUN_ID = "fleet-run"


@dataclass
class Fleet:
    """One run shared by worker processes.

    Attributes:
        tmp: the test's directory (ledger, SQLite file, hold and barrier directories).
        backend: ``"sqlite"`` or ``"postgres"``.
        dsn, schema: the PostgreSQL database and the test's schema.
        kind: the tool's kind (``idempotent``, ``non_idempotent``, ``reconcile``).
        steps: how many tool steps the run makes before it finishes.
        lease_s: the workers' lease.
    """

    tmp: Path
    backend: str
    kind: str = "idempotent"
    dsn: str = ""
    schema: str = ""
    steps: int = 3
    lease_s: float = 2.0
    run_id: str = RUN_ID
    procs: list[subprocess.Popen[str]] = field(default_factory=list[subprocess.Popen[str]])

    @property
    def ledger(self) -> Path:
        return self.tmp / "ledger.txt"

    @property
    def store_url(self) -> str:
        return self.dsn if self.backend == "postgres" else f"sqlite:///{self.tmp / 'runs.db'}"

    def key(self, step: int) -> str:
        """The idempotency key of the n-th tool step (step 1 is the run's first step)."""
        return f"{self.run_id}:{step}"

    def environ(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCORE_", "FLEET_"))}
        env |= {
            "FLEET_STORE": self.store_url,
            "FLEET_SCHEMA": self.schema,
            "FLEET_RUN_ID": self.run_id,
            "FLEET_LEDGER": str(self.ledger),
            "FLEET_KIND": self.kind,
            "FLEET_STEPS": str(self.steps),
            "FLEET_LEASE_S": str(self.lease_s),
        }
        return env | (extra or {})

    def popen(self, cmd: str, crash: str | None = None, **extra: str) -> subprocess.Popen[str]:
        """Start a worker (``FLEET_*`` settings as keyword arguments: ``HOLD="..."``; a
        crash point for ``AGENTCORE_CRASH_AT``)."""
        env = self.environ({f"FLEET_{k}": v for k, v in extra.items()})
        if crash is not None:
            env["AGENTCORE_CRASH_AT"] = crash
        proc = subprocess.Popen(
            [sys.executable, str(FLEET_WORKER), cmd],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.tmp,
            env=env,
        )
        self.procs.append(proc)
        return proc

    def run(self, cmd: str, crash: str | None = None, **extra: str) -> Outcome:
        """Run a worker to its end."""
        return wait(self.popen(cmd, crash, **extra))

    def popen_waiting(self, cmd: str, **extra: str) -> subprocess.Popen[str]:
        """Start an ``advance`` worker and return once it has found the run busy."""
        mark = self.tmp / f"busy-{len(self.procs)}"
        proc = self.popen(cmd, BUSY_MARK=str(mark), **extra)
        deadline = time.monotonic() + TIMEOUT_S
        while not mark.exists():
            assert proc.poll() is None, wait(proc)
            assert time.monotonic() < deadline, "the worker never found the run busy"
            time.sleep(0.01)
        return proc

    def start(self) -> None:
        """Record the run; no worker advances it yet."""
        out = self.run("start")
        assert out.returncode == 0 and out.status == "running", out

    def hold(self, name: str, point: str, step: int) -> Hold:
        """A hold point for one worker: ``FLEET_HOLD`` and the files to wait on."""
        folder = self.tmp / name
        folder.mkdir()
        return Hold(folder, f"{folder}:{point}:{step}")

    def stop_all(self) -> None:
        """Kill whatever worker is left (a failed test must not leave them behind)."""
        for proc in self.procs:
            if proc.poll() is None:
                with_cont(proc)
                proc.kill()
                proc.communicate(timeout=TIMEOUT_S)

    def events(self) -> list[Event]:
        """The run's events through a fresh store object (closed afterwards)."""

        async def go() -> list[Event]:
            if self.backend == "postgres":
                store: PostgresStore | SQLiteStore = PostgresStore(self.dsn, schema=self.schema)
            else:
                store = SQLiteStore(self.tmp / "runs.db")
            try:
                return await store.load(self.run_id)
            finally:
                await store.close()

        return asyncio.run(go())

    def effects(self) -> Effects:
        """The ledger: every side effect of the tool, with the worker that made it."""
        lines = self.ledger.read_text().splitlines() if self.ledger.exists() else []
        return Effects([(key, int(pid)) for key, pid in (line.split() for line in lines)])


@dataclass
class Effects:
    """The ledger: ``(idempotency key, pid)`` for every side effect, in order."""

    entries: list[tuple[str, int]]

    def count(self) -> Counter[str]:
        """How many times the side effect happened, per idempotency key."""
        return Counter(key for key, _ in self.entries)

    def by(self, pid: int) -> list[str]:
        """The keys of the side effects worker ``pid`` made."""
        return [key for key, p in self.entries if p == pid]


@dataclass
class Hold:
    """Where a held worker waits: it creates ``entered``, then waits for ``release``."""

    folder: Path
    spec: str

    def wait_entered(self, proc: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not (self.folder / "entered").exists():
            assert proc.poll() is None, wait(proc)
            assert time.monotonic() < deadline, "the worker never reached the hold point"
            time.sleep(0.01)

    def release(self) -> None:
        (self.folder / "release").touch()


def with_cont(proc: subprocess.Popen[str]) -> None:
    """SIGCONT (harmless when the process is not stopped)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)


def tool_starts(events: list[Event]) -> Counter[int]:
    """``tool_started`` events per step (more than one: a call was started again)."""
    return Counter(ev.step for ev in events if isinstance(ev, ToolStarted))


def wait_until(condition: str, check: Callable[[], object], timeout_s: float = TIMEOUT_S) -> None:
    """Poll ``check()`` until it is true (``condition`` names it in the failure)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {condition}"
        time.sleep(0.01)


__all__ = [
    "FLEET_WORKER",
    "RUN_ID",
    "Effects",
    "Fleet",
    "Hold",
    "Outcome",
    "tool_starts",
    "wait",
    "wait_until",
    "with_cont",
]
