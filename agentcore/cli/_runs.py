"""Commands about runs: demo, run, reply, runs, show, export, confirm, resume, resolve,
cancel, check, repair."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.markup import escape

from agentcore import (
    Agent,
    Budget,
    PendingCall,
    Policy,
    RunResult,
    RunState,
    RunStatus,
    Settle,
    check_transcript,
    child_run_id,
)
from agentcore.adapters import ModelAdapter, resolve_model
from agentcore.cli._common import (
    EXIT_CODES,
    EXIT_ERROR,
    EXIT_USAGE,
    AcceptToolChangesOpt,
    AgentOpt,
    ByOpt,
    ReasonOpt,
    RunIdArg,
    StoreOpt,
    TenantOpt,
    abort,
    app,
    bound_command,
    compensate_command,
    err,
    load_agent,
    no_store,
    on_owner,
    open_listing,
    out,
    pending_text,
    plain,
    print_pending,
    print_reply,
    print_rows,
    report,
    result_json,
    run_async,
    store_hint,
    turns_json,
    valid_run_id,
    valid_tenant,
    who_decides,
)
from agentcore.contracts import check_run_id
from agentcore.contracts.errors import (
    ConfigurationError,
    LimitExceededError,
    NotAwaitingConfirmationError,
    RunNotFoundError,
)
from agentcore.events import (
    Event,
    RunStarted,
    dump_event,
)
from agentcore.stores import default_store_url, open_store

from ._transcript import live, print_transcript


@app.command()
def demo(
    model: Annotated[
        str | None,
        typer.Option(
            help="A real model, e.g. openai/gpt-4.1-mini, or 'local' for SmolLM2-135M on this "
            "machine (extra [local]) (default: $AGENTCORE_MODEL, else the scripted model). A "
            "provider key in the environment never switches the model by itself."
        ),
    ] = None,
    store: StoreOpt = None,
) -> None:
    """Run the support-desk demo agent (offline: scripted model, SQLite store)."""
    from agentcore.demo import DEMO_TASK, SCRIPTED, build_agent, configured_model

    ref = "agentcore.demo:build_agent"
    local = model == "local"
    model = model or configured_model()

    async def go(chosen: str | ModelAdapter | None) -> tuple[RunResult, list[Event]]:
        agent = build_agent(model=chosen, store=store)
        try:
            name = agent.route[0].name
            if name.startswith("scripted"):
                out.print(
                    "[bold]model:[/] scripted: a deterministic script, not a language model; "
                    "offline. To use a real one: agentcore demo --model openai/gpt-4.1-mini "
                    "(or set AGENTCORE_MODEL; the provider's key must be set)",
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
                out.print(
                    f"[bold]model:[/] {name} (a real model, called over the network; "
                    "`agentcore demo` without --model and AGENTCORE_MODEL is offline)",
                    highlight=False,
                )
            out.print(f"[bold]store:[/] {agent.store.url}", highlight=False)
            out.print(f"[bold]task:[/] {DEMO_TASK}\n", highlight=False)
            # the model is recorded, so confirm and resume continue on the same one
            metadata = {"agent": ref}
            if not local:  # SmolLM2's server stops with this command (see the note below)
                metadata["model"] = SCRIPTED if name.startswith("scripted") else name
            result = await live(
                agent.stream(DEMO_TASK, budget=Budget(max_steps=12), metadata=metadata),
                store=hints[0],
            )
            return result, await agent.transcript(result.run_id)
        finally:
            await agent.close()

    hints: list[str | None] = [store_hint(store)]
    with contextlib.ExitStack() as stack:
        chosen = _serve_smollm2(stack) if local else model
        result, _ = run_async(go(chosen))
    if local and result.status is RunStatus.AWAITING_CONFIRMATION:
        out.print(
            "note: the SmolLM2 server stopped with this command; `agentcore confirm` continues "
            "this run on the demo's default model.",
            highlight=False,
        )
    report(result, store=hints[0], paused_ok=True)


def _serve_smollm2(stack: contextlib.ExitStack) -> ModelAdapter:
    """Start SmolLM2 on llama-cpp-python's server for the length of ``stack``."""
    from agentcore.adapters import (
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
        abort(str(exc))
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)
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
        str | None,
        typer.Option(help="A caller-chosen run id (idempotent start).", callback=valid_run_id),
    ] = None,
    show: Annotated[bool, typer.Option(help="Also print the transcript table at the end.")] = False,
    tenant: Annotated[
        str | None,
        typer.Option(
            help="The run's tenant (recorded; what FromRun.tenant() parameters receive).",
            callback=valid_tenant,
        ),
    ] = None,
    metadata: Annotated[
        list[str] | None,
        typer.Option(
            "--metadata",
            help="The run's metadata (recorded; what FromRun(KEY) parameters receive): "
            "KEY=VALUE (VALUE is a string), or a JSON object for other types. Repeatable.",
        ),
    ] = None,
) -> None:
    """Start a run of an agent and advance it until it completes, stops or waits."""
    given = parse_metadata(metadata or ())
    where: list[str | None] = [None]  # the --store printed commands need

    async def go() -> tuple[RunResult, list[Event]]:
        agent = load_agent(target, model=model, store=store)
        try:
            where[0] = store_hint(agent.store.url)
            names = [s.strip() for s in scope.split(",") if s.strip()] if scope else None
            recorded = given | {"agent": target} | ({"model": model} if model else {})
            result = await live(
                agent.stream(
                    task,
                    scope=names,
                    budget=Budget(max_steps=max_steps, max_tokens=max_tokens),
                    run_id=run_id,
                    metadata=recorded,
                    tenant=tenant,
                ),
                store=where[0],
            )
            return result, await agent.transcript(result.run_id)
        finally:
            await agent.close()

    result, events = run_async(go())
    if show:
        print_transcript(events)
    report(result, store=where[0])


