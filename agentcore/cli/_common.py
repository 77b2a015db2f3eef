"""Shared pieces of the command line: the app, consoles, options, rendering helpers."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import re
import shlex
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping, Sequence
from typing import Annotated, Any, NoReturn, TypeGuard, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from agentcore import (
    Agent,
    PendingCall,
    RunResult,
    RunStatus,
    configure_logging,
)
from agentcore.contracts import (
    check_run_id,
    check_tenant,
)
from agentcore.contracts.errors import (
    AgentcoreError,
    ConfigurationError,
    LimitExceededError,
)
from agentcore.events import RunStarted
from agentcore.stores import TranscriptStore, default_store_url, open_read_only, open_store

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
    RunStatus.AWAITING_INPUT: 11,
}
EXIT_ERROR = 1
EXIT_USAGE = 2

app = typer.Typer(
    name="agentcore",
    help="Run, inspect, confirm and resume agentcore runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is plain: "[local]" in it is an extra's name, not markup
)
contract_app = typer.Typer(
    help="The next-action contract document.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(contract_app, name="contract")

# soft_wrap: lines are never broken by rich (a terminal wraps them; a pipe gets them whole)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def plain() -> bool:
    """Whether stdout is not a terminal: tables become tab-separated lines, nothing is
    truncated or wrapped, and there is no colour."""
    return not out.is_terminal


def print_rows(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table on a terminal; tab-separated lines (a header, then one per row, tabs and line
    breaks inside a value replaced by spaces) when stdout is not one."""
    if plain():
        for row in (columns, *rows):
            sys.stdout.write("\t".join(" ".join(str(v).split()) for v in row) + "\n")
        return
    table = Table(header_style="bold")
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*(Text(v) for v in row))
    out.print(table)


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
AcceptToolChangesOpt = Annotated[
    bool, typer.Option(help="Continue although a tool the run used has changed.")
]
ReasonOpt = Annotated[str | None, typer.Option(help="Why (recorded).")]


def open_listing(url: str | None) -> TranscriptStore | None:
    """The store a listing command reads (``runs``, ``show``, ``export``, ``stats``,
    ``check``), opened only to read (:func:`open_read_only`): ``None`` when there is no
    store at ``url``, so that listing creates nothing."""
    return open_read_only(url)


def missing_store(url: str | None) -> str | None:
    """What to tell a person on stderr when there is no store at ``url`` (:func:`no_store`);
    ``None`` when there is one, or when opening it fails (the command that opens it says
    why). Opens the store to read and closes it: call it outside an event loop."""
    try:
        found = open_read_only(url)
    except AgentcoreError:
        return None
    if found is not None:
        run_async(found.close())
        return None
    return no_store(url)


def no_store(url: str | None) -> str:
    """The note for a store that is not there: listing it shows nothing, and creates
    nothing."""
    where = url or default_store_url()
    return f"no store at {where}: no runs yet; pass --store or set AGENTCORE_STORE"


def valid_tenant(value: str | None) -> str | None:
    """Refuse a tenant no run may have (empty, too long, control characters) as a usage
    error, before any store is opened."""
    if value == "":
        abort("--tenant is empty: give the tenant's name, or leave --tenant out", EXIT_USAGE)
    return _checked(check_tenant, value)


def _checked(check: Callable[[str], object], value: str | None) -> str | None:
    """``value``, or a usage error saying why ``check`` refused it."""
    if value is not None:
        try:
            check(value)
        except LimitExceededError as exc:
            abort(str(exc), EXIT_USAGE)
    return value


TenantOpt = Annotated[
    str | None,
    typer.Option("--tenant", help="Only runs of this tenant.", callback=valid_tenant),
]


def abort(message: str, code: int = EXIT_ERROR) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


_AGO = re.compile(r"([0-9]{1,9})([dhm])")
_AGO_SECONDS = {"d": 86400, "h": 3600, "m": 60}


