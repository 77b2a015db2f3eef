#!/usr/bin/env python
"""Structured vs native, and contract variants, on SmolLM2: a comparison with its noise.

Three commands:

``sample``
    Draws, once, two disjoint stratified samples of 200 cases from the project's fixtures
    (``fixtures/evals/cases.jsonl``, 9 per category: 72) and the published BFCL cases of
    ``simple_python`` (43), ``multiple`` (43) and ``irrelevance`` (42) from the
    ``bfcl-eval`` wheel, with a fixed seed (:func:`agentcore.evals.split_halves`), and
    writes ``samples/tuning.json`` and ``samples/confirmation.json``: the ids in run order
    (interleaved, so a run cut short is still a stratified sample) and the sha256 of every
    source file. It refuses to overwrite them: the samples are fixed before any experiment.
``run --half tuning|confirmation --variants a,b,...``
    Serves SmolLM2 the way ``bench/run_smollm2_eval.py`` does (its server settings, one
    server for every variant of the same mode: the variants differ only in the request),
    and asks each case of the half once per variant, case by case (all variants of a case
    before the next case, so a run stopped at any time has measured every variant on the
    same cases). Each answer is appended to ``results/<half>--<variant>.jsonl`` at once; a
    rerun skips what is there. Decoding is greedy (temperature 0), so a variant's answer to
    a case depends on the request alone, not on how many requests the server saw before.
    A case still unanswered after ``--case-timeout`` seconds (default 240: the slowest
    case recorded before this guard took 137 s) is abandoned and recorded as not solved
    with ``"error": "timeout after N s"`` (a rerun does not ask it again), and the server
    is stopped and started again: it answers one request at a time, and llama-cpp-python's
    ``chatml-function-calling`` handler generates with no token cap (``max_tokens=None``,
    whatever the request asks) until the context window is full, so an abandoned request
    would keep it busy for minutes. ``--results DIR`` writes elsewhere (a trial run, a
    recheck); ``--skip N`` and ``--limit N`` ask only cases N+1 to N+limit of the half.
``report``
    Reads every result and rewrites the part of ``RESULTS.md`` between the ``results``
    markers: per half and variant, accuracy with its 95% bootstrap interval (cases
    resampled, 2,000 resamples, fixed seed), the same per rule set and per category, the
    paired difference to the baseline with its paired bootstrap interval, seconds per case,
    and how many cases timed out.

Variants (``variants/*.json`` are contract documents; see ``RESULTS.md`` for what each
changes): ``baseline`` (contract v1, structured), ``native`` (contract v1, native tool
calling through llama-cpp-python's ``chatml-function-calling`` handler), ``thought_first``,
``tool_examples``, ``signature``, ``no_tool_hint``, and any other ``variants/<name>.json``
or built-in version ``v<N>`` (structured).

Each case is scored by the rules it was written for: BFCL's (``bfcl``) for BFCL cases, the
project's (``agentcore``) for the fixtures. Needs the local extra and the BFCL data::

    pip install 'agentcore[local]' && pip install --no-deps 'bfcl-eval==2026.3.23'
    python bench/quality/run_quality.py run --half tuning --variants baseline,thought_first
    nice -n 19 python bench/quality/run_quality.py run --half tuning --variants native --threads 1
    python bench/quality/run_quality.py report
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import importlib.metadata
import json
import os
import re
import signal
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

from agentcore.adapters._llama_server import SMOLLM2_ALIAS, serve_llama, smollm2_model_path
from agentcore.adapters.local import LocalAdapter
from agentcore.contracts import ContractDocument, load_contract
from agentcore.evals import (
    EvalCase,
    Mode,
    bootstrap_interval,
    evaluate,
    load_bfcl,
    load_cases,
    paired_difference,
    score_action,
    split_halves,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import run_smollm2_eval as smollm2  # noqa: E402  # the server settings and machine description

SAMPLES = HERE / "samples"
RESULTS = HERE / "results"
VARIANTS = HERE / "variants"
REPORT = HERE / "RESULTS.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"
FIXTURES = ROOT / "fixtures" / "evals" / "cases.jsonl"
BFCL_VERSION = "BFCL_v4"
BFCL_CATEGORIES = ("simple_python", "multiple", "irrelevance")
SEED = 20261201
PER_HALF = {
    **{
        f"fixtures/{c}": 9
        for c in (
            "argument_extraction",
            "destructive_looking",
            "distractors",
            "missing_args",
            "multi_step_plan",
            "no_tool",
            "similar_names",
            "straightforward",
        )
    },
    "bfcl/simple_python": 43,
    "bfcl/multiple": 43,
    "bfcl/irrelevance": 42,
}
BASELINE = "baseline"
HALVES = ("tuning", "confirmation")
CASE_TIMEOUT_S = 240.0
"""A case's wall-clock limit: the slowest case recorded without it took 137 s (native, one
thread at nice 19, load 3-5); one had kept the server generating for 12 minutes."""
TIMEOUT = "timeout after"
"""How a timed-out case's ``error`` starts."""


