"""Native tool calling: arguments no parser can read are an invalid reply, re-asked.

Through litellm's real OpenAI path against a loopback fake: a function call whose
arguments nest 100,000 deep (Python's json raises RecursionError), 100 deep (past the
limits), or carry NaN must be re-asked, and the run must finish normally.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentcore import Agent, Budget, RunStatus, check_transcript, tool
from agentcore.adapters import BreakerPolicy, RetryPolicy
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.events import ModelCalled, ToolStarted

from .fakes import FakeProvider, JsonReply, ok
from .native_payloads import chat_tool_calls

KEPT: list[object] = []


@tool(effect="read")
def keep(payload: Any) -> str:  # Any: any JSON value
    """Keep a payload.

    Args:
        payload: any JSON value.
    """
    KEPT.append(payload)
    return "kept"


@pytest.mark.parametrize(
    "arguments",
    [
        '{"payload": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"payload": ' + "[" * 100 + "]" * 100 + "}",
        '{"payload": NaN}',
        '{"payload": "\\ud800"}',
    ],
    ids=["recursion", "deep-100", "nan", "surrogate"],
)
async def test_unreadable_native_arguments_are_reasked(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, arguments: str
) -> None:
    KEPT.clear()
    fake.queue(
        JsonReply(chat_tool_calls([("keep", arguments)])),
        JsonReply(chat_tool_calls([("keep", {"payload": [1, 2]})])),
        ok("Kept."),
    )
    adapter = OpenAIAdapter(
        "gpt-4.1-mini",
        api_base=fake.base_url,
        api_key="sk-test",
        retry=retry,
        breaker=breaker,
        mode="native",
    )
    agent = Agent(tools=[keep], model=adapter, store="memory://")
    result = await agent.run("keep it", budget=Budget(max_steps=4))
    events = await agent.transcript(result.run_id)
    await agent.close()

    assert result.status is RunStatus.COMPLETED, result.reason
    assert KEPT == [[1, 2]]
    invalid = [e for e in events if isinstance(e, ModelCalled) and e.outcome == "invalid"]
    assert len(invalid) == 1
    assert invalid[0].attempts == 1  # re-asked, not retried as a provider failure
    assert [e.args for e in events if isinstance(e, ToolStarted)] == [{"payload": [1, 2]}]
    assert check_transcript(events) == []
