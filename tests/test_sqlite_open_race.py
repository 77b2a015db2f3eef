"""Several processes opening one new SQLite store at once: each open waits for the file's lock
as a write does, and every process's runs complete.

Real processes (multiprocessing with spawn), released together by a barrier onto each of a
series of fresh files. Two races live there: switching a new file to WAL answers SQLITE_BUSY
at once, without SQLite's busy handler, when another process is opening the file at the same
moment; and an opener that read the version (0) just before another process created the
store, then its tables, took the file for another application's.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import sys
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from agentcore import RunStatus
from agentcore.errors import StoreError
from agentcore.stores import SQLiteStore
from agentcore.testing import finish, scripted_agent

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

_PROCESSES = 4
_FILES = 60
_RUNS = 3
_BARRIER_TIMEOUT_S = 20.0
_DEADLINE_S = 50.0


async def _runs(url: str) -> list[str]:
    agent = scripted_agent([], *[finish("Opened.")] * _RUNS, store=url)
    try:
        results = await asyncio.gather(*(agent.run("Open the store.") for _ in range(_RUNS)))
    finally:
        await agent.close()
    return [r.status.value for r in results]


def _open_each(paths: list[str], barrier: Barrier, out: Queue[list[str]]) -> None:
    """In a child process: for each file, wait for every process, then open the store and
    start runs on it; puts one line per failure or per run that did not complete."""
    problems: list[str] = []
    for path in paths:
        barrier.wait(_BARRIER_TIMEOUT_S)
        try:
            statuses = asyncio.run(_runs(f"sqlite:///{path}"))
        except StoreError as exc:
            problems.append(f"{path}: {exc}")
            continue
        problems += [f"{path}: a run ended {s}" for s in statuses if s != RunStatus.COMPLETED.value]
    out.put(problems)


def test_processes_opening_one_new_store_at_once_all_open_it_and_complete_their_runs(
    tmp_path: Path,
) -> None:
    paths = [str(tmp_path / f"runs-{i}.db") for i in range(_FILES)]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(_PROCESSES)
    out: Queue[list[str]] = ctx.Queue()
    workers = [
        ctx.Process(target=_open_each, args=(paths, barrier, out)) for _ in range(_PROCESSES)
    ]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    try:
        problems = [line for _ in workers for line in out.get(timeout=_DEADLINE_S)]
    finally:
        for worker in workers:
            worker.join(timeout=5)
            if worker.is_alive():
                worker.kill()
    assert problems == [], "\n".join(problems)
    assert [w.exitcode for w in workers] == [0] * _PROCESSES
    assert time.monotonic() - started < _DEADLINE_S


def test_a_lock_held_past_the_busy_timeout_fails_the_open_naming_the_file_and_the_timeout(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    holder = sqlite3.connect(path, isolation_level=None)  # another process's long transaction
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"runs\.db.*busy timeout \(0\.2 s\).*busy_timeout_s"):
            SQLiteStore(path, busy_timeout_s=0.2)
        assert time.monotonic() - started < 5
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    asyncio.run(SQLiteStore(path).close())  # the lock released, the same file opens
