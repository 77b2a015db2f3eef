#!/usr/bin/env python
"""Issue 26 ("CPU per step"): its targets measured in one run, interleaved, on the defaults
a user gets (default logging, leases, group commit, snapshots every 512 events).

Each round runs every case once, in a rotating order: a 1,000-tool-step run of the
scripted model (``bench_steps.py``'s task and tools), timed as wall time and as this
process's CPU time (``time.process_time``), per step. Floors are sampled in the same
rounds: a bare thread hand-off, and ``bench_steps.py``'s floor (b) (validate the action,
call the tool, append the step's bytes to a file and fsync it).

Also, once: reading the 1,000-step run back (``agent.transcript``, SQLite), beside the
OpenAI Agents SDK's session load of the same 1,000 tool steps (``SQLiteSession.get_items``,
2,002 items: a function call and its output a step) in a separate interpreter given by
``--peer-python`` (its own venv: ``pip install openai-agents``); the bytes a 1,000-step
run keeps in SQLite; and the CPU of ``Agent()`` itself.

Usage::

    python bench/bench_cpu.py                       # prints the report
    python bench/bench_cpu.py --peer-python /tmp/peers/bin/python --write
    python bench/bench_cpu.py --rounds 3 --postgres postgresql://postgres@127.0.0.1/test

The 9c1a250 comparison is ``compare_revisions.py`` (its code, in its own process).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_steps as steps  # noqa: E402  # after the path entry

from agentcore import Agent, Budget, RunStatus  # noqa: E402
from agentcore.adapters import ScriptedModel  # noqa: E402
from agentcore.stores import MemoryStore, SQLiteStore  # noqa: E402

N = 1000
PG_SCHEMA = f"agentcore_bench_cpu_{os.getpid()}"
SECTION = "## Issue 26 targets in one run (bench_cpu.py)"
PEER = r"""
import asyncio, gc, json, os, statistics, sys, tempfile, time
from agents import SQLiteSession

async def main():
    path = os.path.join(tempfile.mkdtemp(), "session.db")
    session = SQLiteSession("run", path)
    items = [{"role": "user", "content": "Look up the orders and say where they are."}]
    for i in range(1000):
        items.append({"type": "function_call", "call_id": f"call_{i}", "name": "get_order",
                      "arguments": json.dumps({"order_id": f"A{i:05d}"}), "id": f"fc_{i}",
                      "status": "completed"})
        items.append({"type": "function_call_output", "call_id": f"call_{i}",
                      "output": json.dumps({"order_id": f"A{i:05d}", "status": "shipped",
                                            "eta": "2 days"})})
    items.append({"role": "assistant", "content": "All shipped.", "type": "message"})
    await session.add_items(items)
    times = []
    for _ in range(int(sys.argv[1])):
        gc.collect()
        fresh = SQLiteSession("run", path)
        started = time.perf_counter()
        got = await fresh.get_items()
        times.append(time.perf_counter() - started)
        assert len(got) == len(items)
    print(json.dumps({"items": len(items), "ms": [t * 1e3 for t in times]}))

asyncio.run(main())
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def one_run(
    make_store: Callable[[], Any], tool: Any
) -> tuple[float, float]:  # Any: a store, a Tool
    """Wall and CPU seconds per step of one 1,000-step run on a fresh store."""
    store = make_store()
    try:
        agent = steps.new_agent(store, steps.script_for(N), the_tool=tool)
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        result = await agent.run(steps.TASK, budget=Budget(max_steps=N + 1))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if result.status is not RunStatus.COMPLETED:
            raise RuntimeError(f"the benchmark run ended {result.status}: {result.reason}")
    finally:
        close = store.close()
        if isinstance(close, Awaitable):
            await close
    return wall / (N + 1), cpu / (N + 1)


