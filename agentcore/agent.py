"""The public entry point: :class:`Agent`, a facade over the run package.

Each public method checks its arguments, asks a pure command (``_run._commands``) for the
events that carry it out, and hands them to a session (``_run._session``), which records
them under the run's lease and advances the run through the loop (``_run._loop``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from agentcore.adapters import ModelAdapter, resolve_route
from agentcore.contracts import (
    ActionSchema,
    ContractDocument,
    OutputSpec,
    WorkedExample,
    check_run_id,
    check_text,
    load_contract,
    output_spec,
)
from agentcore.contracts.errors import (
    ConfigurationError,
    ContractLintError,
    OutputTypeChangedError,
    RunBusyError,
    SeqConflictError,
)

from ._ownership import DEFAULT_LEASE_S, default_owner
from ._run import (
    LOST_CALL_WAIT_S,
    ContextProvider,
    History,
    RunSetup,
    Session,
    Settle,
    StreamTwin,
    SyncTwin,
    Turn,
    commands,
)
from ._snapshot import snapshot_interval
from ._state import FINAL_STATUSES, OutputT, RunResult, RunState, RunStatus
from .events import Event, RunStarted
from .policy import Budget, Policy
from .queue import RunQueue
from .routing import Route
from .secrets import Redactor, SecretResolver
from .stores import TranscriptStore, open_store
from .tools import DepsFactory, Tool

__all__ = ["Agent", "ModelSpec"]

CONFIRM_WAIT_S = 10.0
"""How long ``confirm`` waits for a run another worker holds (another person's answer
being recorded) before it raises ``RunBusyError``."""

B = TypeVar("B", bound=BaseModel)
ModelSpec = str | ModelAdapter | Sequence[str | ModelAdapter]
"""A model (``"provider/model"`` or an adapter object) or a route: a list tried in order."""
_UNSET: Any = object()  # Any: a sentinel for "no result given" (None is a valid result)


class Agent(Generic[OutputT]):
    """Tools, a model route, a store and a policy: runs tasks step by step.

    The agent is generic in the type of its runs' answers: ``Agent(..., output=Invoice)``
    is an ``Agent[Invoice]`` whose results have ``output: Invoice | None``; without
    ``output`` it is an ``Agent[str]`` (a text answer).

    Args:
        tools: ``@tool``-decorated functions.
        model: an adapter (e.g. ``ScriptedModel([...])``), a ``"provider/model"`` string, or a
            list of them: a route, where a model failing after its retries hands the step to
            the next with the same transcript. A :class:`Route` adds plan-step models and a
            minimum eval score.
        store: a store URL (``"sqlite:///runs.db"``, ``"memory://"``) or a store object;
            default ``$AGENTCORE_STORE`` or ``sqlite:///agentcore.db``.
        policy: governance rules (default: :class:`Policy()`).
        output: the type of a run's answer (default ``str``, a text answer): a pydantic
            model, a TypedDict (``typing_extensions.TypedDict`` before Python 3.12), a
            dataclass, a primitive or container (``int``, ``list[str]``), or a list of
            models meaning their union (``[Refund, Escalation]``). The ``finish`` action
            asks for it in its schema; an answer that does not validate is asked again;
            ``RunResult.output`` is the validated value. Runs record its schema's hash and
            continue only with an agent whose output type has the same one.
        contract: the contract document, a built-in version such as ``"1"``, or a path.
        instructions: operator instructions added to the system text.
        examples: worked examples using this agent's tools (linted against them).
        context: context providers called before each step; what they return is recorded.
        owner: this worker's name in the runs it holds (default ``host:pid:random``).
        lease_s: how long a run stays this worker's without a renewal (default 30 s; renewed
            every third of it while the run advances). A worker that stalls longer is taken
            over, and fenced: it can no longer write to the run or start a tool for it.
        name: the agent's name in a worker's registry (needed with ``queue``).
        queue: hand runs to workers instead of advancing them in the caller's process:
            ``submit``, ``confirm``, ``resume`` and ``resolve`` record what was asked and
            enqueue the run (see :mod:`agentcore.queue`); ``run`` still runs in-process.
        secrets: fills tool parameters marked :class:`~agentcore.secrets.Secret`
            (``name -> value``, sync or async; e.g. ``env_secrets()``); the values it
            returns are redacted from everything the run records.
        redact: values no event may hold (at least 6 characters each): replaced by
            ``[secret:redacted]`` before anything is recorded, logged or sent to a model.
        redact_env: names of environment variables whose values are redacted the same way
            (shown as ``[secret:NAME]``).
        snapshot_every: keep a snapshot of the run (its folded state and rendered history)
            every this many events (default ``$AGENTCORE_SNAPSHOT_EVERY`` or 512, about 100
            tool steps; 0: never), so a resume, a confirmation or a worker's turn reads the
            last snapshot and the events after it, not the whole transcript. Snapshots are
            checked against the events' chain digests and ignored when they do not match
            (see ``agentcore._snapshot``).
        lost_call_wait_s: how long after a lost call started (plus the tool's timeout) a
            worker waits while the process that ran it may still be running it, before the
            run stops as ``needs_attention`` (default 300 s). It applies to a
            non-idempotent tool with ``reconcile`` whose worker was taken over while
            stalled: ``reconcile`` can see an effect only once it has happened, so the call
            runs again only after its guard shows that no process can still make it.
        deps: ``deps(identity)`` (sync or async) builds what tools receive as
            ``ToolContext.deps`` (a database pool, an HTTP client, your service objects)
            from the run's recorded :class:`~agentcore.tools.RunIdentity` (run id, tenant,
            metadata), once per run in whichever process advances it: a Celery worker that
            never saw the request builds the same dependencies from the record.

    Example:
        >>> agent = Agent(tools=[get_order], model=ScriptedModel([...]), store="memory://")
        >>> result = await agent.run("Where is order A1?", budget=Budget(max_steps=5))
    """

    def __init__(
        self,
        tools: Sequence[Tool],
        model: ModelSpec | Route,
        *,
        store: str | TranscriptStore | None = None,
        policy: Policy | None = None,
        output: type[OutputT] | Sequence[type[OutputT]] = str,
        contract: ContractDocument | str | None = None,
        instructions: str | None = None,
        examples: Sequence[WorkedExample] = (),
        context: ContextProvider | Sequence[ContextProvider] | None = None,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
        name: str | None = None,
        queue: RunQueue | None = None,
        secrets: SecretResolver | None = None,
        redact: Sequence[str] = (),
        redact_env: Sequence[str] = (),
        snapshot_every: int | None = None,
        lost_call_wait_s: float = LOST_CALL_WAIT_S,
        deps: DepsFactory | None = None,
    ) -> None:
        self.secrets = secrets
        self._redactor = Redactor.listed(redact, redact_env)
        self.tools: dict[str, Tool] = {}
        for t in tools:
            if not isinstance(t, Tool):  # pyright: ignore[reportUnnecessaryIsInstance]  # untyped callers pass plain functions
                raise ConfigurationError(
                    f"{t!r} is not a tool: decorate it with @tool(effect=...) so its effect is "
                    "explicit."
                )
            if t.name in self.tools:
                raise ConfigurationError(
                    f"Two tools are named {t.name!r}; tool names must be unique."
                )
            self.tools[t.name] = t
        if isinstance(model, Route):
            self.route: tuple[ModelAdapter, ...] = model.act_models
            self.plan_route: tuple[ModelAdapter, ...] = model.plan_models
        else:
            self.route = resolve_route(model)
            self.plan_route = ()
        self.policy = policy or Policy()
        self._output: OutputSpec | None = output_spec(output)
        doc = contract if isinstance(contract, ContractDocument) else load_contract(contract)
        self.contract = doc.with_examples(examples)
        problems = self.contract.lint([t.spec for t in self.tools.values()])
        if problems:
            raise ContractLintError(problems)
        self.instructions = instructions
        if context is None:
            self._context: tuple[ContextProvider, ...] = ()
        elif callable(context):
            self._context = (context,)
        else:
            self._context = tuple(context)
        if lease_s <= 0:
            raise ConfigurationError(f"lease_s must be > 0, got {lease_s!r}")
        if not lost_call_wait_s >= 0:
            raise ConfigurationError(f"lost_call_wait_s must be >= 0, got {lost_call_wait_s!r}")
        self.lost_call_wait_s = lost_call_wait_s
        self.deps = deps
        self.owner = owner or default_owner()
        self.lease_s = lease_s
        self.snapshot_every = snapshot_interval(snapshot_every)
        if queue is not None and not name:
            raise ConfigurationError("An agent with a queue needs a name= that workers know it by.")
        self.name = name
        self.queue = queue
        self._store_arg = store
        self._store: TranscriptStore | None = store if not isinstance(store, str | None) else None
        self._schema_cache: dict[tuple[object, ...], ActionSchema] = {}
        self._system_cache: dict[tuple[str, ...], str] = {}

    def configured(
        self, *, model: ModelSpec | None = None, store: str | None = None
    ) -> Agent[OutputT]:
        """A copy of this agent with another model route and/or store URL."""
        clone = copy.copy(self)
        if model is not None:
            clone.route = resolve_route(model)
            clone.plan_route = ()
        if store is not None:
            clone._store_arg = store
            clone._store = None
        clone._schema_cache = {}
        clone._system_cache = {}
        return clone

    # -- plumbing -----------------------------------------------------------------------------

    @property
    def store(self) -> TranscriptStore:
        """The transcript store (opened on first use)."""
        if self._store is None:
            self._store = open_store(self._store_arg if isinstance(self._store_arg, str) else None)
        return self._store

    def _session(self) -> Session:
        """What loading, owning and advancing this agent's runs needs (the store opens on
        first use)."""
        setup = RunSetup(
            tools=self.tools,
            contract=self.contract,
            instructions=self.instructions,
            route=self.route,
            plan_route=self.plan_route,
            context_providers=self._context,
            store=self.store,
            schema_cache=self._schema_cache,
            system_cache=self._system_cache,
            secrets=self.secrets,
            redactor=self._redactor,
            snapshot_every=self.snapshot_every,
            lost_call_wait_s=self.lost_call_wait_s,
            deps=self.deps,
            output=self._output,
        )
        return Session(setup, self.owner, self.lease_s, self.name, self.policy.on_pending)

    def as_tool(
        self,
        name: str,
        description: str,
        *,
        scope: Sequence[str] | None = None,
        budget: Budget | None = None,
    ) -> Tool:
        """This agent as a tool of another (a sub-agent): the parent's model calls it with
        a ``task``, and it answers with this agent's final answer.

        Each call is a run of this agent with an id derived from the parent's call, so a
        resumed parent re-attaches to the same run and never starts a second one. The run
        has this agent's tools (``scope``), a budget carved from what the parent has left
        (``budget`` at most), the parent's tenant and metadata plus a link to the parent
        (``metadata["agentcore.parent"]``); its model usage counts in the parent too. The
        tool's effect is the strongest among the tools in ``scope``; a sub-agent that stops
        for a person stops the parent as ``needs_attention`` until the person settled it.
        See :mod:`agentcore._subagent`.

        Raises:
            ConfigurationError: no tools in ``scope``, or an invalid name.
        """
        from ._subagent import subagent_tool

        return subagent_tool(
            self,
            name,
            description,
            scope=None if scope is None else list(scope),
            budget=budget,
        )

    def resolve_scope(self, scope: Sequence[str] | None) -> tuple[str, ...]:
        """Tool names selected by ``scope`` (names or labels; ``None``: every tool).

        Raises:
            ConfigurationError: an entry is neither a tool name nor a label.
        """
        return commands.scope_names(self.tools, scope)

    # -- public API ---------------------------------------------------------------------------

    async def run(
        self,
        task: str,
        *,
        scope: Sequence[str] | None = None,
        budget: Budget | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,  # Any: JSON values recorded as given
        tenant: str | None = None,
    ) -> RunResult[OutputT]:
        """Start a run and advance it until it completes, stops or waits for a person.

        Args:
            task: what the user asks for.
            scope: tool names or labels this run may use (``None``: all of the agent's tools).
                Only the calling code sets the scope; nothing a model or tool says widens it.
            budget: limits (default :class:`Budget()`).
            run_id: a caller-chosen id. Starting an id that exists returns that run's current
                result instead of starting a second run.
            metadata: JSON values recorded in ``run_started`` (request id, user, ...).
            tenant: the run's namespace, recorded in ``run_started`` and kept in the store's
                run row: ``list_runs(tenant=...)``, ``agentcore runs/stats/prune --tenant``.
                The same rules as a run id (non-empty, at most 200 characters, printable).

        Raises:
            ConfigurationError: bad scope, empty task.
            LimitExceededError: an invalid ``run_id`` or ``tenant``.
            StoreError: the store failed; nothing after the last durable event happened.
        """
        session = self._session()
        begun = await self._start(session, task, scope, budget, run_id, metadata, tenant)
        if isinstance(begun, RunResult):
            return begun
        state, started = begun
        try:
            async with session.owned(state.run_id) as own:
                return self._typed(await session.drive(own, state, History([started])))
        except RunBusyError:
            return await self.result(state.run_id)  # someone resumed it already

    async def submit(
        self,
        task: str,
        *,
        scope: Sequence[str] | None = None,
        budget: Budget | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,  # Any: JSON values recorded as given
        tenant: str | None = None,
    ) -> str:
        """Record a run and hand it to the agent's queue; return its id at once.

        The same arguments and checks as :meth:`run`. Without a queue the run is only
        recorded: call :meth:`advance` (or :meth:`resume`) to advance it. Submitting an id
        that exists enqueues nothing new and returns the id.
        """
        begun = await self._start(self._session(), task, scope, budget, run_id, metadata, tenant)
        if isinstance(begun, RunResult):
            return begun.run_id
        self._handed_off(begun[0].result())
        return begun[0].run_id

    async def advance(
        self, run_id: str, *, max_steps: int | None = None, max_seconds: float | None = None
    ) -> RunResult[OutputT]:
        """One worker's turn of a run that is ``running``: for queue workers.

        Advances at most ``max_steps`` steps and ``max_seconds`` seconds (checked between
        steps: a turn never stops inside a step), then hands the run back with status
        ``running`` if it has not stopped; the worker enqueues it again. A run taken over
        from a worker that died or stalled mid-turn counts as a recovery (dead-lettered
        after ``Policy.dead_letter_after`` in a row without progress). A run whose tools
        differ from this worker's (a rolling deploy) stops as ``needs_attention`` naming the
        difference, instead of bouncing between workers. A run that is not ``running``
        (finished, paused, waiting for a person) is returned as it is.

        Raises:
            RunBusyError: another worker holds the run (its message is then a duplicate).
            RunNotFoundError: no such run.
        """
        check_run_id(run_id)
        session = self._session()
        async with session.owned(run_id) as own:
            state, history = await session.load(run_id)
            if state.status is not RunStatus.RUNNING:
                return self._typed(state.result())
            first = commands.advance(
                state,
                self.tools,
                worker=self.owner,
                taken_over=own.lease.taken_over is not None,
                output_hash=self._output_hash,
            )
            return self._typed(
                await session.drive(own, state, history, first, turn=Turn(max_steps, max_seconds))
            )

    async def result(self, run_id: str) -> RunResult[OutputT]:
        """The run's current result, without advancing it.

        Raises:
            RunNotFoundError: no such run.
            LimitExceededError: ``run_id`` is not a valid run id.
            OutputTypeChangedError: the run completed with an answer that is not of this
                agent's output type.
        """
        check_run_id(run_id)
        state, _ = await self._session().load(run_id)
        return self._typed(state.result())

    async def resume(
        self,
        run_id: str,
        *,
        budget: Budget | None = None,
        by: str | None = None,
        accept_tool_changes: bool = False,
    ) -> RunResult[OutputT]:
        """Continue a run from its transcript (after a crash, a budget stop, or by hand).

        Resuming a completed or cancelled run returns its result; a run waiting for
        confirmation stays waiting (use :meth:`confirm`). A proposed action is executed
        from the transcript without asking the model again; a tool that was started but
        never finished is re-run only if it is idempotent (or its ``reconcile`` says it did
        not happen and no process can still be running it); otherwise the run stops as
        ``needs_attention`` (see :meth:`resolve`).

        A run found still ``running`` had its process die (a run another worker is advancing
        right now is left alone: its current result is returned). After
        ``Policy.dead_letter_after`` such recoveries in a row without progress it is stopped
        as ``failed`` (dead-lettered) instead. A ``failed`` run is resumed only by a person:
        pass ``by``.

        Args:
            budget: replaces the run's budget (to continue a ``budget_exhausted`` run).
            by: who resumes by hand (recorded); resets the dead-letter count.
            accept_tool_changes: resume although a tool the run used has changed since it
                started (recorded); otherwise that refuses with ToolManifestChangedError.

        Raises:
            RunNotFoundError: no such run.
            ToolManifestChangedError: a tool the run used changed or is gone.
            OutputTypeChangedError: the run was started with another output type.
            LimitExceededError: ``run_id`` is not a valid run id.
        """
        check_run_id(run_id)
        session = self._session()
        state, history = await session.load(run_id)
        if not commands.needs_continuing(state, by):
            return self._typed(state.result())
        try:
            async with session.owned(run_id) as own:
                await session.catch_up(state, history)  # what others wrote before we owned it
                if not commands.needs_continuing(state, by):
                    return self._typed(state.result())
                first = commands.resume(
                    state,
                    self.tools,
                    taken_over=own.lease.taken_over is not None,
                    budget=budget,
                    by=by,
                    accept_tool_changes=accept_tool_changes,
                    output_hash=self._output_hash,
                )
                result = await session.drive(own, state, history, first, advance=self.queue is None)
        except RunBusyError:
            return self._typed(state.result())  # another worker is advancing it
        return self._typed(self._handed_off(result))

    async def resolve(
        self,
        run_id: str,
        *,
        by: str,
        result: Any = _UNSET,  # Any: the JSON result the lost call produced
        rerun: bool = False,
        fail: bool = False,
        reason: str | None = None,
        accept_tool_changes: bool = False,
    ) -> RunResult[OutputT]:
        """Settle a call whose outcome was lost, for a run in ``needs_attention``.

        Exactly one of: ``result=<JSON value>`` (the call happened and returned this),
        ``rerun=True`` (it did not happen: run it once), ``fail=True`` (treat it as failed;
        the model sees the failure). The decision is recorded, then the run continues.

        Like :meth:`resume`, it first checks the tools the run used against the definitions
        recorded when it started.

        Args:
            accept_tool_changes: continue although a tool the run used (the lost call's
                included) changed since the run started; the accepted changes are recorded.

        Raises:
            RunError: the run is not waiting on a lost call.
            ConfigurationError: not exactly one of ``result``, ``rerun``, ``fail``; empty ``by``;
                an invalid run id (:class:`LimitExceededError`).
            ToolManifestChangedError: a tool the run used changed or is gone.
        """
        check_run_id(run_id)
        if not by.strip():
            raise ConfigurationError("resolve() needs by=<who decided>; it is recorded.")
        check_text(by + (reason or ""), "resolution's by/reason")
        options: tuple[tuple[commands.Settlement, bool], ...] = (
            ("result", result is not _UNSET),
            ("rerun", rerun),
            ("fail", fail),
        )
        chosen: list[commands.Settlement] = [name for name, on in options if on]
        if len(chosen) != 1:
            raise ConfigurationError(
                "resolve() takes exactly one of result=..., rerun=True, fail=True."
            )
        settled = await self._session().apply(
            run_id,
            lambda state: commands.resolve(
                state,
                self.tools,
                decision=chosen[0],
                by=by,
                result=result,
                reason=reason,
                accept_tool_changes=accept_tool_changes,
                output_hash=self._output_hash,
            ),
            advance=self.queue is None,
        )
        return self._typed(self._handed_off(settled))

    async def confirm(
        self,
        run_id: str,
        *,
        approve: bool,
        by: str,
        reason: str | None = None,
        args: Mapping[str, Any] | None = None,  # Any: JSON arguments, validated by the tool
        step: int | None = None,
        args_hash: str | None = None,
        accept_tool_changes: bool = False,
    ) -> RunResult[OutputT]:
        """Approve or deny the call a run is waiting on, then continue the run.

        The approved call runs exactly as persisted (or with ``args``, validated against
        the tool's schema); the model is not asked again. A denial's ``reason`` is shown
        to the model.

        **Unbound unless you bind it.** Without ``step`` and ``args_hash`` this approves
        whatever call the run is waiting on when the approval arrives, which may not be the
        one the person saw. Pass ``step=pending.step, args_hash=pending.args_hash`` from
        the :class:`PendingCall` that was shown; the CLI always does.

        Like :meth:`resume`, it first checks the tools the run used (and the waiting call's
        tool) against the definitions recorded when the run started. With
        ``Policy(approval_ttl=...)`` an approval that arrives later than that many seconds
        after the call began waiting is refused (the run keeps waiting; a denial is still
        accepted).

        Args:
            approve: approve (``True``) or deny (``False``).
            by: who decided (recorded).
            reason: why; shown to the model on a denial.
            args: edited arguments to run instead of the proposed ones.
            step: with ``args_hash``, binds the approval to what the person saw; a mismatch
                refuses.
            args_hash: see ``step``.
            accept_tool_changes: continue although a tool the run used changed since it
                started; the accepted changes are recorded in the confirmation.

        Raises:
            NotAwaitingConfirmationError: the run is not waiting for a person.
            ConfirmationMismatchError: ``step`` or ``args_hash`` is not what is waiting, or
                the approval came after ``Policy.approval_ttl``.
            ToolManifestChangedError: a tool the run used changed or is gone.
            OutputTypeChangedError: the run was started with another output type.
            ConfigurationError: ``by`` is empty, edited ``args`` do not validate or an
                argument policy of the tool refuses them, or the run
                id is invalid (:class:`LimitExceededError`).
            RunBusyError: another worker is advancing the run right now.
        """
        check_run_id(run_id)
        if not by.strip():
            raise ConfigurationError("confirm() needs by=<who decided>; it is recorded.")
        check_text(by + (reason or ""), "confirmation's by/reason")
        result = await self._session().apply(
            run_id,
            lambda state: commands.confirm(
                state,
                self.tools,
                approve=approve,
                by=by,
                reason=reason,
                args=args,
                step=step,
                bound_hash=args_hash,
                accept_tool_changes=accept_tool_changes,
                output_hash=self._output_hash,
                authorize=self.policy.authorize,
            ),
            advance=self.queue is None,
            wait_s=min(self.lease_s, CONFIRM_WAIT_S),
        )
        return self._typed(self._handed_off(result))

    async def compensate(
        self, run_id: str, *, by: str, settle: Mapping[str, Settle] | None = None
    ) -> RunResult[OutputT]:
        """Undo a stopped run's committed effects, newest first, each at most once.

        Every committed call of a tool with ``@tool(compensate=...)`` is undone; the run
        then ends ``cancelled`` with a reason that lists what was undone and what could not
        be (tools without ``compensate``). A call whose own outcome is unknown is reconciled
        first, or put to a person; an undo that fails, or whose outcome is lost and cannot
        be reconciled, stops the run as ``needs_attention``: call ``compensate`` again (it
        goes on where it stopped), with ``settle`` for what a person found out. A run whose
        compensation began never advances again.

        Args:
            by: who asks (recorded on each undo).
            settle: a person's word, by call id, on a call or an undo whose outcome is
                unknown: ``"done"`` (it happened) or ``"not_done"`` (it did not).

        Raises:
            RunError: the run is running or waiting for a person (cancel it first), or
                ``settle`` names a call with nothing in doubt.
            RunBusyError: another worker holds the run.
            RunNotFoundError: no such run.
            ConfigurationError: ``by`` is empty, or the run id is invalid.
        """
        check_run_id(run_id)
        if not by.strip():
            raise ConfigurationError("compensate() needs by=<who asks>; it is recorded.")
        check_text(by, "compensation's by")
        for call_id, word in (settle or {}).items():
            if word not in ("done", "not_done"):
                raise ConfigurationError(
                    f"settle[{call_id!r}] must be 'done' or 'not_done', got {word!r}"
                )
        return self._typed(
            await self._session().compensate(
                run_id, by=by, settle=dict(settle or {}), wait_s=min(self.lease_s, CONFIRM_WAIT_S)
            )
        )

    async def expire_approvals(self, *, limit: int = 1_000) -> list[RunResult[OutputT]]:
        """Apply ``Policy.approval_expiry`` to every waiting call whose approval window
        (``Policy.approval_ttl``) has passed: deny it (the run continues, the model is
        told) or escalate it (``on_pending`` hears of it, the window starts again). Run it
        periodically (a cron job, a Celery beat task, ``agentcore expire``); runs that
        another worker holds are left for the next pass, and runs of other agents sharing
        the store (a scope beyond this agent's tools) are left alone.

        Returns:
            The runs it changed, as they stand afterwards.
        """
        session, changed = self._session(), list[RunResult[OutputT]]()
        now = time.time()
        for row in await self.store.list_runs(status="awaiting_confirmation", limit=limit):
            recorded = list[Event]()

            def expire(state: RunState, into: list[Event] = recorded) -> list[Event]:
                if not set(state.scope) <= set(self.tools):  # another agent's run
                    return []
                into.extend(commands.expire(state, now))
                return into

            with contextlib.suppress(RunBusyError):
                result = await session.apply(row.run_id, expire, advance=self.queue is None)
                if recorded:
                    changed.append(self._typed(self._handed_off(result)))
        return changed

    async def cancel(
        self, run_id: str, *, by: str, reason: str | None = None
    ) -> RunResult[OutputT]:
        """End a run for good (status ``cancelled``), now or at its next safe point.

        With no live process advancing the run, the cancellation is recorded now (under
        the run's lease). If another process or task is advancing it, the request is
        recorded in the store and that process honours it at its next safe point: a tool
        that is running finishes and its outcome is recorded, then the cancellation;
        nothing is abandoned mid-call. A call that started and has no recorded outcome
        (its process died, or it timed out) gets a ``tool_finished`` saying its outcome is
        unknown before the cancellation, so no started call is ever silently dropped.

        Returns:
            The run's result. ``status`` is ``cancelled`` when the run is cancelled now;
            otherwise (the run is still ``running``, or paused) the request is recorded and
            the process advancing the run cancels it at its next safe point. A completed
            run is returned as it is.

        Raises:
            RunNotFoundError: no such run.
            ConfigurationError: ``by`` is empty, or the run id is invalid
                (:class:`LimitExceededError`).
        """
        check_run_id(run_id)
        if not by.strip():
            raise ConfigurationError("cancel() needs by=<who cancels>; it is recorded.")
        check_text(by + (reason or ""), "cancellation's by/reason")
        session = self._session()
        state, _ = await session.load(run_id)
        if state.status in FINAL_STATUSES:
            return self._typed(state.result())
        with contextlib.suppress(RunBusyError):
            return self._typed(await self._cancel_now(session, run_id, by, reason))
        await self.store.request_cancel(run_id, by=by, reason=reason)
        # The process advancing it may have let go since: then no one would read the request.
        with contextlib.suppress(RunBusyError):
            return self._typed(await self._cancel_now(session, run_id, by, reason))
        return await self.result(run_id)

    async def transcript(self, run_id: str) -> list[Event]:
        """Every event of the run, in order."""
        check_run_id(run_id)
        return await self.store.load(run_id)

    async def close(self) -> None:
        """Close the store if the agent opened it."""
        if self._store is not None and isinstance(self._store_arg, str | None):
            await self._store.close()
            self._store = None

    # -- plumbing -----------------------------------------------------------------------------

    async def _start(
        self,
        session: Session,
        task: str,
        scope: Sequence[str] | None,
        budget: Budget | None,
        run_id: str | None,
        metadata: Mapping[str, Any] | None,  # Any: JSON values
        tenant: str | None,
    ) -> tuple[RunState, RunStarted] | RunResult[OutputT]:
        """Check a new run's arguments and record its ``run_started``; the existing run's
        result when ``run_id`` is taken (or was started concurrently by someone else)."""
        in_scope = self.resolve_scope(scope)
        for name in in_scope:  # a parameter bound to the run must be there before it starts
            self.tools[name].bound_args(tenant, metadata or {})
        started = commands.start(
            task,
            tools={n: self.tools[n].spec for n in in_scope},
            budget=budget or Budget(),
            run_id=uuid.uuid4().hex if run_id is None else run_id,
            metadata=metadata,
            tenant=tenant,
            policy=self.policy,
            contract=self.contract,
            route=(self.route, self.plan_route),
            output_hash=self._output_hash,
        )
        if run_id is not None and await session.exists(run_id):
            return await self.result(run_id)
        started = self._redactor.event(started)  # the task may quote a listed value
        state = RunState(started.run_id)
        state.apply(started)
        try:
            await session.begin(started.run_id, [started])
        except SeqConflictError:
            return await self.result(started.run_id)
        return state, started

    @staticmethod
    async def _cancel_now(session: Session, run_id: str, by: str, reason: str | None) -> RunResult:
        """Cancel under the run's lease (RunBusyError if another worker holds it)."""

        def cancelled(state: RunState) -> list[Event]:
            return [] if state.status in FINAL_STATUSES else commands.cancel(state, by, reason)

        return await session.apply(run_id, cancelled, advance=False)

    @property
    def _output_hash(self) -> str | None:
        """What runs of this agent pin in ``run_started.output_hash``."""
        return None if self._output is None else self._output.hash

    def _typed(self, result: RunResult[Any]) -> RunResult[OutputT]:  # Any: not decoded yet
        """``result`` with ``output`` set: a completed run's answer as this agent's output
        type (decoded from the canonical JSON the run recorded), else ``None``.

        Raises:
            OutputTypeChangedError: the answer does not validate as this agent's output
                type (the run was started by an agent with another one).
        """
        answer = result.answer
        if result.status is not RunStatus.COMPLETED or answer is None:
            return dataclasses.replace(result, output=None)
        if self._output is None:
            return dataclasses.replace(result, output=answer)
        try:
            value = self._output.decode(answer)
        except ValueError as exc:  # pydantic's ValidationError
            raise OutputTypeChangedError(
                f"Run {result.run_id} answered {answer[:200]!r}, which is not a "
                f"{self._output.name}: it was started by an agent with another output type. "
                "Read it with an agent whose output= is the one it started with."
            ) from exc
        return dataclasses.replace(result, output=value)

    def _handed_off(self, result: RunResult) -> RunResult:
        """With a queue: enqueue a run that is ready to advance (after the lease is
        released, so the worker does not find it busy)."""
        if self.queue is not None and self.name and result.status is RunStatus.RUNNING:
            self.queue.enqueue(self.name, result.run_id)
        return result

    # -- streaming and sync twins: the signatures of the methods they wrap ----------------------

    stream = StreamTwin(run)
    """:meth:`run`, yielding events as they happen (see :mod:`agentcore.streaming`).

    Thought deltas and the detected action type arrive while the model writes; then each
    transcript event as it is recorded; last, :class:`RunEnded` with the result. Closing
    the stream early (leave the loop inside ``contextlib.aclosing(...)``) cancels the run's
    task: what was recorded stays, and the run can be resumed."""
    stream_resume = StreamTwin(resume)
    """:meth:`resume`, streamed like :meth:`stream`."""
    stream_confirm = StreamTwin(confirm)
    """:meth:`confirm`, streamed like :meth:`stream`."""
    run_sync = SyncTwin(run)
    """:meth:`run` for code without an event loop."""
    resume_sync = SyncTwin(resume)
    """:meth:`resume` for code without an event loop."""
    confirm_sync = SyncTwin(confirm)
    """:meth:`confirm` for code without an event loop."""

    # -- typed extraction (agentcore._extract) ------------------------------------------------

    async def extract(
        self,
        output: type[B],
        text: str,
        *,
        model: ModelSpec | None = None,
        instructions: str | None = None,
        max_reasks: int = 2,
        max_output_tokens: int | None = None,
    ) -> B:
        """One validated ``output`` object read from ``text``, through instructor over litellm
        (replies that fail validation are asked again with the errors, ``max_reasks`` times).

        Called inside a tool of a run, its tokens are recorded in that run (a
        ``model_called`` event with ``role="extract"``) and count against its budget.
        Extraction picks no action, so a model refused for plan and act steps by a route's
        ``min_score`` may extract.

        Args:
            output: the pydantic model to fill.
            text: the text to read.
            model: a route entry (``"openai/gpt-4.1-mini"`` or an adapter); default the first
                model of the agent's route.
            instructions: the system text (default: extract only what the text says).
            max_reasks: re-asks after a reply that fails validation.
            max_output_tokens: the reply's token cap (default: the adapter's).

        Raises:
            ExtractionError: no reply validated after the re-asks.
            ModelError: the provider failed, refused or cut the reply off.
            ConfigurationError: the model cannot extract (a scripted model).
        """
        from ._extract import extract_with

        adapter = resolve_route(model)[0] if model is not None else self.route[0]
        return await extract_with(
            adapter,
            output,
            text,
            instructions=instructions,
            max_reasks=max_reasks,
            max_output_tokens=max_output_tokens,
        )

    extract_sync = SyncTwin(extract)
    """:meth:`extract` for code without an event loop (a sync tool runs in a thread
    without one)."""
