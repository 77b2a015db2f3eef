"""Plans a person approved: ``@tool(requires="person_plan")`` beside
``Policy(confirm_plans=True)``. The model's own plan (an injected one too) never unlocks
such a tool."""

from __future__ import annotations

from typing import Any

import pytest

from agentcore import Agent, Policy, RunStatus, tool
from agentcore.adapters import ScriptedModel
from agentcore.errors import ToolDefinitionError
from agentcore.events import Decision
from agentcore.testing import call

PLAN = {"type": "plan", "thought": "t", "steps": ["publish the summary"]}
FINISH = {"type": "finish", "thought": "t", "answer": "done"}


def _agent(script: list[Any], policy: Policy | None = None) -> tuple[Agent, list[str]]:
    ran: list[str] = []

    @tool(effect="write", requires="person_plan")
    def publish(text: str) -> str:
        """Publish a text on the public site."""
        ran.append(text)
        return "published"

    @tool(effect="write")
    def note(text: str) -> str:
        """Keep a private note."""
        ran.append(f"note {text}")
        return "noted"

    @tool(effect="read")
    def look() -> str:
        """Look around."""
        return "nothing"

    agent = Agent([publish, note, look], ScriptedModel(script), store="memory://", policy=policy)
    return agent, ran


async def test_a_person_approved_plan_unlocks_the_tool() -> None:
    agent, ran = _agent([call("publish", text="hi"), PLAN, call("publish", text="hi"), FINISH])
    result = await agent.run("publish")
    assert result.status is RunStatus.AWAITING_CONFIRMATION  # the plan waits for a person
    assert result.pending is not None and result.pending.kind == "plan"
    events = await agent.transcript(result.run_id)
    first = next(e for e in events if isinstance(e, Decision))
    assert first.verdict == "needs_plan" and first.reason is not None
    assert "a person approved" in first.reason
    result = await agent.confirm(result.run_id, approve=True, by="ann")
    assert result.status is RunStatus.COMPLETED and ran == ["hi"]


async def test_a_denied_plan_leaves_it_locked() -> None:
    agent, ran = _agent([PLAN, call("publish", text="secret"), FINISH])
    result = await agent.run("publish")
    result = await agent.confirm(result.run_id, approve=False, by="ann", reason="no")
    assert result.status is RunStatus.COMPLETED and ran == []
    verdicts = [e.verdict for e in await agent.transcript(result.run_id) if isinstance(e, Decision)]
    assert verdicts == ["needs_confirmation", "needs_plan", "execute"]


@pytest.mark.parametrize("policy", [Policy(), Policy(plan_before_writes=False)])
async def test_the_policy_cannot_approve_it(policy: Policy) -> None:
    # Without the tool in scope, the policy approves plans and unlocks ordinary writes only.
    agent, ran = _agent([PLAN, call("note", text="a"), call("publish", text="b"), FINISH], policy)
    result = await agent.run("x", scope=["note", "look"])
    assert result.status is RunStatus.COMPLETED and ran == ["note a"]  # publish: out of scope
    agent, ran = _agent([call("publish", text="b"), FINISH], policy)
    result = await agent.run("x")
    assert result.status is RunStatus.COMPLETED and ran == []


async def test_plans_wait_only_while_no_person_approved_one() -> None:
    agent, ran = _agent([PLAN, PLAN, call("publish", text="x"), FINISH])
    result = await agent.run("x")
    result = await agent.confirm(result.run_id, approve=True, by="ann")
    assert result.status is RunStatus.COMPLETED and ran == ["x"]  # the second plan: policy


async def test_reads_never_wait() -> None:
    agent, _ = _agent([call("look"), FINISH])
    assert (await agent.run("x")).status is RunStatus.COMPLETED


def test_an_unknown_requirement_is_an_error() -> None:
    with pytest.raises(ToolDefinitionError, match="person_plan"):

        @tool(effect="write", requires="manager")  # pyright: ignore[reportArgumentType]  # the point
        def f() -> None:
            """F."""