def valid_key(value: str | None) -> str | None:
    """Refuse an idempotency key no reply may carry (the rules of a run id) as a usage
    error, before any store is opened."""
    if value == "":
        abort("--key is empty: leave it out, or give the request's id", EXIT_USAGE)
    if value is not None:
        try:
            check_run_id(value)
        except LimitExceededError as exc:
            abort(f"--key: {exc}", EXIT_USAGE)
    return value


@app.command()
def reply(
    run_id: RunIdArg,
    message: Annotated[
        str,
        typer.Argument(
            help="What the user says: the answer to the model's question, or "
            "the next message of the conversation."
        ),
    ],
    key: Annotated[
        str | None,
        typer.Option(
            help="An idempotency key (a request id): a second reply with the same key is "
            "refused, so a retried command does not say the message twice.",
            callback=valid_key,
        ),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(min=1, help="This turn's step budget (default: the run's).")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="This turn's token budget (default: the run's).")
    ] = None,
    wait: Annotated[
        float,
        typer.Option(min=0, help="Seconds to wait for a turn another process is advancing."),
    ] = 60.0,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the outcome as one JSON object (run_id, status, answer, question, "
            "reason, pending, usage, turns) instead of following the turn.",
        ),
    ] = False,
    agent: AgentOpt = None,
    store: StoreOpt = None,
) -> None:
    """Say the user's next message to a run: a new turn of its conversation (the answer to
    the model's question when it is awaiting_input), advanced until it completes, stops or
    waits."""
    if not message.strip():
        abort("the message is empty: say what the user says", EXIT_USAGE)

    async def act(owner: Agent) -> RunResult:
        budget = None
        if max_steps is not None or max_tokens is not None:
            budget = Budget(max_steps=max_steps, max_tokens=max_tokens)
        return await live(
            owner.stream_reply(run_id, message, key=key, budget=budget, wait_s=wait),
            agent=agent,
            store=store_hint(store),
            echo=not as_json,
        )

    result = on_owner(run_id, agent, store, act)
    if as_json:
        sys.stdout.write(json.dumps(result_json(result), ensure_ascii=False) + "\n")
        raise typer.Exit(EXIT_CODES[result.status])
    report(result, agent_hint=agent, store=store_hint(store))