# -- the cases --------------------------------------------------------------------------------


def bfcl_files() -> dict[str, tuple[Path, Path | None]]:
    """category -> (question file, answer file or None) in the installed bfcl-eval wheel."""
    try:
        data = Path(str(files("bfcl_eval") / "data"))
    except ModuleNotFoundError:
        sys.exit("needs the BFCL data: pip install --no-deps 'bfcl-eval==2026.3.23'")
    out: dict[str, tuple[Path, Path | None]] = {}
    for cat in BFCL_CATEGORIES:
        answer = data / "possible_answer" / f"{BFCL_VERSION}_{cat}.json"
        out[cat] = (data / f"{BFCL_VERSION}_{cat}.json", answer if answer.is_file() else None)
    return out


def sources() -> dict[str, Path]:
    """Every file the cases and their answers come from, by a stable name."""
    found: dict[str, Path] = {"fixtures/evals/cases.jsonl": FIXTURES}
    for cat, (question, answer) in bfcl_files().items():
        found[f"bfcl-eval/{question.name}"] = question
        if answer is not None:
            found[f"bfcl-eval/possible_answer/{answer.name}"] = answer
        del cat
    return found


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def all_cases() -> dict[str, tuple[str, EvalCase]]:
    """id -> (stratum, case) for every case the samples may draw."""
    out: dict[str, tuple[str, EvalCase]] = {}
    for case in load_cases(FIXTURES):
        out[case.id] = (f"fixtures/{case.category}", case)
    for cat, (question, answer) in bfcl_files().items():
        for case in load_bfcl(question, answer):
            if case.problem is None:  # a published answer no call can meet: not drawn
                out[case.id] = (f"bfcl/{cat}", case)
    return out


def draw_samples(force: bool) -> None:
    paths = [SAMPLES / f"{h}.json" for h in HALVES]
    if any(p.exists() for p in paths) and not force:
        sys.exit("the samples exist; they are fixed before any experiment (--force to redraw)")
    cases = all_cases()
    strata: dict[str, list[str]] = defaultdict(list)
    for case_id, (stratum, _) in cases.items():
        strata[stratum].append(case_id)
    halves = split_halves(strata, PER_HALF, seed=SEED)
    srcs = {name: sha256(p) for name, p in sources().items()}
    combined = hashlib.sha256("".join(f"{k}={v}\n" for k, v in sorted(srcs.items())).encode())
    SAMPLES.mkdir(parents=True, exist_ok=True)
    for name, ids, path in zip(HALVES, halves, paths, strict=True):
        doc = {
            "half": name,
            "seed": SEED,
            "drawn_by": "agentcore.evals.split_halves (bench/quality/run_quality.py sample)",
            "bfcl_eval": importlib.metadata.version("bfcl-eval"),
            "dataset_hash": combined.hexdigest()[:16],
            "sources": srcs,
            "per_stratum": dict(sorted(Counter(cases[i][0] for i in ids).items())),
            "ids": ids,
        }
        path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}: {len(ids)} cases")


def load_half(half: str) -> tuple[dict[str, Any], list[EvalCase]]:  # Any: JSON
    """The half's sample file and its cases, in run order, after checking the sources."""
    meta = json.loads((SAMPLES / f"{half}.json").read_text(encoding="utf-8"))
    for name, path in sources().items():
        if meta["sources"].get(name) != sha256(path):
            sys.exit(f"{name} is not the file the samples were drawn from (sha256 differs)")
    cases = all_cases()
    return meta, [cases[i][1] for i in meta["ids"]]


# -- the variants -----------------------------------------------------------------------------


def variant(name: str) -> tuple[Mode, ContractDocument]:
    if name == BASELINE:
        return "structured", load_contract("1")
    if name == "native":
        return "native", load_contract("1")
    path = VARIANTS / f"{name}.json"
    if path.is_file():
        return "structured", load_contract(path)
    if re.fullmatch(r"v\d+", name):
        return "structured", load_contract(name)
    sys.exit(f"unknown variant {name!r}: {BASELINE}, native, v<N> or one of variants/*.json")


