#!/usr/bin/env python
"""Issue 15 ("fast by default"): every row of its table in one run, against floors.

Scenario: the deterministic ``ScriptedModel`` answers N tool actions (``get_order``, a
read tool with a trivial body returning a small dict) and then one finish, under
``Budget(max_steps=N + 1)`` and the default ``Policy``. The wall time of ``await
agent.run(...)`` is divided by the N + 1 steps.

What the library ships with is measured besides any tuned configuration: the default
logging (structlog not configured: agentcore logs through the stdlib ``logging`` logger
``"agentcore"``, warnings and up) and a sync tool as in the README; and the durable
stores with their defaults (leases taken by every run, group commit on).

Floors, measured in the same process and interleaved with the runs:

- (a) pydantic ``TypeAdapter(...).validate_json`` of the action text plus calling the tool
  function directly, per step, in memory;
- (b) (a) plus appending the step's bytes to a JSON Lines file and one ``fsync`` per step;
- (c) (a) plus appending the step's bytes to a JSON Lines file, no fsync;
- for loading: reading a JSON Lines export of the same events and validating every line.

Also: two commits per step (a non-idempotent tool, where the write-ahead rules need its
result durable before anything else), stored bytes per step, ``resume()`` to the first
model request for 1000- and 10,000-step runs, ``import agentcore`` and ``agentcore --help``
as whole processes, a 10,000-step run (flat per-step time and memory), and the size in
tokens of a per-step request, structured contract vs native tool calling.

Usage::

    python bench/bench_steps.py            # full run (R=5), prints the report
    python bench/bench_steps.py --quick    # R=2
    python bench/bench_steps.py --write    # also writes bench/RESULTS.md (its sections)
    python bench/bench_steps.py --only memory_async:1000   # one case, for profiling:
    python -m cProfile -s cumtime bench/bench_steps.py --only memory_async:1000
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import itertools
import json
import logging
import math
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
import structlog
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agentcore import Agent, Budget, RunStatus, Tool, tool
from agentcore.adapters import ScriptedModel
from agentcore.events import Event
from agentcore.stores import MemoryStore, SQLiteStore

HERE = Path(__file__).resolve().parent
NS = (100, 1000)
JUDGED_N = 1000  # verdicts are read at this N
STEP_TARGET_RUNS = 200  # small N: repeat runs inside one sample until ~200 steps are timed
LONG_RUN = 10_000
RESUME_NS = (1000, 10_000)
TOKEN_STEPS = (1, 10, 100)

# Targets from issue 15.
SYNC_HANDOFF_FACTOR = 1.2  # sync step <= async step + 1.2x bare hand-off (bench_tools.py)
MEMORY_FLOOR_RATIO = 10.0
FULL_FLOOR_RATIO = 1.5
NORMAL_FLOOR_RATIO = 3.0
RESUME_MS = {1000: 10.0, 10_000: 50.0}
IMPORT_MS = 150.0
HELP_MS = 250.0
FLAT_RATIO = 1.3  # last 1000-step window of the long run within 1.3x of the first
HEAVY = ("litellm", "instructor", "psycopg", "celery", "mcp", "starlette", "opentelemetry.sdk")
OWN_SECTIONS_END = "## Targets (issue 15) at a glance"
OLD_SECTIONS_END = ("## Targets (issue 2) at a glance",)  # this report's earlier last section


# -- the tools and the script -----------------------------------------------------------------


def _order(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "status": "shipped", "eta": "2 days"}


async def get_order_impl(order_id: str) -> dict[str, str]:
    """Look up one order by id.

    Args:
        order_id: the order's id, e.g. "A00001".
    """
    return _order(order_id)


def get_order_sync(order_id: str) -> dict[str, str]:
    """Look up one order by id.

    Args:
        order_id: the order's id, e.g. "A00001".
    """
    return _order(order_id)


ASYNC_TOOL = tool(effect="read", name="get_order")(get_order_impl)
SYNC_TOOL = tool(effect="read", name="get_order")(get_order_sync)
# A tool whose result must be durable before anything else: two commits per step.
UNSAFE_TOOL = tool(effect="read", idempotent=False, name="get_order")(get_order_impl)

TASK = "Look up the orders and say where they are."


def tool_item(i: int, thought: str = "Look up the next order.") -> dict[str, Any]:
    return {
        "type": "tool",
        "thought": thought,
        "tool": "get_order",
        "args": {"order_id": f"A{i:05d}"},
    }


FINISH_ITEM: dict[str, Any] = {
    "type": "finish",
    "thought": "All looked up.",
    "answer": "All shipped.",
}


def script_for(n: int) -> list[dict[str, Any]]:
    return [tool_item(i) for i in range(n)] + [FINISH_ITEM]


# -- floors -----------------------------------------------------------------------------------


class _OrderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    order_id: str


class _ToolAct(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["tool"]
    thought: str
    tool: Literal["get_order"]
    args: _OrderArgs


class _FinishAct(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["finish"]
    thought: str
    answer: str


ACTION_ADAPTER: TypeAdapter[_ToolAct | _FinishAct] = TypeAdapter(
    Annotated[_ToolAct | _FinishAct, Field(discriminator="type")]
)
STEP_BYTES = 1040  # what the stores write per step here (5 event bodies; see "Stored bytes")


async def floor_steps(texts: Sequence[str], fd: int | None, fsync: bool) -> float:
    """One floor run: validate each action text, call the tool; optionally append the step's
    bytes to a JSON Lines file (and fsync it)."""
    line = b'{"floor":"' + b"x" * (STEP_BYTES - 13) + b'"}\n'
    started = time.perf_counter()
    for text in texts:
        action = ACTION_ADAPTER.validate_json(text)
        if isinstance(action, _ToolAct):
            await get_order_impl(order_id=action.args.order_id)
        if fd is not None:
            os.write(fd, line)
            if fsync:
                os.fsync(fd)
    return time.perf_counter() - started


# -- measurements -----------------------------------------------------------------------------


@dataclass
class Stat:
    """Samples (seconds, or seconds per step)."""

    samples: list[float] = field(default_factory=list[float])

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def lo(self) -> float:
        return min(self.samples)

    @property
    def hi(self) -> float:
        return max(self.samples)


def paired_ratio(stats: dict[tuple[str, int], Stat], kind: str, n: int) -> float:
    """Median over the repetitions of (this case's sample / its floor's sample in the same
    repetition): robust to the floor's latency changing between repetitions."""
    case, floor = stats[(kind, n)].samples, stats[(FLOOR_OF[kind], n)].samples
    return statistics.median(a / b for a, b in zip(case, floor, strict=True))