_CLI_METADATA = ("agent", "model")
"""Metadata keys the CLI records itself (the agent and model that continue the run)."""


def parse_metadata(items: Sequence[str]) -> dict[str, Any]:  # Any: JSON values
    """``--metadata`` values as one mapping: each ``KEY=VALUE`` (a string value) or a JSON
    object (its values as they are typed).

    Raises:
        typer.Exit: a usage error (exit 2) naming the item that is neither, an empty key, a
            key given twice, or a key the CLI records itself.
    """
    found: dict[str, Any] = {}  # Any: JSON values
    for item in items:
        pairs: dict[str, Any]  # Any: JSON values
        if item.lstrip().startswith("{"):
            try:
                parsed: object = json.loads(item)
            except json.JSONDecodeError as exc:
                abort(f"--metadata {item!r} is not a valid JSON object: {exc}", EXIT_USAGE)
            if not isinstance(parsed, dict):
                abort(f"--metadata {item!r} must be a JSON object", EXIT_USAGE)
            pairs = cast("dict[str, Any]", parsed)
        else:
            key, equals, value = item.partition("=")
            if not equals:
                abort(
                    f"--metadata {item!r} is neither KEY=VALUE nor a JSON object, e.g. "
                    "--metadata customer_id=c-42 or --metadata '{\"limit\": 5}'",
                    EXIT_USAGE,
                )
            pairs = {key.strip(): value}
        for key, value in pairs.items():
            if not key:
                abort(f"--metadata {item!r} has an empty key", EXIT_USAGE)
            if key in _CLI_METADATA:
                abort(
                    f"--metadata {key!r}: the CLI records {key!r} itself (the "
                    f"{'agent' if key == 'agent' else 'model'} that continues the run); "
                    "use another key",
                    EXIT_USAGE,
                )
            if key in found:
                abort(f"--metadata {key!r} is given twice; give each key once", EXIT_USAGE)
            found[key] = value
    return found


RUN_FIELDS = ("run_id", "status", "task", "created_at", "updated_at", "events", "tenant")
"""The fields of ``agentcore runs --json`` (one JSON object per line), in order. Stable:
fields may be added, never renamed or removed. Times are Unix seconds."""


@app.command()
def runs(
    status: Annotated[str | None, typer.Option(help="Only runs with this status.")] = None,
    limit: Annotated[int, typer.Option(min=1)] = 50,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="JSON Lines, one run per line: run_id, status, task, created_at, updated_at "
            "(Unix seconds), events, tenant.",
        ),
    ] = False,
    tenant: TenantOpt = None,
    store: StoreOpt = None,
) -> None:
    """List runs, most recently updated first. Creates nothing: a store that does not
    exist lists no runs."""
    if status is not None and status not in {s.value for s in RunStatus}:
        abort(
            f"unknown status {status!r}; valid: {', '.join(s.value for s in RunStatus)}", EXIT_USAGE
        )

    async def go() -> list[Any]:  # Any: RunSummary rows
        st = open_listing(store)
        if st is None:
            err.print(no_store(store), highlight=False, soft_wrap=True)
            return []
        try:
            return list(await st.list_runs(status=status, tenant=tenant, limit=limit))
        finally:
            await st.close()

    rows = run_async(go())
    if as_json:
        for r in rows:
            line = {name: getattr(r, name, None) for name in RUN_FIELDS}
            sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
        return
    import datetime as dt

    def when(seconds: float) -> str:
        return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")

    cap = None if plain() else 60
    print_rows(
        ("run id", "status", "events", "updated", "task"),
        [(r.run_id, r.status, str(r.events), when(r.updated_at), r.task[:cap]) for r in rows],
    )


async def _load_listed(run_id: str, store: str | None) -> list[Event]:
    """A run's events from a store opened only to read (nothing is created)."""
    st = open_listing(store)
    if st is None:
        where = store or default_store_url()
        raise RunNotFoundError(f"No run {run_id!r}: there is no store at {where}")
    try:
        return await st.load(run_id)
    finally:
        await st.close()


