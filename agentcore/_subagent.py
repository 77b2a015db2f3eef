"""Sub-agents: an Agent as a tool of another (``Agent.as_tool``).

The child is a run of its own, with an id derived from the parent's call (its idempotency
key and the tool's name), so a parent that is resumed, retried or taken over re-attaches
to the same child run and never starts a second one. The child's transcript keeps the
child's at-most-once promise; the parent keeps its own with the same machinery as any
tool whose outcome can be lost:

- the tool is non-idempotent with ``reconcile``: a parent that lost the call's outcome (a
  crash) asks the child's run; a completed child's answer is adopted, and otherwise the
  call runs again, which re-attaches to the child and resumes it;
- a child that another worker is advancing right now (it holds the child's lease) is a
  call in progress: the parent waits for it, up to the parent's ``lost_call_wait_s``, and
  adopts its outcome; still running after that, the parent's call is lost (the parent
  stops as ``needs_attention`` saying so, and a later ``resume`` adopts the child's
  answer). It is never a failure the parent's model reads, which would invite a second
  child;
- a child that stops for a person (a call waiting for approval, a lost call of its own)
  makes the parent's call lost too: the parent stops as ``needs_attention`` with the
  child's run and what it waits for. A call waiting for approval in the child is the
  parent's ``pending`` (:func:`child_waiting`; ``PendingCall.run_id`` names the child run),
  and ``confirm`` of the parent answers it in the child, bound to its step and args hash,
  then resumes the parent, which adopts the child's answer; a lost call of the child is
  settled in the child, then ``resume`` of the parent adopts its answer.

A run tree is governed as one. A parent binds each sub-agent it is given
(:func:`bind_subagents`, at construction and in ``Agent.configured``): the child runs in
the parent's store, under the parent's approval rules and ``authorize`` as well as its own
(the larger count of people per rule; both must authorise) and the stricter of their
rules on untrusted text. A child's tools that take values bound to the run (``FromRun``)
are checked when the parent's run starts, as the parent's own are.

The child runs with its own scope and tools, its budget carved from what the parent has
left (tokens, cost, deadline, and tool calls and steps less those of the children the
parent's earlier calls started; none left, no child starts), its tenant and a ``parent``
link in its metadata; its model usage is recorded in the parent (as ``model_called``
events with role ``child``), so it counts in both. Its effect towards the parent is the
strongest effect among its tools: a child that may delete is a destructive tool. Its
answer is untrusted output (``@tool(output="untrusted")``) when the child can read
untrusted text (a tool in its scope, a sub-agent of its own or a context provider whose
output is untrusted): the child's answer may quote what a third party wrote.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agentcore.contracts import MAX_RUN_ID_CHARS, Effect, Usage
from agentcore.contracts.errors import ConfigurationError, RunNotFoundError, ToolOutcomeUnknownError

from ._configuration import Configuration
from ._extract import LoggedExtraction, current_log
from ._observability import get_logger
from ._run import UntrustedContext
from ._run._tool_calls import GUARD_POLL_S
from ._state import PendingCall, RunResult, RunState, RunStatus, RunUsage
from ._tree import PARENT_KEY, root_of
from .events import ToolStarted
from .policy import Budget, Policy
from .tools import Tool, ToolContext

if TYPE_CHECKING:
    from .approvals import ApprovalRequest, Authorize, OnPending
    from .approvals import PendingCall as Pending
    from .stores import TranscriptStore

__all__ = ["PARENT_KEY", "SubagentTool", "bind_subagents", "child_run_id", "subagent_tool"]

_RANK: dict[str, int] = {"read": 0, "write": 1, "destructive": 2}


class TreeAgent(Protocol):
    """An agent in a run tree, a parent or a sub-agent, as this module uses it
    (:class:`~agentcore.agent.Agent` is one; ``agent`` imports this module, so an agent is
    named here by what it does). Its settings are read from ``_config``
    (:func:`_settings`): the agent's own settings are descriptors over it, which no
    Protocol member matches."""

    @property
    def _config(self) -> Configuration: ...
    @property
    def store(self) -> TranscriptStore: ...
    def _reconfigure(self, config: Configuration, store: TranscriptStore | None) -> None: ...
    def _share_store(self, store: TranscriptStore) -> None: ...
    def _governed(self, policy: Policy) -> TreeAgent: ...
    def resolve_scope(self, scope: Sequence[str] | None) -> tuple[str, ...]: ...
    async def run(
        self,
        task: str,
        *,
        scope: Sequence[str] | None = None,
        budget: Budget | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,  # Any: JSON values recorded as given
        tenant: str | None = None,
    ) -> RunResult[Any]: ...  # Any: the sub-agent's output type
    async def resume(
        self,
        run_id: str,
        *,
        budget: Budget | None = None,
        by: str | None = None,
        accept_tool_changes: bool = False,
    ) -> RunResult[Any]: ...  # Any: as above
    async def result(self, run_id: str) -> RunResult[Any]: ...  # Any: as above
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
    ) -> RunResult[Any]: ...  # Any: as above


def _settings(agent: TreeAgent) -> Configuration:
    """``agent``'s settings (what ``agent.tools``, ``agent.policy``... read)."""
    return agent._config  # pyright: ignore[reportPrivateUsage]  # the settings' home


