"""Sub-agents through the public API: an Agent as a tool of another.

The child is a run of its own, linked to the parent's call, re-attached (never started
twice) when the parent's call runs again; its budget is carved from the parent's, its usage
counts in both, its effect is its strongest tool's; a child that waits for a person stops
the parent until the person settled it. Real processes killed mid-child:
tests/faults/test_subagents.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from agentcore import Agent, Budget, Policy, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import ConfigurationError
from agentcore.events import ModelCalled, RunStarted, ToolFinished
from agentcore.stores import MemoryStore


@tool(effect="read")
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"{order_id} shipped"


def finishing(answer: str, first: dict[str, Any] | None = None) -> ScriptedModel:
    """Make ``first`` (when given), then finish with ``answer`` plus what it returned."""

    def step(messages: Sequence[Message]) -> dict[str, Any]:
        said = [m.content for m in messages if m.role == "user"]
        done = [s for s in said if "returned" in s or "failed" in s]
        if first is None or done:
            tail = f" ({done[-1][:60]})" if done else ""
            return {"type": "finish", "thought": "done", "answer": answer + tail}
        return first

    return ScriptedModel(step)


def child_agent(store: MemoryStore, *tools: Any, **kw: Any) -> Agent:
    first = {"type": "tool", "thought": "look", "tool": "lookup", "args": {"order_id": "A-1"}}
    return Agent(
        tools=list(tools) or [lookup],
        model=kw.pop("model", finishing("child found it", first)),
        store=store,
        policy=Policy(plan_before_writes=False),
        **kw,
    )


def ask(tool_name: str, task: str) -> dict[str, Any]:
    return {"type": "tool", "thought": "delegate", "tool": tool_name, "args": {"task": task}}


async def test_a_child_runs_as_its_own_run_linked_to_the_parents_call() -> None:
    store = MemoryStore()
    research = child_agent(store).as_tool("research", "Research an order and report.")
    assert research.spec.effect == "read" and "task" in research.spec.args_schema["properties"]
    parent = Agent(
        tools=[research],
        model=finishing("parent done", ask("research", "Where is A-1?")),
        store=store,
    )
    result = await parent.run("Find A-1", run_id="p1", tenant="acme", metadata={"ticket": 7})
    assert result.status is RunStatus.COMPLETED
    assert "child found it" in (result.answer or "")
    child = await parent.transcript("p1:1/research")  # the child's id: the parent's call
    started = child[0]
    assert isinstance(started, RunStarted) and started.task == "Where is A-1?"
    assert started.tenant == "acme" and started.metadata["ticket"] == 7
    assert started.metadata["agentcore.parent"] == {
        "run_id": "p1",
        "call_id": "c1",
        "step": 1,
        "root": "p1",  # the tree's first run (quotas kept per run count the tree)
    }
    # the child's model usage counts in the parent too
    events = await parent.transcript("p1")
    (used,) = [e for e in events if isinstance(e, ModelCalled) and e.role == "child"]
    child_tokens = sum(
        e.input_tokens + e.output_tokens for e in child if isinstance(e, ModelCalled)
    )
    assert used.model == "agent:research" and used.input_tokens + used.output_tokens == child_tokens
    assert result.usage.input_tokens + result.usage.output_tokens > child_tokens
    # listed by search on the parent's id
    found = await store.list_runs(search='"agentcore.parent":{"run_id":"p1"')
    assert [r.run_id for r in found] == ["p1:1/research"]


async def test_the_child_budget_is_carved_from_what_the_parent_has_left() -> None:
    store = MemoryStore()
    research = child_agent(store).as_tool(
        "research", "Research.", budget=Budget(max_tokens=10_000, max_tool_calls=9)
    )
    parent = Agent(
        tools=[research],
        model=finishing("ok", ask("research", "Where is A-1?")),
        store=store,
    )
    await parent.run("go", run_id="p1", budget=Budget(max_tokens=400, max_tool_calls=3))
    started = (await parent.transcript("p1:1/research"))[0]
    assert isinstance(started, RunStarted)
    parent_used = sum(
        e.input_tokens + e.output_tokens
        for e in (await parent.transcript("p1"))[:4]
        if isinstance(e, ModelCalled) and e.role == "act"
    )
    assert started.budget["max_tokens"] == 400 - parent_used  # the parent's, not 10,000
    assert started.budget["max_tool_calls"] == 2  # 3, less the parent's call of the child


async def test_a_child_that_may_delete_is_a_destructive_tool() -> None:
    @tool(effect="destructive")
    def close(account: str) -> str:
        """Close an account."""
        return "closed"

    store = MemoryStore()
    closer = child_agent(store, lookup, close).as_tool("closer", "Close accounts.")
    assert closer.spec.effect == "destructive" and not closer.spec.idempotent
    reader = child_agent(store, lookup, close).as_tool("reader", "Read.", scope=["lookup"])
    assert reader.spec.effect == "read"
    with pytest.raises(ConfigurationError, match="no tools"):
        child_agent(store).as_tool("none", "Nothing.", scope=[])


def closing_family(store: MemoryStore) -> tuple[Agent, Agent, list[str]]:
    """A parent whose sub-agent ``closer`` closes account X (a destructive call that waits
    for a person), and the accounts really closed."""
    closed: list[str] = []

    @tool(effect="destructive")
    def close(account: str) -> str:
        """Close an account."""
        closed.append(account)
        return "closed"

    first = {"type": "tool", "thought": "close", "tool": "close", "args": {"account": "X"}}
    child = child_agent(store, close, model=finishing("child closed it", first))
    parent = Agent(
        tools=[child.as_tool("closer", "Close accounts.")],
        model=finishing("parent done", ask("closer", "Close X")),
        store=store,
        policy=Policy(plan_before_writes=False),
    )
    return parent, child, closed


async def test_a_child_waiting_for_a_person_stops_the_parent_until_it_is_settled() -> None:
    store = MemoryStore()
    parent, child, closed = closing_family(store)
    waiting = await parent.run("close X", run_id="p1")
    assert waiting.status is RunStatus.AWAITING_CONFIRMATION  # the parent's own stop first
    stuck = await parent.confirm("p1", approve=True, by="ann")
    assert stuck.status is RunStatus.NEEDS_ATTENTION
    assert "agentcore confirm p1:1/closer --approve --step 1" in (stuck.reason or "")
    assert closed == []
    pending = (await child.result("p1:1/closer")).pending
    assert pending is not None and pending.args == {"account": "X"}
    await child.confirm(
        "p1:1/closer", approve=True, by="ann", step=pending.step, args_hash=pending.args_hash
    )
    done = await parent.resume("p1", by="ann")
    assert done.status is RunStatus.COMPLETED, done.reason
    assert "child closed it" in (done.answer or "") and closed == ["X"]
    events = await parent.transcript("p1")
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.ok and "child closed it" in str(finished.result)
    assert len(await store.list_runs()) == 2  # one parent, one child


async def test_a_failed_child_is_an_error_the_parents_model_reads() -> None:
    store = MemoryStore()
    child = child_agent(store, model=ScriptedModel([]))  # its model has nothing to say
    parent = Agent(
        tools=[child.as_tool("research", "Research.")],
        model=finishing("parent done", ask("research", "Where is A-1?")),
        store=store,
    )
    result = await parent.run("go", run_id="p1")
    assert result.status is RunStatus.COMPLETED
    (finished,) = [e for e in await parent.transcript("p1") if isinstance(e, ToolFinished)]
    assert not finished.ok and "stopped as failed" in (finished.error or "")


async def test_a_childs_waiting_call_is_the_parents_pending_and_is_confirmed_from_it() -> None:
    """The person sees the child's exact call from the parent (its step, args hash and run)
    and answers it there: the call runs once in the child, and the parent continues with
    the child's answer. An answer bound to another hash is refused and runs nothing."""
    from agentcore.errors import ConfirmationMismatchError

    store = MemoryStore()
    parent, _, closed = closing_family(store)
    waiting = await parent.run("close X", run_id="p1")  # the parent's own stop first
    assert waiting.status is RunStatus.AWAITING_CONFIRMATION and waiting.pending is not None
    assert waiting.pending.run_id is None  # its own call
    stuck = await parent.confirm(
        "p1", approve=True, by="ann", step=waiting.pending.step, args_hash=waiting.pending.args_hash
    )
    assert stuck.status is RunStatus.NEEDS_ATTENTION, stuck
    pending = stuck.pending  # the child's call, surfaced in the parent
    assert pending is not None and pending.run_id == "p1:1/closer"
    assert pending.tool == "close" and pending.args == {"account": "X"}
    assert (await parent.result("p1")).pending == pending
    with pytest.raises(ConfirmationMismatchError):
        await parent.confirm("p1", approve=True, by="ann", step=pending.step, args_hash="0" * 16)
    assert closed == []
    done = await parent.confirm(
        "p1", approve=True, by="ann", step=pending.step, args_hash=pending.args_hash
    )
    assert done.status is RunStatus.COMPLETED, done.reason
    assert "child closed it" in (done.answer or "") and closed == ["X"]
    assert len(await store.list_runs()) == 2  # one parent, one child


