"""The public entry point: :class:`Agent`."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
import uuid
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
    Sequence,
)
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agentcore.adapters import ModelAdapter, resolve_route
from agentcore.contracts import (
    ActionSchema,
    ContractDocument,
    ToolAction,
    WorkedExample,
    check_run_id,
    check_tenant,
    check_text,
    load_contract,
    to_recordable,
)
from agentcore.contracts.errors import (
    ApprovalExpiredError,
    ConfigurationError,
    ConfirmationMismatchError,
    ContractLintError,
    LeaseLostError,
    NotAwaitingConfirmationError,
    RunBusyError,
    RunError,
    RunNotFoundError,
    SeqConflictError,
    StoreError,
    ToolManifestChangedError,
)

from ._manifest import manifest_change, manifest_entry
from ._observability import get_logger, log_events
from ._ownership import DEFAULT_LEASE_S, Ownership, default_owner
from ._runner import LOST_CALL_WAIT_S, ContextProvider, Driver, History, RunSetup, Turn
from ._snapshot import UNUSABLE, restore, snapshot_interval
from ._state import FINAL_STATUSES, RunResult, RunState, RunStatus
from ._state import args_hash as compute_args_hash
from .events import (
    Confirmation,
    Event,
    Resolution,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolFinished,
)
from .guards import check_arguments
from .policy import Budget, Policy
from .queue import RunQueue
from .routing import Route
from .secrets import Redactor, SecretResolver
from .stores import SnapshotStore, TranscriptStore, open_store
from .stores._codec import printable
from .streaming import SINK, RunEnded, StreamEvent
from .tools import Tool

__all__ = ["Agent", "ModelSpec"]

T = TypeVar("T")
B = TypeVar("B", bound=BaseModel)
ModelSpec = str | ModelAdapter | Sequence[str | ModelAdapter]
_UNSET: Any = object()  # Any: a sentinel for "no result given" (None is a valid result)
"""A model (``"provider/model"`` or an adapter object) or a route: a list tried in order."""


class Agent:
    """Tools, a model route, a store and a policy: runs tasks step by step.

    Args:
        tools: ``@tool``-decorated functions.
        model: an adapter (e.g. ``ScriptedModel([...])``), a ``"provider/model"`` string, or a
            list of them: a route, where a model failing after its retries hands the step to
            the next with the same transcript. A :class:`Route` adds plan-step models and a
            minimum eval score.
        store: a store URL (``"sqlite:///runs.db"``, ``"memory://"``) or a store object;
            default ``$AGENTCORE_STORE`` or ``sqlite:///agentcore.db``.
        policy: governance rules (default: :class:`Policy()`).
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

    def configured(self, *, model: ModelSpec | None = None, store: str | None = None) -> Agent:
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

    def _setup(self) -> RunSetup:
        return RunSetup(
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
        )

    def resolve_scope(self, scope: Sequence[str] | None) -> tuple[str, ...]:
        """Tool names selected by ``scope`` (names or labels; ``None``: every tool).

        Raises:
            ConfigurationError: an entry is neither a tool name nor a label.
        """
        if scope is None:
            return tuple(self.tools)
        if isinstance(scope, str):
            raise ConfigurationError("scope is a list of tool names or labels, not one string.")
        chosen: dict[str, None] = {}
        for entry in scope:
            if entry in self.tools:
                chosen[entry] = None
                continue
            labelled = [n for n, t in self.tools.items() if entry in t.labels]
            if not labelled:
                labels = sorted({lb for t in self.tools.values() for lb in t.labels})
                raise ConfigurationError(
                    f"Scope entry {entry!r} is neither a tool nor a label. Tools: "
                    f"{', '.join(self.tools) or '(none)'}; labels: {', '.join(labels) or '(none)'}."
                )
            chosen.update(dict.fromkeys(labelled))
        return tuple(chosen)

    async def _append(self, run_id: str, events: Sequence[Event]) -> None:
        """Append a new run's first event (no one owns a run before it exists); a stream in
        progress sees it too. Every later event goes through a :class:`Driver`, under the
        run's lease."""
        await self.store.append(run_id, events[0].seq, events)
        log_events(run_id, events)
        sink = SINK.get()
        if sink is not None:
            for ev in events:
                sink(ev)

    async def _load(self, run_id: str) -> tuple[RunState, History]:
        """The run's state and the events a driver needs: from its latest usable snapshot
        and the events after it (``_snapshot``), else from the whole transcript."""
        loaded = await self._from_snapshot(run_id)
        if loaded is not None:
            return loaded
        events = await self.store.load(run_id)
        state = RunState(run_id)
        for ev in events:
            state.apply(ev)
        return state, History(events)

    async def _from_snapshot(self, run_id: str) -> tuple[RunState, History] | None:
        """``None`` when the run has no snapshot this code can use; a snapshot that does
        not fit is logged and ignored (the next one replaces it), never trusted."""
        store = self.store
        if not isinstance(store, SnapshotStore):
            return None
        try:
            snaps = await store.load_snapshot(run_id)
        except StoreError as exc:  # e.g. a read-only store of an older schema
            get_logger().warning("snapshot_ignored", run_id=run_id, error=str(exc))
            return None
        if not snaps:
            return None
        last = snaps[-1]
        try:
            state, renderer = restore(run_id, snaps)
        except UNUSABLE as exc:
            get_logger().warning(
                "snapshot_ignored", run_id=run_id, seq=last.seq, error=printable(str(exc))[:300]
            )
            return None
        # The store hands back consecutive events from last.seq + 1, where the state ends.
        events = await store.load(run_id, after=last.seq)
        for ev in events:
            state.apply(ev)
        return state, History(events, base=last.seq + 1, renderer=renderer)

    async def _catch_up(self, state: RunState, history: History) -> None:
        """Fold in what was appended since ``state`` was loaded (reads only the new
        events: a resume of a long run decodes its transcript once, not twice)."""
        for ev in await self.store.load(state.run_id, after=state.next_seq - 1):
            state.apply(ev)
            history.events.append(ev)

    async def _drive(
        self,
        own: Ownership,
        state: RunState,
        history: History,
        first: Sequence[Event] = (),
        *,
        turn: Turn | None = None,
        hand_off: bool = True,
    ) -> RunResult:
        """Record ``first`` (a command's events: a resume, a confirmation, ...), then advance
        the run this agent owns (for one ``turn`` when given), or, with a queue and
        ``hand_off``, leave the advancing to a worker (:meth:`_handed_off` enqueues it once
        the lease is released). The driver is the one writer of the transcript: every
        batch it flushes carries the lease, so a worker that lost the run writes nothing."""
        driver = Driver(self._setup(), state, history, own)
        try:
            with driver.obs.advance(first, self.name):  # one span per advance, when traced
                for ev in first:
                    driver.record(ev)
                await driver.flush()  # a person's decision is durable on its own
                if not (hand_off and self.queue is not None):
                    await driver.advance(turn)
        except (SeqConflictError, LeaseLostError) as exc:
            # Another worker advanced or took over this run; nothing of ours after the last
            # durable batch was written. Report the run as the store has it.
            driver.log.info("lost_the_run", error=str(exc))
            state, _ = await self._load(state.run_id)
        return state.result()

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
    ) -> RunResult:
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
        begun = await self._start(task, scope, budget, run_id, metadata, tenant)
        if isinstance(begun, RunResult):
            return begun
        state, started = begun
        try:
            async with self._owned(state.run_id) as own:
                return await self._drive(own, state, History([started]), hand_off=False)
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
        begun = await self._start(task, scope, budget, run_id, metadata, tenant)
        if isinstance(begun, RunResult):
            return begun.run_id
        state, _ = begun
        self._handed_off(state.result())
        return state.run_id

    async def advance(
        self, run_id: str, *, max_steps: int | None = None, max_seconds: float | None = None
    ) -> RunResult:
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
        async with self._owned(run_id) as own:
            state, history = await self._load(run_id)
            if state.status is not RunStatus.RUNNING:
                return state.result()
            first: list[Event] = []
            changed = self._tool_changes(state)
            if changed:
                first.append(
                    RunFinished(
                        run_id=run_id,
                        seq=state.next_seq,
                        at=time.time(),
                        status=RunStatus.NEEDS_ATTENTION.value,
                        reason=(
                            f"worker {self.owner} has tools that differ from the ones this run "
                            f"started with: {'; '.join(changed.values())}. Deploy matching "
                            f"tools, or resume by hand with `agentcore resume {run_id} --by NAME "
                            "--accept-tool-changes`."
                        ),
                    )
                )
            elif own.lease.taken_over is not None:
                first.append(self._resumed(state, recovery=True))
            return await self._drive(
                own, state, history, first, turn=Turn(max_steps, max_seconds), hand_off=False
            )

    def _handed_off(self, result: RunResult) -> RunResult:
        """With a queue: enqueue a run that is ready to advance (after the lease is
        released, so the worker does not find it busy)."""
        if self.queue is not None and self.name and result.status is RunStatus.RUNNING:
            self.queue.enqueue(self.name, result.run_id)
        return result

    async def _start(
        self,
        task: str,
        scope: Sequence[str] | None,
        budget: Budget | None,
        run_id: str | None,
        metadata: Mapping[str, Any] | None,  # Any: JSON values
        tenant: str | None,
    ) -> tuple[RunState, RunStarted] | RunResult:
        """Check a new run's arguments and record its ``run_started``; the existing run's
        result when ``run_id`` is taken."""
        if not task.strip():
            raise ConfigurationError("The task is empty: say what the agent should do.")
        check_text(task, "task")
        recorded_metadata: dict[str, Any] = to_recordable(dict(metadata or {}), "metadata")
        names = self.resolve_scope(scope)
        budget = budget or Budget()
        if run_id is not None:
            check_run_id(run_id)
        if tenant is not None:
            check_tenant(tenant)
        if run_id is not None and await self._exists(run_id):
            return await self.result(run_id)
        run_id = run_id or uuid.uuid4().hex
        state = RunState(run_id)
        started = RunStarted(
            run_id=run_id,
            seq=0,
            at=time.time(),
            task=task,
            scope=list(names),
            budget=budget.to_json(),
            policy=self.policy.to_json(),
            contract={"version": self.contract.version, "hash": self.contract.hash},
            route=[m.name for m in self.route],
            plan_route=[m.name for m in self.plan_route],
            tools={n: manifest_entry(self.tools[n].spec) for n in names},
            metadata=recorded_metadata,
            tenant=tenant,
        )
        started = self._redactor.event(started)  # the task may quote a listed value
        state.apply(started)
        try:
            await self._append(run_id, [started])
        except SeqConflictError:
            return await self.result(run_id)  # started concurrently by someone else
        return state, started

    @contextlib.asynccontextmanager
    async def _owned(self, run_id: str) -> AsyncGenerator[Ownership]:
        """Hold the run's lease, renewed in the background, released on the way out
        (RunBusyError if another worker holds it)."""
        own = await Ownership.acquire(self.store, run_id, owner=self.owner, ttl_s=self.lease_s)
        async with own:
            yield own

    async def _exists(self, run_id: str) -> bool:
        try:
            await self.store.load(run_id, after=2**62)
        except RunNotFoundError:
            return False
        return True

    async def result(self, run_id: str) -> RunResult:
        """The run's current result, without advancing it.

        Raises:
            RunNotFoundError: no such run.
            LimitExceededError: ``run_id`` is not a valid run id.
        """
        check_run_id(run_id)
        state, _ = await self._load(run_id)
        return state.result()

    async def resume(
        self,
        run_id: str,
        *,
        budget: Budget | None = None,
        by: str | None = None,
        accept_tool_changes: bool = False,
    ) -> RunResult:
        """Continue a run from its transcript (after a crash, a budget stop, or by hand).

        Resuming a completed or cancelled run returns its result; a run waiting for
        confirmation stays waiting (use :meth:`confirm`). A proposed action is executed
        from the transcript without asking the model again; a tool that was started but
        never finished is re-run only if it is idempotent (or its ``reconcile`` says it did
        not happen); otherwise the run stops as ``needs_attention`` (see :meth:`resolve`).

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
            LimitExceededError: ``run_id`` is not a valid run id.
        """
        check_run_id(run_id)
        state, history = await self._load(run_id)
        if self._settled(state, by):
            return state.result()
        try:
            async with self._owned(run_id) as own:
                await self._catch_up(state, history)  # what others wrote before we owned it
                result = await self._resume_claimed(
                    own, state, history, budget, by, accept_tool_changes
                )
        except RunBusyError:
            return state.result()  # another worker is advancing it
        return self._handed_off(result)

    @staticmethod
    def _settled(state: RunState, by: str | None) -> bool:
        """Nothing for a plain resume to do: final, waiting for a person, or failed (a
        failed run, dead-lettered or not, is resumed only by a person: ``by=``)."""
        return (
            state.status in FINAL_STATUSES
            or state.status is RunStatus.AWAITING_CONFIRMATION
            or (state.status is RunStatus.FAILED and by is None)
        )

    async def _resume_claimed(
        self,
        own: Ownership,
        state: RunState,
        history: History,
        budget: Budget | None,
        by: str | None,
        accept_tool_changes: bool,
    ) -> RunResult:
        run_id = state.run_id
        if self._settled(state, by):
            return state.result()
        accepted, pinned = self._check_tools(state, accept_tool_changes)
        call = state.call
        if (
            call is not None
            and isinstance(call.action, ToolAction)
            and not call.settled
            and call.action.tool not in self.tools
        ):
            raise ToolManifestChangedError(
                f"Run {run_id} is at step {call.step}, a call of {call.action.tool!r}, which is "
                "no longer a tool of this agent: it cannot run, even with accept_tool_changes. "
                f"Add the tool back, or cancel the run (agentcore cancel {run_id} --by NAME)."
            )
        # A running run was left by a worker that died or stalled (its lease was taken
        # over), or predates leases; a run only submitted (nothing after run_started) and
        # never advanced is not a recovery.
        recovery = state.status is RunStatus.RUNNING and (
            own.lease.taken_over is not None or state.next_seq > 1
        )
        ev = self._resumed(
            state, recovery=recovery, by=by, budget=budget, accepted=accepted, pinned=pinned
        )
        return await self._drive(own, state, history, [ev])

    @staticmethod
    def _resumed(
        state: RunState,
        *,
        recovery: bool,
        by: str | None = None,
        budget: Budget | None = None,
        accepted: Sequence[str] = (),
        pinned: Mapping[str, dict[str, Any]] | None = None,  # Any: JSON manifest entries
    ) -> Event:
        """The event that continues a run: ``run_resumed``, or, for a recovery of a run
        whose workers died ``Policy.dead_letter_after`` times in a row without progress,
        the ``run_finished`` that dead-letters it (a person can still resume it)."""
        run_id = state.run_id
        if recovery and by is None and state.recoveries >= state.policy.dead_letter_after:
            return RunFinished(
                run_id=run_id,
                seq=state.next_seq,
                at=time.time(),
                status=RunStatus.FAILED.value,
                reason=(
                    f"dead-lettered: the process advancing this run died {state.recoveries + 1} "
                    f"times in a row at step {state.steps} without progress; inspect it with "
                    f"`agentcore show {run_id}` and resume by hand with "
                    f"`agentcore resume {run_id} --by NAME`"
                ),
            )
        return RunResumed(
            run_id=run_id,
            seq=state.next_seq,
            at=time.time(),
            budget=budget.to_json() if budget else None,
            recovery=recovery,
            by=by,
            accepted_tool_changes=list(accepted),
            accepted_tools=dict(pinned or {}),
        )

    def _tool_changes(self, state: RunState, *, whole_scope: bool = False) -> dict[str, str]:
        """What changed, in words, in each tool the run used or is about to run (with
        ``whole_scope``: in every tool of its scope), by tool name."""
        used = {name for name, n in state.per_tool.items() if n > 0}
        if state.call is not None and isinstance(state.call.action, ToolAction):
            used.add(state.call.action.tool)
        if whole_scope:
            used.update(state.scope)
        changed: dict[str, str] = {}
        for name in sorted(used):
            current = self.tools.get(name)
            change = manifest_change(
                name, state.tools.get(name), None if current is None else current.spec
            )
            if change is not None:
                changed[name] = change
        return changed

    def _check_tools(
        self, state: RunState, accept: bool
    ) -> tuple[list[str], dict[str, dict[str, Any]]]:  # Any: JSON manifest entries
        """Tools the run used or is about to run whose definition changed since it started
        (or are gone), each with what changed. Every continuation (resume, confirm, resolve)
        runs this check before it records anything.

        Returns:
            With ``accept``: what changed in every tool of the run's scope, in words, and the
            current definitions of those tools (recorded, the run is pinned to them from then
            on); otherwise nothing.

        Raises:
            ToolManifestChangedError: something changed and ``accept`` is false.
        """
        changed = self._tool_changes(state)
        if changed and not accept:
            raise ToolManifestChangedError(
                f"Run {state.run_id} used tools that changed since it started: "
                f"{'; '.join(changed.values())}. Nothing was recorded or run. Continue with "
                "accept_tool_changes=True (--accept-tool-changes) if the run may go on with "
                "the new definitions."
            )
        if not accept:
            return [], {}
        every = self._tool_changes(state, whole_scope=True)
        pinned = {n: manifest_entry(self.tools[n].spec) for n in every if n in self.tools}
        return list(every.values()), pinned

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
    ) -> RunResult:
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
        async with self._owned(run_id) as own:
            settled = await self._resolve_claimed(
                own, run_id, by, result, rerun, fail, reason, accept_tool_changes
            )
        return self._handed_off(settled)

    async def _resolve_claimed(
        self,
        own: Ownership,
        run_id: str,
        by: str,
        result: Any,  # Any: the JSON result, or _UNSET
        rerun: bool,
        fail: bool,
        reason: str | None,
        accept_tool_changes: bool,
    ) -> RunResult:
        chosen = [
            name
            for name, on in (("result", result is not _UNSET), ("rerun", rerun), ("fail", fail))
            if on
        ]
        if len(chosen) != 1:
            raise ConfigurationError(
                "resolve() takes exactly one of result=..., rerun=True, fail=True."
            )
        state, history = await self._load(run_id)
        call = state.call
        if (
            state.status is not RunStatus.NEEDS_ATTENTION
            or call is None
            or call.started is None
            or call.finished is not None
            or not isinstance(call.action, ToolAction)
        ):
            raise RunError(
                f"Run {run_id} is {state.status.value} and has no call with a lost outcome to "
                "resolve."
            )
        decision = chosen[0]
        accepted, pinned = self._check_tools(state, accept_tool_changes)
        if decision == "rerun" and call.action.tool not in self.tools:
            raise ConfigurationError(
                f"This agent has no tool {call.action.tool!r} to run again; resolve with "
                "result=... or fail=True, or use the agent that has the tool."
            )
        if decision == "result":
            result = to_recordable(result, "result given to resolve()")
        now, seq = time.time(), state.next_seq
        batch: list[Event] = [
            Resolution(
                run_id=run_id,
                seq=seq,
                at=now,
                step=call.step,
                call_id=call.call_id,
                decision="result" if result is not _UNSET else "rerun" if rerun else "fail",
                by=by,
                reason=reason,
                accepted_tool_changes=accepted,
                accepted_tools=pinned,
            )
        ]
        if decision != "rerun":
            why = f"marked as failed by {by}" + (f": {reason}" if reason else "")
            batch.append(
                ToolFinished(
                    run_id=run_id,
                    seq=seq + 1,
                    at=now,
                    step=call.step,
                    call_id=call.call_id,
                    tool=call.action.tool,
                    ok=decision == "result",
                    result=result if decision == "result" else None,
                    error=None if decision == "result" else why,
                )
            )
        return await self._drive(own, state, history, batch)

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
    ) -> RunResult:
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
            step, args_hash: bind the approval to what the person saw; a mismatch refuses.
            accept_tool_changes: continue although a tool the run used changed since it
                started; the accepted changes are recorded in the confirmation.

        Raises:
            NotAwaitingConfirmationError: the run is not waiting for a person.
            ConfirmationMismatchError: ``step`` or ``args_hash`` is not what is waiting, or
                the approval came after ``Policy.approval_ttl``.
            ToolManifestChangedError: a tool the run used changed or is gone.
            ConfigurationError: ``by`` is empty, edited ``args`` do not validate or an
                argument policy of the tool refuses them, or the run
                id is invalid (:class:`LimitExceededError`).
            RunBusyError: another worker is advancing the run right now.
        """
        check_run_id(run_id)
        if not by.strip():
            raise ConfigurationError("confirm() needs by=<who decided>; it is recorded.")
        check_text(by + (reason or ""), "confirmation's by/reason")
        async with self._owned(run_id) as own:
            result = await self._confirm_claimed(
                own, run_id, approve, by, reason, args, step, args_hash, accept_tool_changes
            )
        return self._handed_off(result)

    async def _confirm_claimed(
        self,
        own: Ownership,
        run_id: str,
        approve: bool,
        by: str,
        reason: str | None,
        args: Mapping[str, Any] | None,  # Any: JSON arguments
        step: int | None,
        args_hash: str | None,
        accept_tool_changes: bool,
    ) -> RunResult:
        state, history = await self._load(run_id)
        pending = state.pending()
        if pending is None:
            raise NotAwaitingConfirmationError(
                f"Run {run_id} is {state.status.value}, not awaiting confirmation; "
                "nothing to confirm."
            )
        if step is not None and step != pending.step:
            raise ConfirmationMismatchError(
                f"Run {run_id} is waiting at step {pending.step}, not step {step}; "
                "nothing recorded."
            )
        if args_hash is not None and args_hash != pending.args_hash:
            raise ConfirmationMismatchError(
                f"Run {run_id}: the waiting call's args hash is {pending.args_hash}, not "
                f"{args_hash}; the call changed since it was shown. Nothing recorded."
            )
        if approve:
            self._check_approval_window(state)
        accepted, pinned = self._check_tools(state, accept_tool_changes)
        if approve and pending.tool is not None and pending.tool not in self.tools:
            raise ConfigurationError(
                f"This agent has no tool {pending.tool!r} to run; deny the call, or confirm "
                "with the agent that has the tool."
            )
        edited: dict[str, Any] | None = None  # Any: JSON values
        new_hash = pending.args_hash
        if args is not None:
            if pending.kind != "tool" or pending.tool is None:
                raise ConfigurationError(
                    "Only a tool call's arguments can be edited, not a plan's."
                )
            tool = self.tools.get(pending.tool)
            if tool is None:
                raise ConfigurationError(
                    f"This agent has no tool {pending.tool!r} to validate args for."
                )
            try:
                edited = tool.validate_args(dict(args))
            except ValidationError as exc:
                raise ConfigurationError(
                    f"Edited args for {pending.tool!r} are invalid: {exc}"
                ) from exc
            refused = check_arguments(tool.policies, edited)
            if refused is not None:  # a person's edit passes the same rules as the model's
                raise ConfigurationError(f"Edited args for {pending.tool!r} are refused: {refused}")
            new_hash = compute_args_hash(pending.tool, edited)
        ev = Confirmation(
            run_id=run_id,
            seq=state.next_seq,
            at=time.time(),
            step=pending.step,
            call_id=pending.call_id,
            approved=approve,
            by=by,
            reason=reason,
            args=edited,
            args_hash=new_hash,
            accepted_tool_changes=accepted,
            accepted_tools=pinned,
        )
        return await self._drive(own, state, history, [ev])

    @staticmethod
    def _check_approval_window(state: RunState) -> None:
        """Refuse an approval that arrives after ``Policy.approval_ttl`` (the run's policy)."""
        ttl = state.policy.approval_ttl
        call = state.call
        if ttl is None or call is None or call.decision is None:
            return
        waited = time.time() - call.decision.at
        if waited > ttl:
            raise ApprovalExpiredError(
                f"Run {state.run_id}: the call at step {call.step} has waited {waited:.0f}s for "
                f"approval; approvals expire after {ttl:g}s (Policy.approval_ttl), so this one "
                "is refused and nothing was recorded. The run keeps waiting: deny the call "
                "(the model then proposes again) or cancel the run."
            )

    async def cancel(self, run_id: str, *, by: str, reason: str | None = None) -> RunResult:
        """End a run for good (status ``cancelled``), now or at its next safe point.

        With no live process advancing the run, the cancellation is recorded now (under
        the run's claim). If another process or task is advancing it, the request is
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
        state, _ = await self._load(run_id)
        if state.status in FINAL_STATUSES:
            return state.result()
        with contextlib.suppress(RunBusyError):
            return await self._cancel_now(run_id, by, reason)
        await self.store.request_cancel(run_id, by=by, reason=reason)
        # The process advancing it may have let go since: then no one would read the request.
        with contextlib.suppress(RunBusyError):
            return await self._cancel_now(run_id, by, reason)
        return await self.result(run_id)

    async def _cancel_now(self, run_id: str, by: str, reason: str | None) -> RunResult:
        """Cancel under the run's claim (RunBusyError if another worker holds it)."""
        async with self._owned(run_id) as own:
            state, history = await self._load(run_id)
            if state.status in FINAL_STATUSES:
                return state.result()
            driver = Driver(self._setup(), state, history, own)
            driver.cancel(by, reason)
            await driver.flush()
            return state.result()

    async def transcript(self, run_id: str) -> list[Event]:
        """Every event of the run, in order."""
        check_run_id(run_id)
        return await self.store.load(run_id)

    async def close(self) -> None:
        """Close the store if the agent opened it."""
        if self._store is not None and isinstance(self._store_arg, str | None):
            await self._store.close()
            self._store = None

    # -- streaming ----------------------------------------------------------------------------

    def stream(self, task: str, **kwargs: Any) -> AsyncIterator[StreamEvent]:  # Any: as run()
        """:meth:`run`, yielding events as they happen (see :mod:`agentcore.streaming`).

        Thought deltas and the detected action type arrive while the model writes; then
        each transcript event as it is recorded; last, :class:`RunEnded` with the result.
        Closing the stream early (leave the loop inside ``contextlib.aclosing(...)``)
        cancels the run's task: what was recorded stays, and the run can be resumed.
        """
        return self._stream(lambda: self.run(task, **kwargs))

    def stream_resume(
        self, run_id: str, **kwargs: Any
    ) -> AsyncIterator[StreamEvent]:  # Any: as resume()
        """:meth:`resume`, streamed like :meth:`stream`."""
        return self._stream(lambda: self.resume(run_id, **kwargs))

    def stream_confirm(
        self, run_id: str, **kwargs: Any
    ) -> AsyncIterator[StreamEvent]:  # Any: as confirm()
        """:meth:`confirm`, streamed like :meth:`stream`."""
        return self._stream(lambda: self.confirm(run_id, **kwargs))

    async def _stream(
        self,
        start: Callable[[], Coroutine[Any, Any, RunResult]],  # Any: coroutine plumbing
    ) -> AsyncIterator[StreamEvent]:
        queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        token = SINK.set(queue.put_nowait)
        try:
            runner = asyncio.create_task(start())  # copies the context: the sink goes along
        finally:
            SINK.reset(token)
        runner.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                yield item
            yield RunEnded(runner.result())
        finally:
            if not runner.done():
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await runner

    # -- sync twins ---------------------------------------------------------------------------

    def run_sync(self, task: str, **kwargs: Any) -> RunResult:  # Any: same keywords as run()
        """:meth:`run` for code without an event loop."""
        return _sync(self.run(task, **kwargs))

    def confirm_sync(self, run_id: str, **kwargs: Any) -> RunResult:  # Any: as confirm()
        """:meth:`confirm` for code without an event loop."""
        return _sync(self.confirm(run_id, **kwargs))

    def resume_sync(self, run_id: str, **kwargs: Any) -> RunResult:  # Any: as resume()
        """:meth:`resume` for code without an event loop."""
        return _sync(self.resume(run_id, **kwargs))

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

    def extract_sync(self, output: type[B], text: str, **kwargs: Any) -> B:  # Any: as extract()
        """:meth:`extract` for code without an event loop (a sync tool runs in a thread
        without one)."""
        return _sync(self.extract(output, text, **kwargs))


def _sync(coro: Awaitable[T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        if asyncio.iscoroutine(coro):
            coro.close()
        raise ConfigurationError(
            "The *_sync methods cannot run inside an event loop; await run() instead."
        )

    async def main() -> T:
        return await coro

    return asyncio.run(main())