_STRICTNESS: dict[str, int] = {"allow": 0, "confirm": 1, "deny": 2}


def child_run_id(idempotency_key: str, name: str) -> str:
    """The child run's id for the parent's call ``idempotency_key`` of tool ``name``: the
    same every time the call runs again."""
    plain = f"{idempotency_key}/{name}"
    if len(plain) <= MAX_RUN_ID_CHARS:
        return plain
    return "child-" + hashlib.sha256(plain.encode()).hexdigest()


def subagent_tool(
    child: TreeAgent,
    name: str,
    description: str,
    *,
    scope: list[str] | None,
    budget: Budget | None,
) -> SubagentTool:
    """The tool that runs ``child`` (see the module's text).

    Raises:
        ConfigurationError: the child has no tools in ``scope``.
    """
    in_scope = child.resolve_scope(scope)
    if not in_scope:
        raise ConfigurationError(f"Sub-agent {name!r} has no tools in its scope.")
    return SubagentTool(child, name, description, scope, budget, in_scope=in_scope)


class SubagentTool(Tool):
    """A tool that runs a sub-agent (``Agent.as_tool``); :attr:`child` is that agent, in
    the tool a parent holds bound to the parent (its store and governance)."""

    runs_agent = True

    def __init__(
        self,
        child: TreeAgent,
        name: str,
        description: str,
        scope: list[str] | None,
        budget: Budget | None,
        *,
        in_scope: tuple[str, ...],
        parent: TreeAgent | None = None,
        tree_store: Callable[[], TranscriptStore] | None = None,
        origin: SubagentTool | None = None,
    ) -> None:
        self._child = child
        self.scope = scope
        self.budget = budget
        self.description_text = description
        self.in_scope = in_scope
        self.parent = parent
        """The agent this tool was bound to (``None``: not bound, as ``as_tool`` made it)."""
        self.origin: SubagentTool = origin or self
        """The tool as ``as_tool`` made it, before any parent bound it."""
        self._tree_store = tree_store
        effect: Effect = "read"
        for t in in_scope:
            if _RANK[_settings(child).tools[t].spec.effect] > _RANK[effect]:
                effect = _settings(child).tools[t].spec.effect

        async def run_child(task: str, ctx: ToolContext) -> str | None:
            return await self._run(task, ctx)

        # The description as given (none of its lines read as a docstring section).
        run_child.__doc__ = """
        Args:
            task: what the sub-agent is to do, in words it can act on alone.
        """
        super().__init__(
            run_child,
            effect=effect,
            idempotent=False,
            timeout=None,
            reconcile=self._answer_of,
            name=name,
            description=inspect.cleandoc(description),
            output="untrusted" if _reads_untrusted(child, in_scope) else "trusted",
        )

    @property
    def child(self) -> TreeAgent:
        """The sub-agent; bound to a parent, it uses the run tree's one store."""
        child = self._child
        if self._tree_store is not None:
            child._share_store(self._tree_store())  # pyright: ignore[reportPrivateUsage]  # not the child's to close
        return child

    @property
    def child_tools(self) -> dict[str, Tool]:
        """The sub-agent's tools (bound to the parent, when this tool is)."""
        return _settings(self._child).tools

    def bound(
        self,
        parent: TreeAgent,
        *,
        check_store: bool = True,
        tree_store: Callable[[], TranscriptStore] | None = None,
    ) -> SubagentTool:
        """This sub-agent as a tool of ``parent``: its runs in the parent's store (or
        ``tree_store``'s: a sub-agent of a sub-agent uses the root's), under the parent's
        governance as well as its own (see the module's text).

        Raises:
            ConfigurationError: the sub-agent was given a store of its own that is not its
                parent's (``check_store``).
        """
        origin = self.origin
        child = origin._child
        if check_store:
            _check_same_store(origin.name, child, parent)
        root = tree_store or (lambda: parent.store)
        policy = governed_policy(_settings(child).policy, _settings(parent).policy)
        governed = child._governed(policy)  # pyright: ignore[reportPrivateUsage]  # its store: set on first use
        tool = SubagentTool(
            governed,
            origin.name,
            origin.description_text,
            origin.scope,
            origin.budget,
            in_scope=origin.in_scope,
            parent=parent,
            tree_store=root,
            origin=origin,
        )
        tools = {
            name: t.origin.bound(governed, check_store=False, tree_store=root)
            if isinstance(t, SubagentTool)
            else t
            for name, t in _settings(child).tools.items()
        }
        # The parent's quotas hold in the child's runs too (a run tree spends as one), on the
        # parent's clock; a quota of the child's own with the same name is the parent's.
        above = _settings(parent)
        named = {q.name for q in above.quotas}
        quotas = (*above.quotas, *(q for q in _settings(child).quotas if q.name not in named))
        # As setting ``governed.tools`` would (no store is open yet: it is set on first use).
        governed._reconfigure(  # pyright: ignore[reportPrivateUsage]
            replace(_settings(governed), tools=tools, quotas=quotas, clock=above.clock), None
        )
        return tool

    @property
    def untrusted_sources(self) -> list[str]:
        """What the sub-agent can read that is untrusted (its tools' names, ``context``),
        named where an argument copied from its answer is reported."""
        return _untrusted_sources(self._child, self.in_scope)

    def bound_args(
        self, tenant: str | None, metadata: Mapping[str, Any]
    ) -> dict[str, Any]:  # Any: JSON values from the run's record
        """Nothing of its own is bound to the run; checks that the child's tools find what
        they take from the run (``FromRun``) in the parent's tenant and metadata, which the
        child's run is given, so a run that lacks one is refused when it starts.

        Raises:
            ConfigurationError: a tool of the child (or of its sub-agents) takes a value
                the run does not carry.
        """
        child = self._child
        for name in self.in_scope:
            try:
                _settings(child).tools[name].bound_args(tenant, metadata)
            except ConfigurationError as exc:
                raise ConfigurationError(f"Sub-agent {self.name!r}: {exc}") from exc
        return {}

    async def _answer_of(self, key: str) -> object | None:
        """``reconcile``: the child's answer once it completed; ``None`` when there is no
        child run or it stopped another way (the call runs again: it re-attaches).

        Raises:
            ToolOutcomeUnknownError: (``settled_elsewhere``) the child waits for a person:
                what settles the parent's call is that person's answer in the child, not
                a person's word on the parent's call.
        """
        run_id = child_run_id(key, self.name)
        try:
            found = await self.child.result(run_id)
        except RunNotFoundError:
            return None
        if found.status is RunStatus.COMPLETED:
            return found.answer
        if found.status in (RunStatus.AWAITING_CONFIRMATION, RunStatus.NEEDS_ATTENTION):
            raise ToolOutcomeUnknownError(
                _child_stopped_reason(self.name, found), settled_elsewhere=True
            )
        return None

    async def _run(self, task: str, ctx: ToolContext) -> str | None:
        child, name = self.child, self.name
        run_id = child_run_id(ctx.idempotency_key, name)
        before = await _usage_of(child, run_id)
        try:
            result = await self._attach(child, run_id, task, ctx)
            if result.status is RunStatus.RUNNING:
                result = await self._wait_for(child, result)
        finally:
            _log_usage(name, before, await _usage_of(child, run_id))
        if result.status is RunStatus.COMPLETED:
            return result.answer
        if result.status is RunStatus.RUNNING:
            raise ToolOutcomeUnknownError(
                f"sub-agent {name!r} (run {run_id}) is still running in another worker "
                f"{self._wait_s():g}s after this call began waiting for it; resume this run "
                "once it has stopped: the sub-agent's answer is taken from its run",
                settled_elsewhere=True,
            )
        if result.status in (RunStatus.AWAITING_CONFIRMATION, RunStatus.NEEDS_ATTENTION):
            raise ToolOutcomeUnknownError(
                _child_stopped_reason(name, result), settled_elsewhere=True
            )
        raise RuntimeError(  # failed, cancelled, out of budget: the parent's model decides
            f"sub-agent {name!r} (run {run_id}) stopped as {result.status.value}: "
            f"{result.reason or 'no reason given'}"
        )

    def _wait_s(self) -> float:
        """How long a call waits for its child that another worker is advancing."""
        return _settings(self.parent or self._child).lost_call_wait_s

    async def _wait_for(self, child: TreeAgent, result: RunResult) -> RunResult:
        """Wait while another worker advances the child (bounded by :meth:`_wait_s`),
        taking it over when that worker is gone; the child's result when it stopped, or
        its last (``running``) one."""
        deadline = time.monotonic() + self._wait_s()
        get_logger().warning(
            "subagent_running_elsewhere",
            run_id=result.run_id,
            tool=self.name,
            wait_s=self._wait_s(),
        )
        while result.status is RunStatus.RUNNING and time.monotonic() < deadline:
            await asyncio.sleep(min(GUARD_POLL_S, max(0.0, deadline - time.monotonic())))
            if _settings(child).queue is None:  # a worker that died leaves it to this one
                result = await child.resume(result.run_id)
            else:  # a queue's worker has it
                result = await child.result(result.run_id)
        return result

    async def _attach(
        self, child: TreeAgent, run_id: str, task: str, ctx: ToolContext
    ) -> RunResult:
        """Start the child run, or continue the one this call started before.

        Raises:
            RuntimeError: the run tree has no tool calls or steps left for a new child.
        """
        try:
            found = await child.result(run_id)
        except RunNotFoundError:
            root = root_of(ctx.run_id, ctx.metadata)
            parent = {"run_id": ctx.run_id, "call_id": ctx.call_id, "step": ctx.step}
            parent["root"] = root
            metadata: Mapping[str, Any] = {**ctx.metadata, PARENT_KEY: parent}  # Any: JSON
            budget = await self._carved(ctx)
            return await child.run(
                task,
                scope=self.scope,
                budget=budget,
                run_id=run_id,
                metadata=metadata,
                tenant=ctx.tenant,
            )
        if found.status is RunStatus.RUNNING:  # its worker (this call, before) died: go on
            return await child.resume(run_id)
        return found

    async def _carved(self, ctx: ToolContext) -> Budget:
        """The child's budget: its own (or a default), cut to what the parent's run tree
        has left: the parent's tokens, cost and deadline, and its tool calls and steps less
        those of the children its earlier calls started.

        Raises:
            RuntimeError: no tool call or no step is left for the child.
        """
        own = self.budget or Budget()
        left = ctx.budget_left
        if left is None:
            return own

        def least(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else min(a, b)

        calls_left, steps_left = await self._tree_left(ctx)
        for what, count in (("tool calls", calls_left), ("steps", steps_left)):
            if count is not None and count < 1:
                raise RuntimeError(
                    f"sub-agent {self.name!r} did not run: this run has no {what} left for "
                    "it (a sub-agent's tool calls and steps count in this run's budget); "
                    "finish with what you have"
                )
        tokens = least(own.max_tokens, left.max_tokens)
        calls = least(own.max_tool_calls, calls_left)
        steps = least(own.max_steps, steps_left)
        return replace(
            own,
            max_steps=None if steps is None else int(steps),
            max_tokens=None if tokens is None else max(1, int(tokens)),
            max_tool_calls=None if calls is None else int(calls),
            max_cost=least(own.max_cost, left.max_cost),
            deadline=least(own.deadline, left.deadline),
        )

    async def _tree_left(self, ctx: ToolContext) -> tuple[int | None, int | None]:
        """The tool calls and steps the parent's budget has left (``None``: no limit),
        counting the parent's own and those of the children of its earlier calls."""
        parent = self.parent
        if parent is None:  # not bound to a parent: what the call was told
            left = ctx.budget_left
            return (None if left is None else left.max_tool_calls), None
        events = await parent.store.load(ctx.run_id)
        state = RunState(ctx.run_id)
        children: dict[str, SubagentTool] = {}
        for event in events:
            state.apply(event)
            if not isinstance(event, ToolStarted) or event.idempotency_key == ctx.idempotency_key:
                continue
            tool = _settings(parent).tools.get(event.tool)
            if isinstance(tool, SubagentTool):
                children[child_run_id(event.idempotency_key, event.tool)] = tool
        calls, steps = state.tool_calls, state.steps
        for run_id, tool in children.items():
            try:
                used = (await tool.child.result(run_id)).usage
            except RunNotFoundError:  # the call never got as far as starting it
                continue
            calls, steps = calls + used.tool_calls, steps + used.steps
        budget = state.budget
        return (
            None if budget.max_tool_calls is None else budget.max_tool_calls - calls,
            None if budget.max_steps is None else budget.max_steps - steps,
        )


def bind_subagents(agent: TreeAgent, *, check_store: bool = True) -> dict[str, Tool]:
    """``agent``'s tools with each sub-agent bound to it (:meth:`SubagentTool.bound`).

    Raises:
        ConfigurationError: a sub-agent was given a store of its own that is not
            ``agent``'s (``check_store``).
    """
    return {
        name: t.bound(agent, check_store=check_store) if isinstance(t, SubagentTool) else t
        for name, t in _settings(agent).tools.items()
    }


def governed_policy(child: Policy, parent: Policy) -> Policy:
    """The policy a child's runs record under ``parent``: every approval rule of both (the
    larger count of people where both name one), both ``authorize`` hooks (each must
    allow), both ``on_pending`` hooks (each is told), the stricter rules on untrusted
    text."""
    approvals = dict(child.approvals)
    for key, count in parent.approvals.items():
        approvals[key] = max(approvals.get(key, 0), count)
    untrusted_arguments = max(
        child.untrusted_arguments, parent.untrusted_arguments, key=_STRICTNESS.__getitem__
    )
    writes_after: Literal["confirm", "allow"] = (
        "confirm"
        if "confirm" in (child.writes_after_untrusted, parent.writes_after_untrusted)
        else "allow"
    )
    return replace(
        child,
        approvals=approvals,
        authorize=_both(parent.authorize, child.authorize),
        on_pending=_all_told(parent.on_pending, child.on_pending),
        untrusted_arguments=untrusted_arguments,
        writes_after_untrusted=writes_after,
    )


def _both(first: Authorize | None, second: Authorize | None) -> Authorize | None:
    if first is None or second is None or first is second:
        return first or second

    def authorize(by: str, pending: Pending) -> bool:
        return first(by, pending) and second(by, pending)

    return authorize


def _all_told(first: OnPending | None, second: OnPending | None) -> OnPending | None:
    if first is None or second is None or first is second:
        return first or second

    async def on_pending(request: ApprovalRequest) -> None:
        for hook in (first, second):
            told = hook(request)
            if inspect.isawaitable(told):
                await told

    return on_pending


def _check_same_store(name: str, child: TreeAgent, parent: TreeAgent) -> None:
    """A sub-agent given a store of its own must be given its parent's.

    Raises:
        ConfigurationError: it is another.
    """
    own = _settings(child).store
    theirs = _settings(parent).store
    if own is None or own is theirs or (isinstance(own, str) and own == theirs):
        return
    raise ConfigurationError(
        f"Sub-agent {name!r} was given a store of its own ({_named(own)}) and its parent "
        f"another ({_named(theirs)}): a run tree lives in one store. Leave the sub-agent's "
        "store unset (it then uses its parent's), or give both the same store."
    )


def _named(store: object) -> str:
    if store is None:
        return "the default store"
    return repr(store) if isinstance(store, str) else type(store).__name__


def _reads_untrusted(child: TreeAgent, in_scope: tuple[str, ...]) -> bool:
    """Whether the child can read untrusted text: a tool in scope whose output is
    untrusted (a sub-agent's, recursively), or an untrusted context provider."""
    return bool(_untrusted_sources(child, in_scope))


def _untrusted_sources(child: TreeAgent, in_scope: tuple[str, ...]) -> list[str]:
    """What the child reads that is untrusted: its tools in scope whose output is, and
    ``context`` for an untrusted context provider."""
    found = [t for t in in_scope if _settings(child).tools[t].output == "untrusted"]
    if any(isinstance(p, UntrustedContext) for p in _settings(child).context):
        found.append("context")
    return found


async def child_waiting(
    tools: Mapping[str, Tool], state: RunState
) -> tuple[TreeAgent, PendingCall] | None:
    """The sub-agent and its waiting call when ``state``'s run stopped because a child run
    waits for a person (``PendingCall.run_id`` names the child run); else ``None``."""
    call = state.call
    if state.status is not RunStatus.NEEDS_ATTENTION or call is None or call.started is None:
        return None
    tool = tools.get(call.started.tool)
    if not isinstance(tool, SubagentTool):
        return None
    child = tool.child
    run_id = child_run_id(call.started.idempotency_key, call.started.tool)
    try:
        found = await child.result(run_id)
    except RunNotFoundError:
        return None
    if found.pending is None:
        return None
    return child, replace(found.pending, run_id=run_id)


async def _usage_of(child: TreeAgent, run_id: str) -> RunUsage:
    try:
        return (await child.result(run_id)).usage
    except RunNotFoundError:
        return RunUsage()


def _log_usage(name: str, before: RunUsage, after: RunUsage) -> None:
    """Record what the child used during this call in the parent (as extractions are):
    its tokens and cost, and its tool calls and steps, which count in the parent's
    budget."""
    log = current_log()
    spent = Usage(
        after.input_tokens - before.input_tokens,
        after.output_tokens - before.output_tokens,
        after.cached_input_tokens - before.cached_input_tokens,
        None if after.cost is None else after.cost - (before.cost or 0.0),
    )
    calls, steps = after.tool_calls - before.tool_calls, after.steps - before.steps
    if log is None or not (
        spent.input_tokens or spent.output_tokens or spent.cost or calls or steps
    ):
        return
    log.entries.append(
        LoggedExtraction(
            f"agent:{name}", spent, 1, 0.0, role="child", tool_calls=calls, steps=steps
        )
    )


def _child_stopped_reason(name: str, result: RunResult) -> str:
    """Why the parent's call has no outcome while its child run ``result`` waits for a
    person, and what settles it (the ``ToolOutcomeUnknownError`` the parent records)."""
    pending = result.pending
    what = result.reason or result.status.value
    if pending is not None:
        what = (
            f"its call {pending.tool or 'plan'} at step {pending.step} waits for a person "
            f"(args hash {pending.args_hash}): agentcore confirm {result.run_id} --approve "
            f"--step {pending.step} --args-hash {pending.args_hash}"
        )
    return (
        f"sub-agent {name!r} (run {result.run_id}) stopped as {result.status.value}: {what}; "
        "settle it, then resume this run: the sub-agent's answer is taken from its run"
    )