def runs_per_sample(n: int) -> int:
    return max(1, STEP_TARGET_RUNS // (n + 1))


def quiet_logging() -> None:
    """The tuned configuration: structlog configured to drop debug/info cheaply."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def default_logging() -> None:
    """What the library ships with: nothing configured (agentcore logs through the stdlib
    ``logging`` logger ``"agentcore"``, which by default drops debug and info)."""
    structlog.reset_defaults()


def new_agent(
    store: Any,  # Any: a store object
    script: Sequence[Any] | Callable[..., Any],  # Any: script items
    name: str = "scripted",
    the_tool: Tool = ASYNC_TOOL,
) -> Agent:
    """An agent on ``store`` whose model replays ``script``. A list script continues where
    the transcript stands for a model of the same ``name``: a resume that brings a new
    script names its model differently."""
    return Agent(tools=[the_tool], model=ScriptedModel(script, name=name), store=store)


async def timed_run(agent: Agent, n: int) -> float:
    started = time.perf_counter()
    result = await agent.run(TASK, budget=Budget(max_steps=n + 1))
    elapsed = time.perf_counter() - started
    if result.status is not RunStatus.COMPLETED or result.usage.steps != n + 1:
        raise RuntimeError(f"benchmark run did not complete as scripted: {result}")
    return elapsed


@dataclass(frozen=True)
class Case:
    label: str
    store: Literal["memory", "FULL", "NORMAL"]
    the_tool: Tool
    logging: Literal["default", "quiet"]


AGENT_CASES: dict[str, Case] = {
    "memory_sync": Case(
        "agent, MemoryStore, sync tool, default logging (as shipped: the README's tools)",
        "memory",
        SYNC_TOOL,
        "default",
    ),
    "memory_async": Case(
        "agent, MemoryStore, async tool, default logging", "memory", ASYNC_TOOL, "default"
    ),
    "memory_async_quiet": Case(
        "agent, MemoryStore, async tool, structlog configured at WARNING (tuned)",
        "memory",
        ASYNC_TOOL,
        "quiet",
    ),
    "sqlite_full": Case(
        "agent, SQLiteStore synchronous=FULL (default), async tool", "FULL", ASYNC_TOOL, "default"
    ),
    "sqlite_full_two": Case(
        "agent, SQLiteStore FULL, non-idempotent tool (two commits a step)",
        "FULL",
        UNSAFE_TOOL,
        "default",
    ),
    "sqlite_normal": Case(
        "agent, SQLiteStore synchronous=NORMAL, async tool", "NORMAL", ASYNC_TOOL, "default"
    ),
}
FLOOR_LABELS = {
    "floor_a": "floor (a): validate_json + tool call",
    "floor_fsync": "floor (b): (a) + JSONL append + fsync per step",
    "floor_write": "floor (c): (a) + JSONL append, no fsync",
}
FLOOR_OF = {
    "memory_sync": "floor_a",
    "memory_async": "floor_a",
    "memory_async_quiet": "floor_a",
    "sqlite_full": "floor_fsync",
    "sqlite_full_two": "floor_fsync",
    "sqlite_normal": "floor_write",
}


async def sample_agent(kind: str, n: int, tmp_root: Path) -> float:
    """Seconds per step of ``agent.run`` for one sample (one or more runs, fresh store)."""
    case = AGENT_CASES[kind]
    quiet_logging() if case.logging == "quiet" else default_logging()
    k = runs_per_sample(n)
    total = 0.0
    if case.store == "memory":
        store: Any = MemoryStore()  # Any: either store
    else:
        d = Path(tempfile.mkdtemp(dir=tmp_root))
        store = SQLiteStore(d / "runs.db", synchronous=case.store)
    try:
        for _ in range(k):
            agent = new_agent(store, script_for(n), the_tool=case.the_tool)
            total += await timed_run(agent, n)
    finally:
        await store.close()
        default_logging()
    return total / (k * (n + 1))


async def sample_floor(kind: str, n: int, tmp_root: Path) -> float:
    texts = [json.dumps(item, ensure_ascii=False) for item in script_for(n)]
    k = runs_per_sample(n)
    fd = None
    if kind != "floor_a":
        d = Path(tempfile.mkdtemp(dir=tmp_root))
        fd = os.open(d / "floor.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        total = sum([await floor_steps(texts, fd, kind == "floor_fsync") for _ in range(k)])
    finally:
        if fd is not None:
            os.close(fd)
    return total / (k * (n + 1))


async def measure_steps(reps: int, tmp_root: Path) -> tuple[dict[tuple[str, int], Stat], Stat]:
    """Per-step samples of every case, and the bare hand-off, all interleaved."""
    stats: dict[tuple[str, int], Stat] = {}
    handoff = Stat()
    # Each floor right before the cases judged against it: a sample and its floor are then
    # seconds apart (fsync latency here changes regime, 0.2 to 4 ms, within a minute).
    kinds = [
        "floor_a",
        "memory_sync",
        "memory_async",
        "memory_async_quiet",
        "floor_fsync",
        "sqlite_full",
        "sqlite_full_two",
        "floor_write",
        "sqlite_normal",
    ]
    assert sorted(kinds) == sorted([*FLOOR_LABELS, *AGENT_CASES])
    for kind in kinds:  # warm up every path once (imports, schema builds, sqlite)
        fn = sample_floor if kind.startswith("floor") else sample_agent
        await fn(kind, 10, tmp_root)
    for rep in range(reps):
        for n in NS:
            for kind in kinds:  # interleaved: noise from other processes spreads over all
                gc.collect()
                fn = sample_floor if kind.startswith("floor") else sample_agent
                per_step = await fn(kind, n, tmp_root)
                stats.setdefault((kind, n), Stat()).samples.append(per_step)
                log(f"rep {rep + 1}/{reps} N={n:<5} {kind:<19} {per_step * 1e3:8.4f} ms/step")
            handoff.samples.append(await bare_handoff())
    return stats, handoff


# -- the sync hand-off (as bench_tools.py measures it) ----------------------------------------


async def bare_handoff(n: int = 200) -> float:
    """A trivial function sent through a warm executor and back, per call."""
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    for _ in range(n):
        await loop.run_in_executor(HANDOFF_POOL, int)
    return (time.perf_counter() - started) / n


HANDOFF_POOL = ThreadPoolExecutor(1)


# -- stored bytes -----------------------------------------------------------------------------


@dataclass
class Bytes:
    n: int
    steps: int
    events: int
    body_bytes: int


async def measure_bytes(tmp_root: Path) -> list[Bytes]:
    out: list[Bytes] = []
    for n in NS:
        d = Path(tempfile.mkdtemp(dir=tmp_root))
        path = d / "runs.db"
        store = SQLiteStore(path, synchronous="NORMAL")
        result = await new_agent(store, script_for(n)).run(TASK, budget=Budget(max_steps=n + 1))
        await store.close()
        conn = sqlite3.connect(path)
        try:
            events, body = conn.execute(
                "SELECT count(*), sum(length(CAST(body AS BLOB))) FROM events WHERE run_id = ?",
                (result.run_id,),
            ).fetchone()
        finally:
            conn.close()
        out.append(Bytes(n, result.usage.steps, events, body))
    return out


# -- load and resume --------------------------------------------------------------------------


def budget_stop_script(n: int) -> tuple[list[dict[str, Any]], int]:
    """N tool actions that end, by the token budget, with ``budget_exhausted`` after step N.

    ``max_steps`` cannot be used: the last step under a step budget only offers ``finish``
    (the graceful end). A token budget stops the run before a step when it is used up, and
    the last step is offered tools as long as the tokens left are at least twice the
    previous call's. So step N's reply is made longer (a long argument) and the budget is
    exactly the tokens of N replies, as ScriptedModel counts them.
    """
    model = ScriptedModel([])
    items = [tool_item(i) for i in range(n - 1)]
    last = tool_item(n - 1)
    last["args"]["order_id"] += "-" + "x" * 600  # a long argument: more output tokens
    items.append(last)

    def tokens(item: dict[str, Any]) -> int:
        text = json.dumps(item, ensure_ascii=False)
        return model.input_tokens + max(1, math.ceil(len(text) * model.output_tokens_per_char))

    return items, sum(tokens(it) for it in items)


@dataclass
class LoadResume:
    load: Stat = field(default_factory=Stat)  # store.load() of a completed 1000-step run
    load_floor: Stat = field(default_factory=Stat)  # read + validate the JSONL export
    load_events: int = 0
    resume: dict[int, Stat] = field(default_factory=dict[int, Stat])  # resume() -> model asked
    resume_events: dict[int, int] = field(default_factory=dict[int, int])
    resume_messages: dict[int, int] = field(default_factory=dict[int, int])
    resume_peak_kb: dict[int, float] = field(default_factory=dict[int, float])
    notes: list[str] = field(default_factory=list[str])


def db_files(d: Path) -> list[Path]:
    """The database and its WAL files (not the directory of lock files beside them)."""
    return [p for p in d.iterdir() if p.name.startswith("runs.db") and p.is_file()]


async def measure_load_resume(reps: int, tmp_root: Path) -> LoadResume:
    res = LoadResume()
    event_adapter: TypeAdapter[Any] = TypeAdapter(Event)  # Any: the union's members
    # Load: a completed 1000-step run, with a fresh store each time; floor: JSONL export.
    d = Path(tempfile.mkdtemp(dir=tmp_root))
    store = SQLiteStore(d / "runs.db", synchronous="NORMAL")
    done = await new_agent(store, script_for(1000)).run(TASK, budget=Budget(max_steps=1001))
    events = await store.load(done.run_id)
    await store.close()
    res.load_events = len(events)
    jsonl = d / "export.jsonl"
    jsonl.write_text("".join(ev.model_dump_json() + "\n" for ev in events))
    for _ in range(reps):
        gc.collect()
        store = SQLiteStore(d / "runs.db")
        await store.load(done.run_id, after=len(events) - 1)  # not timed: opens the file
        started = time.perf_counter()
        loaded = await store.load(done.run_id)
        res.load.samples.append(time.perf_counter() - started)
        assert len(loaded) == len(events)
        await store.close()
        gc.collect()
        started = time.perf_counter()
        with jsonl.open("rb") as f:
            floor = [event_adapter.validate_json(line) for line in f]
        res.load_floor.samples.append(time.perf_counter() - started)
        assert len(floor) == len(events)

    # Resume: a run stopped by its budget after n steps, resumed with a bigger one; timed
    # from resume() until the model is asked for step n + 1 (a fresh store on a copy).
    for n in RESUME_NS:
        items, max_tokens = budget_stop_script(n)
        src = Path(tempfile.mkdtemp(dir=tmp_root))
        store = SQLiteStore(src / "runs.db", synchronous="NORMAL")
        stopped = await new_agent(store, items).run(
            TASK, budget=Budget(max_steps=n + 100, max_tokens=max_tokens)
        )
        res.resume_events[n] = len(await store.load(stopped.run_id))
        await store.close()
        if stopped.status is not RunStatus.BUDGET_EXHAUSTED or stopped.usage.steps != n:
            res.notes.append(
                f"the {n}-step budget stop ended {stopped.status.value} after "
                f"{stopped.usage.steps} steps ({stopped.reason}); resume timed from there"
            )
        stat = res.resume[n] = Stat()
        for rep in range(reps + 1):  # the first (tracemalloc on) only measures memory
            d = Path(tempfile.mkdtemp(dir=tmp_root))
            for p in db_files(src):
                shutil.copy(p, d / p.name)
            asked: list[float] = []

            def first_new(
                messages: Sequence[Any], asked: list[float] = asked, n: int = n
            ) -> dict[str, Any]:
                # A real adapter reads the whole conversation: so does the timing.
                shown = len(messages)
                asked.append(time.perf_counter())
                res.resume_messages[n] = shown
                return FINISH_ITEM

            gc.collect()
            store = SQLiteStore(d / "runs.db")
            agent = new_agent(store, first_new, name="scripted-resume")
            if rep == 0:
                tracemalloc.start()
            started = time.perf_counter()
            again = await agent.resume(stopped.run_id, budget=Budget(max_steps=n + 10))
            if rep == 0:
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                res.resume_peak_kb[n] = peak / 1024
            else:
                stat.samples.append(asked[0] - started)
            await store.close()
            assert again.status is RunStatus.COMPLETED, again
    return res


# -- the long run ---------------------------------------------------------------------------


@dataclass
class LongRun:
    label: str
    window_ms: list[float]  # median per-step time in each 1000-step window (ms)
    heap_kb: list[float]  # traced heap at the end of each window (KB), separate run
    total_s: float


async def long_run(store_kind: str, tmp_root: Path, traced: bool) -> tuple[list[float], float]:
    """One 10,000-step run; per-step times (or heap sizes every 1000 steps, traced)."""
    marks: list[float] = []
    model_ref: list[ScriptedModel] = []

    async def get_order(order_id: str) -> dict[str, str]:
        """Look up one order by id.

        Args:
            order_id: the order's id.
        """
        model_ref[0].requests.clear()  # the scripted model keeps every request: not ours
        if traced:
            i = int(order_id[1:])
            if i % 1000 == 0 or i == LONG_RUN - 1:
                marks.append(tracemalloc.get_traced_memory()[0] / 1024)
        else:
            marks.append(time.perf_counter())
        return _order(order_id)

    the_tool = tool(effect="read", name="get_order")(get_order)
    if store_kind == "memory":
        store: Any = MemoryStore()  # Any: either store
    else:
        store = SQLiteStore(Path(tempfile.mkdtemp(dir=tmp_root)) / "runs.db", synchronous="NORMAL")
    model = ScriptedModel(script_for(LONG_RUN))
    model_ref.append(model)
    agent = Agent(tools=[the_tool], model=model, store=store)
    gc.collect()
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    result = await agent.run(TASK, budget=Budget(max_steps=LONG_RUN + 1))
    total = time.perf_counter() - started
    if traced:
        tracemalloc.stop()
    await store.close()
    assert result.status is RunStatus.COMPLETED, result
    return marks, total


async def measure_long(tmp_root: Path) -> list[LongRun]:
    out: list[LongRun] = []
    for kind, label in (("memory", "MemoryStore"), ("sqlite", "SQLiteStore NORMAL")):
        marks, total = await long_run(kind, tmp_root, traced=False)
        deltas = [b - a for a, b in itertools.pairwise(marks)]
        windows = [
            statistics.median(deltas[i : i + 1000]) * 1e3 for i in range(0, len(deltas), 1000)
        ]
        heap, _ = await long_run(kind, tmp_root, traced=True)
        out.append(LongRun(label, windows, heap, total))
    return out


# -- tokens of a request --------------------------------------------------------------------


@dataclass
class Tokens:
    counter: str
    rows: list[tuple[int, dict[str, int], dict[str, int]]]  # step, structured, native


def token_counter() -> tuple[str, Callable[[str], int]]:
    """tiktoken's o200k_base (the GPT-4o/4.1 encoding), offline from the copy litellm ships
    when present; else about 4 characters a token."""
    try:
        import tiktoken  # pyright: ignore[reportMissingImports]  # optional, bench only
    except ImportError:
        return "characters / 4 (tiktoken not installed)", lambda text: math.ceil(len(text) / 4)
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        import importlib.util

        spec = importlib.util.find_spec("litellm")
        if spec is not None and spec.origin is not None:
            bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
            if bundled.is_dir():
                os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
    try:
        enc: Any = tiktoken.get_encoding("o200k_base")  # pyright: ignore[reportUnknownMemberType]  # Any: untyped
    except Exception as exc:  # offline without a cached file
        return f"characters / 4 (tiktoken could not load o200k_base: {type(exc).__name__})", (
            lambda text: math.ceil(len(text) / 4)
        )
    return "tiktoken o200k_base (GPT-4o / GPT-4.1 family)", lambda text: len(
        enc.encode(text, disallowed_special=())
    )


async def measure_tokens() -> Tokens:
    from agentcore.adapters.openai import OpenAIAdapter
    from agentcore.contracts import choose_form, compile_wire_schema

    name, count = token_counter()
    n = max(TOKEN_STEPS)
    model = ScriptedModel(script_for(n))
    agent = Agent(tools=[ASYNC_TOOL], model=model, store=MemoryStore())
    result = await agent.run(TASK, budget=Budget(max_steps=n + 1))
    assert result.status is RunStatus.COMPLETED, result
    structured = OpenAIAdapter("gpt-4.1-mini", api_key="sk-bench")
    native = OpenAIAdapter("gpt-4.1-mini", api_key="sk-bench", mode="native")

    def size(params: dict[str, Any], schema_key: str) -> dict[str, int]:  # Any: JSON
        messages = params["messages"]
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        history = messages[1:] if system else messages
        parts = {
            "system": count(system),
            "history": count(json.dumps(history, ensure_ascii=False)),
            "schema": count(json.dumps(params[schema_key], ensure_ascii=False)),
        }
        parts["total"] = sum(parts.values())
        return parts

    rows: list[tuple[int, dict[str, int], dict[str, int]]] = []
    for step in TOKEN_STEPS:
        request = next(r for r in model.requests if r.step == step)
        request = replace(request, messages=list(request.messages))
        schema = choose_form(request.schema, structured.dialect)
        wire = compile_wire_schema(schema, structured.dialect)
        s = structured.request_params(replace(request, schema=schema), wire, 1024)
        nat = native.native_request_params(request, 1024)
        rows.append((step, size(s, "response_format"), size(nat, "tools")))
    return Tokens(name, rows)


# -- start-up in fresh processes ------------------------------------------------------------

_MODULES = """
import json, sys
mode, heavy = sys.argv[1], sys.argv[2].split(",")
if mode == "import":
    import agentcore
else:
    sys.argv = ["agentcore", "--help"]
    import contextlib, io
    from agentcore.cli import main
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main()
print(json.dumps({"loaded": sorted(m for m in heavy if m in sys.modules),
                  "modules": len(sys.modules)}))
"""


@dataclass
class Startup:
    wall: dict[str, Stat]
    modules: dict[str, Any]  # Any: JSON from the children


def _time_child(argv: list[str], cwd: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"child failed: {argv!r}: {proc.stderr.strip()[-500:]}")
    return elapsed


def measure_startup(times: int = 9) -> Startup:
    cli = shutil.which("agentcore", path=str(Path(sys.executable).parent)) or "agentcore"
    programs = {
        "`python -c pass`": [sys.executable, "-c", "pass"],
        "`python -c 'import pydantic'` (reference)": [sys.executable, "-c", "import pydantic"],
        "`python -c 'import agentcore'`": [sys.executable, "-c", "import agentcore"],
        "`agentcore --help`": [cli, "--help"],
        # no target: what a program that uses the package pays (pydantic, asyncio, the core)
        "`python -c 'from agentcore import Agent'` (first use)": [
            sys.executable,
            "-c",
            "from agentcore import Agent",
        ],
    }
    with tempfile.TemporaryDirectory() as cwd:  # not the repo: import the installed package
        modules = {
            mode: json.loads(
                subprocess.run(
                    [sys.executable, "-c", _MODULES, mode, ",".join(HEAVY)],
                    cwd=cwd,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            for mode in ("import", "help")
        }
        for argv in programs.values():
            _time_child(argv, cwd)  # warm the file system cache
        wall = {label: Stat() for label in programs}
        for _ in range(times):
            for label, argv in programs.items():  # interleaved
                wall[label].samples.append(_time_child(argv, cwd))
    return Startup(wall, modules)


# -- report -----------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ms(seconds: float) -> str:
    value = seconds * 1e3
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.3f}"
    return f"{value:.4f}"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def spread(s: Stat, unit: Callable[[float], str] = ms) -> str:
    return f"{unit(s.lo)}-{unit(s.hi)}"


def yes(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def loadavg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def git_state() -> str:
    def git(*args: str) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=HERE.parent, capture_output=True, text=True, check=False
        )
        return proc.stdout.strip()

    if exported := os.environ.get("AGENTCORE_BENCH_CODE"):  # run from a clean export
        return exported
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = [
        line[3:] for line in git("status", "--porcelain").splitlines() if line[3:].endswith(".py")
    ]
    if not dirty:
        return f"commit {head}"
    return f"commit {head} plus uncommitted changes in {', '.join(f'`{p}`' for p in dirty)}"


def machine() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "pydantic": pydantic.VERSION,
        "sqlite": sqlite3.sqlite_version,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "tmp": tempfile.gettempdir(),
        "git": git_state(),
    }


@dataclass
class Results:
    stats: dict[tuple[str, int], Stat]
    handoff: Stat
    sizes: list[Bytes]
    lr: LoadResume
    long: list[LongRun]
    tokens: Tokens
    startup: Startup


def report(
    args: argparse.Namespace,
    reps: int,
    info: dict[str, str],
    loads: tuple[str, str],
    r: Results,
    wall: float,
) -> tuple[str, list[tuple[str, str, bool | None]]]:
    verdicts: list[tuple[str, str, bool | None]] = []  # target, measured, met (None: no target)
    out: list[str] = []
    w = out.append
    st = r.stats
    w("# agentcore benchmark: framework overhead per step (issue 15)")
    w("")
    w(f"Generated by `python bench/bench_steps.py{' --quick' if args.quick else ''} --write`;")
    w("do not edit by hand. Numbers are from one run on the machine below; rerun to compare.")
    w("")
    w("## Machine and conditions")
    w("")
    w(f"- CPU: {info['cpu']}, {info['cores']} cores (`os.cpu_count()`)")
    w(
        f"- {info['python']} on {info['platform']}; pydantic {info['pydantic']}, "
        f"SQLite {info['sqlite']}"
    )
    w(f"- Code: {info['git']}")
    w(f"- Date: {info['date']}; total benchmark wall time {wall:.0f} s")
    w(f"- Load average (1/5/15 min) at start {loads[0]}, at end {loads[1]}")
    w("- **The machine is shared and noisy**: other sessions' test suites, compilers and a")
    w("  local model may run at the same time, and fsync latency on these virtual disks varies")
    w("  by 10x. Compare ratios to the floors (measured interleaved, in the same process)")
    w("  rather than absolute times; the targets are judged on those ratios.")
    w(f"- SQLite files live in a fresh directory under `{info['tmp']}` per measurement; every")
    w("  run takes its lease and the stores commit in groups (their defaults).")
    w("- Logging: **as shipped** (structlog not configured: agentcore's events go to the stdlib")
    w('  logger `"agentcore"`, which drops debug and info) unless a row says it is tuned')
    w("  (structlog configured with `make_filtering_bound_logger(logging.WARNING)`).")
    w(f"- Repetitions: R={reps} samples per (case, N), interleaved across cases; `gc.collect()`")
    w("  before each sample; N=100 samples time 1 run, as N=1000. Agent construction is not")
    w("  timed; `await agent.run(...)` is, divided by N+1 steps. Spread is min-max.")
    w("")
    w("## Scenario")
    w("")
    w("`ScriptedModel` with N tool actions (`get_order`, whose body returns a 3-key dict) and")
    w("one finish; `Budget(max_steps=N+1)`; default `Policy`. Floor (a): `TypeAdapter(tool |")
    w("finish).validate_json(action text)` + calling `get_order` per step. Floors (b) and (c):")
    w(f"(a) + `os.write` of a {STEP_BYTES}-byte line (what the stores write per step here) to a")
    w("JSON Lines file opened `O_APPEND`, with and without `os.fsync` per step.")
    w("")

    # -- per-step table
    w("## Time per step (ms)")
    w("")
    w(
        "Ratio to its floor: the median over the repetitions of the case's sample divided by "
        "its floor's sample in the same repetition (measured just before it)."
    )
    w("")
    w("| case | N | median | spread (min-max) | ratio to its floor | floor |")
    w("|---|---:|---:|---:|---:|---|")
    for kind, label in FLOOR_LABELS.items():
        for n in NS:
            s = st[(kind, n)]
            w(f"| {label} | {n} | {ms(s.median)} | {spread(s)} | 1 | |")
    for kind, case in AGENT_CASES.items():
        floor = FLOOR_OF[kind]
        for n in NS:
            s = st[(kind, n)]
            ratio = paired_ratio(st, kind, n)
            w(
                f"| {case.label} | {n} | {ms(s.median)} | {spread(s)} | {ratio:.1f}x | "
                f"{floor.split('_')[0]} {FLOOR_LABELS[floor].split(':')[0][6:]} |"
            )
    w("")
    n = JUDGED_N
    sync_s, async_s = st[("memory_sync", n)].median, st[("memory_async", n)].median
    hands = Stat(r.handoff.samples[NS.index(n) :: len(NS)])  # this N's, one a repetition
    hand = hands.median
    # Paired per repetition: (sync - async) / the hand-off measured right after them.
    factor = statistics.median(
        (a - b) / h
        for a, b, h in zip(
            st[("memory_sync", n)].samples,
            st[("memory_async", n)].samples,
            hands.samples,
            strict=True,
        )
    )
    ok = factor <= SYNC_HANDOFF_FACTOR
    verdicts.append(
        (
            "memory store, sync tool <= async step + 1.2x a bare warm-executor hand-off",
            f"sync - async = {factor:.2f}x the hand-off ({us(sync_s)} - {us(async_s)} us; "
            f"hand-off {us(hand)} us; N={n})",
            ok,
        )
    )
    w(
        f"Sync tool (N={n}): the sync step {us(sync_s)} us, the async step {us(async_s)} us, a "
        f"bare hand-off through a warm executor {us(hand)} us (spread {spread(hands, us)} us; "
        "sampled after each repetition's steps). Per repetition, the sync step's cost over "
        f"the async step is {factor:.2f}x that repetition's hand-off (median): target <= "
        f"{SYNC_HANDOFF_FACTOR}x, {yes(ok)}. `bench_tools.py` measures the same in fresh event "
        "loops (its section below)."
    )
    w("")
    for kind, target, name in (
        ("memory_async", MEMORY_FLOOR_RATIO, "memory store, async tool"),
        ("sqlite_full", FULL_FLOOR_RATIO, "SQLite FULL"),
        ("sqlite_normal", NORMAL_FLOOR_RATIO, "SQLite NORMAL"),
    ):
        ratio = paired_ratio(st, kind, n)
        verdicts.append(
            (
                f"{name} <= {target:g}x {FLOOR_LABELS[FLOOR_OF[kind]].split(':')[0]}",
                f"{ratio:.1f}x ({ms(st[(kind, n)].median)} ms; N={n})",
                ratio <= target,
            )
        )
    ratio_quiet = paired_ratio(st, "memory_async_quiet", n)
    verdicts.append(("(same, logging tuned: structlog at WARNING)", f"{ratio_quiet:.1f}x", None))
    two = statistics.median(
        a / b
        for a, b in zip(
            st[("sqlite_full_two", n)].samples, st[("sqlite_full", n)].samples, strict=True
        )
    )
    verdicts.append(
        (
            "SQLite FULL, two commits a step (non-idempotent tool), vs one",
            f"{two:.2f}x the one-commit step",
            None,
        )
    )
    w(
        "Commits per step: an idempotent tool's step is one commit (its `tool_started` with the "
        "step's model call, action and decision; its result joins the next step's batch). A "
        "non-idempotent tool's result must be durable before anything else happens (the "
        "write-ahead rules: it must never run twice), so its step is two commits: "
        f"{ms(st[('sqlite_full_two', n)].median)} ms vs {ms(st[('sqlite_full', n)].median)} ms "
        f"per step here ({two:.2f}x)."
    )
    w("")

    # -- bytes
    w("## Stored bytes per step (SQLiteStore)")
    w("")
    w("| N | steps | events | events/step | body bytes/step |")
    w("|---:|---:|---:|---:|---:|")
    for b in r.sizes:
        w(
            f"| {b.n} | {b.steps} | {b.events} | {b.events / b.steps:.2f} | "
            f"{b.body_bytes / b.steps:.0f} |"
        )
    w("")

    # -- load and resume
    lr = r.lr
    w("## Load and resume (SQLiteStore; a fresh store on the file each time)")
    w("")
    w("| measurement | median (ms) | spread (ms) | target | met? |")
    w("|---|---:|---:|---|---|")
    load_ratio = lr.load.median / lr.load_floor.median
    w(
        f"| `store.load()` of a completed 1000-step run ({lr.load_events} events) | "
        f"{ms(lr.load.median)} | {spread(lr.load)} | - | {load_ratio:.1f}x the floor |"
    )
    w(
        f"| floor: read the run's JSON Lines export and `validate_json` each line | "
        f"{ms(lr.load_floor.median)} | {spread(lr.load_floor)} | floor | |"
    )
    verdicts.append(
        (
            "load a 1000-step transcript (no target; vs read + validate JSONL)",
            f"{ms(lr.load.median)} ms vs {ms(lr.load_floor.median)} ms ({load_ratio:.1f}x)",
            None,
        )
    )
    for n_res, stat in lr.resume.items():
        target = RESUME_MS[n_res]
        ok = stat.median * 1e3 < target
        verdicts.append(
            (
                f"resume() to the first model request, {n_res}-step run < {target:g} ms",
                f"{ms(stat.median)} ms",
                ok,
            )
        )
        w(
            f"| `resume(budget=...)` of a budget-stopped {n_res}-step run "
            f"({lr.resume_events[n_res]} events) until the model has read the "
            f"{lr.resume_messages[n_res]:,} messages of step {n_res + 1}'s request | "
            f"{ms(stat.median)} | {spread(stat)} | < {target:g} ms | {yes(ok)} |"
        )
    w("")
    w(
        "Peak traced heap while resuming from snapshots (tracemalloc, one extra resume "
        "each; the history's messages are held, not its events): "
        + ", ".join(
            f"{n_res} steps {kb / 1024:.1f} MB ({kb * 1024 / lr.resume_events[n_res]:.0f} bytes "
            "an event)"
            for n_res, kb in lr.resume_peak_kb.items()
        )
        + "."
    )
    for note in lr.notes:
        w(f"- Note: {note}")
    w("")

    # -- long run
    w(f"## One run of {LONG_RUN:,} steps (async tool, default logging)")
    w("")
    w("Per-step time: median of each window of 1000 steps (ms). Heap: tracemalloc's current")
    w("size at the end of each window, in a second, traced run (KB). A MemoryStore holds")
    w("every event (it is the store); with SQLite the driver lets go of the events each")
    w("snapshot covers, and what stays is the rendered conversation. Flat memory: the")
    w("second half of the run grows the heap by at most 1.3x what the first half did.")
    w("")
    for lrun in r.long:
        w(f"- {lrun.label}: {LONG_RUN:,} steps in {lrun.total_s:.1f} s")
        w("  - per step (ms): " + ", ".join(f"{x:.3f}" for x in lrun.window_ms))
        growth = [b - a for a, b in zip(lrun.heap_kb, lrun.heap_kb[1:], strict=False)]
        w(
            "  - heap growth per 1000 steps (KB): "
            + ", ".join(f"{g:.0f}" for g in growth)
            + f" (about {statistics.median(growth):.0f} bytes a step)"
        )
        flat_t = lrun.window_ms[-1] / lrun.window_ms[0]
        half = len(growth) // 2
        flat_m = sum(growth[half:]) / max(sum(growth[:half]), 1e-9)
        verdicts.append(
            (
                f"{LONG_RUN:,} steps, {lrun.label}: flat per-step time (last window <= "
                f"{FLAT_RATIO:g}x the first)",
                f"{flat_t:.2f}x",
                flat_t <= FLAT_RATIO,
            )
        )
        verdicts.append(
            (
                f"{LONG_RUN:,} steps, {lrun.label}: flat memory (second half's heap growth "
                "<= 1.3x the first half's)",
                f"{flat_m:.2f}x, ~{statistics.median(growth):.0f} bytes a step",
                flat_m <= FLAT_RATIO,
            )
        )
    w("")

    # -- tokens
    tk = r.tokens
    w("## Tokens of one request: structured contract vs native tool calling")
    w("")
    w(f"Counted with {tk.counter} on the JSON text of the request the OpenAI adapter builds")
    w("(chat completions): the system text, the history (the messages after it, as JSON),")
    w("and the schema (`response_format` with the strict action schema) or the functions")
    w("(`tools`). The same run, tools (`get_order` only) and history; native mode renders the")
    w("history as tool calls and results. Providers count their own framing on top.")
    w("")
    w(
        "| step | structured: system | history | schema | total | native: system | history "
        "| tools | total | structured - native |"
    )
    w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for step, s_, n_ in tk.rows:
        w(
            f"| {step} | {s_['system']} | {s_['history']} | {s_['schema']} | {s_['total']} | "
            f"{n_['system']} | {n_['history']} | {n_['schema']} | {n_['total']} | "
            f"{s_['total'] - n_['total']:+d} |"
        )
        verdicts.append(
            (
                f"tokens of the step-{step} request (no target)",
                f"structured {s_['total']}, native {n_['total']}",
                None,
            )
        )
    w("")

    # -- start-up
    su = r.startup
    w("## Start-up (whole processes, cwd outside the repository)")
    w("")
    w(f"Median of {len(next(iter(su.wall.values())).samples)} runs each, interleaved.")
    w("")
    w("| program | wall (ms) | spread (ms) |")
    w("|---|---:|---:|")
    for label, s in su.wall.items():
        w(f"| {label} | {ms(s.median)} | {spread(s)} |")
    w("")
    imp = su.wall["`python -c 'import agentcore'`"].median * 1e3
    hlp = su.wall["`agentcore --help`"].median * 1e3
    bare = su.wall["`python -c pass`"].median * 1e3
    verdicts.append(
        (
            f"`import agentcore` < {IMPORT_MS:g} ms (whole process)",
            f"{imp:.0f} ms ({imp - bare:.0f} over a bare python)",
            imp < IMPORT_MS,
        )
    )
    verdicts.append(
        (
            f"`agentcore --help` < {HELP_MS:g} ms (whole process)",
            f"{hlp:.0f} ms ({hlp - bare:.0f} over a bare python)",
            hlp < HELP_MS,
        )
    )
    loaded = {mode: m["loaded"] for mode, m in su.modules.items()}
    clean = not any(loaded.values())
    verdicts.append(
        (
            "neither loads " + ", ".join(HEAVY),
            "; ".join(f"{mode}: {', '.join(v) or 'none'}" for mode, v in loaded.items()),
            clean,
        )
    )
    w(
        "Modules loaded: `import agentcore` "
        f"{su.modules['import']['modules']}, `agentcore --help` {su.modules['help']['modules']}; "
        f"of {', '.join(HEAVY)}: "
        + "; ".join(f"{mode}: {', '.join(v) or 'none'}" for mode, v in loaded.items())
        + f" ({yes(clean)}; tests/test_layering.py asserts it)."
    )
    w("")

    # -- reading
    n = JUDGED_N
    mem_x = paired_ratio(st, "memory_async", n)
    normal_x = paired_ratio(st, "sqlite_normal", n)
    full_x = paired_ratio(st, "sqlite_full", n)
    w("## Reading the misses (what each would take)")
    w("")
    w(
        f"- **Memory store, async tool, {mem_x:.0f}x "
        "its floor.** The floor validates one action and calls a function; a step builds, "
        "validates, folds, encodes and decodes five pydantic events, asks the model through "
        "the contract's parser, checks the arguments and the result, and appends through the "
        "store's checks. Profile of this case (cProfile, shares of the run): the store's "
        "append ~38% (the round trip that refuses what `load` could not read back, encode + "
        "decode + compare of every event, ~21%; the hash chain ~12%), asking the scripted "
        "model and parsing its reply ~29%, the tool call with its argument and result checks "
        "~12%, constructing, folding and observing the events ~10%. Ten times the floor is "
        "~25-30 us: less than five pydantic validations, five encodes and five decodes cost "
        "here. It would take events that are not pydantic models on the hot path (slotted "
        "structs with a generated codec) and a round-trip proof per event type rather than "
        "per event. A proof per event from the field types (skipping the decode-and-compare "
        "for values that provably read back) was built and measured: about 8% of the step "
        "(148 to 136 us CPU), for ~350 lines that must track pydantic's validation exactly; "
        "it was not kept, since the decode-and-compare is the check that found the values "
        "a store could not read back."
    )
    w(
        f"- **SQLite NORMAL, {normal_x:.0f}x "
        "its floor.** The floor is one `os.write` of a line; SQLite's transaction for a step "
        "(five event rows, the run row, the WAL frames of every page touched) costs most of "
        "the difference by itself (`sqlite3` execute calls are about half of this case's "
        "profile), plus the two cancel checks a step reads. Three times a JSONL append is "
        "below what SQLite costs: it would take an append-only log per run as the store's "
        "no-fsync mode."
    )
    fsync_ms = st[("floor_fsync", n)].median * 1e3
    full_ms = st[("sqlite_full", n)].median * 1e3
    w(
        f"- **SQLite FULL, {full_x:.1f}x its floor ({'met' if full_x <= 1.5 else 'missed'}).** "
        "A step is one commit (the targeted structure; two for a non-idempotent tool, "
        f"above). The floor's fsync took {fsync_ms:.2f} ms in this run and the step "
        f"{full_ms:.2f} ms: the rest is the step's CPU, the same work as the NORMAL step "
        "above. So the ratio follows the disk: 1.2x in the last session's run, where an "
        "fsync took 3.3 ms, and the miss here is the per-step CPU of the memory-store row, "
        "not a second commit."
    )
    resume_ok = all(stat.median * 1e3 < RESUME_MS[n_res] for n_res, stat in lr.resume.items())
    w(
        f"- **Resume, {ms(lr.resume[RESUME_NS[0]].median)} ms and "
        f"{ms(lr.resume[RESUME_NS[-1]].median)} ms ({'met' if resume_ok else 'missed'}).** "
        "The run is read from its last snapshot (`agentcore._snapshot`: the folded state and "
        "the rendered history, one row per 512 events, bound to the chain digest of its last "
        "event and sealed) and the events after it (at most 512, decoded by pydantic at "
        "~7 us each under this load); the timing includes the model reading every message "
        f"({', '.join(f'{m:,}' for m in lr.resume_messages.values())} messages). What is "
        "left grows with the history: parsing its JSON chunks and building one message "
        "object per message (~1.5 us each). Without snapshots (older runs, or "
        "`snapshot_every=0`) a resume decodes every event, as the load row shows."
    )
    imp_ms = su.wall["`python -c 'import agentcore'`"].median * 1e3
    hlp_ms = su.wall["`agentcore --help`"].median * 1e3
    if imp_ms >= IMPORT_MS or hlp_ms >= HELP_MS:
        w(
            f"- **Start-up, `import agentcore` {imp_ms:.0f} ms, `agentcore --help` "
            f"{hlp_ms:.0f} ms.** `import agentcore` is meant to load the package alone (its "
            "names load their modules on first use) and `--help` the CLI package besides; "
            "tests/test_layering.py checks both, so a miss here is the machine's load or "
            "an interpreter start-up that grew (compare the `python -c pass` row)."
        )
    w("")

    # -- summary
    w(OWN_SECTIONS_END)
    w("")
    w("| target | measured | met? |")
    w("|---|---|---|")
    for name, measured, ok in verdicts:
        w(f"| {name} | {measured} | {'-' if ok is None else yes(ok)} |")
    w("")
    return "\n".join(out), verdicts


# -- main ---------------------------------------------------------------------------------------


async def run_only(case: str, reps: int, tmp_root: Path) -> None:
    kind, _, n_text = case.partition(":")
    n = int(n_text or "1000")
    fn: Callable[[str, int, Path], Awaitable[float]] = (
        sample_floor if kind.startswith("floor") else sample_agent
    )
    for _ in range(reps):
        gc.collect()
        per_step = await fn(kind, n, tmp_root)
        print(f"{kind} N={n}: {per_step * 1e3:.4f} ms/step")


async def main_async(args: argparse.Namespace, reps: int, tmp_root: Path) -> None:
    if args.only:
        await run_only(args.only, reps, tmp_root)
        return
    started = time.perf_counter()
    load0 = loadavg()
    info = machine()
    log("start-up (subprocesses)...")
    startup = measure_startup()
    log("per-step timings...")
    stats, handoff = await measure_steps(reps, tmp_root)
    log("stored bytes...")
    sizes = await measure_bytes(tmp_root)
    log("load and resume...")
    lr = await measure_load_resume(reps, tmp_root)
    log("long run...")
    long = await measure_long(tmp_root)
    log("tokens...")
    tokens = await measure_tokens()
    wall = time.perf_counter() - started
    results = Results(stats, handoff, sizes, lr, long, tokens, startup)
    text, verdicts = report(args, reps, info, (load0, loadavg()), results, wall)
    print(text)
    if args.write:
        write_sections(text, args.results)
        log(f"wrote {args.results}")
    missed = [name for name, _, ok in verdicts if ok is False]
    judged = [ok for _, _, ok in verdicts if ok is not None]
    log(f"targets met: {sum(judged)}/{len(judged)}")
    for name in missed:
        log(f"  missed: {name}")


def write_sections(text: str, results: Path) -> None:
    """Replace this report's sections at the top of ``results``; keep every section other
    benchmarks put after its last one."""
    old = results.read_text() if results.exists() else ""
    tail = ""
    for marker in (OWN_SECTIONS_END, *OLD_SECTIONS_END):
        last = old.find(marker)
        if last >= 0:
            after = old.find("\n## ", last + len(marker))
            tail = old[after:] if after >= 0 else ""
            break
    results.write_text(text.rstrip() + "\n" + tail)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="R=2 repetitions instead of 5")
    parser.add_argument("--reps", type=int, default=None, help="override R")
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    parser.add_argument(
        "--results", type=Path, default=HERE / "RESULTS.md", help="the file --write updates"
    )
    parser.add_argument(
        "--only",
        metavar="KIND:N",
        help=f"time one case, e.g. memory_async:1000 ({', '.join([*FLOOR_LABELS, *AGENT_CASES])})",
    )
    args = parser.parse_args(argv)
    if args.only:
        kind, _, n_text = args.only.partition(":")
        if kind not in (*FLOOR_LABELS, *AGENT_CASES):
            # Never another case under this name: a figure must be the case it names.
            parser.error(
                f"--only: no case {kind!r}; the cases: {', '.join([*FLOOR_LABELS, *AGENT_CASES])}"
            )
        if n_text and not (n_text.isdigit() and int(n_text) > 0):
            parser.error(f"--only: N must be a positive number of steps, got {n_text!r}")
    reps = args.reps or (2 if args.quick else 5)
    with tempfile.TemporaryDirectory(prefix="agentcore-bench-") as tmp:
        asyncio.run(main_async(args, reps, Path(tmp)))


if __name__ == "__main__":
    main()