async def rounds(args: argparse.Namespace, tmp: Path) -> dict[str, list[tuple[float, float]]]:
    cases: dict[str, Callable[[], Awaitable[tuple[float, float]]]] = {
        "memory, async tool": lambda: one_run(MemoryStore, steps.ASYNC_TOOL),
        "memory, sync tool": lambda: one_run(MemoryStore, steps.SYNC_TOOL),
        "SQLite NORMAL": lambda: one_run(
            lambda: SQLiteStore(Path(tempfile.mkdtemp(dir=tmp)) / "r.db", synchronous="NORMAL"),
            steps.ASYNC_TOOL,
        ),
        "SQLite FULL": lambda: one_run(
            lambda: SQLiteStore(Path(tempfile.mkdtemp(dir=tmp)) / "r.db"), steps.ASYNC_TOOL
        ),
    }
    if args.postgres:
        from agentcore.stores import PostgresStore

        cases["PostgreSQL"] = lambda: one_run(
            lambda: PostgresStore(args.postgres, schema=PG_SCHEMA), steps.ASYNC_TOOL
        )

    async def handoff() -> tuple[float, float]:
        cpu = time.process_time()
        wall = await steps.bare_handoff(2000)
        return wall, (time.process_time() - cpu) / 2000

    async def fsync_floor() -> tuple[float, float]:
        cpu = time.process_time()
        wall = await steps.sample_floor("floor_fsync", N, tmp)
        return wall, (time.process_time() - cpu) / (N + 1)

    cases["floor: bare thread hand-off"] = handoff
    cases["floor: validate + tool + write + fsync"] = fsync_floor
    names = list(cases)
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    await steps.new_agent(MemoryStore(), steps.script_for(20)).run(steps.TASK)  # warm
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            out[name].append(await cases[name]())
        log(f"round {r + 1}/{args.rounds} done")
    return out


async def transcript_read(tmp: Path, reps: int) -> tuple[list[float], int]:
    d = Path(tempfile.mkdtemp(dir=tmp))
    store = SQLiteStore(d / "runs.db", synchronous="NORMAL")
    done = await steps.new_agent(store, steps.script_for(N)).run(
        steps.TASK, budget=Budget(max_steps=N + 1)
    )
    await store.close()
    times: list[float] = []
    count = 0
    for _ in range(reps):
        store = SQLiteStore(d / "runs.db")
        agent = steps.new_agent(store, [])
        await store.load(done.run_id, after=4 * N)  # opens the file: not timed
        gc.collect()
        started = time.perf_counter()
        events = await agent.transcript(done.run_id)
        times.append(time.perf_counter() - started)
        count = len(events)
        await store.close()
    return times, count


def peer_read(python: str, reps: int) -> tuple[list[float], int, str] | str:
    import json

    try:
        out = subprocess.run(
            [python, "-c", PEER, str(reps)], capture_output=True, text=True, check=True, timeout=300
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"not measured: {exc}"
    data = json.loads(out.stdout.strip().splitlines()[-1])
    version = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('openai-agents'))"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return [t / 1e3 for t in data["ms"]], int(data["items"]), version


