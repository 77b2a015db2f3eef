"""Whatever reaches a store, what leaves it is a StoreError naming the run and the seq.

Events are built directly with hostile values (the agent's entrances normally refuse them
before a store sees them). ``append`` either stores an event so that ``load`` returns an
equal one, or refuses it with a StoreError and writes nothing: never a raw exception, and
never a row that ``load`` then cannot decode.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore.contracts.errors import (
    RunNotFoundError,
    SeqConflictError,
    StoreCorruptedError,
    StoreError,
)
from agentcore.events import Event, RunStarted, ToolFinished
from agentcore.stores import MemoryStore, SQLiteStore, TranscriptStore

SURROGATE = "\ud800"


def started(run_id: str, **extra: Any) -> RunStarted:  # Any: RunStarted's fields
    fields: dict[str, Any] = {  # Any: as above
        "run_id": run_id,
        "seq": 0,
        "at": 1.0,
        "task": "t",
        "scope": [],
        "budget": {},
        "policy": {},
        "contract": {"hash": "h"},
        "route": ["scripted"],
        "tools": {},
    }
    return RunStarted(**(fields | extra))


def result(run_id: str, value: Any, seq: int = 1) -> ToolFinished:  # Any: a JSON value
    return ToolFinished(
        run_id=run_id, seq=seq, at=2.0, step=1, call_id="c1", tool="t", ok=True, result=value
    )


def nested(depth: int) -> Any:  # Any: lists inside lists
    value: Any = "bottom"  # Any: as above
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture(scope="module", autouse=True)
def _huge_ints() -> Iterator[None]:
    """Let Python build a 30,000-digit int (its str conversion is capped at 4,300 digits)."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    yield
    sys.set_int_max_str_digits(before)


HUGE = 10**30_000 - 1

# (case id, run id, value of a tool result)
HOSTILE: list[tuple[str, str, Any]] = [  # Any: JSON-ish values, some not JSON at all
    ("surrogate-in-result", "r1", {"text": SURROGATE}),
    ("surrogate-in-key", "r1", {SURROGATE: 1}),
    ("nul-in-result", "r1", {"text": "a\u0000b", "\u0000": 0}),
    ("nul-in-run-id", "r\u0000id", "fine"),
    ("huge-int", "r1", HUGE),
    ("int-past-64-bits", "r1", 2**70),
    ("deep-200", "r1", nested(200)),
    ("deep-60", "r1", nested(60)),
    ("nan", "r1", float("nan")),
    ("infinity", "r1", [float("inf")]),
    ("odd-unicode", "r1", "\u202e\ufeff\U0001f600\u0301"),
]


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TranscriptStore]:
    made: TranscriptStore = (
        MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")
    )
    try:
        yield made
    finally:
        await made.close()


def assert_names(exc: BaseException, run_id: str, seq: int) -> None:
    text = str(exc)
    assert repr(run_id) in text, text
    assert f"seq {seq}" in text, text
    text.encode()  # the message itself is printable text


