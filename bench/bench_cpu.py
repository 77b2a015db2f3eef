#!/usr/bin/env python
"""Issue 26 ("CPU per step"): its targets measured in one run, interleaved, on the defaults
a user gets (default logging, leases, group commit, snapshots every 512 events).

Each round runs every case once, in a rotating order: a 1,000-tool-step run of the
scripted model (``bench_steps.py``'s task and tools), timed as wall time and as this
process's CPU time (``time.process_time``), per step. Floors are sampled in the same
rounds: a bare thread hand-off, ``bench_steps.py``'s floor (a) (validate the action, call
the tool) and floor (b) ((a), then append the step's bytes to a file and fsync it). So is
``--base`` (9c1a250: the code before the integrity, scale-out and security work): its own
``bench_steps.py`` cases beside this tree's, each in a fresh process
(``compare_revisions.py``'s way), each case under the name that revision gives it: a case the
base has under no name stops the run before anything is timed.

Also, once: reading the 1,000-step run back (``agent.transcript``, SQLite), beside the
OpenAI Agents SDK's session load of the same 1,000 tool steps (``SQLiteSession.get_items``,
2,002 items: a function call and its output a step) in a separate interpreter given by
``--peer-python`` (its own venv: ``pip install openai-agents``); the bytes a 1,000-step
run keeps in SQLite; the CPU of ``Agent()`` itself; and group commit's gain at 1,000 runs
in flight (``bench_scale.py --quick --ratio 1000``, without and with ``tune_gc()``). The
report ends with every target of the issue against this run's medians.

Usage::

    python bench/bench_cpu.py                       # prints the report (~10 minutes)
    python bench/bench_cpu.py --peer-python /tmp/peers/bin/python --write
    python bench/bench_cpu.py --rounds 3 --postgres postgresql://postgres@127.0.0.1/test
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import gc
import json
import math
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_steps as steps  # noqa: E402  # after the path entry
import compare_revisions as revisions  # noqa: E402

from agentcore import Agent, Budget, RunStatus  # noqa: E402
from agentcore.adapters import ScriptedModel  # noqa: E402
from agentcore.stores import MemoryStore, SQLiteStore  # noqa: E402

N = 1000
BASE_CASES = ("memory_async", "sqlite_normal", "sqlite_full")
"""bench_steps.py cases timed with the base revision's code and this tree's, each in a fresh
process of its own revision (``compare_revisions.py``'s way), in every round. 9c1a250 has no
sync-tool case: its ``memory`` is this tree's ``memory_async``."""
SCALE_RUNS = 1000
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


async def _in_process_of(tree: Path, entry: Path | None, case: str) -> tuple[float, float]:
    """A revision's own bench_steps.py, one case (``KIND:N``, the revision's own name) in a
    fresh process: its median wall time per step (CPU is not reported by it: ``nan``)."""
    samples = await asyncio.to_thread(revisions.time_case, tree, entry, case)
    return statistics.median(samples) / 1e6, float("nan")


async def rounds(
    args: argparse.Namespace, tmp: Path, trees: dict[str, tuple[Path, Path | None]]
) -> tuple[dict[str, list[tuple[float, float]]], list[str]]:
    """Each round's (wall, CPU) per step of every case, and the cases a revision times under
    another name.

    Raises:
        SystemExit: a revision has no case of ``BASE_CASES`` (before anything is timed).
    """
    renamed: list[str] = []
    own: dict[tuple[str, str], str] = {}
    for name, (tree, entry) in trees.items():
        known = await asyncio.to_thread(revisions.case_names, tree, entry)
        for case in BASE_CASES:
            own[(name, case)] = revisions.own_case(f"{case}:{N}", known, name)
            if not own[(name, case)].startswith(f"{case}:"):
                renamed.append(f"`{name}: {case}` is that revision's `{own[(name, case)]}`")
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

    texts = [json.dumps(item, ensure_ascii=False) for item in steps.script_for(N)]

    async def floor(fsync: bool) -> tuple[float, float]:
        """bench_steps.py's floor (a), or (b) with ``fsync``: its steps alone timed."""
        fd = None
        if fsync:
            path = Path(tempfile.mkdtemp(dir=tmp)) / "floor.jsonl"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            cpu = time.process_time()
            wall = await steps.floor_steps(texts, fd, fsync)
            return wall / (N + 1), (time.process_time() - cpu) / (N + 1)
        finally:
            if fd is not None:
                os.close(fd)

    cases["floor: bare thread hand-off"] = handoff
    cases["floor: validate + tool (in memory)"] = functools.partial(floor, False)
    cases["floor: validate + tool + write + fsync"] = functools.partial(floor, True)
    for case in BASE_CASES if trees else ():
        for name, (tree, entry) in trees.items():
            cases[f"{name}: {case}"] = functools.partial(
                _in_process_of, tree, entry, own[(name, case)]
            )
    names = list(cases)
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    await steps.new_agent(MemoryStore(), steps.script_for(20)).run(steps.TASK)  # warm
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            out[name].append(await cases[name]())
        log(f"round {r + 1}/{args.rounds} done")
    return out, renamed


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


def group_commit(dsn: str | None, tune_gc: bool) -> dict[str, list[float]]:
    """``bench_scale.py --quick --ratio 1000`` in its own process: steps/s at 1,000 runs in
    flight, group commit on and off, SQLite FULL and PostgreSQL (with ``dsn``)."""
    argv = [sys.executable, str(HERE / "bench_scale.py"), "--quick", "--ratio", str(SCALE_RUNS)]
    argv += ["--postgres", dsn] if dsn else []
    argv += ["--tune-gc"] if tune_gc else []
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=900).stdout
    data: dict[str, list[float]] = json.loads(out.strip().splitlines()[-1])
    return data


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


