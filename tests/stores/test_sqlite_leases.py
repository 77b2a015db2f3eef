"""SQLite leases across processes: the per-run flock voids a dead holder's lease at once,
and the epoch fences a holder that is alive but stalled (SIGSTOP) past its lease."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentcore.errors import RunBusyError
from agentcore.events import RunFinished
from agentcore.stores import SQLiteStore
from agentcore.stores.testing import context, started

# A holder in its own process: acquires the run, says so, waits for a line on stdin, then
# appends seq 1 with its lease and reports how that went.
HOLDER = """
import asyncio, sys
from agentcore.errors import LeaseLostError
from agentcore.events import ContextAdded
from agentcore.stores import SQLiteStore

path, run, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])

async def main():
    store = SQLiteStore(path)
    lease = await store.acquire(run, owner="holder", ttl_s=ttl)
    print("held", lease.epoch, flush=True)
    sys.stdin.readline()
    late = ContextAdded(run_id=run, seq=1, at=2.0, step=1, source="holder", content="stale")
    try:
        await store.append(run, 1, [late], lease=lease)
    except LeaseLostError as exc:
        print("LeaseLostError:", exc, flush=True)
    else:
        print("appended", flush=True)

asyncio.run(main())
"""


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
async def store(path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(path)
    try:
        yield s
    finally:
        await s.close()


@contextlib.contextmanager
def holder(path: Path, run: str, ttl_s: float) -> Iterator[subprocess.Popen[str]]:
    """A holder process that has acquired ``run``; killed on the way out."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), run, str(ttl_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=path.parent,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("held "):
            proc.kill()
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"the holder did not acquire the run: {line!r} {err}")
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
        proc.communicate(timeout=30)


@pytest.mark.subprocess
async def test_a_killed_holders_run_is_taken_at_once(path: Path, store: SQLiteStore) -> None:
    await store.append("r", 0, [started("r")])
    with holder(path, "r", ttl_s=60) as proc:
        with pytest.raises(RunBusyError, match="'holder'"):
            await store.acquire("r", owner="parent", ttl_s=30)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    before = time.time()
    lease = await store.acquire("r", owner="parent", ttl_s=30)  # its 60 s lease is void
    assert time.time() - before < 5
    assert lease.epoch == 2
    await store.append("r", 1, [context("r", 1)], lease=lease)


@pytest.mark.subprocess
async def test_a_stalled_holder_is_stolen_from_after_its_lease_and_then_fenced(
    path: Path, store: SQLiteStore
) -> None:
    await store.append("r", 0, [started("r")])
    with holder(path, "r", ttl_s=1.0) as proc:
        os.kill(proc.pid, signal.SIGSTOP)  # alive, holding its flock, doing nothing
        with pytest.raises(RunBusyError, match="'holder'"):
            await store.acquire("r", owner="parent", ttl_s=30)
        await asyncio.sleep(1.3)
        lease = await store.acquire("r", owner="parent", ttl_s=30)  # stolen, without the flock
        assert lease.epoch == 2
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate("go\n", timeout=30)
        assert out.startswith("LeaseLostError:"), (out, err)
        assert "'parent'" in out and "epoch 2" in out
    assert await store.load("r") == [started("r")]  # the stalled holder wrote nothing
    await store.append("r", 1, [context("r", 1)], lease=lease)
    assert await store.load("r") == [started("r"), context("r", 1)]


async def test_a_stolen_lease_takes_the_flock_on_renew(path: Path) -> None:
    """A lease taken without the flock lives until it expires even if the stalled holder
    then dies; once its holder renews and gets the flock, its own death frees the run at
    once. (Closing a store lets go of its flocks as dying does.)"""
    first, second, third = SQLiteStore(path), SQLiteStore(path), SQLiteStore(path)
    try:
        await first.append("r", 0, [started("r")])
        await first.acquire("r", owner="first", ttl_s=0.2)
        await asyncio.sleep(0.35)
        stolen = await second.acquire("r", owner="second", ttl_s=30)  # first keeps its flock
        await first.close()  # the stalled holder dies: its flock goes
        with pytest.raises(RunBusyError, match="'second'"):
            await third.acquire("r", owner="third", ttl_s=30)  # second may be alive
        await second.renew(stolen)  # takes the flock that came free
        await second.close()  # and dies
        taken = await third.acquire("r", owner="third", ttl_s=30)
        assert taken.epoch == stolen.epoch + 1
    finally:
        for s in (first, second, third):
            await s.close()


async def test_releasing_a_finished_run_removes_its_lock_file(
    path: Path, store: SQLiteStore
) -> None:
    await store.append("r", 0, [started("r")])
    lease = await store.acquire("r", owner="a", ttl_s=30)
    locks = os.listdir(f"{path}.locks")
    assert len(locks) == 1
    done = RunFinished(run_id="r", seq=1, at=3.0, status="completed", answer="42")
    await store.append("r", 1, [done], lease=lease)
    await store.release(lease)
    assert os.listdir(f"{path}.locks") == []
