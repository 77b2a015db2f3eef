"""The ``agentcore`` command line.

Exit codes (also in the README):

== ===========================================================
0  the run completed (or the command succeeded)
1  an error: store failure, unknown run, a run that cannot be confirmed
2  usage error: bad option, bad argument, bad configuration
3  the run is awaiting confirmation
4  the run's budget is exhausted
5  the run needs attention
6  the run failed
7  the run was cancelled
8  the run is still marked running (its process may have died: resume it)
== ===========================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar, cast

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from agentcore.adapters import ModelAdapter, resolve_model
from agentcore.contracts import FinishAction, NextAction, PlanAction, ToolAction, load_contract
from agentcore.contracts.errors import AgentcoreError, ConfigurationError, ContractLintError

from . import (
    ActionDetected,
    Agent,
    Budget,
    RunEnded,
    RunResult,
    RunStatus,
    StreamEvent,
    ThoughtDelta,
    check_transcript,
)
from ._stats import ContractStats, contract_stats
from .evals import (
    EvalCase,
    Mode,
    Scorecard,
    dataset_hash,
    evaluate,
    load_bfcl,
    load_cases,
    save_scorecard,
)
from .events import (
    ActionProposed,
    Confirmation,
    ContextAdded,
    Decision,
    Event,
    ModelCalled,
    Resolution,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolFinished,
    ToolStarted,
    dump_event,
)
from .routing import default_scorecards_dir
from .stores import open_store

__all__ = ["EXIT_CODES", "app", "main"]

T = TypeVar("T")

EXIT_CODES: dict[RunStatus, int] = {
    RunStatus.COMPLETED: 0,
    RunStatus.AWAITING_CONFIRMATION: 3,
    RunStatus.BUDGET_EXHAUSTED: 4,
    RunStatus.NEEDS_ATTENTION: 5,
    RunStatus.FAILED: 6,
    RunStatus.CANCELLED: 7,
    RunStatus.RUNNING: 8,
}
EXIT_ERROR = 1
EXIT_USAGE = 2

app = typer.Typer(
    name="agentcore",
    help="Run, inspect, confirm and resume agentcore runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
contract_app = typer.Typer(help="The next-action contract document.", no_args_is_help=True)
app.add_typer(contract_app, name="contract")

out = Console()
err = Console(stderr=True)

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store", help="Store URL (default: $AGENTCORE_STORE or sqlite:///agentcore.db)."
    ),
]
AgentOpt = Annotated[
    str | None,
    typer.Option(
        "--agent",
        help="MODULE:ATTR of the Agent (or a factory) that owns the run; default: the one "
        "recorded when the run was started from the CLI.",
    ),
]


def _fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _run_async(coro: Coroutine[Any, Any, T]) -> T:  # Any: coroutine send/throw types
    try:
        return asyncio.run(coro)
    except ConfigurationError as exc:
        _fail(str(exc), EXIT_USAGE)
    except AgentcoreError as exc:
        _fail(str(exc))


def _load_agent(ref: str, model: str | None = None, store: str | None = None) -> Agent:
    """Import ``MODULE:ATTR``: an Agent, or a callable returning one (given model/store)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"--agent / target {ref!r} must look like 'package.module:attr'.")
    sys.path.insert(0, ".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"Cannot import {module_name!r}: {exc}") from exc
    finally:
        sys.path.pop(0)
    target: Any = getattr(module, attr, None)  # Any: user object, checked below
    if target is None:
        raise ConfigurationError(f"Module {module_name!r} has no attribute {attr!r}.")
    if isinstance(target, Agent):
        if model is not None or store is not None:
            return target.configured(model=model, store=store)
        return target
    if callable(target):
        factory: Callable[..., Any] = target
        kwargs = {k: v for k, v in (("model", model), ("store", store)) if v is not None}
        made = factory(**kwargs)
        if isinstance(made, Agent):
            return made
    raise ConfigurationError(f"{ref} is neither an Agent nor a function returning one.")


def _action_detail(action: NextAction) -> str:
    match action:
        case PlanAction(steps=steps):
            return " | ".join(steps)
        case ToolAction(tool=name, args=args):
            return f"{name} {json.dumps(args)}"
        case FinishAction(answer=answer):
            return answer


def _describe(ev: Event) -> tuple[str, str]:
    """(step, text) for one event in the transcript table."""
    match ev:
        case RunStarted():
            return (
                "",
                f"task: {ev.task}  scope: {', '.join(ev.scope)}  "
                f"contract: {ev.contract.get('hash')}",
            )
        case ContextAdded():
            return str(ev.step), f"{ev.source}: {ev.content[:120]}"
        case ModelCalled():
            tokens = f"{ev.input_tokens}+{ev.output_tokens} tokens"
            extra = f"  {ev.error}" if ev.error else ""
            return str(
                ev.step
            ), f"{ev.model}: {ev.outcome}, {tokens}, {ev.latency_ms:.1f} ms{extra}"
        case ActionProposed():
            a = ev.action
            detail = _action_detail(a)
            return str(ev.step), f"[{ev.call_id}] {a.type}: {detail}\n  thought: {a.thought}"
        case Decision():
            return str(ev.step), f"[{ev.call_id}] {ev.verdict}" + (
                f": {ev.reason}" if ev.reason else ""
            )
        case Confirmation():
            verb = "approved" if ev.approved else "denied"
            edited = " (edited args)" if ev.args is not None else ""
            why = f": {ev.reason}" if ev.reason else ""
            return str(ev.step), f"[{ev.call_id}] {verb} by {ev.by}{edited}{why}"
        case ToolStarted():
            return str(
                ev.step
            ), f"[{ev.call_id}] {ev.tool} {json.dumps(ev.args)}  key={ev.idempotency_key}"
        case ToolFinished():
            body = json.dumps(ev.result) if ev.ok else f"ERROR {ev.error}"
            return str(ev.step), f"[{ev.call_id}] {ev.tool} -> {body[:300]}"
        case Resolution():
            why = f": {ev.reason}" if ev.reason else ""
            return str(ev.step), f"[{ev.call_id}] resolved by {ev.by}: {ev.decision}{why}"
        case RunResumed():
            return "", "resumed" + (" with a new budget" if ev.budget else "")
        case RunFinished():
            return "", f"{ev.status}: {ev.answer or ev.reason or ''}"


def _print_transcript(events: list[Event]) -> None:
    table = Table(show_lines=False, header_style="bold")
    table.add_column("seq", justify="right")
    table.add_column("step", justify="right")
    table.add_column("event")
    table.add_column("detail", overflow="fold")
    for ev in events:
        step, text = _describe(ev)
        table.add_row(str(ev.seq), step, ev.type, Text(text))
    out.print(table)


def _report(result: RunResult, *, agent_hint: str | None = None) -> NoReturn:
    status = result.status
    style = {RunStatus.COMPLETED: "green", RunStatus.AWAITING_CONFIRMATION: "yellow"}.get(
        status, "red"
    )
    out.print(f"[bold {style}]{status.value}[/]  run {result.run_id}", highlight=False)
    if result.answer:
        out.print(f"answer: {result.answer}", highlight=False)
    if result.reason and status is not RunStatus.COMPLETED:
        out.print(f"reason: {result.reason}", highlight=False)
    u = result.usage
    out.print(
        f"usage: {u.steps} steps, {u.tool_calls} tool calls, {u.model_calls} model calls, "
        f"{u.input_tokens}+{u.output_tokens} tokens",
        highlight=False,
    )
    p = result.pending
    if p is not None:
        what = (
            f"{p.tool}({json.dumps(p.args)})"
            if p.kind == "tool"
            else "plan: " + " | ".join(p.plan_steps)
        )
        out.print(f"waiting for a person to approve step {p.step}: {what}", highlight=False)
        agent_opt = f" --agent {agent_hint}" if agent_hint else ""
        out.print("approve: ", end="")
        out.print(
            f"agentcore confirm {result.run_id} --approve --by <your-name>{agent_opt}",
            style="bold",
            highlight=False,
            soft_wrap=True,
        )
        out.print("deny:    ", end="")
        out.print(
            f'agentcore confirm {result.run_id} --deny --by <your-name> --reason "..."{agent_opt}',
            style="bold",
            highlight=False,
            soft_wrap=True,
        )
    raise typer.Exit(EXIT_CODES[status])


async def _agent_for_run(
    run_id: str, agent_ref: str | None, store: str | None
) -> tuple[Agent, str]:
    if agent_ref is None:
        st = open_store(store)
        try:
            first = (await st.load(run_id))[0]
        finally:
            await st.close()
        recorded = first.metadata.get("agent") if isinstance(first, RunStarted) else None
        if not isinstance(recorded, str):
            raise ConfigurationError(
                f"Run {run_id} was not started from the CLI: pass --agent MODULE:ATTR naming "
                "the agent that owns its tools."
            )
        agent_ref = recorded
    return _load_agent(agent_ref, store=store), agent_ref


async def _live(stream: AsyncIterator[StreamEvent]) -> RunResult:
    """Show a run as it happens: the thought while the model writes, then each decision."""
    thought = Text()
    result: RunResult | None = None
    with Live(thought, console=out, transient=True, refresh_per_second=20) as live:
        async for ev in stream:
            match ev:
                case ThoughtDelta(step=step, text=text):
                    if not thought.plain:
                        thought.append(f"step {step} thinking: ", style="dim")
                    thought.append(text)
                    live.update(thought)
                case ActionDetected():
                    pass
                case ActionProposed() | Decision() | ToolFinished() | Confirmation() | Resolution():
                    if isinstance(ev, ActionProposed):
                        thought = Text()
                        live.update(thought)
                    step, text = _describe(ev)
                    live.console.print(Text(f"{step:>3} {ev.type:<16} {text}"), soft_wrap=True)
                case RunEnded(result=final):
                    result = final
                case _:
                    pass
    assert result is not None
    return result


@app.callback()
def _main(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log each step to stderr.")
    ] = False,
) -> None:
    """Run, inspect, confirm and resume agentcore runs."""
    import structlog

    level = logging.DEBUG if verbose else logging.WARNING
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


