"""Cancel requests in the store protocol: recorded beside the run, read back, overwritten.

The request is not an event: the process advancing the run (or the canceller, when none
is) turns it into the transcript's cancellation. Here only the store's part is tested.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcore.errors import RunNotFoundError
from agentcore.events import RunStarted
from agentcore.stores import CancelRequest, MemoryStore, SQLiteStore, TranscriptStore

FIXTURE = Path(__file__).parent / "fixtures" / "store-0.1.0.db"


def started(run_id: str) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        seq=0,
        at=1.0,
        task="t",
        scope=[],
        budget={},
        policy={},
        contract={"hash": "h"},
        route=["scripted"],
        tools={},
    )


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TranscriptStore]:
    made: TranscriptStore = (
        MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")
    )
    try:
        await made.append("r1", 0, [started("r1")])
        yield made
    finally:
        await made.close()


async def test_no_request_until_one_is_made(store: TranscriptStore) -> None:
    assert await store.cancel_request("r1") is None


async def test_a_request_is_recorded_and_read_back(store: TranscriptStore) -> None:
    before = time.time()
    await store.request_cancel("r1", by="ops", reason="customer changed mind")
    request = await store.cancel_request("r1")
    assert isinstance(request, CancelRequest)
    assert (request.by, request.reason) == ("ops", "customer changed mind")
    assert before <= request.at <= time.time()
    # Recording a request writes no event: the transcript is unchanged.
    assert [e.type for e in await store.load("r1")] == ["run_started"]


async def test_a_later_request_replaces_the_earlier(store: TranscriptStore) -> None:
    await store.request_cancel("r1", by="ops", reason="first")
    await store.request_cancel("r1", by="alice")
    request = await store.cancel_request("r1")
    assert request is not None
    assert (request.by, request.reason) == ("alice", None)


async def test_unknown_run(store: TranscriptStore) -> None:
    with pytest.raises(RunNotFoundError, match="nope"):
        await store.request_cancel("nope", by="ops")
    with pytest.raises(RunNotFoundError, match="nope"):
        await store.cancel_request("nope")


def test_a_request_is_a_frozen_value() -> None:
    request = CancelRequest(by="ops", reason=None, at=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.by = "mallory"  # pyright: ignore[reportAttributeAccessIssue]


async def test_a_sqlite_request_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    first = SQLiteStore(path)
    try:
        await first.append("r1", 0, [started("r1")])
        await first.request_cancel("r1", by="ops", reason="why")
    finally:
        await first.close()
    second = SQLiteStore(path)
    try:
        request = await second.cancel_request("r1")
        assert request is not None
        assert (request.by, request.reason) == ("ops", "why")
    finally:
        await second.close()


async def test_runs_of_0_1_0_take_requests_after_the_migration(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURE, path)
    store = SQLiteStore(path)
    try:
        assert await store.cancel_request("v010-delete") is None
        await store.request_cancel("v010-delete", by="ops")
        request = await store.cancel_request("v010-delete")
        assert request is not None
        assert request.by == "ops"
    finally:
        await store.close()
