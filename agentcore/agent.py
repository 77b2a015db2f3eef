"""The public entry point: :class:`Agent`, a facade over the parts it holds.

An agent holds a :class:`~agentcore._configuration.Configuration` (what it was made with,
checked) and :class:`~agentcore._operations.RunOperations` (what is done to its runs; they
own its store and the one session built from both). Each public method checks its
arguments and hands over; an operation asks a pure command (``_run._commands``) for the
events that carry it out and gives them to the session (``_run._session``), which records
them under the run's lease and advances the run through the loop (``_run._loop``).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

from pydantic import BaseModel

from agentcore.adapters import ModelAdapter, resolve_route
from agentcore.contracts import (
    ContractDocument,
    WorkedExample,
    check_run_id,
    check_text,
    load_contract,
    output_spec,
)
from agentcore.contracts.errors import ConfigurationError, ContractLintError

from ._configuration import Configuration
from ._extract import extract_with
from ._operations import RunOperations, person, tool_table
from ._ownership import DEFAULT_LEASE_S, default_owner
from ._run import LOST_CALL_WAIT_S, ContextProvider, NewRun, Settle, Shift, commands
from ._snapshot import snapshot_interval
from ._state import OutputT, RunResult, RunState
from ._subagent import SubagentTool, bind_subagents
from ._twins import StreamTwin, SyncTwin
from .events import Event, RunStarted
from .policy import Budget, Policy
from .queue import RunQueue
from .quotas import Clock, Quota, check_quotas
from .routing import ModelSpec, Route
from .secrets import Redactor, SecretResolver
from .stores import TranscriptStore
from .tools import DepsFactory, Tool

__all__ = ["Agent", "ModelSpec"]

V = TypeVar("V")
T = TypeVar("T", bound=BaseModel)

_UNSET: Any = object()  # Any: a sentinel for "no result given" (None is a valid result)


def _rule_targets(tools: Mapping[str, Tool]) -> tuple[set[str], set[str]]:
    """The tool names and labels an approvals rule may name: the agent's tools', and
    those its sub-agents can call (their scopes), at any depth."""
    names: set[str] = set()
    labels: set[str] = set()
    for tool in tools.values():
        names.add(tool.name)
        labels.update(tool.labels)
        if isinstance(tool, SubagentTool):
            child = tool.child_tools
            more_names, more_labels = _rule_targets({n: child[n] for n in tool.in_scope})
            names |= more_names
            labels |= more_labels
    return names, labels


class _Setting(Generic[V]):
    """An agent's setting, read from its configuration; setting it makes a configuration
    with the new value (and the run setup again, on next use)."""

    def __set_name__(self, owner: type[object], name: str) -> None:
        self._name = name

    @overload
    def __get__(self, agent: None, owner: type[object]) -> _Setting[V]: ...
    @overload
    def __get__(self, agent: Agent[Any], owner: type[object]) -> V: ...
    def __get__(self, agent: Agent[Any] | None, owner: type[object]) -> _Setting[V] | V:
        if agent is None:
            return self
        return getattr(agent._config, self._name)  # pyright: ignore[reportPrivateUsage]  # the setting's home

    def __set__(self, agent: Agent[Any], value: V) -> None:
        config = dataclasses.replace(agent._config, **{self._name: value})  # pyright: ignore[reportPrivateUsage]  # the setting's home
        agent._reconfigure(config, agent._ops.opened)  # pyright: ignore[reportPrivateUsage]  # the setting's home


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
            tool steps; 0: never), so a resume, a confirmation or a worker's shift reads the
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
        quotas: limits that span runs (:class:`~agentcore.quotas.Quota`): per tenant, per
            run-bound value, per tool, per hour or day; kept by the store and enforced
            atomically by every worker (docs/budgets.md, "Quotas across runs").
        clock: what "now" is for the quotas' hour and day windows (``time.time``); inject
            one in tests.

    Example:
        >>> agent = Agent(tools=[get_order], model=ScriptedModel([...]), store="memory://")
        >>> result = await agent.run("Where is order A1?", budget=Budget(max_steps=5))
    """

    tools = _Setting[dict[str, Tool]]()
    """The agent's tools by name (sub-agents bound to it)."""
    route = _Setting[tuple[ModelAdapter, ...]]()
    """The models that act, in order (a failing model hands the step to the next)."""
    plan_route = _Setting[tuple[ModelAdapter, ...]]()
    """The models for plan steps (empty: the route's)."""
    policy = _Setting[Policy]()
    """The governance rules."""
    contract = _Setting[ContractDocument]()
    """The contract document, with the worked examples."""
    instructions = _Setting[str | None]()
    """Operator instructions added to the system text."""
    owner = _Setting[str]()
    """This worker's name in the runs it holds."""
    lease_s = _Setting[float]()
    """How long a run stays this worker's without a renewal."""
    name = _Setting[str | None]()
    """The agent's name in a worker's registry."""
    queue = _Setting[RunQueue | None]()
    """Where runs are handed to workers (``None``: advanced in the caller's process)."""
    secrets = _Setting[SecretResolver | None]()
    """Fills tool parameters marked :class:`~agentcore.secrets.Secret`."""
    deps = _Setting[DepsFactory | None]()
    """Builds what tools receive as ``ToolContext.deps``."""
    lost_call_wait_s = _Setting[float]()
    """How long a worker waits for a process that may still be running a lost call."""
    snapshot_every = _Setting[int]()
    """Events between two snapshots of a run (0: never)."""

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
        quotas: Sequence[Quota] = (),
        clock: Clock | None = None,
    ) -> None:
        redactor = Redactor.listed(redact, redact_env)
        table = tool_table(tools)
        if isinstance(model, Route):
            route, plan_route = model.act_models, model.plan_models
        else:
            route, plan_route = resolve_route(model), ()
        policy = policy or Policy()
        policy.check_rules(*_rule_targets(table))
        spec = output_spec(output)
        doc = contract if isinstance(contract, ContractDocument) else load_contract(contract)
        doc = doc.with_examples(examples)
        problems = doc.lint([t.spec for t in table.values()])
        if problems:
            raise ContractLintError(problems)
        context = () if context is None else context
        if lease_s <= 0:
            raise ConfigurationError(f"lease_s must be > 0, got {lease_s!r}")
        if not lost_call_wait_s >= 0:
            raise ConfigurationError(f"lost_call_wait_s must be >= 0, got {lost_call_wait_s!r}")
        if queue is not None and not name:
            raise ConfigurationError("An agent with a queue needs a name= that workers know it by.")
        config = Configuration(
            tools=table,
            route=route,
            plan_route=plan_route,
            policy=policy,
            contract=doc,
            instructions=instructions,
            context=(context,) if callable(context) else tuple(context),
            owner=owner or default_owner(),
            lease_s=lease_s,
            name=name,
            queue=queue,
            secrets=secrets,
            redactor=redactor,
            snapshot_every=snapshot_interval(snapshot_every),
            lost_call_wait_s=lost_call_wait_s,
            deps=deps,
            output=spec,
            store=store,
            quotas=check_quotas(quotas),
            clock=time.time if clock is None else clock,
        )
        self._config = config  # binding its sub-agents reads the agent's settings
        if config.has_subagents:  # a run tree: one store, governed as one
            config = dataclasses.replace(config, tools=bind_subagents(self))
        self._reconfigure(config, None)

    def _reconfigure(self, config: Configuration, store: TranscriptStore | None) -> None:
        """Hold ``config``, and operations over it (``store``: one already open)."""
        self._config = config
        self._ops = RunOperations[OutputT](config, store)

    def _share_store(self, store: TranscriptStore) -> None:
        """Use ``store`` (a run tree's, not this agent's to close) unless a store is
        open already."""
        if self._ops.opened is None:
            self._reconfigure(dataclasses.replace(self._config, store=store), store)

    def _governed(self, policy: Policy) -> Agent[OutputT]:
        """A copy under ``policy`` with no store yet (a sub-agent bound to a parent)."""
        clone = copy.copy(self)
        clone._reconfigure(dataclasses.replace(self._config, policy=policy, store=None), None)
        return clone

    @property
    def quotas(self) -> tuple[Quota, ...]:
        """The agent's quotas (``Agent(quotas=...)``)."""
        return self._config.quotas

    @property
    def store(self) -> TranscriptStore:
        """The transcript store (opened on first use)."""
        return self._ops.store

    def configured(
        self, *, model: ModelSpec | None = None, store: str | None = None
    ) -> Agent[OutputT]:
        """A copy of this agent with another model route and/or store URL."""
        config = self._config
        if model is not None:
            config = dataclasses.replace(config, route=resolve_route(model), plan_route=())
        if store is not None:
            config = dataclasses.replace(config, store=store)
        clone = copy.copy(self)
        clone._config = config  # binding its sub-agents reads the clone's settings
        bound = bind_subagents(clone, check_store=False)  # they follow its store
        clone._reconfigure(
            dataclasses.replace(config, tools=bound), self._ops.opened if store is None else None
        )
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

    def owns(self, run: RunStarted | RunState) -> bool:
        """Whether this agent can carry ``run`` on: it has every tool of the run's scope
        (as its ``run_started`` recorded it). The one rule for which of several agents
        sharing a store owns a run (the console, the Celery sweep)."""
        return set(run.scope) <= set(self.tools)

    # -- starting and advancing runs --------------------------------------------------------

    async def run(
        self,
        task: str,
        *,
        scope: Sequence[str] | None = None,
        budget: Budget | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,  # Any: JSON values recorded as given
        tenant: str | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,  # Any: chat messages as given
        conversation_budget: Budget | None = None,
    ) -> RunResult[OutputT]:
        """Start a run and advance it until it completes, stops or waits for a person.

        The run's answer ends its first turn; :meth:`reply` continues the conversation.

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
            history: an earlier conversation to start from (moving from another framework):
                messages in OpenAI's chat format, recorded in ``run_started`` as imported.
                The model sees them before the task; what the assistant and tools said
                there is untrusted (``Policy.untrusted_arguments`` judges arguments copied
                from it). System messages are left out.
            conversation_budget: limits of all the conversation's turns together (steps,
                tokens, cost, deadline); ``budget`` is each turn's.

        Raises:
            ConfigurationError: bad scope, empty task, a history not in the chat format.
            LimitExceededError: an invalid ``run_id`` or ``tenant``.
            StoreError: the store failed; nothing after the last durable event happened.
        """
        return await self._ops.run(
            NewRun(task, scope, budget, run_id, metadata, tenant, history, conversation_budget)
        )

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
        return await self._ops.submit(NewRun(task, scope, budget, run_id, metadata, tenant))

    async def advance(
        self, run_id: str, *, max_steps: int | None = None, max_seconds: float | None = None
    ) -> RunResult[OutputT]:
        """One worker's shift on a run that is ``running``: for queue workers.

        Advances at most ``max_steps`` steps and ``max_seconds`` seconds (checked between
        steps: a shift never stops inside a step), then hands the run back with status
        ``running`` if it has not stopped; the worker enqueues it again. A run taken over
        from a worker that died or stalled mid-shift counts as a recovery (dead-lettered
        after ``Policy.dead_letter_after`` in a row without progress). A run whose tools
        differ from this worker's (a rolling deploy) stops as ``needs_attention`` naming the
        difference, instead of bouncing between workers. A run that is not ``running``
        (finished, paused, waiting for a person) is returned as it is.

        Raises:
            RunBusyError: another worker holds the run (its message is then a duplicate).
            RunNotFoundError: no such run.
        """
        check_run_id(run_id)
        return await self._ops.advance(run_id, Shift(max_steps, max_seconds))

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
            ConfigurationError: ``by`` names nobody (empty once normalised).
            LimitExceededError: ``run_id`` is not a valid run id, or ``by`` cannot be
                recorded.
        """
        check_run_id(run_id)
        by = None if by is None else person(by, "resume")
        return await self._ops.resume(run_id, budget, by, accept_tool_changes)

    async def reply(
        self,
        run_id: str,
        message: str,
        *,
        key: str | None = None,
        budget: Budget | None = None,
        wait_s: float = 60.0,
    ) -> RunResult[OutputT]:
        """The user's next message: a new turn of the run's conversation, advanced like
        :meth:`run` until it completes, stops or waits for a person.

        The model sees everything before the message (earlier turns, tool results,
        approvals) and answers it; the run's answer, typed output and ``result.turns`` are
        the new turn's. Every rule of the run holds across turns: its scope, bound
        parameters, provenance (untrusted text read in one turn is untrusted in the
        next), approvals, and the transcript's chain. A plan approved in an earlier turn
        does not cover this one's writes.

        A run takes a message when its turn has ended: ``completed``, ``awaiting_input``
        (the message answers the model's question) or ``budget_exhausted`` (the new turn
        has a budget of its own). Two replies at once are recorded one after the other,
        each with a turn of its own: a reply to a run whose turn is being advanced waits
        for it to end (up to ``wait_s``).

        Args:
            message: what the user said (trusted, like the task).
            key: an idempotency key (a request id): a second reply with the same key is
                refused, so a retried request does not append the message twice.
            budget: this turn's budget (default: the run's, without its deadline).
            wait_s: how long to wait for a turn in progress (another reply's, a queue
                worker's) before giving up.

        Raises:
            NotAcceptingRepliesError: the run was cancelled or compensated (it takes no
                more messages), waits for an approver or an operator, failed, or its turn
                did not end within ``wait_s`` (or its process died: resume it first).
            DuplicateReplyError: ``key`` began a turn already (``.turn`` says which).
            RunBusyError: another worker held the run for longer than ``wait_s``.
            RunNotFoundError: no such run.
            OutputTypeChangedError: the run was started with another output type.
            ConfigurationError: an empty message.
            LimitExceededError: an invalid ``run_id``, ``key`` or message.
        """
        check_run_id(run_id)
        return await self._ops.reply(run_id, commands.Reply(message, key, budget), wait_s)

    # -- reading runs -------------------------------------------------------------------------

    async def result(self, run_id: str) -> RunResult[OutputT]:
        """The run's current result, without advancing it.

        Raises:
            RunNotFoundError: no such run.
            LimitExceededError: ``run_id`` is not a valid run id.
            OutputTypeChangedError: the run completed with an answer that is not of this
                agent's output type.
        """
        check_run_id(run_id)
        return await self._ops.result(run_id)

    async def transcript(self, run_id: str) -> list[Event]:
        """Every event of the run, in order."""
        check_run_id(run_id)
        return await self._ops.transcript(run_id)

    async def close(self) -> None:
        """Close the store if the agent opened it."""
        await self._ops.close()

    # -- what people decide -------------------------------------------------------------------

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
        by = person(by, "resolve")
        check_text(reason or "", "resolution's reason")
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
        return await self._ops.resolve(
            run_id,
            by=by,
            decision=chosen[0],
            result=result,
            reason=reason,
            accept_tool_changes=accept_tool_changes,
        )

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
        by = person(by, "confirm")
        check_text(reason or "", "confirmation's reason")
        answer = commands.Answer(approve, by, reason, args, step, args_hash, accept_tool_changes)
        return await self._ops.confirm(run_id, answer)

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

        An undo is governed like the call it undoes: ``Policy.authorize`` is asked about
        each (``pending.kind == "undo"``), and an undo of a call whose tool needs N
        approvals (``Policy.approvals``) needs N different people, each calling
        ``compensate`` (until then the run stops as ``needs_attention`` saying who
        approved). A completed run is undone only with ``Policy(compensate_completed=True)``.

        Args:
            by: who asks (recorded on each undo).
            settle: a person's word, by call id, on a call or an undo whose outcome is
                unknown: ``"done"`` (it happened) or ``"not_done"`` (it did not).

        Raises:
            RunError: the run is running or waiting for a person (cancel it first), it is
                completed and this agent's ``Policy.compensate_completed`` is not set, or
                ``settle`` names a call with nothing in doubt.
            NotAuthorizedError: ``Policy.authorize`` refuses ``by`` for an undo still to
                do (nothing recorded).
            AlreadyApprovedError: ``by`` approved every undo that waits for more people
                already (nothing recorded).
            RunBusyError: another worker holds the run.
            RunNotFoundError: no such run.
            ConfigurationError: ``by`` is empty, or the run id is invalid.
        """
        check_run_id(run_id)
        by = person(by, "compensate")
        for call_id, word in (settle or {}).items():
            if word not in ("done", "not_done"):
                raise ConfigurationError(
                    f"settle[{call_id!r}] must be 'done' or 'not_done', got {word!r}"
                )
        return await self._ops.compensate(run_id, by=by, settle=settle or {})

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
        return await self._ops.expire_approvals(limit=limit)

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
        by = person(by, "cancel")
        check_text(reason or "", "cancellation's reason")
        return await self._ops.cancel(run_id, by=by, reason=reason)

    # -- typed extraction with the agent's model (see ``agentcore._extract``) ------------------

    async def extract(
        self,
        output: type[T],
        text: str,
        *,
        model: ModelSpec | None = None,
        instructions: str | None = None,
        max_reasks: int = 2,
        max_output_tokens: int | None = None,
    ) -> T:
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
        adapter = resolve_route(model)[0] if model is not None else self.route[0]
        return await extract_with(
            adapter,
            output,
            text,
            instructions=instructions,
            max_reasks=max_reasks,
            max_output_tokens=max_output_tokens,
        )

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
    stream_confirm = StreamTwin(confirm)
    """:meth:`confirm`, streamed like :meth:`Agent.stream`."""
    confirm_sync = SyncTwin(confirm)
    """:meth:`confirm` for code without an event loop."""
    stream_reply = StreamTwin(reply)
    """:meth:`reply`, streamed like :meth:`Agent.stream`: a chat front end shows the
    turn's thought and answer as the model writes them."""
    reply_sync = SyncTwin(reply)
    """:meth:`reply` for code without an event loop."""
    extract_sync = SyncTwin(extract)
    """:meth:`extract` for code without an event loop (a sync tool runs in a thread
    without one)."""