class GreedyLocal(LocalAdapter):
    """The local adapter, decoding greedily: the same request gets the same answer."""

    def transport_params(self) -> dict[str, Any]:  # Any: litellm keyword arguments
        return {**super().transport_params(), "temperature": 0.0}


def results_path(half: str, name: str, results: Path = RESULTS) -> Path:
    return results / f"{half}--{name}.jsonl"


def read_rows(path: Path) -> list[dict[str, Any]]:  # Any: JSON rows
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def done_ids(path: Path) -> set[str]:
    """Every case recorded, timed-out ones included: a rerun does not ask them again."""
    return {r["id"] for r in read_rows(path)}


def is_timeout(row: dict[str, Any]) -> bool:  # Any: JSON row
    return (row["error"] or "").startswith(TIMEOUT)


def timed_out(case: EvalCase, limit: float) -> dict[str, Any]:  # Any: JSON
    """The result fields of a case abandoned after ``limit`` seconds: not solved, and wrong
    on every verdict that applies to it (BFCL would count no call on ``irrelevance`` as
    abstaining; a case that never answered is not that)."""
    score = score_action(case, None, case.rules)
    wrong = {
        k: None if v is None else False
        for k, v in (
            ("tool_correct", score.tool_correct),
            ("args_correct", score.args_correct),
            ("abstained_correctly", score.abstained_correctly),
        )
    }
    return {
        **wrong,
        "correct": False,
        "invalid": False,
        "action": None,
        "reasks": 0,
        "input_tokens": None,
        "output_tokens": None,
        "latency_ms": None,
        "error": f"{TIMEOUT} {limit:g} s",
        "case_error": None,
        "reason": f"no answer within {limit:g} s: abandoned, the server restarted",
    }


class Server:
    """The llama server of one mode, which :meth:`restart` frees from an abandoned request."""

    def __init__(self, serve: Callable[[], contextlib.AbstractContextManager[str]]) -> None:
        self._serve = serve
        self._stack = contextlib.ExitStack()
        self.api_base = ""

    @contextlib.contextmanager
    def running(self) -> Iterator[Server]:
        with self._stack:
            self.api_base = self._stack.enter_context(self._serve())
            yield self

    def restart(self) -> None:
        self._stack.close()
        self.api_base = self._stack.enter_context(self._serve())


def adapter(api_base: str, mode: Mode) -> GreedyLocal:
    return GreedyLocal(
        f"local/{SMOLLM2_ALIAS}",
        api_base=api_base,
        max_output_tokens=smollm2.MAX_OUTPUT_TOKENS,
        mode=mode,
    )


