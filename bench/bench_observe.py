#!/usr/bin/env python
"""What observability costs per step: logging and OpenTelemetry on and off.

Scenario as in ``bench_steps.py``: the ``ScriptedModel`` answers N = 100 tool actions (one
in-process async read tool) and a finish, MemoryStore (no disk: the hot path alone), wall
time of ``await agent.run(...)`` divided by the N + 1 steps. Each case runs in its own
process (OpenTelemetry, once imported, stays imported), and the cases are interleaved over
R rounds so that noise from other processes spreads over all of them:

- ``quiet``: structlog configured at WARNING (the library's per-event INFO logs are off),
  OpenTelemetry not imported. The default for a service that logs warnings only.
- ``otel_imported``: as ``quiet``, but the application imported OpenTelemetry and set no
  provider (agentcore checks for a provider once per advance and stays a no-op).
- ``logs_json``: ``configure_logging(json=True, level="info")`` to ``/dev/null``: one JSON
  line per transcript event.
- ``otel_sdk``: the OpenTelemetry SDK configured: a TracerProvider with a
  BatchSpanProcessor to an exporter that drops spans, and a MeterProvider with an
  in-memory reader (logs at WARNING).
- ``otel_unsampled``: as ``otel_sdk`` with the ``ALWAYS_OFF`` sampler: metrics, and spans
  that record nothing.
- ``before`` (with ``--before DIR``): ``quiet`` on another source tree, e.g. the commit
  before observability was added (``git archive <commit> | tar -x -C DIR``).

Usage::

    python bench/bench_observe.py                   # R=5
    python bench/bench_observe.py --rounds 9 --before /tmp/agentcore-before
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
N = 100
RUNS = 4  # runs of N + 1 steps per sample
SAMPLES = 7  # samples per process; the process reports their median
CASES = ("quiet", "otel_imported", "logs_json", "otel_sdk", "otel_unsampled")


def tool_item(i: int) -> dict[str, Any]:  # Any: a JSON action
    return {
        "type": "tool",
        "thought": "Look up the next order.",
        "tool": "get_order",
        "args": {"order_id": f"A{i:05d}"},
    }


FINISH = {"type": "finish", "thought": "All looked up.", "answer": "All shipped."}


def setup(case: str) -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if case == "otel_imported":
        import opentelemetry.metrics
        import opentelemetry.trace  # noqa: F401
    elif case == "logs_json":
        from agentcore import configure_logging

        configure_logging(json=True, level="info", file=open(os.devnull, "w"))  # noqa: SIM115
    elif case in ("otel_sdk", "otel_unsampled"):
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

        from agentcore import configure_telemetry

        class Drop(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:  # Any: the SDK's span sequence
                del spans
                return SpanExportResult.SUCCESS

        sampler = ALWAYS_OFF if case == "otel_unsampled" else ALWAYS_ON
        tracer_provider = TracerProvider(sampler=sampler)
        tracer_provider.add_span_processor(BatchSpanProcessor(Drop()))
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        configure_telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)


async def one_case(case: str) -> list[float]:
    """Seconds per step of SAMPLES samples, in this process."""
    setup(case)
    from agentcore import Agent, Budget, RunStatus, tool
    from agentcore.adapters import ScriptedModel
    from agentcore.stores import MemoryStore

    @tool(effect="read", name="get_order")
    async def get_order(order_id: str) -> dict[str, str]:
        """Look up one order by id."""
        return {"order_id": order_id, "status": "shipped", "eta": "2 days"}

    script = [tool_item(i) for i in range(N)] + [FINISH]

    async def sample() -> float:
        store = MemoryStore()
        total = 0.0
        for _ in range(RUNS):
            agent = Agent(tools=[get_order], model=ScriptedModel(script), store=store)
            started = time.perf_counter()
            result = await agent.run("Look up the orders.", budget=Budget(max_steps=N + 1))
            total += time.perf_counter() - started
            if result.status is not RunStatus.COMPLETED:
                raise RuntimeError(f"benchmark run did not complete: {result}")
        await store.close()
        return total / (RUNS * (N + 1))

    await sample()  # warm-up: imports, schema builds
    samples: list[float] = []
    for _ in range(SAMPLES):
        gc.collect()
        samples.append(await sample())
    return samples


def run_case(case: str, before: Path | None) -> list[float]:
    env = dict(os.environ)
    if case == "before":
        assert before is not None
        env["PYTHONPATH"] = str(before)
        case = "quiet"
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--case", case],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd="/tmp",
    )
    if out.returncode != 0:
        raise RuntimeError(f"case {case} failed:\n{out.stderr}")
    return [float(x) for x in json.loads(out.stdout.strip().splitlines()[-1])["per_step_s"]]


def level_check() -> list[tuple[str, float]]:
    """Nanoseconds per transcript event for the log observer alone, on the events of one
    recorded run: the level off (the check only), the fields gathered and handed to a
    logger whose level is off (what the check saves), and one JSON line to /dev/null."""
    import structlog

    from agentcore import Agent, Budget, configure_logging, tool
    from agentcore._observability import get_logger
    from agentcore._observability._observer import LogObserver, _fields  # pyright: ignore[reportPrivateUsage]
    from agentcore.adapters import ScriptedModel

    @tool(effect="read", name="get_order")
    async def get_order(order_id: str) -> dict[str, str]:
        """Look up one order by id."""
        return {"order_id": order_id}

    script = [tool_item(i) for i in range(N)] + [FINISH]

    async def events() -> list[Any]:  # Any: transcript events
        agent = Agent(tools=[get_order], model=ScriptedModel(script), store="memory://")
        result = await agent.run("Look up the orders.", budget=Budget(max_steps=N + 1))
        return await agent.transcript(result.run_id)

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    evs = asyncio.run(events())
    off = get_logger().bind(run_id="r")
    checked = LogObserver(off, logging.WARNING)

    def unchecked(ev: Any) -> None:  # Any: an event
        off.info(ev.type, **_fields(ev))

    def timed(fn: Any) -> float:  # Any: a callable of one event
        best = float("inf")
        for _ in range(7):
            started = time.perf_counter()
            for _ in range(20):
                for ev in evs:
                    fn(ev)
            best = min(best, (time.perf_counter() - started) / (20 * len(evs)))
        return best * 1e9

    rows = [("level off: the check only", timed(checked.event))]
    rows.append(("level off, fields gathered first (no check)", timed(unchecked)))
    configure_logging(json=True, level="info", file=open(os.devnull, "w"))  # noqa: SIM115
    rows.append(
        (
            "level on: one JSON line to /dev/null",
            timed(LogObserver(get_logger().bind(run_id="r"), logging.INFO).event),
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--case", choices=CASES, help="run one case in this process (internal)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="a source tree to measure as 'before'")
    parser.add_argument("--levels", action="store_true", help="only the log level check")
    args = parser.parse_args()
    if args.levels:
        print("| log observer, per transcript event | ns (fastest of 7) |")
        print("|---|---:|")
        for label, ns in level_check():
            print(f"| {label} | {ns:.0f} |")
        return
    if args.case:
        samples = asyncio.run(one_case(args.case))
        import agentcore

        print(json.dumps({"per_step_s": samples, "agentcore": agentcore.__file__}))
        return
    cases = (("before",) if args.before else ()) + CASES
    medians: dict[str, list[float]] = {c: [] for c in cases}
    lows: dict[str, list[float]] = {c: [] for c in cases}
    for r in range(args.rounds):
        for case in cases:
            samples = run_case(case, args.before)
            medians[case].append(statistics.median(samples))
            lows[case].append(min(samples))
            print(
                f"round {r + 1}/{args.rounds} {case:<15} "
                f"{statistics.median(samples) * 1e6:8.1f} us/step (min {min(samples) * 1e6:.1f})",
                file=sys.stderr,
            )
    quiet_med, quiet_min = statistics.median(medians["quiet"]), min(lows["quiet"])
    print(
        f"\nN={N} tool steps + finish, MemoryStore, {args.rounds} processes per case, each "
        f"{SAMPLES} samples of {RUNS} runs: the median of the processes' medians, and the "
        "fastest sample of all (the least disturbed by other processes)\n"
    )
    print("| case | us/step, median | vs quiet | us/step, fastest | vs quiet |")
    print("|---|---:|---:|---:|---:|")
    for case in cases:
        med, low = statistics.median(medians[case]), min(lows[case])
        print(
            f"| {case} | {med * 1e6:.1f} | {(med - quiet_med) * 1e6:+.1f} | "
            f"{low * 1e6:.1f} | {(low - quiet_min) * 1e6:+.1f} |"
        )


if __name__ == "__main__":
    main()