@dataclass
class Figures:
    """What one run measured."""

    timed: dict[str, list[tuple[float, float]]]
    """Per case, each round's (wall, CPU) seconds per step (CPU ``nan``: not measured)."""
    read: tuple[list[float], int]
    """Seconds of each transcript read, and the events read."""
    peer: tuple[list[float], int, str] | str
    """The Agents SDK's session loads (seconds, items, version), or why not measured."""
    sizes: dict[str, int]
    agents: list[float]
    scale: dict[str, dict[str, list[float]]]
    """Per garbage-collector setting, steps/s of each store and group-commit mode."""
    renamed: list[str]
    """The base cases a revision names otherwise, and its name for them."""


def report(args: argparse.Namespace, f: Figures, load: tuple[str, str], wall_s: float) -> str:
    timed, read, peer, sizes, agents, scale = (f.timed, f.read, f.peer, f.sizes, f.agents, f.scale)
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
        cpu = (
            "- (own process)"
            if any(math.isnan(c) for c in cpus)  # a revision's bench_steps.py: wall only
            else f"{us(med(cpus))} ({us(min(cpus))}-{us(max(cpus))})"
        )
        lines.append(f"| {name} | {us(med(walls))} ({us(min(walls))}-{us(max(walls))}) | {cpu} |")
    if args.base:
        lines += [
            "",
            f"Rows `base {args.base}: ...` and `head: ...` are `bench_steps.py --only CASE:1000 "
            "--reps 3` of that revision in a fresh process (`compare_revisions.py`'s way: the "
            "base checked out into a git worktree, this interpreter's dependencies), in the same "
            "rounds as the rest; each sample is the median of its 3."
            + (" " + "; ".join(f.renamed) + "." if f.renamed else ""),
        ]
    for label, speeds in scale.items():
        lines += [
            "",
            f"Group commit at {SCALE_RUNS:,} runs in flight ({label}; `bench_scale.py --quick "
            f"--ratio {SCALE_RUNS}`, 2 rounds, steps/s): "
            + "; ".join(
                f"{k} {med(v):,.0f} ({min(v):,.0f}-{max(v):,.0f})" for k, v in speeds.items()
            )
            + ".",
        ]
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
        "",
        *targets(args, f),
    ]
    return "\n".join(lines) + "\n"