@app.command()
def demo(
    model: Annotated[
        str | None,
        typer.Option(
            help="A real model, e.g. openai/gpt-4.1-mini, or 'local' for SmolLM2-135M on this "
            "machine (extra [local]) (default: scripted)."
        ),
    ] = None,
    store: StoreOpt = None,
) -> None:
    """Run the support-desk demo agent (offline, scripted model, SQLite store)."""
    from .demo import DEMO_TASK, build_agent

    ref = "agentcore.demo:build_agent"
    local = model == "local"

    async def go(chosen: str | ModelAdapter | None) -> tuple[RunResult, list[Event]]:
        agent = build_agent(model=chosen, store=store)
        try:
            name = agent.route[0].name
            if name.startswith("scripted"):
                out.print(
                    "[bold]model:[/] scripted: a deterministic script, not a language model "
                    "(pass --model provider/name or set AGENTCORE_MODEL to use a real one)",
                    highlight=False,
                )
            elif local:
                out.print(
                    f"[bold]model:[/] {name}: SmolLM2-135M-Instruct, a real 135M-parameter "
                    "model running on this machine (llama-cpp-python's server on 127.0.0.1). "
                    "It is tiny and picks tools badly: this run shows the wiring, not quality.",
                    highlight=False,
                )
            else:
                out.print(f"[bold]model:[/] {name}", highlight=False)
            out.print(f"[bold]store:[/] {agent.store.url}", highlight=False)
            out.print(f"[bold]task:[/] {DEMO_TASK}\n", highlight=False)
            result = await _live(
                agent.stream(DEMO_TASK, budget=Budget(max_steps=12), metadata={"agent": ref})
            )
            return result, await agent.transcript(result.run_id)
        finally:
            await agent.close()

    with contextlib.ExitStack() as stack:
        chosen = _serve_smollm2(stack) if local else model
        result, _ = _run_async(go(chosen))
    if local and result.status is RunStatus.AWAITING_CONFIRMATION:
        out.print(
            "note: the SmolLM2 server stopped with this command; `agentcore confirm` continues "
            "this run on the demo's default model.",
            highlight=False,
        )
    _report(result)