@app.command()
def show(
    run_id: RunIdArg,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="JSON Lines, one event per line, in the public event format (docs/events.md).",
        ),
    ] = False,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="MODULE:ATTR of the agent that owns the run, for the approve, deny and "
            "reply commands printed for a waiting run (needed only when the run was not "
            "started from the CLI).",
        ),
    ] = None,
    turns: Annotated[
        bool,
        typer.Option(
            "--turns",
            help="Only the conversation's turns: each message and how its turn ended (with "
            "--json: one JSON object per turn).",
        ),
    ] = False,
    store: StoreOpt = None,
) -> None:
    """Show a run's transcript (creates nothing)."""
    events = run_async(_load_listed(run_id, store))
    state = RunState.of(events)
    if turns:
        result = state.result()
        for line in turns_json(result) if as_json else ():
            sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
        if not as_json:
            print_turns(result)
        return
    if as_json:
        for ev in events:
            sys.stdout.write(json.dumps(dump_event(ev), ensure_ascii=False) + "\n")
        return
    print_transcript(events)
    result = state.result()
    if len(result.turns) > 1 or result.question is not None:
        print_turns(result)
    first = events[0]
    recorded = first.metadata.get("agent") if isinstance(first, RunStarted) else None
    if result.question is not None:
        if agent is None and not isinstance(recorded, str):
            out.print(
                "this run was not started from the CLI, so the agent that owns its tools is "
                "not recorded: show it again with --agent naming that agent (its MODULE:ATTR) "
                "for the reply command",
                highlight=False,
            )
            return
        print_reply(run_id, agent_hint=agent, store=store_hint(store))
        return
    pending = state.pending() or run_async(_child_pending(state, store))
    if pending is None:
        return
    if pending.run_id is not None:
        out.print(
            f"sub-agent run {pending.run_id} waits for a person on the call below; answer it "
            "from this run, which then goes on",
            highlight=False,
        )
    if agent is None and not isinstance(recorded, str):
        out.print(f"waiting for a person to approve {pending_text(pending)}", highlight=False)
        out.print(
            "this run was not started from the CLI, so the agent that owns its tools is not "
            "recorded: show it again with --agent naming that agent (its MODULE:ATTR) for "
            "the approve and deny commands",
            highlight=False,
        )
        return
    print_pending(run_id, pending, agent_hint=agent, store=store_hint(store))


def print_turns(result: RunResult) -> None:
    """The conversation's turns, in order: each message and how its turn ended (its
    answer, the model's question, or why it stopped)."""
    rows: list[tuple[str, str, str, str]] = []
    for turn in result.turns:
        waiting = turn.status is RunStatus.AWAITING_INPUT
        ended = (
            f"question: {turn.reason}"
            if waiting
            else f"answer: {turn.answer}"
            if turn.answer is not None
            else turn.reason or ""
        )
        # "turn N", not N alone: a line of the plain transcript begins with its seq
        rows.append((f"turn {turn.number}", turn.status.value, turn.message, ended))
    if not plain():
        out.print("[bold]turns[/]", highlight=False)
    print_rows(("turn", "status", "message", "how it ended"), rows)


async def _child_pending(state: RunState, store: str | None) -> PendingCall | None:
    """The call a sub-agent's run waits on when ``state``'s run stopped for it (the child
    run of its open call, in the same store), with ``run_id`` naming the child; else
    ``None``."""
    call = state.call
    if state.status is not RunStatus.NEEDS_ATTENTION or call is None or call.started is None:
        return None
    child_id = child_run_id(call.started.idempotency_key, call.started.tool)
    try:
        events = await _load_listed(child_id, store)
    except RunNotFoundError:
        return None
    pending = RunState.of(events).pending()
    return None if pending is None else dataclasses.replace(pending, run_id=child_id)


