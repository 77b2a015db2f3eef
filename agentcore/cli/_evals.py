"""Commands about models and contracts: eval, stats, contract lint."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from agentcore import ContractStats, contract_stats
from agentcore.adapters import ModelAdapter, resolve_model
from agentcore.cli._common import (
    EXIT_ERROR,
    EXIT_USAGE,
    StoreOpt,
    TenantOpt,
    abort,
    app,
    contract_app,
    cutoff_time,
    err,
    load_agent,
    open_listing,
    out,
    run_async,
)
from agentcore.contracts import load_contract
from agentcore.contracts.errors import ConfigurationError, ContractLintError
from agentcore.evals import (
    EvalCase,
    Mode,
    Scorecard,
    Scoring,
    dataset_hash,
    evaluate,
    load_bfcl,
    load_cases,
    save_scorecard,
)
from agentcore.routing import default_scorecards_dir


def _load_model(spec: str) -> ModelAdapter:
    """``provider/model`` through the registry, or ``MODULE:ATTR`` naming an adapter (or a
    function returning one)."""
    if ":" in spec and "/" not in spec.split(":", 1)[0]:
        module_name, _, attr = spec.partition(":")
        sys.path.insert(0, ".")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigurationError(f"Cannot import {module_name!r}: {exc}") from exc
        finally:
            sys.path.pop(0)
        target: Any = getattr(module, attr, None)  # Any: user object, checked below
        made: Any = (
            target() if callable(target) and not isinstance(target, ModelAdapter) else target
        )
        if not isinstance(made, ModelAdapter):
            raise ConfigurationError(
                f"{spec} is not a model adapter (or a function returning one)."
            )
        return made
    return resolve_model(spec)


def _load_dataset(path: Path) -> tuple[list[EvalCase], list[Path]]:
    """Our JSON Lines cases, or a BFCL question file (answers in possible_answer/ beside it);
    and the files they came from (the dataset hash covers the answers too)."""
    if path.name.startswith("BFCL_"):
        answers = path.parent / "possible_answer" / path.name
        if answers.is_file():
            return load_bfcl(path, answers), [path, answers]
        return load_bfcl(path), [path]
    return load_cases(path), [path]


@app.command("eval")
def eval_cmd(
    dataset: Annotated[Path, typer.Argument(help="Cases (JSON Lines) or a BFCL question file.")],
    model: Annotated[str, typer.Option(help="provider/model, or MODULE:ATTR of an adapter.")],
    mode: Annotated[str, typer.Option(help="structured, native or both.")] = "structured",
    scoring: Annotated[
        str,
        typer.Option(
            help="Rules: agentcore (this project's), bfcl (BFCL's AST checker) or auto "
            "(bfcl for BFCL files, agentcore otherwise)."
        ),
    ] = "auto",
    concurrency: Annotated[int, typer.Option(min=1, help="Cases in flight at once.")] = 4,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N cases.")] = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write the scorecard JSON here.")
    ] = None,
    scorecards: Annotated[
        Path | None,
        typer.Option(
            help="Store the scorecard here for Route(min_score=...) (default: "
            "$AGENTCORE_SCORECARDS or .agentcore/scorecards)."
        ),
    ] = None,
) -> None:
    """Score a model's tool selection on a dataset: one-step decisions, nothing executed."""
    modes: list[Mode]
    if mode == "both":
        modes = ["structured", "native"]
    elif mode in ("structured", "native"):
        modes = [mode]
    else:
        abort(f"unknown mode {mode!r}; valid: structured, native, both", EXIT_USAGE)
    rules: Scoring | None
    if scoring == "auto":
        rules = None
    elif scoring in ("agentcore", "bfcl"):
        rules = scoring
    else:
        abort(f"unknown scoring {scoring!r}; valid: auto, agentcore, bfcl", EXIT_USAGE)
    try:
        cases, files = _load_dataset(dataset)
        adapter = _load_model(model)
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)
    if limit is not None:
        cases = cases[:limit]
    digest = dataset_hash(*files)
    cards: list[Scorecard] = []
    for m in modes:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as progress:
            task = progress.add_task(f"{adapter.name} ({m})", total=len(cases))

            def advance(
                _result: object, task: TaskID = task, progress: Progress = progress
            ) -> None:
                progress.advance(task)

            cards.append(
                run_async(
                    evaluate(
                        cases,
                        adapter,
                        mode=m,
                        scoring=rules,
                        dataset=str(dataset),
                        dataset_digest=digest,
                        concurrency=concurrency,
                        on_result=advance,
                    )
                )
            )
    directory = scorecards or Path(default_scorecards_dir())
    for card in cards:
        save_scorecard(card, directory)
    if out_file is not None:
        payload = [c.model_dump(mode="json") for c in cards]
        out_file.write_text(
            json.dumps(payload[0] if len(payload) == 1 else payload, indent=2) + "\n",
            encoding="utf-8",
        )
    table = Table(
        title=f"{adapter.name} on {dataset.name} ({len(cases)} cases, {cards[0].scoring} rules)",
        header_style="bold",
    )
    table.add_column("metric")
    for card in cards:
        table.add_column(card.mode, justify="right")
    for metric in cards[0].metrics:
        table.add_row(metric, *(_num(c.metrics[metric]) for c in cards))
    out.print(table)
    cats = Table(title="accuracy by category", header_style="bold")
    cats.add_column("category")
    for card in cards:
        cats.add_column(card.mode, justify="right")
    for cat in cards[0].by_category:
        cats.add_row(cat, *(_num(c.by_category[cat]["accuracy"]) for c in cards))
    out.print(cats)
    errors = cards[0].case_errors
    if errors:
        err.print(
            f"[yellow]{len(errors)} case(s) not scored[/] (see case_errors in the scorecard):",
            highlight=False,
        )
        for case_id, why in list(errors.items())[:_ERRORS_SHOWN]:
            err.print(f"  {case_id}: {why}", highlight=False, soft_wrap=True)
        if len(errors) > _ERRORS_SHOWN:
            err.print(f"  ... and {len(errors) - _ERRORS_SHOWN} more", highlight=False)