def _serve_smollm2(stack: contextlib.ExitStack) -> ModelAdapter:
    """Start SmolLM2 on llama-cpp-python's server for the length of ``stack``."""
    from agentcore.adapters._llama_server import (
        SMOLLM2_ALIAS,
        ServerStartError,
        serve_llama,
        smollm2_model_path,
    )

    try:
        path = smollm2_model_path()
        err.print("starting llama-cpp-python's server with SmolLM2-135M-Instruct...")
        api_base = stack.enter_context(serve_llama(path, n_ctx=4096))
    except ServerStartError as exc:
        _fail(str(exc))
    except ConfigurationError as exc:
        _fail(str(exc), EXIT_USAGE)
    return resolve_model(f"local/{SMOLLM2_ALIAS}", api_base=api_base, max_output_tokens=256)


@app.command("run")
def run_cmd(
    target: Annotated[
        str, typer.Argument(help="MODULE:ATTR of an Agent or a function returning one.")
    ],
    task: Annotated[str, typer.Argument(help="The task.")],
    scope: Annotated[
        str | None, typer.Option(help="Comma-separated tool names or labels (default: all).")
    ] = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Step budget.")] = 25,
    max_tokens: Annotated[int | None, typer.Option(min=1, help="Token budget.")] = None,
    model: Annotated[str | None, typer.Option(help="Override the agent's model route.")] = None,
    store: StoreOpt = None,
    run_id: Annotated[
        str | None, typer.Option(help="A caller-chosen run id (idempotent start).")
    ] = None,
    show: Annotated[bool, typer.Option(help="Also print the transcript table at the end.")] = False,
) -> None:
    """Start a run of an agent and advance it until it completes, stops or waits."""

    async def go() -> tuple[RunResult, list[Event]]:
        agent = _load_agent(target, model=model, store=store)
        try:
            names = [s.strip() for s in scope.split(",") if s.strip()] if scope else None
            result = await _live(
                agent.stream(
                    task,
                    scope=names,
                    budget=Budget(max_steps=max_steps, max_tokens=max_tokens),
                    run_id=run_id,
                    metadata={"agent": target},
                )
            )
            return result, await agent.transcript(result.run_id)
        finally:
            await agent.close()

    result, events = _run_async(go())
    if show:
        _print_transcript(events)
    _report(result)


