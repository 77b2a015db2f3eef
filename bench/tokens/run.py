#!/usr/bin/env python
"""Issue 37: tokens per task, agentcore beside Pydantic AI, the OpenAI Agents SDK and LangGraph.

Every framework runs the same tasks (``tasks.py``: a six-tool support task, a one-tool
lookup, a twelve-tool workspace task, a 30-step triage run) with the same tools and
instructions, through its real OpenAI client, against a loopback fake of the Chat
Completions API (``fake.py``) that logs each request and replays the model's scripted
decisions. Tokens are counted on the logged requests with tiktoken's o200k_base
(``count.py``: the serialization rule, the parts, the kept prefix, OpenAI's cacheable share).

agentcore runs through :class:`~agentcore.adapters.openai.OpenAIAdapter` (litellm; structured
and native mode, the default ``Policy()`` and variants; ``measure.py``), the peers in their
own interpreter (``--peer-python``, a venv with ``peers-requirements.txt``; ``peers.py``).

Usage::

    python bench/tokens/run.py                                   # agentcore only
    python bench/tokens/run.py --peer-python /tmp/peers/bin/python --write
    python bench/tokens/run.py --rev HEAD --peer-python ...      # agentcore at a revision
    python bench/tokens/run.py --json /tmp/tokens.json           # every request's record

``--rev`` measures agentcore as committed at a git revision (its ``agentcore``, ``adapters``
and ``contracts`` folders laid out as the installed package, first on ``PYTHONPATH``) in a
child process, so a working tree in the middle of a change can still measure its base.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

from count import (  # noqa: E402
    MARKERS,
    PARTS,
    RequestRecord,
    encoder_name,
    records,
    system_sections,
    tokens,
)
from fake import Turn  # noqa: E402
from tasks import TASKS  # noqa: E402

SECTION = "## Tokens per task (issue 37)"


@dataclass(frozen=True)
class Config:
    label: str
    mode: str
    max_batch: int = 0
    plan_before_writes: bool = True
    ask: bool = False  # Policy(ask=True): the model is offered a question for the user


CONFIGS = (
    Config("agentcore structured (defaults)", "structured"),
    Config("agentcore native (defaults)", "native"),
    Config("agentcore structured, max_batch=4", "structured", max_batch=4),
    Config("agentcore native, max_batch=4", "native", max_batch=4),
    Config("agentcore structured, no plan-before-writes", "structured", plan_before_writes=False),
    Config("agentcore structured, ask", "structured", ask=True),
    Config("agentcore native, ask", "native", ask=True),
)
ASK = {c.mode: c for c in CONFIGS if c.ask}
PEER_LABELS = {
    "pydantic_ai": "Pydantic AI",
    "openai_agents": "OpenAI Agents SDK",
    "langgraph": "LangGraph",
}


@dataclass
class Row:
    label: str
    task: str
    records: list[RequestRecord]
    error: str | None = None

    @property
    def requests(self) -> int:
        return len(self.records)

    @property
    def input_tokens(self) -> int:
        return sum(r.input_tokens for r in self.records)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.records)

    @property
    def first(self) -> int:
        return self.records[0].input_tokens if self.records else 0

    @property
    def cacheable_share(self) -> float:
        total = self.input_tokens
        return sum(r.cacheable_tokens for r in self.records) / total if total else 0.0

    @property
    def after_caching(self) -> float:
        """Input tokens as billed with the cacheable ones at a quarter of the price (the
        GPT-4.1 family's cached-input discount; other models differ)."""
        return self.input_tokens - 0.75 * sum(r.cacheable_tokens for r in self.records)

    @property
    def min_kept(self) -> float | None:
        kept = [r.kept_pct for r in self.records if r.kept_pct is not None]
        return min(kept) if kept else None


# ------------------------------------------------------------------------------------------
# agentcore


def _agentcore_rows(tasks: Sequence[str]) -> tuple[list[Row], dict[str, Any]]:  # Any: JSON
    """Every config on every task, in this process (agentcore as imported). A revision from
    before the ask action has no ask rows."""
    from measure import run_agentcore

    import agentcore
    from agentcore import Policy

    rows: list[Row] = []
    first_bodies: dict[str, Any] = {}  # Any: JSON
    offers_ask = "ask" in Policy.__dataclass_fields__
    for name in tasks:
        for c in CONFIGS:
            if c.ask and not offers_ask:
                continue
            options: dict[str, Any] = {"ask": True} if c.ask else {}  # Any: Policy options
            policy = Policy(
                max_batch=c.max_batch, plan_before_writes=c.plan_before_writes, **options
            )
            run = asyncio.run(run_agentcore(name, c.mode, policy=policy))  # type: ignore[arg-type]
            error = None
            if run.status != "completed" or len(run.bodies) != len(run.turns):
                error = (
                    f"{run.status} ({run.reason}); {len(run.bodies)} requests for "
                    f"{len(run.turns)} scripted replies"
                )
            elif run.model_calls != len(run.bodies):
                error = f"{run.model_calls} model calls recorded for {len(run.bodies)} requests"
            rows.append(Row(c.label, name, run.records, error))
            if c is CONFIGS[0] or c is CONFIGS[1]:
                first_bodies[f"{name}/{c.mode}"] = run.bodies[0] if run.bodies else {}
    meta = {"agentcore": str(Path(agentcore.__file__).parent)}
    return rows, {"meta": meta, "first_bodies": first_bodies}


def _snapshot(rev: str) -> tuple[Path, str]:
    """agentcore at ``rev`` laid out as the installed package, in a temporary folder."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()
    root = Path(tempfile.mkdtemp(prefix=f"agentcore-{commit}-"))
    src = root / "src"
    src.mkdir()
    archive = subprocess.run(
        ["git", "archive", rev, "agentcore", "adapters", "contracts"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    (src / "agentcore").rename(root / "agentcore")
    (src / "adapters").rename(root / "agentcore" / "adapters")
    (src / "contracts").rename(root / "agentcore" / "contracts")
    shutil.rmtree(src)
    return root, commit


def _rows_to_json(rows: Sequence[Row]) -> list[dict[str, Any]]:  # Any: JSON
    return [
        {
            "label": r.label,
            "task": r.task,
            "error": r.error,
            "records": [x.as_json() for x in r.records],
        }
        for r in rows
    ]


def _rows_from_json(items: Sequence[dict[str, Any]]) -> list[Row]:  # Any: JSON
    return [
        Row(i["label"], i["task"], [RequestRecord(**x) for x in i["records"]], i["error"])
        for i in items
    ]


def agentcore_side(
    tasks: Sequence[str], rev: str | None
) -> tuple[list[Row], dict[str, Any]]:  # Any: JSON
    if rev is None:
        rows, extra = _agentcore_rows(tasks)
        status = subprocess.run(
            ["git", "status", "--porcelain", "agentcore", "adapters", "contracts"],
            check=False,
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            check=False,
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
        extra["meta"]["revision"] = f"working tree at {head}" + (
            " (with uncommitted changes)" if status.strip() else ""
        )
        extra["meta"]["commit"] = "working tree"
        return rows, extra
    root, commit = _snapshot(rev)
    try:
        env = {**os.environ, "PYTHONPATH": str(root)}
        out = subprocess.run(
            [sys.executable, str(Path(__file__)), "--agentcore-json", "--tasks", ",".join(tasks)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)
    data = json.loads(out)
    subject = subprocess.run(  # of the commit measured: ``rev`` (HEAD) may have moved since
        ["git", "log", "-1", "--format=%s", commit],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    short = subject if len(subject) <= 90 else subject[:87].rstrip() + "..."
    data["meta"]["revision"] = f'{commit} (--rev {rev}: "{short}")'
    data["meta"]["commit"] = commit
    return _rows_from_json(data["rows"]), data


# ------------------------------------------------------------------------------------------
# peers


def peer_side(python: str, tasks: Sequence[str]) -> tuple[list[Row], dict[str, str]]:
    out = subprocess.run(
        [python, str(HERE / "peers.py"), "--tasks", ",".join(tasks)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    data = json.loads(out)
    rows: list[Row] = []
    for run in data["runs"]:
        task = TASKS[run["task"]]
        turns = [Turn(c, tuple((n, a) for n, a in calls)) for c, calls in run["turns"]]
        error = run["error"]
        if error is None and len(run["bodies"]) != len(turns):
            error = f"{len(run['bodies'])} requests for {len(turns)} scripted replies"
        rows.append(
            Row(
                PEER_LABELS[run["framework"]],
                run["task"],
                records(run["bodies"], turns, task.instructions, list(task.results().values())),
                error,
            )
        )
    return rows, data["versions"]


# ------------------------------------------------------------------------------------------
# report


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


def table(rows: Sequence[Row], task: str) -> list[str]:
    mine = [r for r in rows if r.task == task]
    peers = [r for r in mine if not r.label.startswith("agentcore") and not r.error]
    best = min(peers, key=lambda r: r.input_tokens) if peers else None
    lines = [
        f"**{TASKS[task].title}** (`{task}`)" + (f"; best peer: {best.label}" if best else ""),
        "",
        "| framework / mode | requests | input tokens | vs best peer | first request "
        "| output tokens | cacheable share | input after caching | min prefix kept |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in mine:
        if r.error:
            lines.append(f"| {r.label} | failed: {r.error.splitlines()[-1][:120]} ||||||||")
            continue
        ratio = f"{r.input_tokens / best.input_tokens:.2f}x" if best else "-"
        cached = f"{r.after_caching:,.0f}" + (
            f" ({r.after_caching / best.after_caching:.2f}x)" if best else ""
        )
        lines.append(
            f"| {r.label} | {r.requests} | {r.input_tokens:,} | {ratio} | {r.first:,} "
            f"| {r.output_tokens:,} | {100 * r.cacheable_share:.0f}% | {cached} "
            f"| {_pct(r.min_kept)} |"
        )
    return [*lines, ""]


def targets(rows: Sequence[Row], tasks: Sequence[str]) -> list[str]:
    """Issue 37's targets for agentcore's defaults, per task, against this run."""
    lines = [
        "Issue 37's targets, agentcore's defaults (structured, `Policy()`) against this run:",
        "",
        "| task | input <= best peer | requests <= best peer's | first <= 1.1x best peer's "
        "| structured output <= 1.1x native | prefix kept >= 95% | native <= structured |",
        "|---|---|---|---|---|---|---|",
    ]

    for task in tasks:
        mine = {r.label: r for r in rows if r.task == task and not r.error}
        peers = [r for r in mine.values() if not r.label.startswith("agentcore")]
        structured = CONFIGS[0].label.removeprefix("agentcore")
        whos = [
            r.label.removesuffix(structured)
            for r in rows
            if r.task == task and r.label.startswith("agentcore") and r.label.endswith(structured)
        ]
        for who in whos:
            lines.append(_target_row(task, who, mine, peers))
    return [*lines, ""]


def _target_row(task: str, who: str, mine: dict[str, Row], peers: Sequence[Row]) -> str:
    def ok(flag: bool, text: str) -> str:
        return ("met: " if flag else "**missed**: ") + text

    name = task if who == "agentcore" else f"{task} ({who})"
    s = mine.get(who + CONFIGS[0].label.removeprefix("agentcore"))
    n = mine.get(who + CONFIGS[1].label.removeprefix("agentcore"))
    if s is None or n is None or not peers:
        return f"| {name} | not measured (a run failed, or no peers) ||||||"
    best = min(peers, key=lambda r: r.input_tokens)
    best_first = min(r.first for r in peers)
    kept = s.min_kept if s.min_kept is not None else 100.0
    cells = [
        ok(s.input_tokens <= best.input_tokens, f"{s.input_tokens:,} vs {best.input_tokens:,}"),
        ok(s.requests <= best.requests, f"{s.requests} vs {best.requests}"),
        ok(s.first <= 1.1 * best_first, f"{s.first:,} vs {best_first:,}"),
        ok(s.output_tokens <= 1.1 * n.output_tokens, f"{s.output_tokens} vs {n.output_tokens}"),
        ok(kept >= 95.0, f"{kept:.1f}%"),
        ok(n.input_tokens <= s.input_tokens, f"{n.input_tokens:,} vs {s.input_tokens:,}"),
    ]
    return f"| {name} | " + " | ".join(cells) + " |"


def parts_table(rows: Sequence[Row]) -> list[str]:
    lines = [
        "| task / framework / mode | first request | tool schemas | framework text "
        "| operator instructions | history |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.error or not r.records or any(v in r.label for v in ("max_batch", "no plan", "ask")):
            continue
        f = r.records[0]
        lines.append(
            f"| {r.task} / {r.label} | {f.input_tokens:,} | {f.schemas:,} | {f.framework:,} "
            f"| {f.instructions:,} | {f.history:,} |"
        )
    return [*lines, ""]


def ask_table(rows: Sequence[Row], tasks: Sequence[str]) -> list[str]:
    """What offering ``ask`` costs: each ask row against the defaults in the same mode (the
    same script: the model never asks, so the requests match one to one)."""
    lines = [
        "Offering the ask action (`Policy(ask=True)`) against the defaults, same mode, same "
        "replies (the model never asks), input tokens:",
        "",
        "| task / agentcore / mode | requests | first request: defaults | first: ask "
        "| task: defaults | task: ask | per request |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for task in tasks:
        mine = {r.label: r for r in rows if r.task == task and not r.error and r.records}
        for base, offered in ((CONFIGS[0], ASK["structured"]), (CONFIGS[1], ASK["native"])):
            suffix = base.label.removeprefix("agentcore")
            for who in [k.removesuffix(suffix) for k in mine if k.endswith(suffix)]:
                d = mine[who + suffix]
                a = mine.get(who + offered.label.removeprefix("agentcore"))
                if a is None:  # a revision before the ask action
                    continue
                if d.requests != a.requests:
                    per = f"- ({d.requests} vs {a.requests} requests)"
                else:
                    per = f"{(a.input_tokens - d.input_tokens) / d.requests:+,.1f}"
                lines.append(
                    f"| {task} / {who} / {base.mode} | {d.requests} | {d.first:,} "
                    f"| {a.first:,} ({a.first - d.first:+,}) | {d.input_tokens:,} "
                    f"| {a.input_tokens:,} ({a.input_tokens - d.input_tokens:+,}) | {per} |"
                )
    return [*lines, ""]


def sections_table(first_bodies: dict[str, Any]) -> list[str]:  # Any: JSON
    labels = ["contract text", *(label for label, _ in MARKERS)]
    lines = [
        "agentcore's system text in the first request, by section (tokens):",
        "",
        "| task / mode | " + " | ".join(labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    for key, body in first_bodies.items():
        system = next(
            (m.get("content") for m in body.get("messages") or () if m.get("role") == "system"),
            None,
        )
        if not isinstance(system, str):
            continue
        sec = system_sections(system)
        lines.append(f"| {key} | " + " | ".join(f"{sec.get(x, 0):,}" for x in labels) + " |")
    return [*lines, ""]


# ------------------------------------------------------------------------------------------
# per part: where agentcore's defaults and the best peer differ, and what the levers save

LEAN = REPO / "bench" / "quality" / "variants" / "lean.json"


def part_totals(row: Row) -> dict[str, int]:
    """The row's input tokens by :data:`count.PARTS`, summed over its requests."""
    out = dict.fromkeys(PARTS, 0)
    for r in row.records:
        for k, v in r.parts.items():
            out[k] = out.get(k, 0) + v
    return out


def _defaults(rows: Sequence[Row], task: str, who: str) -> tuple[Row | None, Row | None]:
    mine = {r.label: r for r in rows if r.task == task and not r.error}
    s = mine.get(who + CONFIGS[0].label.removeprefix("agentcore"))
    n = mine.get(who + CONFIGS[1].label.removeprefix("agentcore"))
    return s, n


def _best_peer(rows: Sequence[Row], task: str) -> Row | None:
    peers = [r for r in rows if r.task == task and not r.label.startswith("agentcore")]
    peers = [r for r in peers if not r.error and r.records]
    return min(peers, key=lambda r: r.input_tokens) if peers else None


def _whos(rows: Sequence[Row], task: str) -> list[str]:
    suffix = CONFIGS[0].label.removeprefix("agentcore")
    return [
        r.label.removesuffix(suffix)
        for r in rows
        if r.task == task and r.label.startswith("agentcore") and r.label.endswith(suffix)
    ]


def parts_gap_table(rows: Sequence[Row], task: str) -> list[str]:
    """First request and whole task by part: agentcore's defaults (structured; native beside
    it) against the best peer, and the structured gap per part."""
    best = _best_peer(rows, task)
    out: list[str] = []
    for who in _whos(rows, task)[-1:]:  # the last --rev given
        s, n = _defaults(rows, task, who)
        if s is None or n is None or best is None or not s.records or not n.records:
            continue
        st, nt, bt = part_totals(s), part_totals(n), part_totals(best)
        sf, nf, bf = s.records[0].parts, n.records[0].parts, best.records[0].parts
        out += [
            f"**{task}**: {who} structured / native (defaults) against {best.label}, "
            "input tokens by part:",
            "",
            "| part | first: structured | first: native | first: best peer "
            "| task: structured | task: native | task: best peer | task gap (structured - peer) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for k in PARTS:
            if not (st.get(k) or nt.get(k) or bt.get(k)):
                continue
            out.append(
                f"| {k} | {sf.get(k, 0):,} | {nf.get(k, 0):,} | {bf.get(k, 0):,} "
                f"| {st.get(k, 0):,} | {nt.get(k, 0):,} | {bt.get(k, 0):,} "
                f"| {st.get(k, 0) - bt.get(k, 0):+,} |"
            )
        out += [
            f"| **all** ({s.requests} / {n.requests} / {best.requests} requests) "
            f"| {s.first:,} | {n.first:,} | {best.first:,} | {s.input_tokens:,} "
            f"| {n.input_tokens:,} | {best.input_tokens:,} "
            f"| {s.input_tokens - best.input_tokens:+,} |",
            "",
        ]
    return out


def _system_of(body: dict[str, Any]) -> str:  # Any: JSON
    for m in body.get("messages") or ():
        if m.get("role") == "system" and isinstance(m.get("content"), str):
            return str(m["content"])
    return ""


def _section(system: str, label: str) -> str:
    """The text of one section of agentcore's system text (``system_sections``' cuts)."""
    cuts = [(0, "contract text")]
    for name, marker in MARKERS:
        at = system.find(marker, cuts[-1][0] + 1)
        if at != -1:
            cuts.append((at, name))
    for (start, name), (end, _) in zip(cuts, [*cuts[1:], (len(system), "")], strict=True):
        if name == label:
            return system[start:end]
    return ""


def output_forms(turns: Sequence[Turn]) -> dict[str, int]:
    """Output tokens of agentcore's structured replies as scripted, and the same decisions
    (same thought text) written as compact JSON, and as compact flat actions
    (``{"type","thought","tool","args"}``: the form the history already shows)."""
    as_is = compact = flat = untyped = 0
    for t in turns:
        as_is += tokens(t.content or "")
        try:
            value = json.loads(t.content or "")
        except ValueError:
            value = None
        if not isinstance(value, dict):
            n = tokens(t.content or "")
            compact, flat, untyped = compact + n, flat + n, untyped + n
            continue
        compact += tokens(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
        action = dict(value.get("action", value))  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        call = action.pop("call", None)
        if isinstance(call, dict):
            action.update(call)  # pyright: ignore[reportUnknownArgumentType]
        flat += tokens(json.dumps(action, separators=(",", ":"), ensure_ascii=False))
        action.pop("type", None)
        untyped += tokens(json.dumps(action, separators=(",", ":"), ensure_ascii=False))
    return {
        "as scripted": as_is,
        "compact JSON": compact,
        "flat action": flat,
        "flat, no type key": untyped,
    }


def levers_table(
    rows: Sequence[Row],
    task: str,
    first_bodies: dict[str, Any],  # Any: JSON
    turns: dict[str, list[Turn]] | None = None,
) -> list[str]:
    """What each lever would save on agentcore's structured defaults, computed on this run's
    requests (per request x the requests it is in; not measured through agentcore)."""
    best = _best_peer(rows, task)
    out: list[str] = []
    for who in _whos(rows, task)[-1:]:  # the last --rev given
        s, n = _defaults(rows, task, who)
        if s is None or n is None or best is None:
            continue
        st, bt = part_totals(s), part_totals(best)
        k = s.requests
        system = _system_of(first_bodies.get(f"{who} {task}/structured", {}))
        native_system = _system_of(first_bodies.get(f"{who} {task}/native", {}))
        lines: list[tuple[str, int, str]] = []
        if system and native_system:
            short = system.replace(
                _section(system, "tool list"), _section(native_system, "tool list"), 1
            )
            d = tokens(system) - tokens(short)
            lines.append(
                (
                    "system text's tool list cut to native mode's line (response_format "
                    "carries the schemas)",
                    d * k,
                    f"{d} a request x {k}",
                )
            )
            d = st["worked examples"]
            lines.append(("no worked examples", d, f"{d // k} a request x {k}"))
            if LEAN.is_file():
                lean = json.loads(LEAN.read_text())
                cut = system.replace(_section(system, "worked examples"), "", 1)
                cut = cut.replace(_section(system, "contract text"), lean["system"] + "\n\n", 1)
                d = tokens(system) - tokens(cut)
                lines.append(
                    (
                        "contract text at bench/quality's lean variant (its rules, no "
                        "examples; -7.5 pts on the confirmation half, not shipped)",
                        d * k,
                        f"{d} a request x {k}",
                    )
                )
        plan = next(
            (
                r
                for r in rows
                if r.task == task and not r.error and r.label == who + CONFIGS[4].label[9:]
            ),
            None,
        )
        if plan is not None:
            lines.append(
                (
                    "no plan request (the no plan-before-writes row; a plan riding with the "
                    "first write keeps its text in the history, so at most this)",
                    s.input_tokens - plan.input_tokens,
                    f"{s.requests - plan.requests} request(s) fewer; output "
                    f"{s.output_tokens - plan.output_tokens:,} fewer at most",
                )
            )
        lines += [
            ("no step notes", st["step notes"], f"{st['step notes']} over {k} requests"),
            (
                "observation framing at the best peer's",
                st["observation framing"] - bt["observation framing"],
                f"{st['observation framing']:,} vs {bt['observation framing']:,}",
            ),
            (
                "model replies in the history at the best peer's size",
                st["model replies"] - bt["model replies"],
                f"{st['model replies']:,} vs {bt['model replies']:,}",
            ),
            (
                "response_format at the best peer's tools' size",
                st["response_format"] + st["tools"] - bt["tools"] - bt["response_format"],
                f"{s.records[0].parts['response_format']:,} vs "
                f"{best.records[0].parts['tools']:,} a request",
            ),
        ]
        gap = s.input_tokens - best.input_tokens
        out += [
            f"**{task}**: what each lever would save on {who} structured (defaults), "
            f"input tokens per task; gap to {best.label}: {gap:+,}",
            "",
            "| lever | saves | how computed | share of the gap |",
            "|---|---:|---|---:|",
            *(
                f"| {name} | {d:,} | {how} | {100 * d / gap:.0f}% |"
                if gap > 0
                else f"| {name} | {d:,} | {how} | - |"
                for name, d, how in lines
            ),
            "",
        ]
        if turns and f"{who} {task}" in turns:
            forms = output_forms(turns[f"{who} {task}"])
            out += [
                f"Output tokens, {who} structured (defaults) on {task}: "
                + ", ".join(f"{k} {v:,}" for k, v in forms.items())
                + f"; native {n.output_tokens:,} (1.1x: {1.1 * n.output_tokens:,.0f}).",
                "",
            ]
    return out


def report(
    rows: Sequence[Row],
    tasks: Sequence[str],
    meta: dict[str, Any],  # Any: JSON
    peer_versions: dict[str, str] | None,
    command: str,
    first_bodies: dict[str, Any] | None = None,  # Any: JSON
) -> str:
    from importlib.metadata import version

    lines = [
        SECTION,
        "",
        f"`{command}`, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
        f"CPython {platform.python_version()}; agentcore {meta.get('revision', '?')} with "
        f"litellm {version('litellm')}, openai {version('openai')}; counted with "
        f"{encoder_name()}.",
        "",
    ]
    if peer_versions:
        pv = ", ".join(f"{k} {v}" for k, v in peer_versions.items())
        lines += [f"Peers (their own venv, `bench/tokens/peers-requirements.txt`): {pv}.", ""]
    else:
        lines += ["Peers: not measured (no `--peer-python`): agentcore only.", ""]
    lines += [
        "Each framework through its real OpenAI client against a loopback fake of the Chat "
        "Completions API that logs each request and replays the same decisions (the same "
        "calls, arguments and thought text; `bench/tokens/tasks.py`). agentcore's script is "
        "what its model must write today: the minimal valid reply per step, and a plan "
        "before the first write under `Policy()`. Input tokens: the serialized request "
        "(tools / response_format JSON first, then the messages; `bench/tokens/count.py`). "
        "Cacheable share: OpenAI's cached tokens (a kept prefix of 1024 tokens or more, in "
        "128-token steps) over all input tokens; input after caching counts those at a "
        "quarter (GPT-4.1's cached-input price; the ratio is to the best peer's). Min "
        "prefix kept: the smallest share of a request that the next one keeps as its "
        "prefix. Output tokens: the scripted replies (the same decisions; their form is "
        "each framework's).",
        "",
    ]
    for task in tasks:
        lines += table(rows, task)
    lines += targets(rows, tasks)
    lines += [
        "Where the first request's tokens go (tool schemas: `tools` / `response_format`; "
        "framework text: system text other than the operator's instructions; history: the "
        "task and anything after it):",
        "",
        *parts_table(rows),
        *(sections_table(first_bodies) if first_bodies else []),
        *ask_table(rows, tasks),
    ]
    lines += [
        "Input tokens by part, the first request and the whole task (`bench/tokens/count.py`"
        "'s `PARTS`; each part counted on its own text, so the parts add up to the request; "
        "agentcore as of the last revision measured):",
        "",
    ]
    for task in tasks:
        lines += parts_gap_table(rows, task)
    from measure import agentcore_turns

    turns = {
        f"{who} {task}": agentcore_turns(TASKS[task], "structured")
        for task in tasks
        for who in _whos(rows, task)
    }
    for task in tasks:
        lines += levers_table(rows, task, first_bodies or {}, turns)
    return "\n".join(lines)


def write_section(text: str) -> None:
    path = REPO / "bench" / "RESULTS.md"
    old = path.read_text()
    start = old.find(SECTION)
    if start == -1:
        new = old.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    else:
        end = old.find("\n## ", start + len(SECTION))
        tail = old[end:] if end != -1 else "\n"
        new = old[:start] + text.rstrip("\n") + "\n" + tail
    path.write_text(new)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--peer-python", help="the peers' interpreter (peers-requirements.txt)")
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated task names")
    parser.add_argument(
        "--rev",
        action="append",
        help="measure agentcore as committed at this git revision (repeat: side by side)",
    )
    parser.add_argument("--write", action="store_true", help="write the section of RESULTS.md")
    parser.add_argument("--json", help="write every request's record to this file")
    parser.add_argument("--agentcore-json", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    tasks = [t for t in ns.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:  # before anything is measured: never another task in its place
        parser.error(f"unknown task(s) {', '.join(unknown)}; the tasks: {', '.join(TASKS)}")
    for rev in ns.rev or ():
        known = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
            cwd=REPO,
            capture_output=True,
            check=False,
        )
        if known.returncode != 0:
            parser.error(f"--rev {rev!r} names no commit of this repository")
    if ns.agentcore_json:  # the child of --rev
        rows, extra = _agentcore_rows(tasks)
        json.dump({**extra, "rows": _rows_to_json(rows)}, sys.stdout)
        return
    rows: list[Row] = []
    extra: dict[str, Any] = {"meta": {}, "first_bodies": {}}  # Any: JSON
    revisions: list[str] = []
    for rev in ns.rev or [None]:
        rev_rows, rev_extra = agentcore_side(tasks, rev)
        commit = str(rev_extra["meta"]["commit"])
        revisions.append(str(rev_extra["meta"]["revision"]))
        prefix = "agentcore" if len(ns.rev or ()) < 2 else f"agentcore {commit}"
        for r in rev_rows:
            r.label = prefix + r.label.removeprefix("agentcore")
        rows += rev_rows
        for key, body in rev_extra["first_bodies"].items():
            extra["first_bodies"][f"{prefix} {key}"] = body
    extra["meta"]["revision"] = ", ".join(revisions)
    versions = None
    if ns.peer_python:
        peer_rows, versions = peer_side(ns.peer_python, tasks)
        rows += peer_rows
    command = (
        "python bench/tokens/run.py"
        + "".join(f" --rev {rev}" for rev in ns.rev or ())
        + (" --peer-python ..." if ns.peer_python else "")
    )
    text = report(rows, tasks, extra["meta"], versions, command, extra.get("first_bodies"))
    print(text)
    if ns.json:
        Path(ns.json).write_text(
            json.dumps(
                {"meta": extra["meta"], "peers": versions, "rows": _rows_to_json(rows)}, indent=1
            )
        )
    if ns.write:
        write_section(text)


if __name__ == "__main__":
    main()