def targets(args: argparse.Namespace, f: Figures) -> list[str]:
    """Issue 26's targets against this run's figures (medians), each met or not."""
    timed, read, peer, sizes, scale = f.timed, f.read, f.peer, f.sizes, f.scale

    def wall(name: str) -> float:
        return med([w for w, _ in timed[name]])

    rows: list[tuple[str, str, bool]] = []
    if args.base:
        for case, label, most in (
            ("memory_async", "memory, async tool", 0.8),
            ("sqlite_normal", "SQLite NORMAL", 1.0),
        ):
            ratio = wall(f"head: {case}") / wall(f"base {args.base}: {case}")
            rows.append((f"{label} <= {most}x {args.base}", f"{ratio:.2f}x", ratio <= most))
    floor = wall("memory, async tool") / wall("floor: validate + tool (in memory)")
    rows.append(("memory, async tool <= 20x the in-memory floor", f"{floor:.0f}x", floor <= 20))
    handoffs = (wall("memory, sync tool") - wall("memory, async tool")) / wall(
        "floor: bare thread hand-off"
    )
    rows.append(
        ("sync tool <= async + 1.2 bare hand-offs", f"+{handoffs:.2f} hand-offs", handoffs <= 1.2)
    )
    fsync = wall("SQLite FULL") / wall("floor: validate + tool + write + fsync")
    rows.append(("SQLite FULL <= 1.5x its fsync floor", f"{fsync:.2f}x", fsync <= 1.5))
    if "PostgreSQL" in timed:
        pg = med([c for _, c in timed["PostgreSQL"]])
        rows.append(("PostgreSQL CPU per step <= 0.3 ms", f"{pg * 1e3:.2f} ms", pg <= 3e-4))
    for label, speeds in scale.items():
        for store in ("SQLite FULL", "PostgreSQL"):
            if f"{store} on" in speeds:
                gain = med(speeds[f"{store} on"]) / med(speeds[f"{store} off"])
                rows.append(
                    (
                        f"group commit at {SCALE_RUNS:,} runs >= 5x, {store} ({label})",
                        f"{gain:.2f}x",
                        gain >= 5,
                    )
                )
    if not isinstance(peer, str):
        ratio = med(read[0]) / med(peer[0])
        rows.append(
            ("transcript read <= the Agents SDK's session load", f"{ratio:.1f}x", ratio <= 1)
        )
    size = sizes["file with snapshots (default)"] / 1e6
    rows.append(("bytes per 1,000-step run <= 1.4 MB", f"{size:.2f} MB", size <= 1.4))
    return [
        "Targets against this run's medians:",
        "",
        "| target | this run | met? |",
        "|---|---|---|",
        *(f"| {t} | {v} | {'yes' if ok else 'no'} |" for t, v, ok in rows),
    ]


async def main_async(args: argparse.Namespace, trees: dict[str, tuple[Path, Path | None]]) -> str:
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.perf_counter()
    steps.default_logging()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        timed, renamed = await rounds(args, tmp, trees)
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
    scale: dict[str, dict[str, list[float]]] = {}
    if args.scale:
        log("group commit at 1,000 runs")
        scale["default"] = group_commit(args.postgres, tune_gc=False)
        scale["`tune_gc()`"] = group_commit(args.postgres, tune_gc=True)
    if args.postgres:
        import psycopg

        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{PG_SCHEMA}" CASCADE'.encode())
    load1 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    figures = Figures(timed, read, peer, sizes, agents, scale, renamed)
    return report(args, figures, (load0, load1), time.perf_counter() - started)


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
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get("AGENTCORE_TEST_POSTGRES_DSN"))
    parser.add_argument("--peer-python", help="an interpreter with openai-agents installed")
    parser.add_argument("--write", action="store_true", help="put the report in RESULTS.md")
    parser.add_argument(
        "--base",
        default="9c1a250",
        help="the revision the memory and SQLite steps are compared with ('' for none)",
    )
    parser.add_argument(
        "--no-scale",
        dest="scale",
        action="store_false",
        help="skip group commit at 1,000 runs (bench_scale.py, ~2 minutes)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentcore-bench-cpu-") as tmp:
        trees: dict[str, tuple[Path, Path | None]] = {}
        if args.base:
            tree = Path(tmp) / "base"
            subprocess.run(
                ["git", "worktree", "add", "--detach", "-q", str(tree), args.base],
                cwd=HERE.parent,
                check=True,
            )
            trees[f"base {args.base}"] = (tree, revisions.link_tree(tree, Path(tmp) / "site"))
            trees["head"] = (HERE.parent, None)
        try:
            text = asyncio.run(main_async(args, trees))
        finally:
            if args.base:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(Path(tmp) / "base")],
                    cwd=HERE.parent,
                    check=False,
                )
    print(text)
    if args.write:
        write_section(text)


if __name__ == "__main__":
    main()
