"""Shared pieces of the command line: the app, consoles, options, rendering helpers."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import shlex
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from agentcore import (
    ActionDetected,
    Agent,
    PendingCall,
    RunEnded,
    RunResult,
    RunStatus,
    StreamEvent,
    ThoughtDelta,
)
from agentcore.contracts import FinishAction, NextAction, PlanAction, ToolAction, check_run_id
from agentcore.contracts.errors import AgentcoreError, ConfigurationError, LimitExceededError
from agentcore.events import (
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
)
from agentcore.stores import open_store

__all__: list[str] = []  # private: see agentcore.cli

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


def abort(message: str, code: int = EXIT_ERROR) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def valid_run_id(value: str | None) -> str | None:
    """Refuse a run id no run may have (empty, too long, control characters, bytes that
    are not UTF-8) as a usage error, before any store is opened."""
    if value is not None:
        try:
            check_run_id(value)
        except LimitExceededError as exc:
            abort(str(exc), EXIT_USAGE)
    return value


RunIdArg = Annotated[str, typer.Argument(help="The run's id.", callback=valid_run_id)]


def run_async(coro: Coroutine[Any, Any, T]) -> T:  # Any: coroutine send/throw types
    try:
        return asyncio.run(coro)
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)
    except AgentcoreError as exc:
        abort(str(exc))


def load_agent(ref: str, model: str | None = None, store: str | None = None) -> Agent:
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


def action_detail(action: NextAction) -> str:
    match action:
        case PlanAction(steps=steps):
            return " | ".join(steps)
        case ToolAction(tool=name, args=args):
            return f"{name} {json.dumps(args)}"
        case FinishAction(answer=answer):
            return answer


def describe(ev: Event) -> tuple[str, str]:
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
            detail = action_detail(a)
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


def print_transcript(events: list[Event]) -> None:
    table = Table(show_lines=False, header_style="bold")
    table.add_column("seq", justify="right")
    table.add_column("step", justify="right")
    table.add_column("event")
    table.add_column("detail", overflow="fold")
    for ev in events:
        step, text = describe(ev)
        table.add_row(str(ev.seq), step, ev.type, Text(text))
    out.print(table)


def report(
    result: RunResult, *, agent_hint: str | None = None, paused_ok: bool = False
) -> NoReturn:
    """Print a run's outcome and exit with its status's code (``paused_ok``: a run waiting
    for a person exits 0, for the demo, where that pause is the point)."""
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
    if result.pending is not None:
        print_pending(result.run_id, result.pending, agent_hint=agent_hint)
    if paused_ok and status is RunStatus.AWAITING_CONFIRMATION:
        raise typer.Exit(0)
    raise typer.Exit(EXIT_CODES[status])


def pending_text(p: PendingCall) -> str:
    """The waiting call as a person should see it before approving it."""
    if p.kind == "tool":
        return f"step {p.step}: {p.tool}({json.dumps(p.args)})  args hash {p.args_hash}"
    return f"step {p.step}: plan: " + " | ".join(p.plan_steps)


def bound_command(
    run_id: str, p: PendingCall, *, approve: bool, by: str = "<your-name>", agent: str | None
) -> str:
    """The confirm command bound to exactly this call (its step and arguments hash)."""
    parts = ["agentcore", "confirm", shlex.quote(run_id), "--approve" if approve else "--deny"]
    parts += ["--step", str(p.step)]
    if p.args_hash is not None:
        parts += ["--args-hash", p.args_hash]
    parts += ["--by", by if by == "<your-name>" else shlex.quote(by)]
    if not approve:
        parts += ["--reason", '"..."']
    if agent:
        parts += ["--agent", shlex.quote(agent)]
    return " ".join(parts)


def print_pending(run_id: str, p: PendingCall, *, agent_hint: str | None) -> None:
    """The waiting call and the approve/deny commands bound to it."""
    out.print(f"waiting for a person to approve {pending_text(p)}", highlight=False)
    for label, approve in (("approve: ", True), ("deny:    ", False)):
        out.print(label, end="")
        out.print(
            bound_command(run_id, p, approve=approve, agent=agent_hint),
            style="bold",
            highlight=False,
            soft_wrap=True,
        )


async def agent_for_run(run_id: str, agent_ref: str | None, store: str | None) -> tuple[Agent, str]:
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
    return load_agent(agent_ref, store=store), agent_ref


async def live(stream: AsyncIterator[StreamEvent]) -> RunResult:
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
                    step, text = describe(ev)
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
