#!/usr/bin/env python
"""Durable steps per second as runs in flight grow, with group commit on and off.

Scenario: one asyncio process, one ``Agent`` on one store, C runs in flight at all times
(a worker starts a new run when its run completes). The model is a ``ScriptedModel``
callable that awaits ``asyncio.sleep`` for a simulated latency and then proposes a call of
an async no-op read tool, 20 times, then ``finish``. Every tool call is a durable step: it
runs only after its ``tool_started`` append has returned (write-ahead), so steps per second
are durable steps per second. Stores: SQLiteStore ``synchronous=FULL`` and PostgresStore,
each with ``group_commit=True`` and ``False``, measured in the same run, interleaved.

Per configuration: a warm-up (runs start: leases, first appends), then a measured window
in which the tool calls are counted; then the runs are told to finish and drain (not
timed). Per-step overhead: for each step of a run, the time between two consecutive model
calls minus the simulated latency of the first, i.e. everything a step costs besides the
model: validation, dispatch, the durable append (including waiting for its batch), the
tool, the cancel check, rendering, and the loop's queueing under load.

Memory per run in flight: C = 100, 1,000, 10,000 runs with a simulated latency of 0.5-2 s
(SQLite FULL, group commit on); once every run has made its first step, the Python heap
(tracemalloc, current) and the RSS growth since before the runs started, divided by C.

Also the design decision behind SQLite group commit: the same batches committed by a
dedicated writer thread on its own connection (the loop keeps running during the fsync)
instead of inline on the loop, at C = 1,000.

Usage::

    python bench/bench_scale.py            # full run, a few minutes; prints the report
    python bench/bench_scale.py --quick    # shorter windows, no 10,000-run memory point
    python bench/bench_scale.py --write    # also puts the report in bench/RESULTS.md
    python bench/bench_scale.py --postgres postgresql://postgres@127.0.0.1:5432/test
    python bench/bench_scale.py --quick --ratio 1000   # only group commit's gain, as JSON

PostgreSQL: ``--postgres DSN``, else ``$AGENTCORE_TEST_POSTGRES_DSN``; without one its rows
are skipped. Each PostgreSQL configuration uses a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import gc
import itertools
import json
import logging
import os
import platform
import random
import secrets
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import structlog

from agentcore import Agent, Budget, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.stores import PostgresStore, SQLiteStore, TranscriptStore
from agentcore.stores._chain import WrittenHeads
from agentcore.stores.sqlite._commit import Pending, SQLiteCommits
from agentcore.stores.sqlite._store import _append_if_at  # the thread variant commits the same way

HERE = Path(__file__).resolve().parent
SECTION = "## Scale: durable steps per second, group commit on and off"
STEPS_PER_RUN = 20
TARGET_RATIO = 10.0  # issue 10: 1,000 runs, group commit vs one fsync per append
THROUGHPUT_LATENCY_S = (0.005, 0.015)
MEMORY_LATENCY_S = (0.5, 2.0)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- the tool and the model ---------------------------------------------------------------


@dataclass
class Meter:
    """What the tool and the model observe: steps in the window, per-step overheads."""

    latency: tuple[float, float]
    stopping: bool = False
    counting: bool = False
    steps: int = 0
    stamps: list[float] = field(default_factory=list[float])
    overheads: list[float] = field(default_factory=list[float])
    first_steps: int = 0
    all_in_flight: asyncio.Event = field(default_factory=asyncio.Event)
    expected_runs: int = 0
    # per run (its task text): (calls so far, time of the last call, its latency)
    runs: dict[str, tuple[int, float, float]] = field(default_factory=dict[str, Any])

    def reset(self, latency: tuple[float, float], expected_runs: int = 0) -> None:
        """Start afresh for the next configuration."""
        self.__dict__.update(Meter(latency, expected_runs=expected_runs).__dict__)


METER = Meter(THROUGHPUT_LATENCY_S)


@tool(effect="read", name="noop")
async def noop(key: str) -> str:
    """Do nothing (the step's side effect).

    Args:
        key: anything.
    """
    if METER.counting:
        METER.steps += 1
        METER.stamps.append(time.perf_counter())
    return "ok"


def reply(messages: Sequence[Message]) -> Any:  # Any: an awaitable of a scripted reply
    """The scripted model: sleep for the simulated latency, then call ``noop`` or finish."""
    key = messages[0].content
    now = time.perf_counter()
    calls, last, latency = METER.runs.get(key, (0, 0.0, 0.0))
    if calls and METER.counting:
        METER.overheads.append(now - last - latency)
    if calls == 1:
        METER.first_steps += 1
        if METER.first_steps == METER.expected_runs:
            METER.all_in_flight.set()
    delay = random.uniform(*METER.latency)
    METER.runs[key] = (calls + 1, now, delay)

    async def answer() -> dict[str, Any]:
        await asyncio.sleep(delay)
        if METER.stopping or calls >= STEPS_PER_RUN:
            METER.runs.pop(key, None)
            return {"type": "finish", "thought": "Done.", "answer": "ok"}
        return {"type": "tool", "thought": "Next.", "tool": "noop", "args": {"key": "k"}}

    return answer()


# -- stores -------------------------------------------------------------------------------


@dataclass
class StoreKind:
    name: str
    make: Callable[[bool], TranscriptStore]
    cleanup: Callable[[], None]


def sqlite_kind(tmp: Path, synchronous: Literal["FULL", "NORMAL"] = "FULL") -> StoreKind:
    folder = Path(tempfile.mkdtemp(dir=tmp))
    return StoreKind(
        f"SQLite {synchronous}",
        lambda g: SQLiteStore(folder / "runs.db", synchronous=synchronous, group_commit=g),
        lambda: None,
    )


def postgres_kind(dsn: str) -> StoreKind:
    import psycopg

    schema = f"agentcore_bench_{secrets.token_hex(4)}"

    def drop() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())

    return StoreKind(
        "PostgreSQL",
        lambda g: PostgresStore(dsn, schema=schema, group_commit=g),
        drop,
    )


class WriterThreadCommits(SQLiteCommits):
    """The rejected design: batches committed by a dedicated thread on its own connection
    while the loop keeps running (results handed back with ``call_soon_threadsafe``)."""

    def __init__(self, path: str) -> None:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5)
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("PRAGMA synchronous = FULL")
        # The store's own statements: the chain unkeyed, cancel requests not kept.
        write = functools.partial(
            _append_if_at, key=None, written=WrittenHeads(), seen=lambda _run, _request: None
        )
        super().__init__(conn, write, self._as_store_error, group=True)
        self._ready = threading.Condition()
        self._items: list[Pending] = []
        threading.Thread(target=self._writer, daemon=True, name="bench-writer").start()

    @staticmethod
    def _as_store_error(exc: Exception, what: str) -> Any:  # Any: a StoreError
        from agentcore.errors import StoreError

        return StoreError(f"{what}: {exc}")

    async def append(self, item: Pending) -> None:
        item.done = asyncio.get_running_loop().create_future()
        with self._ready:
            self._items.append(item)
            self._ready.notify()
        await item.done

    def _writer(self) -> None:
        while True:
            with self._ready:
                while not self._items:
                    self._ready.wait()
                batch, self._items = self._items, []
            outcomes = self._commit(batch)
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Pending, Any]]] = (
                collections.defaultdict(list)
            )
            for item, outcome in zip(batch, outcomes, strict=True):
                assert item.done is not None
                by_loop[item.done.get_loop()].append((item, outcome))
            for loop, results in by_loop.items():
                loop.call_soon_threadsafe(_settle, results)


def _settle(results: list[tuple[Pending, Any]]) -> None:
    for item, outcome in results:
        assert item.done is not None
        if item.done.done():
            continue
        if outcome is None:
            item.done.set_result(None)
        else:
            item.done.set_exception(outcome)


# -- measurements -------------------------------------------------------------------------


@dataclass
class Throughput:
    store: str
    mode: str
    runs: int
    per_s: float
    p50_ms: float
    p99_ms: float
    batches: int
    appends: int


@dataclass
class Aggregate:
    per_s: float
    low: float
    high: float
    p50_ms: float
    p99_ms: float
    per_batch: str

    @property
    def spread(self) -> str:
        return f"{self.low:,.0f}-{self.high:,.0f}"


def _aggregate(results: Sequence[Throughput]) -> Aggregate:
    speeds = [r.per_s for r in results]
    batches = sum(r.batches for r in results)
    return Aggregate(
        statistics.median(speeds),
        min(speeds),
        max(speeds),
        statistics.median(r.p50_ms for r in results),
        statistics.median(r.p99_ms for r in results),
        "1"
        if results[0].mode == "off"  # by construction (the window's edges cut batches)
        else f"{sum(r.appends for r in results) / batches:.1f}"
        if batches
        else "-",
    )


def rate(stamps: Sequence[float]) -> float:
    """Steps per second: the least-squares slope of the step count over time. Under load
    steps come in bursts (a batch's appends return together), so counting steps in a
    window would be off by up to a burst; the slope is not."""
    if len(stamps) < 2:
        return float("nan")
    n = len(stamps)
    t_mean, i_mean = statistics.fmean(stamps), (n - 1) / 2
    var = sum((t - t_mean) ** 2 for t in stamps)
    cov = sum((t - t_mean) * (i - i_mean) for i, t in enumerate(stamps))
    return cov / var if var else float("nan")


async def measure_throughput(
    kind: StoreKind, mode: str, runs: int, warmup: float, window: float
) -> Throughput:
    store = kind.make(mode != "off")
    if mode == "writer thread":
        assert isinstance(store, SQLiteStore)
        store._commits = WriterThreadCommits(store.path)  # pyright: ignore[reportPrivateUsage]  # the rejected design, measured
    METER.reset(THROUGHPUT_LATENCY_S, expected_runs=runs)
    agent = Agent([noop], ScriptedModel(reply), store=store)
    numbers = itertools.count()

    async def worker() -> None:
        while not METER.stopping:
            await agent.run(f"run {next(numbers)}", budget=Budget(max_steps=STEPS_PER_RUN + 1))

    workers = [asyncio.create_task(worker()) for _ in range(runs)]
    await METER.all_in_flight.wait()  # every run started (its lease, its first appends)
    await asyncio.sleep(warmup)
    stats = _stats(store)
    METER.counting = True
    await asyncio.sleep(window)
    METER.counting = False
    after = _stats(store)
    METER.stopping = True
    await asyncio.gather(*workers)
    await store.close()
    kind.cleanup()
    overheads = sorted(METER.overheads) or [float("nan")]
    return Throughput(
        kind.name,
        mode,
        runs,
        rate(METER.stamps),
        _quantile(overheads, 0.50) * 1000,
        _quantile(overheads, 0.99) * 1000,
        after[0] - stats[0],
        after[1] - stats[1],
    )


def _stats(store: TranscriptStore) -> tuple[int, int]:
    stats = getattr(store, "stats", None)
    return (0, 0) if stats is None else (stats.batches, stats.appends)


def _quantile(ordered: Sequence[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Lone:
    store: str
    on_ms: list[float]
    off_ms: list[float]


async def measure_lone(make_kind: Callable[[], StoreKind], rounds: int) -> Lone:
    """One run appending alone (the model's latency left out): each append's latency, group
    commit on and off, in alternating rounds of 20 sequential appends."""
    from agentcore.events import ContextAdded, RunStarted

    kinds = {"on": make_kind(), "off": make_kind()}
    stores = {mode: kind.make(mode == "on") for mode, kind in kinds.items()}
    times: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(rounds):
        for mode, store in stores.items():
            run = f"lone-{mode}-{r}"
            first = RunStarted(
                run_id=run,
                seq=0,
                at=time.time(),
                task="alone",
                scope=["noop"],
                budget={},
                policy={},
                contract={},
                route=["scripted"],
                tools={},
            )
            await store.append(run, 0, [first])
            for seq in range(1, 21):
                event = ContextAdded(
                    run_id=run, seq=seq, at=time.time(), step=seq, source="bench", content="x"
                )
                t = time.perf_counter()
                await store.append(run, seq, [event])
                times[mode].append((time.perf_counter() - t) * 1000)
    for mode, store in stores.items():
        await store.close()
        kinds[mode].cleanup()
    return Lone(kinds["on"].name, times["on"], times["off"])


@dataclass
class Memory:
    runs: int
    heap_kb: float
    rss_kb: float
    seconds_to_all_in_flight: float


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def measure_memory(tmp: Path, runs: int, *, trace: bool) -> Memory:
    """Memory growth per run once ``runs`` runs are in flight: the Python heap when
    ``trace`` (tracemalloc, which slows everything and adds its own memory), else RSS."""
    store = SQLiteStore(Path(tempfile.mkdtemp(dir=tmp)) / "runs.db", synchronous="FULL")
    METER.reset(MEMORY_LATENCY_S)
    agent = Agent([noop], ScriptedModel(reply), store=store)
    await agent.run("warm-up", budget=Budget(max_steps=2))
    METER.reset(MEMORY_LATENCY_S, expected_runs=runs)
    gc.collect()
    if trace:
        tracemalloc.start()
    heap0, rss0 = tracemalloc.get_traced_memory()[0], _rss_bytes()
    started = time.perf_counter()
    tasks = [
        asyncio.create_task(agent.run(f"run {i}", budget=Budget(max_steps=STEPS_PER_RUN + 1)))
        for i in range(runs)
    ]
    await METER.all_in_flight.wait()  # every run past its first step
    elapsed = time.perf_counter() - started
    heap, rss = tracemalloc.get_traced_memory()[0], _rss_bytes()
    tracemalloc.stop()
    if not trace:
        heap = heap0 = 0
    METER.stopping = True
    await asyncio.gather(*tasks)
    await store.close()
    return Memory(runs, (heap - heap0) / runs / 1024, (rss - rss0) / runs / 1024, elapsed)


def fsync_floor(tmp: Path, dsn: str | None) -> dict[str, float]:
    """Median milliseconds of one one-row transaction: SQLite FULL, and PostgreSQL."""
    floors: dict[str, float] = {}
    path = Path(tempfile.mkdtemp(dir=tmp)) / "floor.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (body TEXT)")
    times = []
    for _ in range(200):
        t = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?)", ("x" * 150,))
        conn.execute("COMMIT")
        times.append(time.perf_counter() - t)
    conn.close()
    floors["SQLite FULL"] = statistics.median(times) * 1000
    if dsn:
        import psycopg

        table = f"agentcore_bench_floor_{secrets.token_hex(4)}"
        with psycopg.connect(dsn, autocommit=True) as pg:
            pg.execute(f"CREATE TABLE {table} (body TEXT)".encode())  # logged: a temp one is not
            try:
                times = []
                for _ in range(200):
                    t = time.perf_counter()
                    pg.execute(f"INSERT INTO {table} VALUES (%s)".encode(), ("x" * 150,))
                    times.append(time.perf_counter() - t)
            finally:
                pg.execute(f"DROP TABLE {table}".encode())
        floors["PostgreSQL"] = statistics.median(times) * 1000
    return floors


# -- the report ---------------------------------------------------------------------------


def report(
    args: argparse.Namespace,
    results: list[Throughput],
    lone: list[Lone],
    memory: list[Memory],
    floors: dict[str, float],
    info: dict[str, str],
) -> str:
    lines = [
        SECTION,
        "",
        f"Generated by `python bench/bench_scale.py{' --quick' if args.quick else ''}"
        f"{' --tune-gc' if args.tune_gc else ''} --write`; "
        "numbers from one run on the machine below.",
        "",
        f"- Machine: {info['cpu']}, {os.cpu_count()} cores, shared and noisy (other sessions' "
        "test suites run at the same time; fsync latency on these virtual disks varies "
        "10x from hour to hour). Compare the ratios, measured in this one run, interleaved.",
        f"- {info['versions']}; {info['date']}; wall time {info['wall']}; load average "
        f"{info['load0']} at start, {info['load1']} at end.",
        "- One transaction with one 150-byte row, median of 200 (the cost one fsync-per-"
        "append pays per step): " + ", ".join(f"{k} {v:.2f} ms" for k, v in floors.items()) + ".",
        f"- Each configuration: every run started and past its first step, then {args.warmup:g} s "
        f"more warm-up, then {args.window:g} s measured ({args.window_1000:g} s at 1,000 "
        f"runs); runs of {STEPS_PER_RUN} tool steps and a finish, replaced as they "
        "complete (so C runs are always in flight); model latency "
        f"uniform {THROUGHPUT_LATENCY_S[0] * 1000:g}-{THROUGHPUT_LATENCY_S[1] * 1000:g} ms; "
        "async no-op tool. Leases (acquire at a run's start, release at its end) are "
        "transactions of their own, outside group commit.",
        "",
        "### Durable steps per second",
        "",
        f"Median of {args.reps} interleaved repetitions (spread: min-max). Steps/s is the "
        "least-squares slope of the step count over the measured window; the overheads "
        "are the median of the repetitions' p50 and p99.",
        "",
        "| store | runs in flight | group commit | steps/s | spread | per-step overhead "
        "p50 (ms) | p99 (ms) | appends per transaction | on / off (medians) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, int, str], list[Throughput]] = collections.defaultdict(list)
    for r in results:
        groups[(r.store, r.runs, r.mode)].append(r)
    agg = {key: _aggregate(rs) for key, rs in groups.items()}
    verdicts: list[str] = []
    for (store, runs, mode), a in agg.items():
        if mode == "writer thread":
            continue
        off = agg.get((store, runs, "off"))
        ratio = f"{a.per_s / off.per_s:.1f}x" if mode == "on" and off else ""
        lines.append(
            f"| {store} | {runs:,} | {mode} | {a.per_s:,.0f} | {a.spread} | {a.p50_ms:.2f} | "
            f"{a.p99_ms:.2f} | {a.per_batch} | {ratio} |"
        )
        if mode == "on" and runs == 1000 and off:
            ok = a.per_s / off.per_s > TARGET_RATIO
            low = a.low / off.high
            verdicts.append(
                f"- {store}, 1,000 runs: {a.per_s / off.per_s:.1f}x the steps/s of one "
                f"transaction per append (worst case, slowest on / fastest off: {low:.1f}x): "
                f"target > {TARGET_RATIO:g}x **{'met' if ok else 'missed'}**."
            )
    lines += ["", *verdicts, ""]
    lines += [
        "Reading the ratio: with group commit off, every durable step waits for its own "
        "transaction, so steps/s is bounded by one commit's latency (the one-row floor "
        "above) plus the step's CPU; with it on, hundreds of appends share one commit and "
        "the bound is the loop's CPU per step (one process, one core: the agent's own "
        "work, the per-step cancel check, the store's statements). The ratio at 1,000 runs "
        "is therefore about (CPU + commit) / CPU: it passes 10x when a commit costs "
        "several milliseconds (this disk's fsync has measured 0.2-3 ms at different hours) "
        "and stays near 2-4x when fsync is as fast as a fraction of a millisecond. What "
        "group commit leaves un-shared: each run's lease acquire and release (two "
        f"transactions per {STEPS_PER_RUN}-step run here), which dominate the commits once "
        "appends are batched. PostgreSQL with it off is not one flush per append either: "
        "the pool's connections commit concurrently and PostgreSQL flushes their WAL "
        "together; there the client's CPU per step bounds both (psycopg's pool checkout "
        "and round trip for each cancel check and lease operation).",
        "",
    ]
    if lone:
        lines += [
            "### A run that commits alone: one loop iteration, no window",
            "",
            "One run appending one event at a time, nothing else running (no model "
            "latency): each append's latency in ms, group commit on and off in alternating "
            "rounds of 20 appends, same process. With group commit on, a lone append waits "
            "for one loop iteration before its commit starts (the commit is scheduled with "
            "`call_soon`, so that appends made in the same iteration join it) and for its "
            "caller to be woken after it: the difference below. SQLite NORMAL (no fsync) "
            "shows that cost alone.",
            "",
            "| store | on: median | on: p99 | off: median | off: p99 | on - off, medians (µs) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for one in lone:
            on, off = sorted(one.on_ms), sorted(one.off_ms)
            lines.append(
                f"| {one.store} | {statistics.median(on):.3f} | {_quantile(on, 0.99):.3f} "
                f"| {statistics.median(off):.3f} | {_quantile(off, 0.99):.3f} "
                f"| {(statistics.median(on) - statistics.median(off)) * 1000:.0f} |"
            )
        lines.append("")
    thread = agg.get(("SQLite FULL", 1000, "writer thread"))
    inline = agg.get(("SQLite FULL", 1000, "on"))
    if thread and inline:
        lines += [
            "### SQLite: batches committed inline on the loop vs by a writer thread",
            "",
            "| 1,000 runs | steps/s | spread | per-step overhead p50 (ms) | p99 (ms) "
            "| appends per transaction |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, a in (("inline (the design)", inline), ("writer thread", thread)):
            lines.append(
                f"| {name} | {a.per_s:,.0f} | {a.spread} | {a.p50_ms:.2f} | {a.p99_ms:.2f} "
                f"| {a.per_batch} |"
            )
        lines += [
            "",
            f"Inline / writer thread: {inline.per_s / thread.per_s:.2f}x (medians). The "
            "thread lets the loop keep working while a batch's statements, its fsync and "
            "any WAL checkpoint run; it needs a connection of its own (a read on the loop's "
            "connection would see a batch's uncommitted rows), competes with the loop for "
            "the GIL on every statement (its batches are smaller), and hands every result "
            "across threads. Inline, the loop blocks for one transaction per batch while "
            "the runs whose replies arrive meanwhile queue the next one. Why inline was "
            "chosen, over several runs of this benchmark: `agentcore/stores/sqlite/_commit.py`.",
            "",
        ]
    if memory:
        lines += [
            "### Memory per run in flight (SQLite FULL, group commit on)",
            "",
            f"Model latency uniform {MEMORY_LATENCY_S[0]:g}-{MEMORY_LATENCY_S[1]:g} s; measured "
            "once every run has made its first step. Heap: tracemalloc's current size "
            "growth (Python objects), in one process; RSS: resident set growth, and the time "
            "until all runs were in flight, in another without tracemalloc (whose "
            "bookkeeping would add to RSS). Both fresh processes.",
            "",
            "| runs in flight | heap per run (KB) | RSS per run (KB) "
            "| time until all in flight (s) |",
            "|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {m.runs:,} | {m.heap_kb:.1f} | {m.rss_kb:.1f} | {m.seconds_to_all_in_flight:.1f} |"
            for m in memory
        ]
        lines.append("")
    return "\n".join(lines)


def write_section(text: str) -> None:
    """Replace this benchmark's section of bench/RESULTS.md (or append it); other sections
    stay as they are."""
    path = HERE / "RESULTS.md"
    old = path.read_text() if path.exists() else ""
    start = old.find(SECTION)
    if start < 0:
        path.write_text(old.rstrip() + "\n\n" + text.rstrip() + "\n")
        return
    end = old.find("\n## ", start + len(SECTION))
    tail = old[end:] if end >= 0 else ""
    path.write_text(old[:start] + text.rstrip() + "\n" + tail)


async def main_async(args: argparse.Namespace) -> str:
    began = time.perf_counter()
    load0 = "/".join(f"{x:.2f}" for x in os.getloadavg())
    tmp = Path(tempfile.mkdtemp(prefix="agentcore-bench-scale-"))
    dsn = args.postgres or os.environ.get("AGENTCORE_TEST_POSTGRES_DSN")
    floors = fsync_floor(tmp, dsn)
    log(f"one-row transaction: {floors}")
    results: list[Throughput] = []
    kinds: list[Callable[[], StoreKind]] = [lambda: sqlite_kind(tmp)]
    if dsn:
        kinds.append(lambda: postgres_kind(dsn))
    else:
        log("no PostgreSQL DSN (--postgres or $AGENTCORE_TEST_POSTGRES_DSN): SQLite only")
    lone: list[Lone] = []
    for make_kind in [*kinds, lambda: sqlite_kind(tmp, "NORMAL")]:
        one = await measure_lone(make_kind, 10 if args.quick else 20)
        log(
            f"{one.store:12} lone append: on {statistics.median(one.on_ms):.3f} ms, "
            f"off {statistics.median(one.off_ms):.3f} ms"
        )
        lone.append(one)
    for repetition in range(args.reps):  # interleaved: noise hits every configuration
        for runs in (1, 100, 1000):
            for make_kind in kinds:
                modes = ["on", "off"]
                if runs == 1000 and make_kind is kinds[0]:
                    modes.append("writer thread")
                for mode in modes:
                    kind = make_kind()
                    window = args.window_1000 if runs >= 1000 else args.window
                    r = await measure_throughput(kind, mode, runs, args.warmup, window)
                    log(
                        f"#{repetition + 1} {r.store:12} runs={runs:5} {mode:13} "
                        f"{r.per_s:8.0f} steps/s  p50={r.p50_ms:.2f} ms p99={r.p99_ms:.2f} ms  "
                        f"appends/txn={r.appends / max(r.batches, 1):.1f}"
                    )
                    results.append(r)
    memory: list[Memory] = []
    for runs in (100, 1000) if args.quick else (100, 1000, 10_000):
        # A fresh process each (RSS that earlier configurations grew would hide the growth):
        # one under tracemalloc for the heap, one without it for RSS and the time.
        points: list[Memory] = []
        for trace in (True, False):
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--memory",
                str(runs),
                *(["--trace"] if trace else []),
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await child.communicate()
            points.append(Memory(**json.loads(out.decode().strip().splitlines()[-1])))
        m = Memory(runs, points[0].heap_kb, points[1].rss_kb, points[1].seconds_to_all_in_flight)
        log(f"memory runs={runs}: heap {m.heap_kb:.1f} KB/run, RSS {m.rss_kb:.1f} KB/run")
        memory.append(m)
    import psycopg

    info = {
        "cpu": platform.processor() or platform.machine(),
        "versions": f"CPython {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"psycopg {psycopg.__version__}" + (f", {_pg_version(dsn)}" if dsn else ""),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall": f"{time.perf_counter() - began:.0f} s",
        "load0": load0,
        "load1": "/".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    info["cpu"] = _cpu_model() or info["cpu"]
    shutil.rmtree(tmp, ignore_errors=True)
    return report(args, results, lone, memory, floors, info)


async def measure_ratio(args: argparse.Namespace, runs: int) -> dict[str, list[float]]:
    """Only group commit's gain at ``runs`` runs in flight: steps/s of SQLite FULL and
    PostgreSQL (with a DSN), group commit on and off, interleaved, ``args.reps`` rounds."""
    tmp = Path(tempfile.mkdtemp(prefix="agentcore-bench-scale-"))
    dsn = args.postgres or os.environ.get("AGENTCORE_TEST_POSTGRES_DSN")
    kinds: list[Callable[[], StoreKind]] = [lambda: sqlite_kind(tmp)]
    if dsn:
        kinds.append(lambda: postgres_kind(dsn))
    out: dict[str, list[float]] = {}
    try:
        for _ in range(args.reps):
            for make_kind in kinds:
                for mode in ("on", "off"):
                    r = await measure_throughput(make_kind(), mode, runs, args.warmup, args.window)
                    out.setdefault(f"{r.store} {mode}", []).append(r.per_s)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _pg_version(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else '?'} (fsync on, synchronous_commit on)"


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter windows")
    parser.add_argument("--write", action="store_true", help="put the report in RESULTS.md")
    parser.add_argument("--postgres", help="PostgreSQL DSN (default $AGENTCORE_TEST_POSTGRES_DSN)")
    parser.add_argument("--memory", type=int, help=argparse.SUPPRESS)  # one memory point
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)  # its heap
    parser.add_argument(
        "--tune-gc", action="store_true", help="call agentcore.tune_gc() first (a busy worker's)"
    )
    parser.add_argument(
        "--ratio",
        type=int,
        metavar="RUNS",
        help="only group commit on and off at RUNS runs in flight, 2 rounds; prints JSON",
    )
    args = parser.parse_args()
    args.warmup, args.window, args.window_1000 = (0.5, 1.5, 3.0) if args.quick else (1.0, 2.0, 4.0)
    args.reps = 1 if args.quick else 3
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    random.seed(10)
    if args.tune_gc:
        import agentcore

        agentcore.tune_gc()
    if args.memory:
        tmp = Path(tempfile.mkdtemp(prefix="agentcore-bench-scale-"))
        try:
            point = asyncio.run(measure_memory(tmp, args.memory, trace=args.trace))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(json.dumps(asdict(point)))
        return
    if args.ratio:
        args.window, args.reps = args.window_1000, 2
        print(json.dumps(asyncio.run(measure_ratio(args, args.ratio))))
        return
    text = asyncio.run(main_async(args))
    print(text)
    if args.write:
        write_section(text)
        log(f"wrote {HERE / 'RESULTS.md'}")


if __name__ == "__main__":
    main()
