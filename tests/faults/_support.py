"""Helpers shared by the fault-injection tests: worker processes and store inspection."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcore.events import Event, ModelCalled, RunResumed, dump_event
from agentcore.stores import ChainReport, SQLiteStore

WORKER = Path(__file__).with_name("worker.py")
RUN_ID = "fault-run"
TIMEOUT_S = 60
KILLED = -signal.SIGKILL


@dataclass
class Case:
    """One run under test: its tmp dir, database, ledger and tool kind."""

    tmp: Path
    kind: str
    run_id: str = RUN_ID
    env: dict[str, str] = field(default_factory=dict[str, str])

    @property
    def db(self) -> Path:
        return self.tmp / "runs.db"

    @property
    def ledger(self) -> Path:
        return self.tmp / "ledger.txt"

    @property
    def model_log(self) -> Path:
        return self.tmp / "model-asks.txt"

    def argv(self, cmd: str) -> list[str]:
        return [
            sys.executable,
            str(WORKER),
            cmd,
            str(self.db),
            str(self.ledger),
            self.kind,
            self.run_id,
        ]

    def environ(self, crash: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCORE_", "FAULT_"))}
        env["FAULT_MODEL_LOG"] = str(self.model_log)
        env.update(self.env)
        env.update(extra or {})
        if crash is not None:
            env["AGENTCORE_CRASH_AT"] = crash
        return env

    def run(
        self, cmd: str, crash: str | None = None, extra: dict[str, str] | None = None
    ) -> Outcome:
        """Run the worker to its end (or its death)."""
        proc = subprocess.run(
            self.argv(cmd),
            capture_output=True,
            text=True,
            cwd=self.tmp,
            env=self.environ(crash, extra),
            timeout=TIMEOUT_S,
            check=False,
        )
        return Outcome.of(proc.returncode, proc.stdout, proc.stderr)

    def popen(
        self, cmd: str, crash: str | None = None, extra: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """Start the worker without waiting for it."""
        return subprocess.Popen(
            self.argv(cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.tmp,
            env=self.environ(crash, extra),
        )

    def ledger_lines(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []

    def model_asks(self) -> int:
        return len(self.model_log.read_text().splitlines()) if self.model_log.exists() else 0

    def events(self) -> list[Event]:
        return load_events(self.db, self.run_id)


@dataclass
class Outcome:
    """How a worker process ended and what it printed."""

    returncode: int
    result: dict[str, Any] | None  # Any: the printed JSON
    stdout: str
    stderr: str

    @classmethod
    def of(cls, returncode: int, stdout: str, stderr: str) -> Outcome:
        lines = stdout.strip().splitlines()
        result = json.loads(lines[-1]) if lines else None
        return cls(returncode, result, stdout, stderr)

    @property
    def status(self) -> str:
        assert self.result is not None, self.stderr
        return str(self.result["status"])

    def __str__(self) -> str:
        return f"exit {self.returncode}\nstdout: {self.stdout}\nstderr: {self.stderr[-3000:]}"


def wait(proc: subprocess.Popen[str]) -> Outcome:
    """Wait for a worker started with :meth:`Case.popen`."""
    stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    return Outcome.of(proc.returncode, stdout, stderr)


def load_events(db: Path, run_id: str) -> list[Event]:
    """The run's events through a fresh store object (closed afterwards)."""

    async def go() -> list[Event]:
        store = SQLiteStore(db)
        try:
            return await store.load(run_id)
        finally:
            await store.close()

    return asyncio.run(go())


def dumped(events: list[Event]) -> list[dict[str, Any]]:  # Any: JSON values
    """Events as JSON values, for comparing transcripts taken at different times."""
    return [dump_event(ev) for ev in events]


def of_type(events: list[Event], kind: type[Event]) -> list[Event]:
    return [ev for ev in events if isinstance(ev, kind)]


def model_calls(events: list[Event]) -> list[ModelCalled]:
    return [ev for ev in events if isinstance(ev, ModelCalled)]


def resumes(events: list[Event]) -> list[RunResumed]:
    return [ev for ev in events if isinstance(ev, RunResumed)]


def raw_store(db: Path) -> tuple[list[tuple[str, int]], dict[str, tuple[str, int]]]:
    """``(run_id, seq)`` of every stored event and ``run_id -> (status, next_seq)``."""
    conn = sqlite3.connect(db)
    try:
        events = conn.execute("SELECT run_id, seq FROM events ORDER BY run_id, seq").fetchall()
        runs = {r: (s, n) for r, s, n in conn.execute("SELECT run_id, status, next_seq FROM runs")}
    finally:
        conn.close()
    return events, runs


def assert_store_consistent(db: Path, run_id: str) -> None:
    """No partial batch: seqs 0..n-1 without a gap, and the run row's next_seq is n; the
    hash chain and its head verify (a kill mid-append leaves no half-written chain)."""
    events, runs = raw_store(db)
    seqs = [seq for r, seq in events if r == run_id]
    assert seqs == list(range(len(seqs))), seqs
    assert runs[run_id][1] == len(seqs), (runs[run_id], len(seqs))

    async def verify() -> ChainReport:
        store = SQLiteStore(db, read_only=True)
        try:
            return await store.verify_chain(run_id)
        finally:
            await store.close()

    report = asyncio.run(verify())
    assert report.intact and report.unchained == 0, report.describe()
    assert report.last == len(seqs) - 1, report
