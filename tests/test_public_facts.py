"""The facts the services read from the core: a run's state from its transcript
(``RunState.of``) and which agent owns a run (``Agent.owns``)."""

from __future__ import annotations

import pytest

from agentcore import Policy, RunState, RunStatus, tool
from agentcore.events import RunStarted
from agentcore.testing import call, finish, scripted_agent


@tool(effect="read")
def get_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"


@tool(effect="destructive")
def delete_order(order_id: str) -> str:
    """Delete an order."""
    return f"deleted {order_id}"


NO_PLAN = Policy(plan_before_writes=False)


async def test_run_state_of_a_transcript_is_the_run_the_agent_reports() -> None:
    agent = scripted_agent(
        [get_order, delete_order],
        call("get_order", order_id="A1"),
        call("delete_order", order_id="A1"),
        finish(),
        policy=NO_PLAN,
    )
    paused = await agent.run("Delete order A1.")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    events = await agent.transcript(paused.run_id)

    state = RunState.of(events)

    assert state.run_id == paused.run_id and state.status is paused.status
    assert state.next_seq == len(events)
    assert state.pending() == paused.pending
    assert state.result().usage == paused.usage


async def test_run_state_of_refuses_an_empty_or_disordered_transcript() -> None:
    agent = scripted_agent([get_order], finish())
    done = await agent.run("Say hi.")
    events = await agent.transcript(done.run_id)
    with pytest.raises(ValueError, match="empty transcript"):
        RunState.of([])
    with pytest.raises(ValueError, match="seq"):
        RunState.of(events[1:])


async def test_an_agent_owns_the_runs_whose_scope_it_has_every_tool_of() -> None:
    both = scripted_agent([get_order, delete_order], finish())
    reader = scripted_agent([get_order], finish())
    deleter = scripted_agent([delete_order], finish())
    started = await both.run("Look.", scope=["get_order"])
    events = await both.transcript(started.run_id)
    first = events[0]
    assert isinstance(first, RunStarted)

    assert both.owns(first) and reader.owns(first) and not deleter.owns(first)
    assert reader.owns(RunState.of(events))  # the recorded scope, from either fact
    whole = await both.transcript((await both.run("Look again.")).run_id)
    assert both.owns(RunState.of(whole)) and not reader.owns(RunState.of(whole))