_ERRORS_SHOWN = 10


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


@app.command()
def stats(
    since: Annotated[
        str | None, typer.Option(help="Only runs updated since (7d, 24h, ISO).")
    ] = None,
    by: Annotated[str, typer.Option(help="Group by: contract.")] = "contract",
    tenant: TenantOpt = None,
    store: StoreOpt = None,
) -> None:
    """Per contract version: runs, steps, plan/tool/finish shares, invalid and re-ask rates."""
    if by != "contract":
        abort(f"unknown grouping {by!r}; valid: contract", EXIT_USAGE)
    cutoff = None if since is None else cutoff_time(since, "--since")

    async def go() -> list[ContractStats]:
        st = open_listing(store)  # creates nothing; no store: no runs
        if st is None:
            return []
        try:
            return await contract_stats(st, since=cutoff, tenant=tenant)
        finally:
            await st.close()

    rows = run_async(go())
    table = Table(header_style="bold")
    for col in (
        "contract",
        "runs",
        "steps/run",
        "plan",
        "tool",
        "finish",
        "invalid",
        "re-ask",
        "budget stops",
    ):
        table.add_column(col, justify="left" if col == "contract" else "right")
    for s in rows:
        table.add_row(
            s.contract,
            str(s.runs),
            f"{s.steps_per_run:.2f}",
            f"{s.share('plan'):.1%}",
            f"{s.share('tool'):.1%}",
            f"{s.share('finish'):.1%}",
            f"{s.invalid_rate:.1%}",
            f"{s.reask_rate:.1%}",
            str(s.budget_exhausted),
        )
    out.print(table)


@contract_app.command("lint")
def contract_lint(
    agent: Annotated[
        str | None, typer.Option("--agent", help="Also check against this agent's tools.")
    ] = None,
    version: Annotated[str | None, typer.Option(help="Contract version or path.")] = None,
) -> None:
    """Check that every worked example validates against the action and tool schemas."""
    try:
        if agent is not None:
            owner = load_agent(agent)
            doc, tools = owner.contract, [t.spec for t in owner.tools.values()]
        else:
            doc, tools = load_contract(version), []
        problems = doc.lint(tools)
    except ContractLintError as exc:
        problems = exc.problems
        doc = None
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)
    for p in problems:
        err.print(f"[red]problem:[/] {p}", highlight=False)
    if problems or doc is None:
        raise typer.Exit(EXIT_ERROR)
    out.print(
        f"contract v{doc.version} ({doc.hash}): {len(doc.examples)} worked examples valid",
        highlight=False,
    )
