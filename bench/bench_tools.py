"""Sync tools without the thread tax (issue 15): the step cost of a sync tool vs an async one.

Measured in one process, interleaved: an agent on a ``MemoryStore`` running N tool steps
(``ScriptedModel``, as in ``bench_steps.py``) with the same tool body written as

- an async function (no hand-off);
- a sync function, the default: a worker thread of the library's warm pool, in a copy of
  the caller's context (the loop waits up to 20 us for a quick tool's outcome, then awaits
  it);
- a sync function sent through ``asyncio.to_thread`` (what ``Tool`` did before: the loop's
  default executor, which ``asyncio.run`` shuts down after every run);
- a sync function with ``@tool(inline=True)`` (on the loop, no hand-off);

and the bare hand-offs: a trivial function sent through a warm executor and back, and
through ``asyncio.to_thread``. Target (issue 15): sync step <= async step + 1.2x the bare
hand-off (warm executor), all medians of the same run.

Usage::

    python bench/bench_tools.py            # prints the report
    python bench/bench_tools.py --write    # also puts it in bench/RESULTS.md (its section)
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import datetime as dt
import functools
import gc
import logging
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel

from agentcore import Agent, Budget, RunStatus, Tool, ToolContext, tool
from agentcore.adapters import ScriptedModel
from agentcore.stores import MemoryStore

HERE = Path(__file__).resolve().parent
SECTION = "## Sync tools: the hand-off to a thread"
N = 100  # tool steps per run (+ 1 finish)
RUNS = 2  # runs per sample
TARGET_FACTOR = 1.2
TASK = "Look up the orders and say where they are."


def _body(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "status": "shipped", "eta": "2 days"}


async def get_order_async(order_id: str) -> dict[str, str]:
    """Look up one order by id.

    Args:
        order_id: the order's id.
    """
    return _body(order_id)


def get_order_sync(order_id: str) -> dict[str, str]:
    """Look up one order by id.

    Args:
        order_id: the order's id.
    """
    return _body(order_id)


class _ToThreadTool(Tool):
    """The call path before this change: ``asyncio.to_thread`` per call."""

    def _call(
        self, args: BaseModel, ctx: ToolContext, secrets: Mapping[str, str] | None = None
    ) -> Awaitable[Any]:  # Any: the result
        del ctx, secrets
        kwargs = {k: getattr(args, k) for k in type(args).model_fields}
        return asyncio.to_thread(self.fn, **kwargs)


TOOLS: dict[str, Tool] = {
    "agent, async tool": tool(effect="read", name="get_order")(get_order_async),
    "agent, sync tool (default: warm pool)": tool(effect="read", name="get_order")(get_order_sync),
    "agent, sync tool via asyncio.to_thread (before)": _ToThreadTool(
        get_order_sync,
        effect="read",
        idempotent=None,
        timeout=None,
        reconcile=None,
        name="get_order",
        description=None,
    ),
    "agent, sync tool, inline=True": tool(effect="read", name="get_order", inline=True)(
        get_order_sync
    ),
}


def script() -> list[dict[str, Any]]:  # Any: JSON
    items: list[dict[str, Any]] = [  # Any: JSON
        {"type": "tool", "thought": "Next.", "tool": "get_order", "args": {"order_id": f"A{i}"}}
        for i in range(N)
    ]
    return [*items, {"type": "finish", "thought": "Done.", "answer": "All shipped."}]


async def agent_step(t: Tool) -> float:
    """Seconds per step over RUNS runs of N + 1 steps."""
    total = 0.0
    store = MemoryStore()
    for _ in range(RUNS):
        agent = Agent(tools=[t], model=ScriptedModel(script()), store=store)
        started = time.perf_counter()
        result = await agent.run(TASK, budget=Budget(max_steps=N + 1))
        total += time.perf_counter() - started
        if result.status is not RunStatus.COMPLETED:
            raise RuntimeError(f"benchmark run did not complete: {result}")
    return total / (RUNS * (N + 1))


_POOL = ThreadPoolExecutor(thread_name_prefix="bench")


def _trivial() -> int:
    return 1


async def handoff_pool() -> float:
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    for _ in range(N):
        await loop.run_in_executor(_POOL, _trivial)
    return (time.perf_counter() - started) / N


async def handoff_pool_ctx() -> float:
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    for _ in range(N):
        ctx = contextvars.copy_context()
        await loop.run_in_executor(_POOL, functools.partial(ctx.run, _trivial))
    return (time.perf_counter() - started) / N


async def handoff_to_thread() -> float:
    started = time.perf_counter()
    for _ in range(N):
        await asyncio.to_thread(_trivial)
    return (time.perf_counter() - started) / N


BARE: dict[str, Callable[[], Coroutine[Any, Any, float]]] = {  # Any: asyncio's own
    "bare hand-off: warm executor": handoff_pool,
    "bare hand-off: warm executor + context copy": handoff_pool_ctx,
    "bare hand-off: asyncio.to_thread": handoff_to_thread,
}


def one_sample(case: str) -> float:
    """One sample in a fresh ``asyncio.run`` (as a script calling ``agent.run`` does)."""
    gc.collect()
    if case in TOOLS:
        return asyncio.run(agent_step(TOOLS[case]))
    return asyncio.run(BARE[case]())


def report(samples: dict[str, list[float]], r: int, began: float, load0: str) -> str:
    us = {k: statistics.median(v) * 1e6 for k, v in samples.items()}
    bare = us["bare hand-off: warm executor"]
    async_step = us["agent, async tool"]
    limit = async_step + TARGET_FACTOR * bare
    load1 = "/".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        SECTION,
        "",
        "Generated by `python bench/bench_tools.py --write`; rerun to compare.",
        "",
        f"- Machine: {os.cpu_count()} cores, CPython {platform.python_version()} on "
        f"{platform.platform()}",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; wall time "
        f"{time.perf_counter() - began:.0f} s; load average (1/5/15 min) {load0} at start, "
        f"{load1} at end (shared machine: compare ratios within this run)",
        f"- MemoryStore, ScriptedModel, N={N} tool steps + finish, {RUNS} runs per sample, "
        f"R={r} samples per case interleaved, each sample in a fresh `asyncio.run`; "
        "logging at its default (disabled). Bare hand-offs: N trivial calls per sample.",
        "",
        "| case | median (us) | spread (min-max, us) | minus async step (us) |",
        "|---|---:|---:|---:|",
    ]
    for k, v in samples.items():
        extra = f"{us[k] - async_step:.1f}" if k.startswith("agent") else ""
        lines.append(f"| {k} | {us[k]:.1f} | {min(v) * 1e6:.1f}-{max(v) * 1e6:.1f} | {extra} |")
    sync_step = us["agent, sync tool (default: warm pool)"]
    # Paired per repetition (the cases of one repetition run back to back): robust to the
    # hand-off's cost changing with the other core's load between repetitions.
    factor = statistics.median(
        (a - b) / h
        for a, b, h in zip(
            samples["agent, sync tool (default: warm pool)"],
            samples["agent, async tool"],
            samples["bare hand-off: warm executor"],
            strict=True,
        )
    )
    met = "**met**" if factor <= TARGET_FACTOR else "**missed**"
    lines += [
        "",
        f"Target: sync step <= async step + {TARGET_FACTOR}x bare hand-off (warm executor). "
        f"Medians: {async_step:.1f} + {TARGET_FACTOR} x {bare:.1f} = {limit:.1f} us against a "
        f"sync step of {sync_step:.1f} us; per repetition (median of (sync - async) / "
        f"hand-off, the verdict) {factor:.2f}x: {met}. Before (asyncio.to_thread): "
        f"{us['agent, sync tool via asyncio.to_thread (before)']:.1f} us.",
        "",
        "Reading (2026-12-01, this machine): the bare hand-off itself swings between ~30 us",
        "(a core idle) and ~100 us (the other core busy) from one minute to the next. With a",
        "`ThreadPoolExecutor` and `call_soon_threadsafe` a sync step cost about 2x the bare",
        "hand-off over the async step (a wake-up of the worker, then of the loop through its",
        "self-pipe, then a task switch). Now the loop waits up to 20 us (plus the OS timer",
        "slack, ~50 us) on a lock the worker releases, takes a quick tool's outcome directly",
        "(no future, no task switch), and the pool is a plain queue whose worker does its",
        "bookkeeping before it hands back, so the loop's thread is not woken twice (by the",
        "lock, then by the GIL). A tool still running after the wait is awaited as before:",
        "the loop is never held for the tool's own time (tests/test_tools.py checks it).",
        "`inline=True` removes the hand-off (the async step's cost) for a tool that never blocks.",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str, path: Path) -> None:
    """Replace this benchmark's section of ``path`` (bench/RESULTS.md) or append it."""
    old = path.read_text() if path.exists() else ""
    start = old.find(SECTION)
    if start < 0:
        path.write_text(old.rstrip() + "\n\n" + text.rstrip() + "\n")
        return
    end = old.find("\n## ", start + len(SECTION))
    tail = old[end:] if end >= 0 else ""
    path.write_text(old[:start] + text.rstrip() + "\n" + tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-r", "--repeat", type=int, default=9, help="samples per case")
    parser.add_argument("--write", action="store_true", help="put the report in RESULTS.md")
    parser.add_argument(
        "--results", type=Path, default=HERE / "RESULTS.md", help="the file --write updates"
    )
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    began = time.perf_counter()
    load0 = "/".join(f"{x:.2f}" for x in os.getloadavg())
    cases = [*TOOLS, *BARE]
    for case in cases:  # warm-up, not recorded
        one_sample(case)
    samples: dict[str, list[float]] = {c: [] for c in cases}
    for _ in range(args.repeat):
        for case in cases:
            samples[case].append(one_sample(case))
    text = report(samples, args.repeat, began, load0)
    print(text)
    if args.write:
        write_section(text, args.results)
        print(f"wrote {args.results}", file=sys.stderr)


if __name__ == "__main__":
    main()