@app.command()
def export(run_id: RunIdArg, store: StoreOpt = None) -> None:
    """Write a run's transcript to stdout as JSON Lines (one event per line)."""
    show(run_id, as_json=True, agent=None, turns=False, store=store)


@app.command()
def confirm(
    run_id: RunIdArg,
    by: ByOpt = None,
    approve: Annotated[
        bool | None, typer.Option("--approve/--deny", help="Approve or deny.")
    ] = None,
    step: Annotated[
        int | None, typer.Option(min=1, help="The step of the call you approve (as shown).")
    ] = None,
    args_hash: Annotated[
        str | None, typer.Option(help="The args hash of the call you approve (as shown).")
    ] = None,
    reason: Annotated[
        str | None, typer.Option(help="Why (shown to the model on a denial).")
    ] = None,
    args: Annotated[str | None, typer.Option(help="Edited arguments as a JSON object.")] = None,
    accept_tool_changes: AcceptToolChangesOpt = False,
    agent: AgentOpt = None,
    store: StoreOpt = None,
) -> None:
    """Approve or deny the call a run is waiting on, then continue the run.

    An approval is bound to the call it approves: give the --step and --args-hash shown
    with it (the commands `run`, `demo` and `show` print carry them). Without them the
    waiting call is shown and, on a terminal, you are asked; otherwise it is refused with
    the bound command to run. A call that changed since it was shown is refused.
    """
    if approve is None:
        abort("say --approve or --deny", EXIT_USAGE)
    person = who_decides(by)
    edited: dict[str, Any] | None = None  # Any: JSON values
    if args is not None:
        try:
            parsed: object = json.loads(args)
        except json.JSONDecodeError as exc:
            abort(f"--args is not valid JSON: {exc}", EXIT_USAGE)
        if not isinstance(parsed, dict):
            abort("--args must be a JSON object", EXIT_USAGE)
        edited = cast("dict[str, Any]", parsed)  # a JSON object; the tool's schema validates it

    async def act(owner: Agent) -> RunResult:
        bound_step, bound_hash = step, args_hash
        if approve and (step is None or args_hash is None):
            bound_step, bound_hash = await _bind_approval(owner, run_id, by, step, agent)
        return await live(
            owner.stream_confirm(
                run_id,
                approve=approve,
                by=person,
                reason=reason,
                args=edited,
                step=bound_step,
                args_hash=bound_hash,
                accept_tool_changes=accept_tool_changes,
            ),
            agent=agent,
            store=store_hint(store),
        )

    report(on_owner(run_id, agent, store, act), agent_hint=agent, store=store_hint(store))


async def _bind_approval(
    owner: Agent, run_id: str, by: str | None, step: int | None, agent: str | None
) -> tuple[int | None, str | None]:
    """The step and args hash an approval given without them is bound to: the waiting
    call, shown, and approved by the person at a terminal; elsewhere, refused."""
    store = store_hint(owner.store.url)
    result = await owner.result(run_id)
    pending = result.pending
    if pending is None:
        raise NotAwaitingConfirmationError(
            f"Run {run_id} is {result.status.value}, not awaiting confirmation; nothing to confirm."
        )
    if pending.kind == "plan" and step is not None:
        return step, None  # a plan has no arguments: its step binds it
    out.print(f"run {run_id} is waiting on {pending_text(pending)}", highlight=False)
    command = bound_command(run_id, pending, approve=True, by=by, agent=agent, store=store)
    if not sys.stdin.isatty():
        abort(
            "an approval from the command line is bound to the call it approves; nothing was "
            f"recorded. To approve exactly the call shown, run: {command}",
            EXIT_USAGE,
        )
    if not typer.confirm("Approve exactly this call?", default=False):
        abort("not approved; nothing recorded")
    # Bound to what was shown: if the call changed since, confirm refuses.
    return step if step is not None else pending.step, pending.args_hash


