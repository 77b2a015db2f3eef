"""Fixtures for the adapter tests: a fake provider on loopback, a schema, fake time.

Nothing of ours is mocked: requests go through the real litellm and openai client code to
:class:`~fakes.FakeProvider`. Time is faked only where the adapters take it as a parameter
(``RetryPolicy.sleep`` / ``clock``, ``BreakerPolicy.clock``), so no test really sleeps
through a backoff.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel, Field

from agentcore.adapters import BreakerPolicy, CompletionRequest, Message, RetryPolicy
from agentcore.adapters._breaker import reset_breakers
from agentcore.contracts import ActionSchema, ToolSpec, compile_action_schema, compile_wire_schema

from .fakes import FakeProvider

START = 1_750_000_000.0
"""The fake wall clock's start (a whole second, so HTTP-dates are exact)."""


class GetOrderArgs(BaseModel):
    order_id: str = Field(description="The order's id, e.g. A1.")


class AddNoteArgs(BaseModel):
    order_id: str
    note: str


TOOLS = (
    ToolSpec("get_order", "Look up one order by id.", GetOrderArgs),
    ToolSpec("add_note", "Add a note to an order.", AddNoteArgs, effect="write"),
)


@dataclass
class FakeTime:
    """A wall clock and a monotonic clock that move only when the adapter sleeps.

    Attributes:
        now: the wall-clock time (``time.time()`` seconds).
        waits: every wait the retry loop asked for, in order.
    """

    now: float = START
    waits: list[float] = field(default_factory=list[float])

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def _fresh_breakers() -> Iterator[None]:
    """Breakers are process-wide per endpoint, and loopback ports are reused: reset them."""
    reset_breakers()
    yield
    reset_breakers()


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    """A fake provider for one test."""
    with FakeProvider() as server:
        yield server


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def retry(fake_time: FakeTime) -> RetryPolicy:
    """The default policy on fake time, with the jitter pinned to half the ceiling."""
    return RetryPolicy(sleep=fake_time.sleep, clock=fake_time.clock, random=lambda: 0.5)


@pytest.fixture
def breaker(fake_time: FakeTime) -> BreakerPolicy:
    """A breaker that stays closed through any one test unless the test says otherwise."""
    return BreakerPolicy(failure_threshold=1000, clock=fake_time.clock)


@pytest.fixture
def schema() -> ActionSchema:
    return compile_action_schema(TOOLS)


@pytest.fixture
def make_request(schema: ActionSchema) -> Callable[..., CompletionRequest]:
    """Build a request over :data:`TOOLS`; keyword arguments override its fields."""

    def build(**overrides: Any) -> CompletionRequest:  # Any: CompletionRequest fields
        fields: dict[str, Any] = {  # Any: CompletionRequest fields
            "schema": schema,
            "system": "You are a careful support agent.",
            "messages": [
                Message("user", "Task: where is order A1?"),
                Message("user", "Note: be brief."),
            ],
            "run_id": "run-1",
            "step": 1,
        }
        fields.update(overrides)
        return CompletionRequest(**fields)

    return build


def strict_schema(schema: ActionSchema) -> dict[str, Any]:  # Any: JSON
    """The openai_strict wire schema of ``schema``."""
    return compile_wire_schema(schema, "openai_strict").schema


def wrapped(action: dict[str, Any]) -> dict[str, Any]:  # Any: JSON
    """An action as an openai_strict reply: ``{"action": ...}``, a tool call grouped."""
    if action.get("type") == "tool":
        inner = {
            "type": "tool",
            "thought": action["thought"],
            "call": {"tool": action["tool"], "args": action["args"]},
        }
        return {"action": inner}
    return {"action": action}


FINISH: dict[str, Any] = {
    "type": "finish",
    "thought": "I know it.",
    "answer": "It shipped.",
}  # Any: JSON
NOTE_CALL: dict[str, Any] = {  # Any: JSON
    "type": "tool",
    "thought": "Record it.",
    "tool": "add_note",
    "args": {"order_id": "A1", "note": "customer called"},
}


def dumps(value: object) -> str:
    return json.dumps(value)