async def test_resuming_the_parent_before_the_child_is_settled_says_what_settles_it() -> None:
    """A plain resume of the parent while its child still waits for a person repeats what
    the parent waits for (the child's call, and how to confirm it), not a lost call's
    'agentcore resolve ... --rerun' that a person should not follow; nothing runs, and once
    the child is settled a resume adopts its answer (one close)."""
    store = MemoryStore()
    parent, child, closed = closing_family(store)
    await parent.run("close X", run_id="p1")
    stuck = await parent.confirm("p1", approve=True, by="ann")
    assert stuck.status is RunStatus.NEEDS_ATTENTION
    for _ in range(2):  # asked again and again, the same answer
        again = await parent.resume("p1", by="bob")
        assert again.status is RunStatus.NEEDS_ATTENTION
        assert "agentcore confirm p1:1/closer --approve --step 1" in (again.reason or "")
        assert "resolve" not in (again.reason or "") and "--rerun" not in (again.reason or "")
        assert again.pending is not None and again.pending.run_id == "p1:1/closer"
    assert closed == []
    pending = (await child.result("p1:1/closer")).pending
    assert pending is not None
    await child.confirm(
        "p1:1/closer", approve=True, by="ann", step=pending.step, args_hash=pending.args_hash
    )
    done = await parent.resume("p1", by="ann")
    assert done.status is RunStatus.COMPLETED, done.reason
    assert closed == ["X"]
    assert len(await store.list_runs()) == 2  # one parent, one child