def cutoff_time(value: str, option: str) -> float:
    """The moment an option such as ``--since`` names, in Unix seconds: ``30d``, ``12h``,
    ``90m`` ago, or an ISO date/time (UTC when no zone is given). Anything else aborts with
    a usage error that names ``option`` and the forms it takes."""
    import datetime as dt

    ago = _AGO.fullmatch(value)
    if ago is not None:
        return time.time() - int(ago.group(1)) * _AGO_SECONDS[ago.group(2)]
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        abort(
            f"{option} {value!r}: use 30d, 12h, 90m or an ISO date such as 2026-11-01", EXIT_USAGE
        )
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def valid_run_id(param: typer.CallbackParam, value: str | None) -> str | None:
    """Refuse a run id no run may have (empty, too long, control characters, bytes that
    are not UTF-8) as a usage error, before any store is opened."""
    if value == "":
        if param.param_type_name == "option":  # run --run-id
            abort("--run-id is empty: leave it out for a new random id, or give one", EXIT_USAGE)
        abort("the run id is empty: give a run's id (agentcore runs lists them)", EXIT_USAGE)
    return _checked(check_run_id, value)


RunIdArg = Annotated[str, typer.Argument(help="The run's id.", callback=valid_run_id)]


def run_async(coro: Coroutine[Any, Any, T]) -> T:  # Any: coroutine send/throw types
    try:
        return asyncio.run(coro)
    except Interrupted as exc:
        if exc.run_id is None:
            err.print("interrupted before the run started; nothing was recorded.")
        else:
            out.print(f"interrupted  run {exc.run_id}", highlight=False)
            out.print("resume: ", end="")
            out.print(exc.command or "", style="bold", highlight=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)
    except AgentcoreError as exc:
        abort(str(exc))


def _is_agent(value: object) -> TypeGuard[Agent[Any]]:  # Any: whatever its output type
    return isinstance(value, Agent)