@app.command()
def resume(
    run_id: RunIdArg,
    max_steps: Annotated[int | None, typer.Option(min=1, help="A new step budget.")] = None,
    max_tokens: Annotated[int | None, typer.Option(min=1, help="A new token budget.")] = None,
    by: Annotated[
        str | None, typer.Option(help="Resume by hand as this person (resets dead-lettering).")
    ] = None,
    accept_tool_changes: AcceptToolChangesOpt = False,
    agent: AgentOpt = None,
    store: StoreOpt = None,
) -> None:
    """Continue a run from its transcript (after a crash or a budget stop)."""

    async def act(owner: Agent) -> RunResult:
        budget = None
        if max_steps is not None or max_tokens is not None:
            budget = Budget(max_steps=max_steps, max_tokens=max_tokens)
        return await live(
            owner.stream_resume(
                run_id, budget=budget, by=by, accept_tool_changes=accept_tool_changes
            ),
            agent=agent,
            store=store_hint(store),
        )

    report(on_owner(run_id, agent, store, act), agent_hint=agent, store=store_hint(store))


@app.command()
def resolve(
    run_id: RunIdArg,
    by: ByOpt = None,
    result: Annotated[
        str | None, typer.Option(help="The call happened and returned this JSON value.")
    ] = None,
    rerun: Annotated[bool, typer.Option(help="The call did not happen: run it once.")] = False,
    fail: Annotated[bool, typer.Option(help="Treat the call as failed.")] = False,
    reason: ReasonOpt = None,
    accept_tool_changes: AcceptToolChangesOpt = False,
    agent: AgentOpt = None,
    store: StoreOpt = None,
) -> None:
    """Settle a lost non-idempotent call of a run in needs_attention, then continue it."""
    if sum((result is not None, rerun, fail)) != 1:
        abort("say exactly one of --result JSON, --rerun, --fail", EXIT_USAGE)
    person = who_decides(by)
    value: object = None
    if result is not None:
        try:
            value = json.loads(result)
        except json.JSONDecodeError as exc:
            abort(f"--result is not valid JSON: {exc}", EXIT_USAGE)

    def act(owner: Agent) -> Awaitable[RunResult]:
        if result is not None:
            return owner.resolve(
                run_id,
                by=person,
                result=value,
                reason=reason,
                accept_tool_changes=accept_tool_changes,
            )
        return owner.resolve(
            run_id,
            by=person,
            rerun=rerun,
            fail=fail,
            reason=reason,
            accept_tool_changes=accept_tool_changes,
        )

    report(on_owner(run_id, agent, store, act), agent_hint=agent)


@app.command()
def cancel(
    run_id: RunIdArg,
    by: ByOpt = None,
    reason: ReasonOpt = None,
    agent: AgentOpt = None,
    store: StoreOpt = None,
) -> None:
    """Cancel a run: now, or, while another process advances it, at its next safe point.

    Exit 0 when the run is cancelled or the request is recorded; 1 when it had already
    completed.
    """

    person = who_decides(by)

    result = on_owner(
        run_id, agent, store, lambda owner: owner.cancel(run_id, by=person, reason=reason)
    )
    if result.status is RunStatus.COMPLETED:
        abort(f"Run {run_id} is completed; nothing to cancel.")
    if result.status is RunStatus.CANCELLED:
        out.print(f"[bold red]cancelled[/]  run {run_id}", highlight=False)
        out.print(f"reason: {result.reason}", highlight=False)
        return
    out.print(
        f"cancel requested: run {run_id} is being advanced by another process, which cancels "
        "it at its next safe point (a running tool finishes and its outcome is recorded "
        "first). Follow it with: agentcore show " + run_id,
        highlight=False,
    )