async def stored_bytes(tmp: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for label, every in (("with snapshots (default)", None), ("without snapshots", 0)):
        path = Path(tempfile.mkdtemp(dir=tmp)) / "runs.db"
        store = SQLiteStore(path, synchronous="NORMAL")
        kwargs: dict[str, Any] = {} if every is None else {"snapshot_every": every}  # Any: kwargs
        agent = Agent(
            tools=[steps.ASYNC_TOOL],
            model=ScriptedModel(steps.script_for(N)),
            store=store,
            **kwargs,
        )
        await agent.run(steps.TASK, budget=Budget(max_steps=N + 1))
        await store.close()
        conn = sqlite3.connect(path)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            (body,) = conn.execute("SELECT sum(length(CAST(body AS BLOB))) FROM events").fetchone()
            pages = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
        finally:
            conn.close()
        out[f"file {label}"] = path.stat().st_size
        out[f"events table {label}"] = int(pages.get("events", 0))
        out[f"snapshots table {label}"] = int(pages.get("snapshots", 0))
        out["event bodies"] = int(body)
    return out


def agent_construction(reps: int = 200) -> list[float]:
    store = MemoryStore()
    steps.new_agent(store, [])
    times: list[float] = []
    for _ in range(5):
        cpu = time.process_time()
        for _ in range(reps):
            Agent(tools=[steps.ASYNC_TOOL], model=ScriptedModel([]), store=store)
        times.append((time.process_time() - cpu) / reps)
    return times


def med(values: list[float]) -> float:
    return statistics.median(values)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f}"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def report(
    args: argparse.Namespace,
    timed: dict[str, list[tuple[float, float]]],
    read: tuple[list[float], int],
    peer: tuple[list[float], int, str] | str,
    sizes: dict[str, int],
    agents: list[float],
    load: tuple[str, str],
    wall_s: float,
) -> str:
    lines = [
        SECTION,
        "",
        f"`python bench/bench_cpu.py --rounds {args.rounds}"
        + (" --postgres ..." if args.postgres else "")
        + (" --peer-python ..." if args.peer_python else "")
        + "`: "
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
        f"{os.cpu_count()} cores (shared), CPython {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}; load "
        f"average {load[0]} at the start, {load[1]} at the end; wall {wall_s:.0f} s. Every "
        f"round runs each case once (a 1,000-tool-step run, fresh store, default logging), in a "
        "rotating order; per step: median (min-max) over the rounds.",
        "",
        "| case | wall us/step | CPU us/step |",
        "|---|---|---|",
    ]
    for name, samples in timed.items():
        walls, cpus = [w for w, _ in samples], [c for _, c in samples]
        lines.append(
            f"| {name} | {us(med(walls))} ({us(min(walls))}-{us(max(walls))}) | "
            f"{us(med(cpus))} ({us(min(cpus))}-{us(max(cpus))}) |"
        )
    times, count = read
    lines += [
        "",
        f"Reading the 1,000-step run back (`agent.transcript`, SQLite, {count:,} events), "
        f"{len(times)} reads: median {ms(med(times))} ms ({ms(min(times))}-{ms(max(times))}).",
    ]
    if isinstance(peer, str):
        lines.append(f"OpenAI Agents SDK session load: {peer}.")
    else:
        ptimes, items, version = peer
        lines.append(
            f"OpenAI Agents SDK {version} `SQLiteSession.get_items()` of the same 1,000 tool steps "
            f"({items:,} items), same machine, same minutes: median {ms(med(ptimes))} ms "
            f"({ms(min(ptimes))}-{ms(max(ptimes))}); ratio {med(times) / med(ptimes):.1f}x."
        )
    lines += [
        "",
        "Bytes a 1,000-step run keeps in SQLite (after a checkpoint): "
        + "; ".join(f"{k} {v / 1e6:.2f} MB" for k, v in sizes.items())
        + ".",
        "",
        f"`Agent()` with one tool: {us(med(agents))} us of CPU (median of 5 x 200).",
    ]
    return "\n".join(lines) + "\n"


async def main_async(args: argparse.Namespace) -> str:
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.perf_counter()
    steps.default_logging()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        timed = await rounds(args, tmp)
        log("transcript reads")
        read = await transcript_read(tmp, 9)
        peer: tuple[list[float], int, str] | str = (
            peer_read(args.peer_python, 9)
            if args.peer_python
            else "not measured (no --peer-python)"
        )
        log("bytes")
        sizes = await stored_bytes(tmp)
    agents = agent_construction()
    if args.postgres:
        import psycopg

        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{PG_SCHEMA}" CASCADE'.encode())
    load1 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return report(
        args, timed, read, peer, sizes, agents, (load0, load1), time.perf_counter() - started
    )


def write_section(text: str) -> None:
    path = HERE / "RESULTS.md"
    old = path.read_text()
    start = old.find(SECTION)
    if start < 0:
        path.write_text(old.rstrip() + "\n\n" + text.rstrip() + "\n")
        return
    end = old.find("\n## ", start + len(SECTION))
    path.write_text(old[:start] + text.rstrip() + "\n" + (old[end:] if end >= 0 else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get("AGENTCORE_TEST_POSTGRES_DSN"))
    parser.add_argument("--peer-python", help="an interpreter with openai-agents installed")
    parser.add_argument("--write", action="store_true", help="put the report in RESULTS.md")
    args = parser.parse_args()
    text = asyncio.run(main_async(args))
    print(text)
    if args.write:
        write_section(text)


if __name__ == "__main__":
    main()