@pytest.mark.parametrize(("run_id", "value"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
async def test_a_hostile_result_is_stored_faithfully_or_refused_cleanly(
    store: TranscriptStore, run_id: str, value: Any
) -> None:
    await store.append(run_id, 0, [started(run_id)])
    event = result(run_id, value)
    refused: StoreError | None = None
    try:
        await store.append(run_id, 1, [event])
    except StoreError as exc:
        refused = exc
    if refused is not None:
        assert not isinstance(refused, SeqConflictError)
        assert_names(refused, run_id, 1)
        # Nothing of the batch was written, and the run still reads and lists.
        assert [e.type for e in await store.load(run_id)] == ["run_started"]
        (summary,) = await store.list_runs()
        assert summary.events == 1
    else:
        (back,) = await store.load(run_id, after=0)
        assert back == event
        (summary,) = await store.list_runs()
        assert summary.events == 2


@pytest.mark.parametrize(
    "value",
    [{"text": SURROGATE}, HUGE, nested(200), float("nan")],
    ids=["surrogate", "huge-int", "deep-200", "nan"],
)
async def test_values_no_store_can_read_back_are_refused(
    store: TranscriptStore, value: Any
) -> None:
    await store.append("r1", 0, [started("r1")])
    with pytest.raises(StoreError) as info:
        await store.append("r1", 1, [result("r1", value)])
    assert_names(info.value, "r1", 1)
    assert "tool_finished" in str(info.value)
    assert info.value.__cause__ is not None or "read back" in str(info.value)


async def test_a_bad_event_refuses_its_whole_batch(store: TranscriptStore) -> None:
    await store.append("r1", 0, [started("r1")])
    batch: list[Event] = [result("r1", "ok", seq=1), result("r1", nested(200), seq=2)]
    with pytest.raises(StoreError) as info:
        await store.append("r1", 1, batch)
    assert_names(info.value, "r1", 2)
    assert len(await store.load("r1")) == 1
    await store.append("r1", 1, [result("r1", "ok")])  # the run goes on at seq 1


@pytest.mark.parametrize("run_id", ["r" + SURROGATE, SURROGATE * 3])
async def test_a_run_id_no_store_can_hold_is_refused(store: TranscriptStore, run_id: str) -> None:
    with pytest.raises(StoreError) as info:
        await store.append(run_id, 0, [started(run_id)])
    assert_names(info.value, run_id, 0)
    assert await store.list_runs() == []


async def test_a_task_no_store_can_hold_is_refused(store: TranscriptStore) -> None:
    with pytest.raises(StoreError) as info:
        await store.append("r1", 0, [started("r1", task="pay " + SURROGATE)])
    assert_names(info.value, "r1", 0)
    assert "run_started" in str(info.value)


async def test_reading_with_hostile_arguments_raises_only_store_errors(
    store: TranscriptStore,
) -> None:
    await store.append("r1", 0, [started("r1")])
    for run_id in (SURROGATE, "\u0000", "x" * 100_000):
        with pytest.raises((RunNotFoundError, StoreError)):
            await store.load(run_id)
        with pytest.raises((RunNotFoundError, StoreError)):
            await store.truncate(run_id, after=0)
        with pytest.raises((RunNotFoundError, StoreError)):
            await store.request_cancel(run_id, by="ops")
        with pytest.raises((RunNotFoundError, StoreError)):
            await store.cancel_request(run_id)
    for after in (2**70, -(2**70)):
        try:
            events = await store.load("r1", after=after)
        except StoreError as exc:
            assert_names(exc, "r1", after)
        else:
            assert events == ([] if after > 0 else [started("r1")])
    with contextlib.suppress(StoreError):
        assert await store.list_runs(status=SURROGATE) == []
    with pytest.raises(StoreError, match="limit"):
        await store.list_runs(limit=-1)
    with contextlib.suppress(StoreError):
        await store.list_runs(limit=2**70)


async def test_a_seq_past_64_bits_is_a_store_error(store: TranscriptStore) -> None:
    await store.append("r1", 0, [started("r1")])
    with pytest.raises(StoreError) as info:
        await store.append("r1", 2**70, [result("r1", 1, seq=2**70)])
    assert_names(info.value, "r1", 2**70)


# --------------------------------------------------------------------------- SQLite failures


def sabotage(path: Path, statement: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(statement)
    finally:
        conn.close()


async def test_sqlite_errors_name_the_run_and_seq(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.append("r1", 0, [started("r1")])
        sabotage(path, "ALTER TABLE events RENAME TO gone")
        with pytest.raises(StoreError, match="no such table") as info:
            await store.append("r1", 1, [result("r1", 1)])
        assert_names(info.value, "r1", 1)
        with pytest.raises(StoreError, match="no such table") as info:
            await store.load("r1", after=0)
        assert_names(info.value, "r1", 0)
        with pytest.raises(StoreError, match="no such table") as info:
            await store.truncate("r1", after=0)
        assert_names(info.value, "r1", 0)
        sabotage(path, "ALTER TABLE runs RENAME TO gone_too")
        with pytest.raises(StoreError, match="no such table"):
            await store.list_runs()
        with pytest.raises(StoreError, match="no such table") as info:
            await store.request_cancel("r1", by="ops")
        assert repr("r1") in str(info.value)
        with pytest.raises(StoreError, match="no such table") as info:
            await store.cancel_request("r1")
        assert repr("r1") in str(info.value)
    finally:
        await store.close()


async def test_truncate_names_the_seq_it_cannot_decode(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.append("r1", 0, [started("r1"), result("r1", 1), result("r1", 2, seq=2)])
        sabotage(path, 'UPDATE events SET body = \'{"type": "tool_finished"\' WHERE seq = 1')
        with pytest.raises(StoreCorruptedError) as info:
            await store.truncate("r1", after=1)
        assert_names(info.value, "r1", 1)
        assert len(await store.truncate("r1", after=0)) == 2  # before it, the repair works
    finally:
        await store.close()


def test_a_path_sqlite_cannot_open_is_a_printable_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open the file") as info:
        SQLiteStore(f"{tmp_path}/{SURROGATE}.db")
    str(info.value).encode()  # the message prints, although the path cannot
