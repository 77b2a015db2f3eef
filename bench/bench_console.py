#!/usr/bin/env python
"""The web console's time to first byte with 100,000 runs in a SQLite store.

Seeds a store once (kept at ``--db``; default under ``/tmp``) with N runs (default 100,000)
as agents record them: every run ``run_started`` (a tenant among 20, metadata with a ticket
number), model calls, actions, a tool call, ``run_finished``; 1% still waiting for a person,
1% failed, 1% out of budget. Then serves ``agentcore.console.create_app`` with uvicorn in a
subprocess (loopback, one worker, ``log_level=warning``) and times, from a client in this
process, each page from sending the request to the first byte of the body (TTFB), over
keep-alive connections: 20 warm-up requests, then R timed requests per page, interleaved
across pages.

Usage::

    python bench/bench_console.py                  # N=100000, R=200; prints the report
    python bench/bench_console.py --write          # also appends to bench/RESULTS.md
    python bench/bench_console.py --runs 20000 --requests 50
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from agentcore.events import (
    ActionProposed,
    Decision,
    Event,
    ModelCalled,
    RunFinished,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from agentcore.stores import SQLiteStore

TENANTS = [f"tenant-{i:02d}" for i in range(20)]
RESULTS = Path(__file__).with_name("RESULTS.md")


def run_events(i: int, now: float, n: int) -> list[Event]:
    """Run ``i`` of ``n``: about 10 events, most recent last."""
    run_id = f"run-{i:06d}"
    at = now - (n - i) * 30.0
    waiting, failed, exhausted = i % 100 == 7, i % 100 == 13, i % 100 == 21
    events: list[Event] = [
        RunStarted(
            run_id=run_id,
            seq=0,
            at=at,
            task=f"Customer {i % 9973} asks where order {i} is and whether it can be refunded",
            scope=["lookup", "refund"],
            budget={"max_steps": 8},
            policy={},
            contract={"version": "1" if i < n * 0.7 else "2", "hash": "c0ffee"},
            route=["openai/gpt-4.1-mini"],
            tools={},
            metadata={"ticket": f"T-{i}", "channel": "email" if i % 2 else "chat"},
            tenant=TENANTS[i % len(TENANTS)],
        )
    ]

    def add(kind: type[Any], **fields: Any) -> None:  # Any: event fields
        events.append(kind.model_validate({"run_id": run_id, "seq": len(events), **fields}))

    add(ModelCalled, at=at + 1, step=1, model="openai/gpt-4.1-mini", outcome="ok")
    tool = {"type": "tool", "thought": "Look the order up.", "tool": "lookup"}
    add(ActionProposed, at=at + 1, step=1, call_id="c1", action=tool | {"args": {"id": str(i)}})
    add(Decision, at=at + 1, step=1, call_id="c1", verdict="execute")
    add(ToolStarted, at=at + 1, step=1, call_id="c1", tool="lookup", args={"id": str(i)},
        idempotency_key=f"{run_id}:c1")  # fmt: skip
    add(ToolFinished, at=at + 2, step=1, call_id="c1", tool="lookup", ok=True,
        result={"state": "shipped"})  # fmt: skip
    add(ModelCalled, at=at + 3, step=2, model="openai/gpt-4.1-mini", outcome="ok")
    if waiting:
        refund = {"type": "tool", "thought": "Refund it.", "tool": "refund"}
        add(ActionProposed, at=at + 3, step=2, call_id="c2", action=refund | {"args": {"id": "x"}})
        add(Decision, at=at + 3, step=2, call_id="c2", verdict="needs_confirmation")
        add(RunFinished, at=at + 3, status="awaiting_confirmation", reason="destructive")
        return events
    finish = {"type": "finish", "thought": "Answer.", "answer": "It shipped yesterday."}
    add(ActionProposed, at=at + 3, step=2, call_id="c2", action=finish)
    add(Decision, at=at + 3, step=2, call_id="c2", verdict="execute")
    status = "failed" if failed else "budget_exhausted" if exhausted else "completed"
    add(RunFinished, at=at + 4, status=status, answer="It shipped yesterday.")
    return events


def seeded_already(db: Path, n: int) -> bool:
    """Whether ``db`` holds the ``n`` runs of an earlier run (otherwise it is removed)."""
    if not db.exists():
        return False
    with sqlite3.connect(db) as conn:
        (have,) = conn.execute("SELECT count(*) FROM runs").fetchone()
    if have == n:
        return True
    db.unlink()
    return False


async def seed(db: Path, n: int) -> float:
    """Fill ``db`` with ``n`` runs; seconds taken."""
    started = time.perf_counter()
    store = SQLiteStore(db, synchronous="NORMAL")
    now = time.time()
    try:
        for i in range(n):
            events = run_events(i, now, n)
            await store.append(events[0].run_id, 0, events)
    finally:
        await store.close()
    return time.perf_counter() - started


def serve(db: Path, port: int) -> None:
    """The server process: the console over ``db``, every request signed in as 'bench'."""
    import uvicorn

    from agentcore.console import create_app

    app = create_app(f"sqlite:///{db}", authenticate=lambda _request: "bench")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ttfb(client: httpx.Client, path: str) -> float:
    """Milliseconds from sending the request to the first byte of the body."""
    started = time.perf_counter()
    first = 0.0
    with client.stream("GET", path) as response:
        for _ in response.iter_raw():
            first = first or time.perf_counter()
        assert response.status_code == 200, (path, response.status_code)
    return (first - started) * 1000


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--serve", nargs=2, metavar=("DB", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), int(args.serve[1]))
        return
    n: int = args.runs
    db: Path = args.db or Path("/tmp") / f"agentcore-console-bench-{n}.db"
    seeded = 0.0 if seeded_already(db, n) else asyncio.run(seed(db, n))
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(db), str(port)])
    wall = time.perf_counter()
    load_start = os.getloadavg()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(200):
                try:
                    client.get("/api/csrf")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            deep = client.get("/api/runs", params={"limit": 500}).json()["next"]
            for _ in range(40):  # a cursor about 20,000 runs down
                further = client.get("/api/runs", params={"limit": 500, "after": deep})
                deep = further.json()["next"] or deep
            pages = {
                "runs list (first page, 50 runs)": "/runs",
                "runs list, page 41 (keyset cursor)": f"/runs?after={deep}",
                "runs list, status=awaiting_confirmation": "/runs?status=awaiting_confirmation",
                "runs list, tenant=tenant-07": "/runs?tenant=tenant-07",
                "runs list, search 'refunded' (task, many hits)": "/runs?q=refunded",
                f"runs list, search 'T-{n // 2}' (metadata, one hit)": f"/runs?q=T-{n // 2}",
                "run page (11 events)": f"/runs/run-{n - 2:06d}",
                "run page, waiting for a person": f"/runs/run-{(n - 100) // 100 * 100 + 7:06d}",
                "api: /api/runs": "/api/runs",
            }
            times: dict[str, list[float]] = {name: [] for name in pages}
            for _ in range(20):
                for path in pages.values():
                    ttfb(client, path)
            for _ in range(args.requests):
                for name, path in pages.items():
                    times[name].append(ttfb(client, path))
    finally:
        server.terminate()
        server.wait(10)
    wall = time.perf_counter() - wall
    load_end = os.getloadavg()
    lines = [
        "",
        "## Console: time to first byte with 100,000 runs (SQLite)"
        if n == 100_000
        else f"## Console: time to first byte with {n} runs (SQLite)",
        "",
        "Generated by `python bench/bench_console.py --write` (appended; rerun to compare).",
        "",
        f"- {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores; CPython "
        f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}; wall {wall:.0f} s"
        + (f" (+ {seeded:.0f} s seeding)" if seeded else " (store seeded earlier)"),
        f"- Load average at start {load_start[0]:.2f}, at end {load_end[0]:.2f}: a shared, "
        "noisy machine.",
        f"- {n} runs of ~11 events in one SQLite file ({db.stat().st_size / 1e6:.0f} MB), "
        "20 tenants, 1% waiting for a person; `create_app` served by uvicorn in its own "
        "process on loopback; TTFB = request sent to first body byte, keep-alive; "
        f"{args.requests} timed requests per page after 20 warm-ups, interleaved.",
        "",
        "| page | p50 ms | p95 ms | max ms |",
        "|---|---:|---:|---:|",
    ]
    for name, values in times.items():
        lines.append(
            f"| {name} | {statistics.median(values):.1f} | {percentile(values, 0.95):.1f} | "
            f"{max(values):.1f} |"
        )
    report = "\n".join(lines) + "\n"
    print(report)
    if args.write:
        with RESULTS.open("a") as f:
            f.write(report)


if __name__ == "__main__":
    main()