@app.command()
def compensate(
    run_id: RunIdArg,
    by: ByOpt = None,
    done: Annotated[
        list[str] | None,
        typer.Option("--done", help="CALL_ID whose outcome was in doubt: it happened."),
    ] = None,
    not_done: Annotated[
        list[str] | None,
        typer.Option("--not-done", help="CALL_ID whose outcome was in doubt: it did not."),
    ] = None,
    agent: AgentOpt = None,
    store: StoreOpt = None,
) -> None:
    """Undo a stopped run's committed effects, newest first (each tool's compensate).

    Exit 0 when the run is compensated; 5 (needs_attention) when an undo failed or an
    outcome is in doubt: the reason says what to find out, then run it again.
    """
    person = who_decides(by)
    settle: dict[str, Settle] = dict.fromkeys(done or (), "done")
    for call_id in not_done or ():
        if call_id in settle:
            abort(f"{call_id} is given both --done and --not-done; say which.")
        settle[call_id] = "not_done"

    result = on_owner(
        run_id, agent, store, lambda owner: owner.compensate(run_id, by=person, settle=settle)
    )
    style = "green" if result.status is RunStatus.CANCELLED else "red"
    out.print(f"[bold {style}]{result.status.value}[/]  run {run_id}", highlight=False)
    out.print(f"reason: {result.reason}", highlight=False)
    if result.status is RunStatus.NEEDS_ATTENTION:
        # the reason's own command names no store or agent: this one names this command's
        out.print("continue with: ", end="")
        out.print(
            compensate_command(run_id, agent=agent, store=store_hint(store)),
            style="bold",
            highlight=False,
        )
    if result.status is not RunStatus.CANCELLED:
        raise typer.Exit(EXIT_CODES[result.status])


@app.command()
def expire(
    agent: Annotated[
        str, typer.Option("--agent", help="MODULE:ATTR of the Agent whose policy applies.")
    ],
    store: StoreOpt = None,
) -> None:
    """Deny or escalate the calls whose approval window passed (Policy.approval_expiry);
    run it from cron. Prints one line per run it changed, nothing when no window passed.

    Exit 2, saying what to set, when it changed nothing and the agent's policy can expire
    nothing (no Policy.approval_ttl, or approval_expiry='wait').
    """

    async def go() -> tuple[list[RunResult], Policy]:
        owner = load_agent(agent, store=store)
        try:
            return await owner.expire_approvals(), owner.policy
        finally:
            await owner.close()

    changed, policy = run_async(go())
    for result in changed:
        waiting = pending_text(result.pending) if result.pending is not None else ""
        out.print(f"{result.status.value}  run {result.run_id}  {waiting}", highlight=False)
    if changed:
        return
    if policy.approval_ttl is None:
        abort(
            f"nothing to expire: the policy of {agent} has no approval_ttl, so its approvals "
            "never expire. Set Policy(approval_ttl=SECONDS, approval_expiry='deny' or "
            "'escalate') for this command to deny or escalate calls that wait longer.",
            EXIT_USAGE,
        )
    if policy.approval_expiry == "wait":
        abort(
            f"nothing to expire: the policy of {agent} has approval_expiry='wait', so a call "
            f"waiting past approval_ttl ({policy.approval_ttl:g}s) keeps waiting (approvals "
            "refused) and this command records nothing. Set approval_expiry='deny' or "
            "'escalate' for it to act.",
            EXIT_USAGE,
        )


@app.command()
def check(run_id: RunIdArg, store: StoreOpt = None) -> None:
    """Check a run's transcript integrity (exit 0 when sound, 1 with the problems)."""

    problems = check_transcript(run_async(_load_listed(run_id, store)))
    for p in problems:
        err.print(f"[red]problem:[/] {escape(p)}", highlight=False)
    if problems:
        raise typer.Exit(EXIT_ERROR)
    out.print(f"run {run_id}: transcript sound", highlight=False)


@app.command()
def repair(
    run_id: RunIdArg,
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

    doomed = run_async(go(dry_run=True))
    with target.open("a", encoding="utf-8") as fh:  # the backup is written before deleting
        for seq, body in doomed:
            fh.write(json.dumps({"run_id": run_id, "seq": seq, "raw": body}) + "\n")
    removed = run_async(go(dry_run=False))
    out.print(
        f"run {run_id}: removed {len(removed)} event(s) after seq {truncate_after}; "
        f"saved to {target}. Resume it with: agentcore resume {run_id}",
        highlight=False,
    )
