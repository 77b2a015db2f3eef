"""Checked by pyright (strict) in tests/test_typing.py, never run: the sync and stream twins
of the agent's methods have those methods' parameters and typed results. A wrong argument
is an error pyright reports (the ignores below would be unnecessary otherwise, and this file
reports unnecessary ignores)."""

# pyright: strict, reportUnnecessaryTypeIgnoreComment=true

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import assert_type

from pydantic import BaseModel

from agentcore import Agent, Budget, RunResult, StreamEvent


class Invoice(BaseModel):
    total_cents: int


def sync_twins(agent: Agent[Invoice]) -> None:
    ran = agent.run_sync("Bill A1.", scope=["orders"], budget=Budget(max_steps=3), tenant="t")
    assert_type(ran, RunResult[Invoice])
    confirmed = agent.confirm_sync(ran.run_id, approve=True, by="ops", step=2, args_hash="h")
    assert_type(confirmed.output, Invoice | None)
    assert_type(agent.resume_sync(ran.run_id, by="ops"), RunResult[Invoice])
    agent.run_sync("Bill A1.", scop=["orders"])  # pyright: ignore[reportCallIssue]
    agent.confirm_sync(ran.run_id, by="ops")  # pyright: ignore[reportCallIssue]
    agent.resume_sync(ran.run_id, by=3)  # pyright: ignore[reportArgumentType]


async def stream_twins(agent: Agent[Invoice]) -> None:
    assert_type(agent.stream("Bill A1.", run_id="r1"), AsyncIterator[StreamEvent])
    assert_type(agent.stream_resume("r1", budget=Budget()), AsyncIterator[StreamEvent])
    events = agent.stream_confirm("r1", approve=False, by="ops", reason="no")
    assert_type(events, AsyncIterator[StreamEvent])
    agent.stream_confirm("r1", approve="yes", by="ops")  # pyright: ignore[reportArgumentType]
