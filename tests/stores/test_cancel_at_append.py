"""A cancel request read by the write-ahead commit of a call's intent, on every built-in
store: made while the model answers, it stops the call before it starts (the transcript
says the call did not run); and a run reads the request once a step, not twice."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentcore import Agent, Budget, RunStatus, check_transcript, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.events import ToolFinished, ToolStarted
from agentcore.stores import MemoryStore, PostgresStore, SQLiteStore, TranscriptStore


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[TranscriptStore, TranscriptStore]]:
    """The store a run uses and one a canceller uses (another object where the store can
    be opened twice: another connection, as another process would have)."""
    if request.param == "memory":
        store = MemoryStore()
        yield store, store
        await store.close()
        return
    if request.param == "sqlite":
        made: list[TranscriptStore] = [SQLiteStore(tmp_path / "runs.db") for _ in range(2)]
    else:
        dsn, schema = request.getfixturevalue("postgres_dsn"), request.getfixturevalue("pg_schema")
        made = [PostgresStore(dsn, schema=schema) for _ in range(2)]
    try:
        yield made[0], made[1]
    finally:
        for s in made:
            await s.close()


def lookup_tool(ran: list[str]) -> Any:  # Any: a Tool
    @tool(effect="read")
    def lookup(order_id: str) -> dict[str, str]:
        """Look up one order."""
        ran.append(order_id)
        return {"order_id": order_id, "status": "shipped"}

    return lookup


def call(order_id: str) -> dict[str, Any]:  # Any: JSON
    return {"type": "tool", "thought": "look", "tool": "lookup", "args": {"order_id": order_id}}


async def test_a_cancel_made_while_the_model_answers_stops_the_call_before_it_starts(
    stores: tuple[TranscriptStore, TranscriptStore],
) -> None:
    store, canceller = stores
    ran: list[str] = []

    async def answer_and_get_cancelled(messages: Sequence[Message]) -> dict[str, Any]:  # Any: JSON
        await canceller.request_cancel("r1", by="ops", reason="customer called")
        return call("A2")

    model = ScriptedModel([call("A1"), answer_and_get_cancelled])
    agent = Agent(tools=[lookup_tool(ran)], model=model, store=store)
    result = await agent.run("orders", run_id="r1", budget=Budget(max_steps=5))

    assert result.status is RunStatus.CANCELLED
    assert result.reason == "cancelled by ops: customer called"
    assert ran == ["A1"]  # the second call never ran
    events = await agent.transcript("r1")
    assert [e.type for e in events][-3:] == ["tool_started", "tool_finished", "run_finished"]
    started = [e for e in events if isinstance(e, ToolStarted)]
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [s.args for s in started] == [{"order_id": "A1"}, {"order_id": "A2"}]
    assert finished[-1].call_id == started[-1].call_id
    assert not finished[-1].ok
    assert finished[-1].error == "not run: the run was cancelled by ops before the call started"
    assert check_transcript(events) == []
    assert await agent.resume("r1") == result  # final: nothing more runs
    assert ran == ["A1"]


async def test_a_run_reads_its_cancel_request_once_a_step(
    stores: tuple[TranscriptStore, TranscriptStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = stores
    reads: list[str] = []
    read = store.cancel_request

    async def counted(run_id: str) -> Any:  # Any: CancelRequest | None
        reads.append(run_id)
        return await read(run_id)

    monkeypatch.setattr(store, "cancel_request", counted)
    ran: list[str] = []
    script = [call(f"A{i}") for i in range(5)]
    script.append({"type": "finish", "thought": "done", "answer": "all shipped"})
    agent = Agent(tools=[lookup_tool(ran)], model=ScriptedModel(script), store=store)
    result = await agent.run("orders", run_id="r2", budget=Budget(max_steps=10))
    assert result.status is RunStatus.COMPLETED
    assert len(ran) == 5
    assert len(reads) == 6  # before each of the six model calls; none before a tool call


class PlainStore:
    """A store of one's own that does not read cancel requests as it appends (only the
    protocol's methods, delegated to a MemoryStore)."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.url = "plain://"
        self.reads = 0

    async def append(
        self, run_id: str, expected_seq: int, events: Any, *, lease: Any = None
    ) -> None:  # Any: the protocol's types
        await self.inner.append(run_id, expected_seq, events, lease=lease)

    async def load(self, run_id: str, *, after: int = -1) -> Any:  # Any: events
        return await self.inner.load(run_id, after=after)

    async def cancel_request(self, run_id: str) -> Any:  # Any: CancelRequest | None
        self.reads += 1
        return await self.inner.cancel_request(run_id)

    async def request_cancel(self, run_id: str, *, by: str, reason: str | None = None) -> None:
        await self.inner.request_cancel(run_id, by=by, reason=reason)

    async def acquire(self, run_id: str, *, owner: str, ttl_s: float) -> Any:  # Any: a Lease
        return await self.inner.acquire(run_id, owner=owner, ttl_s=ttl_s)

    async def renew(self, lease: Any) -> Any:  # Any: a Lease
        return await self.inner.renew(lease)

    async def release(self, lease: Any) -> None:  # Any: a Lease
        await self.inner.release(lease)

    async def list_runs(self, **kwargs: Any) -> Any:  # Any: the protocol's filters
        return await self.inner.list_runs(**kwargs)

    async def prune(self, **kwargs: Any) -> Any:  # Any: the protocol's filters
        return await self.inner.prune(**kwargs)

    async def truncate(self, run_id: str, *, after: int, dry_run: bool = False) -> Any:  # Any: rows
        return await self.inner.truncate(run_id, after=after, dry_run=dry_run)

    async def close(self) -> None:
        await self.inner.close()


async def test_a_store_without_it_keeps_the_read_before_each_tool_call() -> None:
    from agentcore.stores import CancelAtAppend

    store = PlainStore()
    assert not isinstance(store, CancelAtAppend)
    ran: list[str] = []

    async def answer_and_get_cancelled(messages: Sequence[Message]) -> dict[str, Any]:  # Any: JSON
        await store.request_cancel("r1", by="ops")
        return call("A2")

    model = ScriptedModel([call("A1"), answer_and_get_cancelled])
    agent = Agent(tools=[lookup_tool(ran)], model=model, store=store)  # pyright: ignore[reportArgumentType]
    result = await agent.run("orders", run_id="r1", budget=Budget(max_steps=5))
    assert result.status is RunStatus.CANCELLED
    assert ran == ["A1"]
    events = await agent.transcript("r1")
    assert [e.type for e in events].count("tool_started") == 1  # the second call never started
    assert store.reads == 4  # before each model call and before each tool call