@app.command()
def runs(
    status: Annotated[str | None, typer.Option(help="Only runs with this status.")] = None,
    limit: Annotated[int, typer.Option(min=1)] = 50,
    store: StoreOpt = None,
) -> None:
    """List runs, most recently updated first."""
    if status is not None and status not in {s.value for s in RunStatus}:
        _fail(
            f"unknown status {status!r}; valid: {', '.join(s.value for s in RunStatus)}", EXIT_USAGE
        )

    async def go() -> list[Any]:  # Any: RunSummary rows
        st = open_store(store)
        try:
            return list(await st.list_runs(status=status, limit=limit))
        finally:
            await st.close()

    rows = _run_async(go())
    table = Table(header_style="bold")
    table.add_column("run id", no_wrap=True)
    for col in ("status", "events", "updated", "task"):
        table.add_column(col)
    import datetime as dt

    for r in rows:
        when = dt.datetime.fromtimestamp(r.updated_at, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(r.run_id, r.status, str(r.events), when, r.task[:60])
    out.print(table)


@app.command()
def show(
    run_id: str,
    as_json: Annotated[bool, typer.Option("--json", help="JSON Lines instead of a table.")] = False,
    store: StoreOpt = None,
) -> None:
    """Show a run's transcript."""

    async def go() -> list[Event]:
        st = open_store(store)
        try:
            return await st.load(run_id)
        finally:
            await st.close()

    events = _run_async(go())
    if as_json:
        for ev in events:
            sys.stdout.write(json.dumps(dump_event(ev), ensure_ascii=False) + "\n")
        return
    _print_transcript(events)


@app.command()
def export(run_id: str, store: StoreOpt = None) -> None:
    """Write a run's transcript to stdout as JSON Lines (one event per line)."""
    show(run_id, as_json=True, store=store)


@app.command()
def confirm(
    run_id: str,
    by: Annotated[str, typer.Option(help="Who decides (recorded).")],
    approve: Annotated[
        bool | None, typer.Option("--approve/--deny", help="Approve or deny.")
    ] = None,
    reason: Annotated[
        str | None, typer.Option(help="Why (shown to the model on a denial).")
    ] = None,
    args: Annotated[str | None, typer.Option(help="Edited arguments as a JSON object.")] = None,
    agent: AgentOpt = None,
    store: StoreOpt = None,
) -> None:
    """Approve or deny the call a run is waiting on, then continue the run."""
    if approve is None:
        _fail("say --approve or --deny", EXIT_USAGE)
    edited: dict[str, Any] | None = None  # Any: JSON values
    if args is not None:
        try:
            parsed: object = json.loads(args)
        except json.JSONDecodeError as exc:
            _fail(f"--args is not valid JSON: {exc}", EXIT_USAGE)
        if not isinstance(parsed, dict):
            _fail("--args must be a JSON object", EXIT_USAGE)
        edited = cast("dict[str, Any]", parsed)  # a JSON object; the tool's schema validates it

    async def go() -> tuple[RunResult, str]:
        owner, ref = await _agent_for_run(run_id, agent, store)
        try:
            result = await owner.confirm(run_id, approve=approve, by=by, reason=reason, args=edited)
            return result, ref
        finally:
            await owner.close()

    result, _ = _run_async(go())
    _report(result, agent_hint=agent)


@app.command()
def resume(
    run_id: str,
    max_steps: Annotated[int | None, typer.Option(min=1, help="A new step budget.")] = None,
    max_tokens: Annotated[int | None, typer.Option(min=1, help="A new token budget.")] = None,
    by: Annotated[
        str | None, typer.Option(help="Resume by hand as this person (resets dead-lettering).")
    ] = None,
    accept_tool_changes: Annotated[
        bool, typer.Option(help="Continue although a tool the run used has changed.")
    ] = False,
    agent: AgentOpt = None,
    store: StoreOpt = None,
) -> None:
    """Continue a run from its transcript (after a crash or a budget stop)."""

    async def go() -> RunResult:
        owner, _ = await _agent_for_run(run_id, agent, store)
        try:
            budget = None
            if max_steps is not None or max_tokens is not None:
                budget = Budget(max_steps=max_steps, max_tokens=max_tokens)
            return await owner.resume(
                run_id, budget=budget, by=by, accept_tool_changes=accept_tool_changes
            )
        finally:
            await owner.close()

    _report(_run_async(go()))


@app.command()
def resolve(
    run_id: str,
    by: Annotated[str, typer.Option(help="Who decides (recorded).")],
    result: Annotated[
        str | None, typer.Option(help="The call happened and returned this JSON value.")
    ] = None,
    rerun: Annotated[bool, typer.Option(help="The call did not happen: run it once.")] = False,
    fail: Annotated[bool, typer.Option(help="Treat the call as failed.")] = False,
    reason: Annotated[str | None, typer.Option(help="Why (recorded).")] = None,
    agent: AgentOpt = None,
    store: StoreOpt = None,
) -> None:
    """Settle a lost non-idempotent call of a run in needs_attention, then continue it."""
    if sum((result is not None, rerun, fail)) != 1:
        _fail("say exactly one of --result JSON, --rerun, --fail", EXIT_USAGE)
    value: object = None
    if result is not None:
        try:
            value = json.loads(result)
        except json.JSONDecodeError as exc:
            _fail(f"--result is not valid JSON: {exc}", EXIT_USAGE)

    async def go() -> RunResult:
        owner, _ = await _agent_for_run(run_id, agent, store)
        try:
            if result is not None:
                return await owner.resolve(run_id, by=by, result=value, reason=reason)
            return await owner.resolve(run_id, by=by, rerun=rerun, fail=fail, reason=reason)
        finally:
            await owner.close()

    _report(_run_async(go()))


@app.command()
def check(run_id: str, store: StoreOpt = None) -> None:
    """Check a run's transcript integrity (exit 0 when sound, 1 with the problems)."""

    async def go() -> list[Event]:
        st = open_store(store)
        try:
            return await st.load(run_id)
        finally:
            await st.close()

    problems = check_transcript(_run_async(go()))
    for p in problems:
        err.print(f"[red]problem:[/] {escape(p)}", highlight=False)
    if problems:
        raise typer.Exit(EXIT_ERROR)
    out.print(f"run {run_id}: transcript sound", highlight=False)


@app.command()
def repair(
    run_id: str,
    truncate_after: Annotated[
        int, typer.Option(min=0, help="Delete every event after this seq (explicit repair).")
    ],
    backup: Annotated[
        Path | None,
        typer.Option(help="Where to save the removed events (default: RUN_ID.removed.jsonl)."),
    ] = None,
    store: StoreOpt = None,
) -> None:
    """Cut a damaged transcript after SEQ; the removed raw events are saved to a file first."""
    target = backup or Path(f"{run_id}.removed.jsonl")

    async def go(dry_run: bool) -> list[tuple[int, str]]:
        st = open_store(store)
        try:
            return await st.truncate(run_id, after=truncate_after, dry_run=dry_run)
        finally:
            await st.close()

    doomed = _run_async(go(dry_run=True))
    with target.open("a", encoding="utf-8") as fh:  # the backup is written before deleting
        for seq, body in doomed:
            fh.write(json.dumps({"run_id": run_id, "seq": seq, "raw": body}) + "\n")
    removed = _run_async(go(dry_run=False))
    out.print(
        f"run {run_id}: removed {len(removed)} event(s) after seq {truncate_after}; "
        f"saved to {target}. Resume it with: agentcore resume {run_id}",
        highlight=False,
    )


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


def _load_dataset(path: Path) -> list[EvalCase]:
    """Our JSON Lines cases, or a BFCL question file (answers in possible_answer/ beside it)."""
    if path.name.startswith("BFCL_"):
        answers = path.parent / "possible_answer" / path.name
        return load_bfcl(path, answers if answers.is_file() else None)
    return load_cases(path)


@app.command("eval")
def eval_cmd(
    dataset: Annotated[Path, typer.Argument(help="Cases (JSON Lines) or a BFCL question file.")],
    model: Annotated[str, typer.Option(help="provider/model, or MODULE:ATTR of an adapter.")],
    mode: Annotated[str, typer.Option(help="structured, native or both.")] = "structured",
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
        _fail(f"unknown mode {mode!r}; valid: structured, native, both", EXIT_USAGE)
    try:
        cases = _load_dataset(dataset)
        adapter = _load_model(model)
    except ConfigurationError as exc:
        _fail(str(exc), EXIT_USAGE)
    if limit is not None:
        cases = cases[:limit]
    digest = dataset_hash(dataset)
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
                _run_async(
                    evaluate(
                        cases,
                        adapter,
                        mode=m,
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
        title=f"{adapter.name} on {dataset.name} ({len(cases)} cases)", header_style="bold"
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


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _parse_since(since: str) -> float:
    """``7d``, ``24h``, ``30m`` ago, or an ISO date/time (UTC when no zone is given)."""
    import datetime as dt

    unit = {"d": 86400, "h": 3600, "m": 60}
    if since[:-1].isdigit() and since[-1:] in unit:
        return time.time() - int(since[:-1]) * unit[since[-1]]
    try:
        when = dt.datetime.fromisoformat(since)
    except ValueError as exc:
        raise ConfigurationError(
            f"--since {since!r}: use 7d, 24h, 30m or an ISO date such as 2026-11-01"
        ) from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


@app.command()
def stats(
    since: Annotated[
        str | None, typer.Option(help="Only runs updated since (7d, 24h, ISO).")
    ] = None,
    by: Annotated[str, typer.Option(help="Group by: contract.")] = "contract",
    store: StoreOpt = None,
) -> None:
    """Per contract version: runs, steps, plan/tool/finish shares, invalid and re-ask rates."""
    if by != "contract":
        _fail(f"unknown grouping {by!r}; valid: contract", EXIT_USAGE)
    try:
        cutoff = _parse_since(since) if since else None
    except ConfigurationError as exc:
        _fail(str(exc), EXIT_USAGE)

    async def go() -> list[ContractStats]:
        st = open_store(store)
        try:
            return await contract_stats(st, since=cutoff)
        finally:
            await st.close()

    rows = _run_async(go())
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
            owner = _load_agent(agent)
            doc, tools = owner.contract, [t.spec for t in owner.tools.values()]
        else:
            doc, tools = load_contract(version), []
        problems = doc.lint(tools)
    except ContractLintError as exc:
        problems = exc.problems
        doc = None
    except ConfigurationError as exc:
        _fail(str(exc), EXIT_USAGE)
    for p in problems:
        err.print(f"[red]problem:[/] {p}", highlight=False)
    if problems or doc is None:
        raise typer.Exit(EXIT_ERROR)
    out.print(
        f"contract v{doc.version} ({doc.hash}): {len(doc.examples)} worked examples valid",
        highlight=False,
    )


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
