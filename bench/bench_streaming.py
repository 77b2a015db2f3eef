"""Time to the first thought character versus time to the complete action, streamed.

A model that streams at a fixed token rate writes one next action (a ~300-character thought,
then a tool call). ``Agent.stream`` yields ThoughtDelta events while the reply is being
written and the validated ActionProposed once it is complete; the gap between the two is
what streaming removes from what a user waits for.

Two sources, measured in the same run:
- ``scripted``: ScriptedModel streaming through the shared partial parser (no network);
- ``openai-sse``: the OpenAI adapter through litellm against a loopback server that sends
  chat.completion.chunk events at the given rate (needs the adapters' streaming support and
  tests/adapters/fakes.py; skipped with a note when unavailable).

Usage: python bench/bench_streaming.py [--reps 5] [--write]
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

import structlog

ROOT = Path(__file__).resolve().parent.parent
THOUGHT = (
    "The customer asked where order A-1042 is. I should not guess: the order service knows its "
    "status and the carrier's tracking number, so I will look the order up first and then "
    "answer with the status, the carrier and the expected delivery date if there is one."
)
ACTION = {"type": "tool", "thought": THOUGHT, "tool": "get_order", "args": {"order_id": "A-1042"}}
FINISH = {"type": "finish", "thought": "Answered.", "answer": "It ships tomorrow."}
CHARS_PER_TOKEN = 4


def _agent(model: Any) -> Any:  # Any: an Agent; imported late so --help stays fast
    from agentcore import Agent, Policy, tool
    from agentcore.stores import MemoryStore

    @tool(effect="read")
    def get_order(order_id: str) -> dict[str, str]:
        """Look up one order by id."""
        return {"id": order_id, "status": "in transit"}

    return Agent(
        tools=[get_order], model=model, store=MemoryStore(), policy=Policy(plan_before_writes=False)
    )


async def _one(model: Any) -> tuple[float, float]:  # Any: an adapter
    from agentcore import ThoughtDelta
    from agentcore.events import ActionProposed

    agent = _agent(model)
    started = time.perf_counter()
    first = action = None
    async for ev in agent.stream("Where is order A-1042?"):
        now = time.perf_counter()
        if isinstance(ev, ThoughtDelta) and first is None:
            first = now - started
        if isinstance(ev, ActionProposed) and action is None:
            action = now - started
    assert first is not None and action is not None
    return first * 1000, action * 1000


async def scripted(rate: float, reps: int) -> list[tuple[float, float]]:
    from agentcore.adapters import ScriptedModel

    out: list[tuple[float, float]] = []
    for _ in range(reps):
        model = ScriptedModel(
            [ACTION, FINISH], stream_chunk_chars=CHARS_PER_TOKEN, stream_delay_s=1.0 / rate
        )
        out.append(await _one(model))
    return out


async def openai_sse(rate: float, reps: int) -> list[tuple[float, float]] | str:
    sys.path.append(str(ROOT))  # for tests.adapters.fakes; agentcore stays the installed one
    try:
        from tests.adapters import fakes
    except ImportError as exc:  # the fake server lives with the adapter tests
        return f"unavailable ({exc})"
    from agentcore.adapters.openai import OpenAIAdapter

    def paced(action: dict[str, Any], rate: float) -> Any:  # Any: a fake SSE reply
        text = json.dumps(action)
        events = fakes.chat_stream(text, pieces=max(1, len(text) // CHARS_PER_TOKEN))
        return fakes.SseReply(events=events, delay=1.0 / rate if rate else 0.0)

    out: list[tuple[float, float]] = []
    with fakes.FakeProvider() as server:
        server.queue(paced(ACTION, 0.0), paced(FINISH, 0.0))  # warm-up: litellm's import
        model = OpenAIAdapter("openai/gpt-bench", api_base=server.base_url, api_key="sk-test")
        await _one(model)
        for _ in range(reps):
            server.queue(paced(ACTION, rate), paced(FINISH, 0.0))
            model = OpenAIAdapter("openai/gpt-bench", api_base=server.base_url, api_key="sk-test")
            out.append(await _one(model))
    return out


def _fmt(samples: list[tuple[float, float]]) -> tuple[str, str, str]:
    firsts = [s[0] for s in samples]
    actions = [s[1] for s in samples]
    ratio = statistics.median(actions) / statistics.median(firsts)
    return (
        f"{statistics.median(firsts):.1f} ({min(firsts):.1f}-{max(firsts):.1f})",
        f"{statistics.median(actions):.1f} ({min(actions):.1f}-{max(actions):.1f})",
        f"{ratio:.0f}x",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="append to bench/RESULTS.md")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    rows: list[str] = []
    tokens = len(str(ACTION)) / CHARS_PER_TOKEN
    for rate in (50.0, 200.0):
        for name, fn in (("scripted", scripted), ("openai-sse", openai_sse)):
            result = asyncio.run(fn(rate, args.reps))
            if isinstance(result, str):
                rows.append(f"| {name} | {rate:.0f} | {result} | | |")
                continue
            first, action, ratio = _fmt(result)
            rows.append(f"| {name} | {rate:.0f} | {first} | {action} | {ratio} |")
    lines = [
        "## Streaming: time to first thought character vs complete action",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}; shared and noisy. "
        f"One action of ~{tokens:.0f} tokens ({CHARS_PER_TOKEN} characters a token), "
        f"{args.reps} repetitions; median (min-max), milliseconds from the start of the run.",
        "",
        "| source | tokens/s | first thought character | complete action | ratio |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        results = ROOT / "bench" / "RESULTS.md"
        current = results.read_text() if results.exists() else ""
        marker = "## Streaming: time to first thought character"
        if marker in current:
            current = current[: current.index(marker)].rstrip() + "\n\n"
        results.write_text(current + text)


if __name__ == "__main__":
    main()
