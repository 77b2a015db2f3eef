"""Sub-agents: an Agent as a tool of another (``Agent.as_tool``).

The child is a run of its own, with an id derived from the parent's call (its idempotency
key and the tool's name), so a parent that is resumed, retried or taken over re-attaches
to the same child run and never starts a second one. The child's transcript keeps the
child's at-most-once promise; the parent keeps its own with the same machinery as any
tool whose outcome can be lost:

- the tool is non-idempotent with ``reconcile``: a parent that lost the call's outcome (a
  crash) asks the child's run; a completed child's answer is adopted, and otherwise the
  call runs again, which re-attaches to the child and resumes it;
- a child that stops for a person (a call waiting for approval, a lost call of its own)
  makes the parent's call lost too: the parent stops as ``needs_attention`` with the
  child's run and what it waits for. A call waiting for approval in the child is the
  parent's ``pending`` (:func:`child_waiting`; ``PendingCall.run_id`` names the child run),
  and ``confirm`` of the parent answers it in the child, bound to its step and args hash,
  then resumes the parent, which adopts the child's answer; a lost call of the child is
  settled in the child, then ``resume`` of the parent adopts its answer.

The child runs with its own scope and tools, its budget carved from what the parent has
left (tokens, cost, tool calls, deadline), its tenant and a ``parent`` link in its
metadata; its model usage is recorded in the parent (as ``model_called`` events with role
``child``), so it counts in both. Its effect towards the parent is the strongest effect
among its tools: a child that may delete is a destructive tool.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentcore.contracts import MAX_RUN_ID_CHARS, Effect, Usage
from agentcore.contracts.errors import ConfigurationError, RunNotFoundError, ToolOutcomeUnknownError

from ._extract import LoggedExtraction, current_log
from ._state import PendingCall, RunResult, RunState, RunStatus
from .policy import Budget
from .tools import Tool, ToolContext

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["PARENT_KEY", "child_run_id", "subagent_tool"]

PARENT_KEY = "agentcore.parent"
"""The child's metadata key naming its parent: ``{"run_id": ..., "call_id": ..., "step":
...}``; ``agentcore runs --search PARENT_RUN_ID`` lists a run's children."""

_RANK: dict[str, int] = {"read": 0, "write": 1, "destructive": 2}


def child_run_id(idempotency_key: str, name: str) -> str:
    """The child run's id for the parent's call ``idempotency_key`` of tool ``name``: the
    same every time the call runs again."""
    plain = f"{idempotency_key}/{name}"
    if len(plain) <= MAX_RUN_ID_CHARS:
        return plain
    return "child-" + hashlib.sha256(plain.encode()).hexdigest()


def subagent_tool(
    child: Agent[Any],
    name: str,
    description: str,
    *,
    scope: list[str] | None,
    budget: Budget | None,
) -> Tool:
    """The tool that runs ``child`` (see the module's text).

    Raises:
        ConfigurationError: the child has no tools in ``scope``.
    """
    in_scope = child.resolve_scope(scope)
    if not in_scope:
        raise ConfigurationError(f"Sub-agent {name!r} has no tools in its scope.")
    effect: Effect = "read"
    for t in in_scope:
        if _RANK[child.tools[t].spec.effect] > _RANK[effect]:
            effect = child.tools[t].spec.effect

    async def answer_of(key: str) -> object | None:
        """``reconcile``: the child's answer once it completed, else ``None``."""
        try:
            found = await child.result(child_run_id(key, name))
        except RunNotFoundError:
            return None
        return found.answer if found.status is RunStatus.COMPLETED else None

    async def run_child(task: str, ctx: ToolContext) -> str | None:
        run_id = child_run_id(ctx.idempotency_key, name)
        before = await _usage_of(child, run_id)
        try:
            result = await _attach(child, run_id, task, ctx, scope, _carved(budget, ctx))
        finally:
            _log_usage(name, before, await _usage_of(child, run_id))
        if result.status is RunStatus.COMPLETED:
            return result.answer
        if result.status in (RunStatus.AWAITING_CONFIRMATION, RunStatus.NEEDS_ATTENTION):
            raise ToolOutcomeUnknownError(_waiting(name, result))
        raise RuntimeError(  # failed, cancelled, out of budget: the parent's model decides
            f"sub-agent {name!r} (run {run_id}) stopped as {result.status.value}: "
            f"{result.reason or 'no reason given'}"
        )

    run_child.__doc__ = f"""{description}

    Args:
        task: what the sub-agent is to do, in words it can act on alone.
    """
    return SubagentTool(
        child,
        run_child,
        effect=effect,
        idempotent=False,
        timeout=None,
        reconcile=answer_of,
        name=name,
        description=None,
    )


class SubagentTool(Tool):
    """A tool that runs a sub-agent (``Agent.as_tool``); :attr:`child` is that agent."""

    def __init__(self, child: Agent[Any], *args: Any, **kwargs: Any) -> None:  # Any: Tool's
        super().__init__(*args, **kwargs)
        self.child = child


async def child_waiting(
    tools: Mapping[str, Tool], state: RunState
) -> tuple[Agent[Any], PendingCall] | None:
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


async def _attach(
    child: Agent[Any],
    run_id: str,
    task: str,
    ctx: ToolContext,
    scope: list[str] | None,
    budget: Budget,
) -> RunResult:
    """Start the child run, or continue the one this call started before."""
    try:
        found = await child.result(run_id)
    except RunNotFoundError:
        parent = {"run_id": ctx.run_id, "call_id": ctx.call_id, "step": ctx.step}
        metadata: Mapping[str, Any] = {**ctx.metadata, PARENT_KEY: parent}  # Any: JSON
        return await child.run(
            task, scope=scope, budget=budget, run_id=run_id, metadata=metadata, tenant=ctx.tenant
        )
    if found.status is RunStatus.RUNNING:  # its worker (this call, before) died: go on
        return await child.resume(run_id)
    return found


def _carved(budget: Budget | None, ctx: ToolContext) -> Budget:
    """The child's budget: its own (or a default), cut to what the parent has left."""
    own = budget or Budget()
    left = ctx.budget_left
    if left is None:
        return own

    def least(a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else min(a, b)

    tokens = least(own.max_tokens, left.max_tokens)
    calls = least(own.max_tool_calls, left.max_tool_calls)
    return replace(
        own,
        max_tokens=None if tokens is None else max(1, int(tokens)),
        max_tool_calls=None if calls is None else max(1, int(calls)),
        max_cost=least(own.max_cost, left.max_cost),
        deadline=least(own.deadline, left.deadline),
    )


async def _usage_of(child: Agent[Any], run_id: str) -> Usage:
    try:
        u = (await child.result(run_id)).usage
    except RunNotFoundError:
        return Usage()
    return Usage(u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cost)


def _log_usage(name: str, before: Usage, after: Usage) -> None:
    """Record what the child used during this call in the parent (as extractions are)."""
    log = current_log()
    spent = Usage(
        after.input_tokens - before.input_tokens,
        after.output_tokens - before.output_tokens,
        after.cached_input_tokens - before.cached_input_tokens,
        None if after.cost is None else after.cost - (before.cost or 0.0),
    )
    if log is None or (spent.input_tokens == 0 and spent.output_tokens == 0 and not spent.cost):
        return
    log.entries.append(LoggedExtraction(f"agent:{name}", spent, 1, 0.0, role="child"))


def _waiting(name: str, result: RunResult) -> str:
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
