"""The public entry point: :class:`Agent`, a facade over the run package.

Each public method checks its arguments, asks a pure command (``_run._commands``) for the
events that carry it out, and hands them to a session (``_run._session``), which records
them under the run's lease and advances the run through the loop (``_run._loop``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from agentcore.adapters import resolve_route
from agentcore.contracts import (
    ContractDocument,
    WorkedExample,
    check_run_id,
    load_contract,
    output_spec,
)
from agentcore.contracts.errors import ConfigurationError, ContractLintError, RunBusyError

from ._extract import Extractor
from ._operations import RunOperations, tool_table
from ._ownership import DEFAULT_LEASE_S, default_owner
from ._run import LOST_CALL_WAIT_S, ContextProvider, Turn, commands
from ._snapshot import snapshot_interval
from ._state import OutputT, RunResult, RunStatus
from ._subagent import SubagentTool, bind_subagents
from ._twins import StreamTwin, SyncTwin
from .policy import Budget, Policy
from .queue import RunQueue
from .routing import ModelSpec, Route
from .secrets import Redactor, SecretResolver
from .stores import TranscriptStore
from .tools import DepsFactory, Tool

__all__ = ["Agent", "ModelSpec"]


def _rule_targets(tools: Mapping[str, Tool]) -> tuple[set[str], set[str]]:
    """The tool names and labels an approvals rule may name: the agent's tools', and
    those its sub-agents can call (their scopes), at any depth."""
    names: set[str] = set()
    labels: set[str] = set()
    for tool in tools.values():
        names.add(tool.name)
        labels.update(tool.labels)
        if isinstance(tool, SubagentTool):
            child = tool.child.tools
            more_names, more_labels = _rule_targets({n: child[n] for n in tool.in_scope})
            names |= more_names
            labels |= more_labels
    return names, labels


class Agent(RunOperations[OutputT], Extractor):
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
        self.tools = tool_table(tools)
        if isinstance(model, Route):
            self.route, self.plan_route = model.act_models, model.plan_models
        else:
            self.route = resolve_route(model)
            self.plan_route = ()
        self.policy = policy or Policy()
        self.policy.check_rules(*_rule_targets(self.tools))
        self._output = output_spec(output)
        doc = contract if isinstance(contract, ContractDocument) else load_contract(contract)
        self.contract = doc.with_examples(examples)
        problems = self.contract.lint([t.spec for t in self.tools.values()])
        if problems:
            raise ContractLintError(problems)
        self.instructions = instructions
        context = () if context is None else context
        self._context = (context,) if callable(context) else tuple(context)
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
        self._store = store if not isinstance(store, str | None) else None
        self._schema_cache = {}
        self._system_cache = {}
        self.tools = bind_subagents(self)  # a run tree: one store, governed as one

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
        clone.tools = bind_subagents(clone, check_store=False)  # they follow its store
        return clone

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
        for a person stops the parent as ``needs_attention`` until the person settled it
        (a call waiting for approval in the child is the parent's ``pending``, confirmed
        from the parent).
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
        begun = await session.start(task, scope, budget, run_id, metadata, tenant)
        if isinstance(begun, RunResult):  # the run exists: read as result() reads it
            return await self.result(begun.run_id)
        state, history = begun
        try:
            async with session.owned(state.run_id) as own:
                result = self._typed(await session.drive(own, state, history))
            return await self._surfaced(result)
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
        begun = await self._session().start(task, scope, budget, run_id, metadata, tenant)
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
                return self._typed(commands.read(state, self._output_hash))
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
            return self._typed(commands.read(state, self._output_hash))
        try:
            async with session.owned(run_id) as own:
                await session.catch_up(state, history)  # what others wrote before we owned it
                if not commands.needs_continuing(state, by):
                    return self._typed(commands.read(state, self._output_hash))
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
            return self._typed(commands.read(state, self._output_hash))  # another worker has it
        return await self._surfaced(self._typed(self._handed_off(result)))

    # -- streaming and sync twins: the signatures of the methods they wrap ----------------------

    stream = StreamTwin(run)
    """:meth:`run`, yielding events as they happen (see :mod:`agentcore.streaming`).

    Thought deltas and the detected action type arrive while the model writes; then each
    transcript event as it is recorded; last, :class:`RunEnded` with the result. Closing
    the stream early (leave the loop inside ``contextlib.aclosing(...)``) cancels the run's
    task: what was recorded stays, and the run can be resumed."""
    stream_resume = StreamTwin(resume)
    """:meth:`resume`, streamed like :meth:`stream`."""
    run_sync = SyncTwin(run)
    """:meth:`run` for code without an event loop."""
    resume_sync = SyncTwin(resume)
    """:meth:`resume` for code without an event loop."""