async def run_cases(
    half: str,
    cases: Sequence[EvalCase],
    chosen: dict[str, tuple[Mode, ContractDocument]],
    server: Server,
    mode: Mode,
    case_timeout: float,
    results: Path,
) -> None:
    model = adapter(server.api_base, mode)
    done = {name: done_ids(results_path(half, name, results)) for name in chosen}
    for i, case in enumerate(cases, 1):
        for name, (_, doc) in chosen.items():
            if case.id in done[name]:
                continue
            began = time.perf_counter()
            try:
                card = await asyncio.wait_for(
                    evaluate(
                        [case],
                        model,
                        mode=mode,
                        scoring=case.rules,
                        contract=doc,
                        concurrency=1,
                        max_reasks=smollm2.MAX_REASKS,
                    ),
                    case_timeout,
                )
            except TimeoutError:
                wall = time.perf_counter() - began
                r = timed_out(case, case_timeout)
                contract_version, contract_hash = doc.version, doc.hash
                print(
                    f"{half} [{i:>3}/{len(cases)}] {name:<14} {case.id}: no answer in "
                    f"{case_timeout:g} s; restarting the server",
                    file=sys.stderr,
                    flush=True,
                )
                server.restart()
                model = adapter(server.api_base, mode)
            else:
                wall = time.perf_counter() - began
                r = card.results[0]
                contract_version, contract_hash = card.contract_version, card.contract_hash
            row = {
                "id": case.id,
                "category": case.category,
                "rules": case.rules,
                "variant": name,
                "mode": mode,
                "contract_version": contract_version,
                "contract_hash": contract_hash,
                "correct": r["correct"],
                "invalid": r["invalid"],
                "action_type": (r["action"] or {}).get("type"),
                "tool_correct": r["tool_correct"],
                "args_correct": r["args_correct"],
                "abstained_correctly": r["abstained_correctly"],
                "reasks": r["reasks"],
                "input_tokens": r["input_tokens"],
                "output_tokens": r["output_tokens"],
                "latency_ms": r["latency_ms"],
                "wall_s": round(wall, 3),
                "error": r["error"],
                "case_error": r["case_error"],
                "reason": r["reason"],
                "action": r["action"],
                "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }
            with results_path(half, name, results).open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            verdict = "ok " if r["correct"] else ("INV" if r["invalid"] else "no ")
            print(
                f"{half} [{i:>3}/{len(cases)}] {name:<14} {verdict} {case.id:<24} {wall:6.1f} s",
                file=sys.stderr,
                flush=True,
            )


def run(
    half: str,
    names: list[str],
    limit: int | None,
    threads: int | None,
    case_timeout: float = CASE_TIMEOUT_S,
    results: Path = RESULTS,
    skip: int = 0,
) -> None:
    chosen = {n: variant(n) for n in names}
    modes = {m for m, _ in chosen.values()}
    if len(modes) != 1:
        sys.exit("one mode per run: start native variants in their own run (their own server)")
    mode: Mode = modes.pop()
    meta, cases = load_half(half)
    cases = cases[skip:]
    cases = cases[:limit] if limit else cases
    results.mkdir(parents=True, exist_ok=True)
    # `kill <pid>` stops the run like Ctrl-C: the server stops and the run is recorded
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def answered() -> int:
        return sum(len(done_ids(results_path(half, n, results))) for n in names)

    def timeouts() -> int:
        return sum(
            1 for n in names for r in read_rows(results_path(half, n, results)) if is_timeout(r)
        )

    before, timeouts_before = answered(), timeouts()
    started = time.time()
    load_start = smollm2.load_average()
    server = Server(
        lambda: serve_llama(
            smollm2_model_path(),
            n_ctx=smollm2.N_CTX,
            chat_format=smollm2.CHAT_FORMATS[mode],
            n_threads=threads,
        )
    )
    with server.running():
        try:
            asyncio.run(run_cases(half, cases, chosen, server, mode, case_timeout, results))
        finally:
            with (results / "runs.jsonl").open("a", encoding="utf-8") as f:
                f.write(
                    json.dumps(
                        {
                            "half": half,
                            "variants": names,
                            "mode": mode,
                            "dataset_hash": meta["dataset_hash"],
                            "cases": len(cases),
                            "answers": answered() - before,
                            "case_timeout_s": case_timeout,
                            "timeouts": timeouts() - timeouts_before,
                            "threads": threads or os.cpu_count(),
                            "niceness": os.nice(0),
                            "started": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(
                                timespec="seconds"
                            ),
                            "wall_s": round(time.time() - started, 1),
                            "load_start": load_start,
                            "load_end": smollm2.load_average(),
                            "machine": smollm2.machine(),
                        }
                    )
                    + "\n"
                )


# -- the report -------------------------------------------------------------------------------


def read_results(half: str) -> dict[str, list[dict[str, Any]]]:  # Any: JSON rows
    out: dict[str, list[dict[str, Any]]] = {}  # Any: JSON rows
    for path in sorted(RESULTS.glob(f"{half}--*.jsonl")):
        rows = read_rows(path)
        out[path.stem.split("--", 1)[1]] = [r for r in rows if r["case_error"] is None]
    return out


def _outcomes(rows: list[dict[str, Any]]) -> dict[str, float]:  # Any: JSON rows
    return {r["id"]: float(r["correct"]) for r in rows}


def _acc(rows: list[dict[str, Any]]) -> str:  # Any: JSON rows
    if not rows:
        return "-"
    return bootstrap_interval([r["correct"] for r in rows]).percent()


def _rate(rows: list[dict[str, Any]], key: str) -> str:  # Any: JSON rows
    """``right/applicable`` for a per-kind verdict (``None`` where it does not apply)."""
    counted = [r[key] for r in rows if r[key] is not None]
    return f"{sum(counted)}/{len(counted)}" if counted else "-"


def timeout_lines(res: dict[str, list[dict[str, Any]]], names: list[str]) -> list[str]:  # Any
    """Which variants had cases abandoned, and the paired difference to the baseline with
    and without them (they count as not solved in every other figure)."""
    hit = {n: [r for r in res[n] if is_timeout(r)] for n in names}
    hit = {n: rows for n, rows in hit.items() if rows}
    if not hit:
        return []
    lines = [
        "",
        "Timed out (no answer within the case limit: abandoned, the server restarted, "
        "counted as not solved above):",
        "",
    ]
    base = _outcomes(res[BASELINE]) if BASELINE in res else {}
    for name, rows in hit.items():
        limits = sorted({r["error"].removeprefix(TIMEOUT).strip() for r in rows})
        line = (
            f"- `{name}`: {len(rows)} of {len(res[name])} cases ({', '.join(limits)}): "
            + ", ".join(r["id"] for r in rows)
        )
        if base and name != BASELINE:
            dropped = {r["id"] for r in rows}
            other = {k: v for k, v in _outcomes(res[name]).items() if k not in dropped}
            common = base.keys() & other.keys()
            if common:
                diff = paired_difference(other, base)
                line += (
                    f". Without them, paired with `{BASELINE}` on the {len(common)} cases both "
                    f"answered: {int(sum(other[k] for k in common))} vs "
                    f"{int(sum(base[k] for k in common))} solved, "
                    f"{diff.percent(signed=True)}"
                )
        lines.append(line + ".")
    return lines


def no_action_lines(res: dict[str, list[dict[str, Any]]], names: list[str]) -> list[str]:  # Any
    """Cases counted solved with no valid action (BFCL's rules count no call on
    ``irrelevance`` as abstaining), and each paired difference with those counted wrong."""
    solved = {n: [r for r in res[n] if r["correct"] and r["action"] is None] for n in names}
    if not any(solved.values()):
        return []
    line = (
        "Solved with no valid action (an invalid or empty reply, which BFCL's rules count as "
        "abstaining on `irrelevance`): "
        + ", ".join(f"`{n}` {len(rows)}" for n, rows in solved.items())
        + "."
    )
    if BASELINE in res:
        strict = {
            n: {r["id"]: float(r["correct"] and r["action"] is not None) for r in res[n]}
            for n in names
        }
        parts = []
        for n in names:
            common = strict[BASELINE].keys() & strict[n].keys()
            if n == BASELINE or not common:
                continue
            diff = paired_difference(strict[n], strict[BASELINE])
            parts.append(
                f"`{n}` {int(sum(strict[n][k] for k in common))} vs "
                f"{int(sum(strict[BASELINE][k] for k in common))} solved, "
                f"{diff.percent(signed=True)} on {len(common)} cases"
            )
        if parts:
            line += (
                f" Counting them as not solved, paired with `{BASELINE}`: " + "; ".join(parts) + "."
            )
    return ["", line]


def half_section(half: str, order: list[str]) -> list[str]:
    res = read_results(half)
    if not res:
        return [f"### {half} half", "", "Nothing measured.", ""]
    names = [n for n in order if n in res] + sorted(set(res) - set(order))
    lines = [
        f"### {half} half",
        "",
        "| variant | mode | contract | n | accuracy [95% CI] | fixtures (agentcore rules) "
        "| BFCL (bfcl rules) | tool chosen | abstained | invalid | timed out "
        "| tool / plan / finish | s per case |",
        "|---|---|---|---:|---|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for name in names:
        rows = res[name]
        kinds = Counter(r["action_type"] for r in rows)
        lines.append(
            f"| {name} | {rows[0]['mode']} | {rows[0]['contract_version']} "
            f"({rows[0]['contract_hash']}) | {len(rows)} | {_acc(rows)} "
            f"| {_acc([r for r in rows if r['rules'] == 'agentcore'])} "
            f"| {_acc([r for r in rows if r['rules'] == 'bfcl'])} "
            f"| {_rate(rows, 'tool_correct')} | {_rate(rows, 'abstained_correctly')} "
            f"| {sum(r['invalid'] for r in rows) / len(rows):.1%} "
            f"| {sum(map(is_timeout, rows))} "
            f"| {kinds['tool']} / {kinds['plan']} / {kinds['finish']} "
            f"| {statistics.mean(r['wall_s'] for r in rows):.1f} |"
        )
    if BASELINE in res:
        base = _outcomes(res[BASELINE])
        lines += [
            "",
            f"Paired differences to `{BASELINE}` (same cases; accuracy points, 95% paired "
            "bootstrap CI; *beyond the noise* when the interval excludes 0):",
            "",
            "| variant | cases in common | variant - baseline | all | fixtures | BFCL | verdict |",
            "|---|---:|---|---|---|---|---|",
        ]
        for name in names:
            if name == BASELINE:
                continue
            other = _outcomes(res[name])
            common = base.keys() & other.keys()
            if not common:
                continue
            diff = paired_difference(other, base)
            parts = []
            for rules in ("agentcore", "bfcl"):
                ids = {r["id"] for r in res[name] if r["rules"] == rules} & common
                parts.append(
                    paired_difference(
                        {k: other[k] for k in ids}, {k: base[k] for k in ids}
                    ).percent(signed=True)
                    if ids
                    else "-"
                )
            a = sum(other[k] for k in common)
            b = sum(base[k] for k in common)
            verdict = "beyond the noise" if diff.excludes_zero else "within the noise"
            lines.append(
                f"| {name} | {len(common)} | {int(a)} vs {int(b)} solved | "
                f"{diff.percent(signed=True)} | {parts[0]} | {parts[1]} | {verdict} |"
            )
    lines += timeout_lines(res, names)
    lines += no_action_lines(res, names)
    cats = sorted({(r["rules"], r["category"]) for rows in res.values() for r in rows})
    lines += [
        "",
        "Per category (accuracy, solved / cases):",
        "",
        "| category | rules | " + " | ".join(names) + " |",
        "|---|---|" + "---:|" * len(names),
    ]
    for rules, cat in cats:
        cells = []
        for name in names:
            rows = [r for r in res[name] if r["category"] == cat and r["rules"] == rules]
            solved = sum(r["correct"] for r in rows)
            cells.append(f"{solved / len(rows):.0%} ({solved}/{len(rows)})" if rows else "-")
        lines.append(f"| {cat} | {rules} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def report() -> None:
    order = [BASELINE, "native", "thought_first", "no_tool_hint", "tool_examples", "signature"]
    runs_file = RESULTS / "runs.jsonl"
    runs = (
        [json.loads(line) for line in runs_file.read_text().splitlines() if line.strip()]
        if runs_file.is_file()
        else []
    )
    body = [
        START,
        "",
        "Generated by `python bench/quality/run_quality.py report` from `results/`.",
        "",
    ]
    for half in HALVES:
        body += half_section(half, order)
    body += ["Runs (each a server start; several variants share one):", ""]
    for r in runs:
        body.append(
            f"- {r['started']}: {r['half']}, {', '.join(r['variants'])} ({r['mode']}), "
            f"{r.get('answers', r['cases'])} answers, {r['threads']} thread(s), nice "
            f"{r['niceness']}, wall "
            f"{r['wall_s']:.0f} s, load {r['load_start']} -> {r['load_end']}"
            + (
                f", {r['timeouts']} timed out (limit {r['case_timeout_s']:g} s)"
                if r.get("timeouts")
                else ""
            )
            + (f" ({r['note']})" if r.get("note") else "")
            + f"; {r['machine']}."
        )
    body += ["", END]
    section = "\n".join(body)
    text = REPORT.read_text(encoding="utf-8") if REPORT.is_file() else ""
    if START in text and END in text:
        pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = f"# Structured vs native on SmolLM2-135M: results\n\n{section}\n"
    REPORT.write_text(text, encoding="utf-8")
    print(f"wrote {REPORT.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="draw the two halves (once)")
    s.add_argument("--force", action="store_true")
    r = sub.add_parser("run", help="ask SmolLM2 every case of a half, per variant")
    r.add_argument("--half", choices=HALVES, required=True)
    r.add_argument("--variants", required=True, help="comma-separated, one mode")
    r.add_argument("--limit", type=int, default=None, help="the first N cases of the half")
    r.add_argument("--skip", type=int, default=0, help="start after the first N cases")
    r.add_argument("--threads", type=int, default=None, help="server threads (default all)")
    r.add_argument(
        "--case-timeout",
        type=float,
        default=CASE_TIMEOUT_S,
        help=f"seconds before a case is abandoned and the server restarted ({CASE_TIMEOUT_S:g})",
    )
    r.add_argument(
        "--results",
        type=Path,
        default=RESULTS,
        help="the results directory (default bench/quality/results; another for a trial run)",
    )
    sub.add_parser("report", help="rewrite RESULTS.md's measured part")
    args = parser.parse_args()
    if args.command == "sample":
        draw_samples(args.force)
    elif args.command == "run":
        run(
            args.half,
            [v for v in args.variants.split(",") if v],
            args.limit,
            args.threads,
            args.case_timeout,
            args.results,
            args.skip,
        )
    else:
        report()


if __name__ == "__main__":
    main()
