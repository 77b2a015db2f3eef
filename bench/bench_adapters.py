"""Adapter overhead per call: our code's time, excluding the server's.

Each provider adapter calls a loopback fake that answers a fixed, documented payload. The
floor is the same HTTP exchange made directly with httpx (the client litellm and the openai
SDK use) on a kept-alive connection: request bytes, the fake's work, response bytes. The
difference is what the adapter adds (schema dialect, envelope, litellm, parsing, retry
loop, breaker, validation).

Usage: python bench/bench_adapters.py [--calls 200] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ACTION = {"type": "tool", "thought": "Look it up.", "tool": "get_order", "args": {"order_id": "A1"}}


async def _time_adapter(adapter: Any, request: Any, calls: int) -> list[float]:  # Any: adapter
    out: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        completion = await adapter.complete_structured(request)
        out.append((time.perf_counter() - started) * 1000)
        assert completion.action is not None, completion.error
    return out


async def _time_floor(url: str, body: dict[str, Any], calls: int) -> list[float]:  # Any: JSON
    import httpx

    out: list[float] = []
    async with httpx.AsyncClient() as client:
        for _ in range(calls):
            started = time.perf_counter()
            response = await client.post(url, json=body, headers={"Authorization": "Bearer x"})
            json.loads(response.content)
            out.append((time.perf_counter() - started) * 1000)
    return out


async def measure(calls: int) -> list[tuple[str, list[float], list[float]]]:
    sys.path.append(str(ROOT))  # for tests.adapters.fakes; agentcore stays the installed one
    from pydantic import BaseModel

    from agentcore.adapters import CompletionRequest, Message
    from agentcore.adapters.openai import OpenAIAdapter
    from agentcore.contracts import ToolSpec, compile_action_schema
    from tests.adapters import fakes

    class Args(BaseModel):
        order_id: str

    schema = compile_action_schema([ToolSpec("get_order", "Look up an order.", Args)])
    request = CompletionRequest(
        schema=schema, system="You are a test.", messages=(Message("user", "Where is A1?"),)
    )
    rows: list[tuple[str, list[float], list[float]]] = []
    with fakes.FakeProvider() as server:
        # http.server writes headers and body in separate small sends; with Nagle's algorithm
        # and delayed ACKs that costs ~40 ms a request on loopback, which would swamp both
        # sides of the comparison.
        server._server.RequestHandlerClass.disable_nagle_algorithm = True  # pyright: ignore[reportPrivateUsage]  # bench-only tuning of the test fake
        reply = fakes.ok(ACTION)
        server.queue(*([reply] * (calls + 20)))
        adapter = OpenAIAdapter("openai/gpt-bench", api_base=server.base_url, api_key="sk-x")
        await _time_adapter(adapter, request, 20)  # warm up: litellm import, connections
        ours = await _time_adapter(adapter, request, calls)
        body = server.requests[-1].body
        server.queue(*([reply] * (calls + 20)))
        url = server.base_url + "/chat/completions"
        await _time_floor(url, body, 20)
        floor = await _time_floor(url, body, calls)
        rows.append(("openai (chat completions)", ours, floor))
        server.queue(*([reply] * (calls + 20)))
        SHARES.update(await _attribute(adapter, request, calls))
    return rows


SHARES: dict[str, float] = {}


async def _attribute(adapter: Any, request: Any, calls: int) -> dict[str, float]:  # Any: adapter
    """Self time per package under cProfile (inflated by profiling; read the shares)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        await adapter.complete_structured(request)
    profiler.disable()
    shares: dict[str, float] = {}
    stats: Any = pstats.Stats(profiler)  # Any: pstats keeps its table untyped
    for (filename, _line, _fn), (_cc, _nc, self_time, _ct, _callers) in stats.stats.items():
        if "/litellm/" in filename:
            key = "litellm"
        elif "/openai/" in filename:
            key = "openai SDK"
        elif "/httpx/" in filename or "/httpcore/" in filename:
            key = "httpx/httpcore"
        elif "site-packages" not in filename and (
            "/agentcore/" in filename or "/adapters/" in filename or "/contracts/" in filename
        ):
            key = "agentcore"
        else:
            key = "other (asyncio, pydantic, stdlib)"
        shares[key] = shares.get(key, 0.0) + self_time
    total = sum(shares.values())
    return {k: v / total for k, v in sorted(shares.items(), key=lambda kv: -kv[1])}


def main() -> None:
    import structlog

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--write", action="store_true", help="append to bench/RESULTS.md")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    rows = asyncio.run(measure(args.calls))
    lines = [
        "## Adapter overhead per call (loopback fake, our code excluding the server)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}; shared and noisy. "
        f"{args.calls} sequential calls after 20 warm-up calls; milliseconds, median (p10-p90). "
        "Floor: the same request body posted with httpx on a kept-alive connection to the same "
        "fake server.",
        "",
        "| adapter | per call | floor (HTTP + server) | adapter overhead |",
        "|---|---|---|---|",
    ]
    for name, ours, floor in rows:

        def cell(xs: list[float]) -> str:
            q = statistics.quantiles(xs, n=10)
            return f"{statistics.median(xs):.2f} ({q[0]:.2f}-{q[-1]:.2f})"

        overhead = statistics.median(ours) - statistics.median(floor)
        lines.append(f"| {name} | {cell(ours)} | {cell(floor)} | {overhead:.2f} |")
    lines += [
        "",
        "Where an adapter call's time goes (cProfile self time, shares; profiling inflates "
        "absolute times): " + ", ".join(f"{k} {v:.0%}" for k, v in SHARES.items()) + ".",
    ]
    text = "\n".join([*lines, ""])
    print(text)
    if args.write:
        results = ROOT / "bench" / "RESULTS.md"
        current = results.read_text() if results.exists() else ""
        marker = "## Adapter overhead per call"
        if marker in current:
            head, _, tail = current.partition(marker)
            rest = tail.split("\n## ", 1)
            current = head + ("## " + rest[1] if len(rest) > 1 else "")
        results.write_text(current.rstrip() + "\n\n" + text)


if __name__ == "__main__":
    main()