def load_agent(
    ref: str, model: str | None = None, store: str | None = None
) -> Agent[Any]:  # Any: the loaded agent's output type, whatever it is
    """Import ``MODULE:ATTR``: an Agent, or a callable returning one (given model/store)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"--agent / target {ref!r} must look like 'package.module:attr'.")
    sys.path.insert(0, ".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"Cannot import {module_name!r}: {exc}") from exc
    except Exception as exc:  # the module itself raised while importing: say so, no traceback
        raise ConfigurationError(
            f"Importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        sys.path.pop(0)
    target: Any = getattr(module, attr, None)  # Any: user object, checked below
    if target is None:
        raise ConfigurationError(f"Module {module_name!r} has no attribute {attr!r}.")
    if _is_agent(target):
        if model is not None or store is not None:
            return target.configured(model=model, store=store)
        return target
    if callable(target):
        factory: Callable[..., Any] = target
        kwargs = {k: v for k, v in (("model", model), ("store", store)) if v is not None}
        try:
            made = factory(**kwargs)
        except AgentcoreError:
            raise
        except Exception as exc:  # the user's factory failed: say so, no traceback
            raise ConfigurationError(
                f"{ref}({', '.join(f'{k}=...' for k in kwargs)}) raised {type(exc).__name__}: {exc}"
            ) from exc
        if _is_agent(made):
            return made
    raise ConfigurationError(f"{ref} is neither an Agent nor a function returning one.")


def store_hint(url: str | None) -> str | None:
    """The ``--store`` a printed command needs: ``None`` when ``url`` is the store the CLI
    opens by default (``$AGENTCORE_STORE`` or ``sqlite:///agentcore.db``)."""
    return None if url is None or url == default_store_url() else url


def _where(agent: str | None, store: str | None) -> list[str]:
    parts: list[str] = []
    if agent:
        parts += ["--agent", shlex.quote(agent)]
    if store:
        parts += ["--store", shlex.quote(store)]
    return parts


def resume_command(
    run_id: str, *, agent: str | None = None, store: str | None = None, more: Sequence[str] = ()
) -> str:
    """The command that continues the run, as it can be pasted into a shell."""
    return " ".join(["agentcore", "resume", shlex.quote(run_id), *more, *_where(agent, store)])


REPLY_PLACEHOLDER = "your answer"
"""The message a printed ``reply`` command carries: the person puts their own in its place."""


def reply_command(
    run_id: str,
    message: str = REPLY_PLACEHOLDER,
    *,
    agent: str | None = None,
    store: str | None = None,
) -> str:
    """The command that answers the run's question (or says the user's next message), as
    it can be pasted into a shell: the message goes where ``message`` stands."""
    parts = ["agentcore", "reply", shlex.quote(run_id), shlex.quote(message)]
    return " ".join(parts + _where(agent, store))


def compensate_command(
    run_id: str, *, agent: str | None = None, store: str | None = None, more: Sequence[str] = ()
) -> str:
    """The command that goes on compensating the run, as it can be pasted into a shell
    (whoever runs it is recorded: ``--by``, else their login name)."""
    return " ".join(["agentcore", "compensate", shlex.quote(run_id), *more, *_where(agent, store)])


def report(
    result: RunResult,
    *,
    agent_hint: str | None = None,
    store: str | None = None,
    paused_ok: bool = False,
) -> NoReturn:
    """Print a run's outcome and exit with its status's code (``paused_ok``: a run waiting
    for a person exits 0, for the demo, where that pause is the point). ``store``: the
    store URL the commands printed must name (see :func:`store_hint`)."""
    status = result.status
    style = STATUS_STYLES.get(status, "red")
    turn = f"  turn {len(result.turns)}" if len(result.turns) > 1 else ""
    out.print(f"[bold {style}]{status.value}[/]  run {result.run_id}{turn}", highlight=False)
    if result.answer:
        out.print(f"answer: {result.answer}", highlight=False)
    pending = result.pending
    said_below = pending is not None and pending.reason == result.reason
    if pending is not None and pending.run_id is not None:
        # The recorded reason names the sub-agent run's own confirm command, which lacks
        # this command's --store and --agent: the bound commands below answer it from here.
        out.print(
            f"reason: sub-agent run {pending.run_id} waits for a person on the call below; "
            "answer it from this run with the command below, and this run goes on",
            highlight=False,
        )
    elif result.question is not None:
        out.print(f"question: {result.question}", highlight=False)
    elif result.reason and status is not RunStatus.COMPLETED and not said_below:
        out.print(f"reason: {result.reason}", highlight=False)  # else the pending call's "why:"
    u = result.usage
    out.print(
        f"usage: {u.steps} steps, {u.tool_calls} tool calls, {u.model_calls} model calls, "
        f"{u.input_tokens}+{u.output_tokens} tokens",
        highlight=False,
    )
    if result.pending is not None:
        print_pending(result.run_id, result.pending, agent_hint=agent_hint, store=store)
    elif status is RunStatus.BUDGET_EXHAUSTED:
        # a resume's budget replaces the run's: totals, with room to go on
        more = ["--max-steps", str(max(u.steps * 2, u.steps + 10))]
        if "token" in (result.reason or ""):
            more += ["--max-tokens", str(max((u.input_tokens + u.output_tokens) * 2, 10_000))]
        out.print("resume with a larger budget: ", end="")
        out.print(
            resume_command(result.run_id, agent=agent_hint, store=store, more=more),
            style="bold",
            highlight=False,
        )
    elif status is RunStatus.FAILED:
        # a failed run is resumed only by a person: the command names the one at this terminal
        person = _login_name()
        label = "resume by hand" if person else "resume by hand (name yourself)"
        more = ["--by", shlex.quote(person or "NAME")]
        if "no API key" in (result.reason or ""):
            label = "set the key, then resume"
        out.print(f"{label}: ", end="")
        out.print(
            resume_command(result.run_id, agent=agent_hint, store=store, more=more),
            style="bold",
            highlight=False,
        )
    elif status is RunStatus.RUNNING:
        out.print("resume: ", end="")
        out.print(
            resume_command(result.run_id, agent=agent_hint, store=store),
            style="bold",
            highlight=False,
        )
    elif status is RunStatus.AWAITING_INPUT:
        print_reply(result.run_id, agent_hint=agent_hint, store=store)
    if paused_ok and status is RunStatus.AWAITING_CONFIRMATION:
        raise typer.Exit(0)
    raise typer.Exit(EXIT_CODES[status])


STATUS_STYLES: dict[RunStatus, str] = {
    RunStatus.COMPLETED: "green",
    RunStatus.AWAITING_CONFIRMATION: "yellow",
    RunStatus.AWAITING_INPUT: "yellow",
}
"""The colour of a status on a terminal (any other: red)."""


def print_reply(run_id: str, *, agent_hint: str | None, store: str | None = None) -> None:
    """The reply command that answers a run waiting for the user (its placeholder message
    to be replaced by the answer)."""
    out.print("reply: ", end="")
    out.print(reply_command(run_id, agent=agent_hint, store=store), style="bold", highlight=False)


def turns_json(result: RunResult) -> list[dict[str, Any]]:  # Any: JSON values
    """The run's turns as ``reply --json`` and ``show --turns --json`` write them (stable
    fields: added, never renamed or removed): ``question`` for a turn that ended with one,
    ``reason`` for a turn that stopped otherwise."""
    found: list[dict[str, Any]] = []  # Any: JSON values
    for turn in result.turns:
        waiting = turn.status is RunStatus.AWAITING_INPUT
        found.append(
            {
                "turn": turn.number,
                "status": turn.status.value,
                "message": turn.message,
                "answer": turn.answer,
                "question": turn.reason if waiting else None,
                "reason": None if waiting else turn.reason,
                "seq": turn.seq,
            }
        )
    return found


def result_json(result: RunResult) -> dict[str, Any]:  # Any: JSON values
    """A run's outcome as ``reply --json`` writes it (stable fields: added, never renamed
    or removed)."""
    p = result.pending
    u = result.usage
    return {
        "run_id": result.run_id,
        "status": result.status.value,
        "answer": result.answer,
        "question": result.question,
        "reason": None if result.question is not None else result.reason,
        "pending": None
        if p is None
        else {"step": p.step, "tool": p.tool, "args": p.args, "args_hash": p.args_hash},
        "usage": {
            "steps": u.steps,
            "tool_calls": u.tool_calls,
            "model_calls": u.model_calls,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
        },
        "turns": turns_json(result),
    }


def pending_text(p: PendingCall) -> str:
    """The waiting call as a person should see it before approving it."""
    if p.kind == "tool":
        text = f"step {p.step}: {p.tool}({json.dumps(p.args)})  args hash {p.args_hash}"
    else:
        text = f"step {p.step}: plan: " + " | ".join(p.plan_steps)
    text += approvals_text(p)
    return text if not p.reason else f"{text}\n  why: {p.reason}"


def approvals_text(p: PendingCall) -> str:
    """``  (approvals 1 of 2: alice)`` for a call that needs several people, else ""."""
    if p.approvals_needed <= 1:
        return ""
    who = f": {', '.join(p.approvals)}" if p.approvals else ""
    return f"  (approvals {len(p.approvals)} of {p.approvals_needed}{who})"


ByOpt = Annotated[
    str | None,
    typer.Option(help="Who decides (recorded); default: your login name ($USER or the account's)."),
]


def _login_name() -> str:
    """The person at this terminal: ``$USER``, ``$LOGNAME``, else this process's account
    ("" when there is none)."""
    return os.environ.get("USER") or os.environ.get("LOGNAME") or _account_name()


def who_decides(by: str | None) -> str:
    """The person a command records: ``--by``, else the login name (``$USER``, ``$LOGNAME``,
    else the account of this process).

    Raises:
        typer.BadParameter: ``--by`` is blank, or no login name can be found.
    """
    if by is None:
        by = _login_name()
        if not by.strip():
            raise typer.BadParameter(
                "no login name to record as the person deciding: pass --by NAME",
                param_hint="--by",
            )
    elif not by.strip():
        raise typer.BadParameter(
            "is empty: pass --by NAME (who decides; recorded)", param_hint="--by"
        )
    return by


def _account_name() -> str:
    """This process's account name, or "" where it has none (a container's bare uid)."""
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return ""


def bound_command(
    run_id: str,
    p: PendingCall,
    *,
    approve: bool,
    by: str | None = None,
    agent: str | None,
    store: str | None = None,
) -> str:
    """The confirm command bound to exactly this call (its step and arguments hash), as it
    can be pasted into a shell: without ``by``, whoever runs it is recorded (their login
    name)."""
    parts = ["agentcore", "confirm", shlex.quote(run_id), "--approve" if approve else "--deny"]
    parts += ["--step", str(p.step)]
    if p.args_hash is not None:
        parts += ["--args-hash", p.args_hash]
    if by is not None:
        parts += ["--by", shlex.quote(by)]
    if not approve:
        parts += ["--reason", "'why not'"]
    return " ".join(parts + _where(agent, store))


def print_pending(
    run_id: str, p: PendingCall, *, agent_hint: str | None, store: str | None = None
) -> None:
    """The waiting call and the approve/deny commands bound to it."""
    out.print(f"waiting for a person to approve {pending_text(p)}", highlight=False)
    for label, approve in (("approve: ", True), ("deny:    ", False)):
        out.print(label, end="")
        out.print(
            bound_command(run_id, p, approve=approve, agent=agent_hint, store=store),
            style="bold",
            highlight=False,
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
        # the model the run was started on (a --model of `run` or `demo`), so a scripted
        # demo run is never continued on another model
        model = first.metadata.get("model") if isinstance(first, RunStarted) else None
        if isinstance(model, str):
            return load_agent(agent_ref, model=model, store=store), agent_ref
    return load_agent(agent_ref, store=store), agent_ref


def on_owner(
    run_id: str,
    agent_ref: str | None,
    store: str | None,
    act: Callable[[Agent[Any]], Awaitable[T]],  # Any: whatever its output type
) -> T:
    """``act(agent)`` on the agent that owns ``run_id`` (:func:`agent_for_run`), closed
    after, run to the end as :func:`run_async` runs it."""

    async def go() -> T:
        owner, _ = await agent_for_run(run_id, agent_ref, store)
        try:
            return await act(owner)
        finally:
            await owner.close()

    return run_async(go())


class Interrupted(Exception):  # noqa: N818  # a person's Ctrl-C, not an error
    """Ctrl-C stopped a run at a safe point (:func:`live`); it can be resumed.

    Attributes:
        run_id: the run, when it had started.
        command: the command that resumes it, as printed.
    """

    def __init__(self, run_id: str | None, command: str | None) -> None:
        super().__init__(run_id)
        self.run_id = run_id
        self.command = command


EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT), as shells report it."""


def _print_version(value: bool) -> None:
    if value:
        from agentcore import __version__

        out.print(f"agentcore {__version__}", highlight=False)
        raise typer.Exit(0)


@app.callback()
def _main(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Log each step to stderr (also accepted after the command)."
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Run, inspect, confirm and resume agentcore runs."""
    del version
    # one log line per transcript event with -v; otherwise warnings only (a run that needs a
    # person). A failed model call is not logged then: the run's result, which the command
    # prints, names it (a route that failed: every model's error) or it is in `show`.
    configure_logging(json=False, level=logging.DEBUG if verbose else logging.WARNING)
    if not verbose:
        import structlog

        processors = structlog.get_config()["processors"]
        structlog.configure(processors=[_drop_model_errors, *processors])


def _drop_model_errors(
    logger: object, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:  # Any: structlog's event dict
    """A structlog processor: a ``model_called`` log event is dropped (see above)."""
    if event.get("event") == "model_called":
        import structlog

        raise structlog.DropEvent
    return event
