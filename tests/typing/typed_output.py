"""Checked by pyright (strict) in tests/test_typing.py, never run: what a user's type
checker knows about typed results. ``assert_type`` fails the check when a type is not the
one written."""

# pyright: strict

from __future__ import annotations

import dataclasses
from typing import assert_type

from pydantic import BaseModel
from typing_extensions import TypedDict

from agentcore import Agent, RunResult
from agentcore.adapters import ScriptedModel


class Invoice(BaseModel):
    customer: str
    total_cents: int


class Refund(BaseModel):
    amount_cents: int


class Escalation(BaseModel):
    team: str


class Summary(TypedDict):
    title: str


@dataclasses.dataclass
class Point:
    x: float


async def billed_cents() -> int:
    agent = Agent(tools=[], model=ScriptedModel([]), store="memory://", output=Invoice)
    assert_type(agent, Agent[Invoice])
    result = await agent.run("Bill order A1.")
    assert_type(result, RunResult[Invoice])
    assert_type(result.output, Invoice | None)
    if result.output is None:
        return 0
    again = await agent.confirm(result.run_id, approve=True, by="ops")
    assert_type(again.output, Invoice | None)
    assert_type((await agent.resume(result.run_id)).output, Invoice | None)
    return result.output.total_cents


def routed(agent: Agent[Refund | Escalation]) -> str:
    result = agent.run_sync("Handle the complaint.")
    output = result.output
    if isinstance(output, Refund):
        return str(output.amount_cents)
    if isinstance(output, Escalation):
        return output.team
    assert_type(output, None)
    return ""


def union_agent() -> Agent[Refund | Escalation]:
    return Agent(tools=[], model=ScriptedModel([]), output=[Refund, Escalation])


def other_kinds() -> None:
    assert_type(Agent(tools=[], model=ScriptedModel([]), output=Summary), Agent[Summary])
    assert_type(Agent(tools=[], model=ScriptedModel([]), output=Point), Agent[Point])
    assert_type(Agent(tools=[], model=ScriptedModel([]), output=int), Agent[int])


def text() -> str:
    agent = Agent(tools=[], model=ScriptedModel([]))
    assert_type(agent, Agent[str])
    result = agent.run_sync("Where is order A1?")
    assert_type(result.output, str | None)
    return (result.output or "").upper()
