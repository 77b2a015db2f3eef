"""Transcript stores: MemoryStore and SQLiteStore share semantics; SQLite adds durability."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Literal

import pytest

from agentcore.contracts import FinishAction, ToolAction
from agentcore.contracts.errors import (
    ConfigurationError,
    RunNotFoundError,
    SeqConflictError,
    StoreCorruptedError,
    StoreError,
)
from agentcore.events import (
    ActionProposed,
    Confirmation,
    ContextAdded,
    Decision,
    Event,
    ModelCalled,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolFinished,
    ToolStarted,
    encode_event_body,
)
from agentcore.stores import (
    MemoryStore,
    SQLiteStore,
    TranscriptStore,
    default_store_url,
    open_store,
    schema_status,
)
from agentcore.stores.sqlite import SCHEMA_VERSION as SQLITE_VERSION
from agentcore.stores.testing import context

# --------------------------------------------------------------------------- helpers


def started(run_id: str = "r1", *, at: float = 1.0, task: str = "do the thing") -> RunStarted:
    return RunStarted(
        run_id=run_id,
        seq=0,
        at=at,
        task=task,
        scope=["read_file", "write_file"],
        budget={"max_steps": 10, "max_cost": 0.5},
        policy={"confirm": ["write_file"], "nested": {"a": [1, None, True]}},
        contract={"hash": "sha256:abc"},
        route=["openai/gpt-4o-mini", "anthropic/claude"],
        tools={"read_file": {"effect": "read", "schema": {"type": "object"}}},
        metadata={"user": "ünïcødé ✓", "n": 3},
    )


def finished(run_id: str, seq: int, status: str, *, at: float) -> RunFinished:
    return RunFinished(run_id=run_id, seq=seq, at=at, status=status, answer="42")


def full_transcript(run_id: str = "r1") -> list[Event]:
    """One event of every type, with non-default values in every optional field."""
    return [
        started(run_id),
        ContextAdded(run_id=run_id, seq=1, at=2.5, step=1, source="files", content="a\nb\x00c"),
        ModelCalled(
            run_id=run_id,
            seq=2,
            at=3.25,
            step=1,
            model="openai/gpt-4o-mini",
            outcome="invalid",
            attempts=2,
            input_tokens=100,
            output_tokens=20,
            cached_input_tokens=50,
            cost=0.00123,
            latency_ms=812.5,
            finish_reason="stop",
            response_id="resp_1",
            reply="{not json",
            error="bad reply",
        ),
        ActionProposed(
            run_id=run_id,
            seq=3,
            at=4.0,
            step=1,
            call_id="c1",
            action=ToolAction(thought="read it", tool="read_file", args={"path": "/x", "n": 2}),
        ),
        Decision(
            run_id=run_id,
            seq=4,
            at=4.5,
            step=1,
            call_id="c1",
            verdict="needs_confirmation",
            reason="write tool",
            args_hash="h1",
        ),
        Confirmation(
            run_id=run_id,
            seq=5,
            at=5.0,
            step=1,
            call_id="c1",
            approved=True,
            by="alice",
            reason="ok",
            args={"path": "/y"},
            args_hash="h2",
        ),
        ToolStarted(
            run_id=run_id,
            seq=6,
            at=5.5,
            step=1,
            call_id="c1",
            tool="read_file",
            args={"path": "/y"},
            idempotency_key="r1:c1",
        ),
        ToolFinished(
            run_id=run_id,
            seq=7,
            at=6.0,
            step=1,
            call_id="c1",
            tool="read_file",
            ok=False,
            result={"partial": [1, 2.5, "x", None]},
            error="EIO",
            duration_ms=12.5,
        ),
        RunResumed(run_id=run_id, seq=8, at=7.0, budget={"max_steps": 20}),
        ActionProposed(
            run_id=run_id,
            seq=9,
            at=7.5,
            step=2,
            call_id="c2",
            action=FinishAction(thought="done", answer="the answer"),
        ),
        RunFinished(
            run_id=run_id,
            seq=10,
            at=8.0,
            status="completed",
            answer="the answer",
            reason="finished",
        ),
    ]


def raw(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection to a store's file (close it!)."""
    return sqlite3.connect(path, isolation_level=None)


def count_rows(path: Path, sql: str, params: Sequence[object] = ()) -> int:
    conn = raw(path)
    try:
        (n,) = conn.execute(sql, tuple(params)).fetchone()
    finally:
        conn.close()
    return int(n)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TranscriptStore]:
    s: TranscriptStore = (
        MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")
    )
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "runs.db")
    try:
        yield s
    finally:
        await s.close()


# --------------------------------------------------------------------------- shared semantics


async def test_round_trip_survives_reopen(tmp_path: Path) -> None:
    events = full_transcript()
    first = SQLiteStore(tmp_path / "runs.db")
    await first.append("r1", 0, events)
    await first.close()
    second = SQLiteStore(tmp_path / "runs.db")
    try:
        assert await second.load("r1") == events
        assert (await second.list_runs())[0].events == len(events)
    finally:
        await second.close()


async def test_seq_mismatch_conflicts_and_writes_nothing(store: TranscriptStore) -> None:
    await store.append("r1", 0, [started(), context("r1", 1)])
    with pytest.raises(SeqConflictError, match=r"r1.*seq 1.*2 events"):
        await store.append("r1", 1, [context("r1", 1, content="late")])
    with pytest.raises(SeqConflictError):
        await store.append("r1", 3, [context("r1", 3), context("r1", 4)])
    loaded = await store.load("r1")
    assert [e.seq for e in loaded] == [0, 1]
    assert isinstance(loaded[1], ContextAdded)
    assert loaded[1].content == "ctx"
    await store.append("r1", 2, [context("r1", 2)])
    assert [e.seq for e in await store.load("r1")] == [0, 1, 2]


@pytest.mark.parametrize(
    ("expected_seq", "batch", "message"),
    [
        (0, [], "at least one event"),
        (0, [started("r1"), context("r1", 2)], "seq=2"),
        (0, [started("other")], "run_id='other'"),
        (0, [context("r1", 0)], "must be run_started"),
        (1, [context("r1", 1), context("r1", 1)], "event 1"),
    ],
    ids=["empty", "seq-gap", "wrong-run", "first-not-started", "duplicate-seq"],
)
async def test_batch_validation(
    store: TranscriptStore, expected_seq: int, batch: list[Event], message: str
) -> None:
    if expected_seq:
        await store.append("r1", 0, [started()])
    with pytest.raises(StoreError, match=message) as info:
        await store.append("r1", expected_seq, batch)
    assert not isinstance(info.value, SeqConflictError)
    if expected_seq:
        assert len(await store.load("r1")) == 1
    else:
        with pytest.raises(RunNotFoundError):
            await store.load("r1")


async def test_list_runs_status_and_order(store: TranscriptStore) -> None:
    await store.append("a", 0, [started("a", at=10.0, task="A")])
    await store.append("b", 0, [started("b", at=20.0, task="B")])
    await store.append("c", 0, [started("c", at=30.0, task="C")])
    await store.append("a", 1, [finished("a", 1, "completed", at=40.0)])
    await store.append("b", 1, [context("b", 1, at=35.0), finished("b", 2, "failed", at=36.0)])

    runs = await store.list_runs()
    assert [r.run_id for r in runs] == ["a", "b", "c"]
    a, b, c = runs
    assert (a.status, a.task, a.created_at, a.updated_at, a.events) == (
        "completed",
        "A",
        10.0,
        40.0,
        2,
    )
    assert (b.status, b.events, b.updated_at) == ("failed", 3, 36.0)
    assert (c.status, c.events, c.created_at, c.updated_at) == ("running", 1, 30.0, 30.0)

    assert [r.run_id for r in await store.list_runs(status="running")] == ["c"]
    assert [r.run_id for r in await store.list_runs(status="completed")] == ["a"]
    assert await store.list_runs(status="cancelled") == []
    assert [r.run_id for r in await store.list_runs(limit=2)] == ["a", "b"]
    assert await store.list_runs(limit=0) == []


async def test_status_follows_finished_and_resumed(store: TranscriptStore) -> None:
    async def status() -> str:
        (summary,) = await store.list_runs()
        return summary.status

    await store.append("r1", 0, [started()])
    assert await status() == "running"
    await store.append("r1", 1, [finished("r1", 1, "awaiting_confirmation", at=2.0)])
    assert await status() == "awaiting_confirmation"
    await store.append("r1", 2, [RunResumed(run_id="r1", seq=2, at=3.0)])
    assert await status() == "running"
    # Within one batch the last status-changing event wins; other events keep it.
    await store.append(
        "r1",
        3,
        [finished("r1", 3, "budget_exhausted", at=4.0), RunResumed(run_id="r1", seq=4, at=5.0)],
    )
    assert await status() == "running"
    await store.append(
        "r1", 5, [finished("r1", 5, "needs_attention", at=6.0), context("r1", 6, at=7.0)]
    )
    assert await status() == "needs_attention"
    (summary,) = await store.list_runs(status="needs_attention")
    assert (summary.events, summary.updated_at) == (7, 7.0)


# --------------------------------------------------------------------------- SQLite: concurrency


async def test_two_connections_same_seq_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    a, b = SQLiteStore(path), SQLiteStore(path)
    try:
        await a.append("r1", 0, [started()])
        results = await asyncio.gather(
            a.append("r1", 1, [context("r1", 1, content="from a")]),
            b.append("r1", 1, [context("r1", 1, content="from b")]),
            return_exceptions=True,
        )
        assert results.count(None) == 1
        (error,) = [r for r in results if r is not None]
        assert isinstance(error, SeqConflictError)
        winner = "from a" if results[0] is None else "from b"
        for s in (a, b):
            loaded = await s.load("r1")
            assert [e.seq for e in loaded] == [0, 1]
            assert isinstance(loaded[1], ContextAdded)
            assert loaded[1].content == winner
    finally:
        await a.close()
        await b.close()
    assert count_rows(path, "SELECT count(*) FROM events WHERE run_id = 'r1' AND seq = 1") == 1


async def test_threads_racing_on_one_file_one_wins(tmp_path: Path) -> None:
    """Real concurrency: four connections in four threads append seq 1 at the same moment."""
    path = tmp_path / "runs.db"
    stores = [SQLiteStore(path) for _ in range(4)]
    barrier = threading.Barrier(len(stores))

    def contend(i: int) -> BaseException | None:
        barrier.wait()
        batch = [context("r1", 1, content=f"writer {i}"), context("r1", 2)]
        try:
            asyncio.run(stores[i].append("r1", 1, batch))
        except SeqConflictError as exc:
            return exc
        return None

    try:
        await stores[0].append("r1", 0, [started()])
        results = await asyncio.gather(*(asyncio.to_thread(contend, i) for i in range(len(stores))))
        assert results.count(None) == 1
        assert all(isinstance(r, SeqConflictError) for r in results if r is not None)
        loaded = await stores[3].load("r1")
        assert [e.seq for e in loaded] == [0, 1, 2]
        assert isinstance(loaded[1], ContextAdded)
        assert loaded[1].content == f"writer {results.index(None)}"
    finally:
        for s in stores:
            await s.close()
    assert count_rows(path, "SELECT count(*) FROM events") == 3


async def test_primary_key_is_a_second_guard(tmp_path: Path) -> None:
    """A stray event row at the next seq (runs.next_seq not advanced) still conflicts."""
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.append("r1", 0, [started()])
        conn = raw(path)
        try:
            conn.execute(
                "INSERT INTO events (run_id, seq, type, at, body) "
                "VALUES ('r1', 2, 'context_added', 9.0, ?)",
                (context("r1", 2).model_dump_json(exclude={"run_id", "seq"}),),
            )
        finally:
            conn.close()
        with pytest.raises(SeqConflictError, match="r1"):
            await store.append("r1", 1, [context("r1", 1), context("r1", 2)])
        # Nothing of the batch was written: seq 1 is absent and the run is still at seq 1.
        assert count_rows(path, "SELECT count(*) FROM events WHERE seq = 1") == 0
        assert count_rows(path, "SELECT next_seq FROM runs WHERE run_id = 'r1'") == 1
    finally:
        await store.close()


# --------------------------------------------------------------------------- SQLite: layout


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
async def test_pragmas_applied(tmp_path: Path, synchronous: Literal["FULL", "NORMAL"]) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path, synchronous=synchronous, busy_timeout_s=2.5)
    try:
        conn = store._conn
        assert conn is not None
        # synchronous and busy_timeout are per connection: ask the store's own.
        (sync,) = conn.execute("PRAGMA synchronous").fetchone()
        assert sync == {"FULL": 2, "NORMAL": 1}[synchronous]
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (2500,)
        assert conn.isolation_level is None
    finally:
        await store.close()
    # journal_mode=WAL is persistent in the file: a separate connection sees it.
    other = raw(path)
    try:
        assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        latest = schema_status(f"sqlite:///{path}").latest
        assert other.execute("PRAGMA user_version").fetchone() == (latest,)  # every migration
    finally:
        other.close()


async def test_invalid_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="synchronous"):
        # An invalid value on purpose: the runtime check is what is tested.
        SQLiteStore(tmp_path / "a.db", synchronous="OFF")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ConfigurationError, match="busy_timeout_s"):
        SQLiteStore(tmp_path / "a.db", busy_timeout_s=-1)
    with pytest.raises(ConfigurationError):
        SQLiteStore("")
    assert not (tmp_path / "a.db").exists()


async def test_one_row_per_event(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        events = full_transcript()
        await store.append("r1", 0, events[:4])
        await store.append("r1", 4, events[4:])
        await store.append("r2", 0, [started("r2"), context("r2", 1)])
    finally:
        await store.close()
    assert count_rows(path, "SELECT count(*) FROM events") == len(events) + 2
    assert count_rows(path, "SELECT count(*) FROM events WHERE run_id = 'r1'") == len(events)
    assert count_rows(path, "SELECT count(*) FROM runs") == 2
    conn = raw(path)
    try:
        rows = conn.execute("SELECT seq, type, at, body FROM events WHERE run_id = 'r1'").fetchall()
    finally:
        conn.close()
    assert [(seq, type_, at) for seq, type_, at, _ in rows] == [
        (e.seq, e.type, e.at) for e in events
    ]
    # The body is the compact JSON of the event without the key columns.
    assert [body for *_, body in rows] == [encode_event_body(e) for e in events]
    assert all('"run_id"' not in body and '"seq"' not in body for *_, body in rows)


async def test_parent_directory_created(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "runs.db"
    store = SQLiteStore(path)
    try:
        assert store.url == f"sqlite:///{path}"
        await store.append("r1", 0, [started()])
    finally:
        await store.close()
    assert path.is_file()


async def test_closed_store_and_idempotent_close(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    await store.append("r1", 0, [started()])
    await store.close()
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.load("r1")
    with pytest.raises(StoreError, match="closed"):
        await store.append("r1", 1, [context("r1", 1)])


async def test_newer_schema_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    conn = raw(path)
    try:
        conn.execute(f"PRAGMA user_version = {SQLITE_VERSION + 1}")
    finally:
        conn.close()
    before = path.read_bytes()
    newer = SQLITE_VERSION + 1
    with pytest.raises(StoreError, match=rf"schema version {newer}.*upgrade") as info:
        SQLiteStore(path)
    assert not isinstance(info.value, StoreCorruptedError)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["runs.db"]


# --------------------------------------------------------------------------- SQLite: corruption


async def test_undecodable_event_body(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.append(
            "run-xyz", 0, [started("run-xyz"), *(context("run-xyz", i) for i in (1, 2, 3))]
        )
        conn = raw(path)
        try:
            conn.execute(
                "UPDATE events SET body = '{not json' WHERE run_id = 'run-xyz' AND seq = 2"
            )
        finally:
            conn.close()
        with pytest.raises(StoreCorruptedError) as info:
            await store.load("run-xyz")
        message = str(info.value)
        assert "run-xyz" in message
        assert "seq 2" in message
        assert "not guessed" in message
        assert info.value.__cause__ is not None
        # Events before and after the bad one are still readable, and nothing was "repaired".
        assert [e.seq for e in await store.load("run-xyz", after=2)] == [3]
        with pytest.raises(StoreCorruptedError):
            await store.load("run-xyz", after=1)
    finally:
        await store.close()
    assert count_rows(path, "SELECT count(*) FROM events WHERE body = '{not json'") == 1


@pytest.mark.parametrize(
    ("body", "type_"),
    [
        ('{"at":1.0,"v":1,"type":"context_added","step":"x","source":"s","content":"c"}', None),
        ('{"at":1.0,"v":1,"type":"no_such_event"}', None),
        ("[]", None),
        (None, "model_called"),  # a valid body whose type column disagrees
    ],
    ids=["bad-field", "unknown-type", "not-an-object", "type-mismatch"],
)
async def test_invalid_event_rows(tmp_path: Path, body: str | None, type_: str | None) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.append("r1", 0, [started(), context("r1", 1)])
        conn = raw(path)
        try:
            if body is not None:
                conn.execute("UPDATE events SET body = ? WHERE seq = 1", (body,))
            if type_ is not None:
                conn.execute("UPDATE events SET type = ? WHERE seq = 1", (type_,))
        finally:
            conn.close()
        with pytest.raises(StoreCorruptedError, match=r"'r1'.*seq 1"):
            await store.load("r1")
    finally:
        await store.close()


async def test_gap_in_seqs_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.append("r1", 0, [started(), *(context("r1", i) for i in (1, 2, 3))])
        conn = raw(path)
        try:
            conn.execute("DELETE FROM events WHERE seq = 2")
        finally:
            conn.close()
        with pytest.raises(StoreCorruptedError, match=r"'r1'.*seq 2"):
            await store.load("r1")
        assert [e.seq for e in await store.load("r1", after=2)] == [3]
        conn = raw(path)
        try:
            conn.execute("DELETE FROM events WHERE seq = 3")  # a missing tail, too
        finally:
            conn.close()
        with pytest.raises(StoreCorruptedError, match=r"'r1'.*seq 3"):
            await store.load("r1", after=2)
    finally:
        await store.close()


async def test_not_a_database_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    garbage = os.urandom(8192)
    path.write_bytes(garbage)
    with pytest.raises(StoreCorruptedError) as info:
        SQLiteStore(path)
    assert str(path) in str(info.value)
    assert "untouched" in str(info.value)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)
    assert path.read_bytes() == garbage
    assert sorted(os.listdir(tmp_path)) == ["runs.db"]
    # open_store says the same, and still does not touch the file.
    with pytest.raises(StoreCorruptedError):
        open_store(f"sqlite:///{path}")
    assert path.read_bytes() == garbage


async def _damaged_store_file(path: Path, start: int | None) -> bytes:
    """A store file with bytes ``start..`` of the first page, or every later page, trashed."""
    store = SQLiteStore(path)
    try:
        more = (context("r1", i, content="x" * 3000) for i in range(1, 20))
        await store.append("r1", 0, [started(), *more])
    finally:
        await store.close()  # the last connection checkpoints the WAL into the file
    return _trash_pages(path, start)


def _trash_pages(path: Path, start: int | None) -> bytes:
    conn = raw(path)
    try:
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    finally:
        conn.close()
    data = bytearray(path.read_bytes())
    if start is None:
        data[page_size:] = b"\xff" * (len(data) - page_size)  # the table pages
    else:
        data[start:page_size] = b"\xff" * (page_size - start)  # the schema page
    path.write_bytes(bytes(data))
    return bytes(data)


async def test_damaged_schema_page_fails_on_open(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    data = await _damaged_store_file(path, start=100)  # keep the 100-byte file header
    with pytest.raises(StoreCorruptedError, match="untouched") as info:
        SQLiteStore(path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == data


async def test_damaged_table_pages_fail_on_read(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    data = await _damaged_store_file(path, start=None)
    store = SQLiteStore(path)
    try:
        with pytest.raises(StoreCorruptedError, match="untouched") as info:
            await store.load("r1")
        assert str(path) in str(info.value)
        with pytest.raises(StoreCorruptedError):
            await store.list_runs()
    finally:
        await store.close()
    assert path.read_bytes() == data


async def test_directory_path(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="directory") as info:
        SQLiteStore(tmp_path)
    assert str(tmp_path) in str(info.value)
    assert not isinstance(info.value, StoreCorruptedError)


async def test_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="file"):
        SQLiteStore(tmp_path / "file" / "runs.db")


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root ignores file permissions, so a read-only store cannot be simulated",
)
async def test_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "ro" / "runs.db"
    store = SQLiteStore(path)
    await store.append("r1", 0, [started()])
    await store.close()
    path.chmod(0o444)
    path.parent.chmod(0o555)
    error: StoreError | None = None
    try:
        try:
            ro = SQLiteStore(path)
        except StoreError as exc:
            error = exc  # refused on open
        else:
            try:
                with pytest.raises(StoreError) as info:
                    await ro.append("r1", 1, [context("r1", 1)])
                error = info.value
            finally:
                await ro.close()
    finally:
        path.parent.chmod(0o755)
        path.chmod(0o644)
    assert error is not None
    assert not isinstance(error, SeqConflictError)
    assert str(path) in str(error)


# --------------------------------------------------------------------------- SQLite: disk full


async def test_disk_full_writes_nothing_and_recovers(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.append("r1", 0, [started(), context("r1", 1), context("r1", 2)])
        before = await store.load("r1")
        conn = store._conn  # the store's own connection: max_page_count is per connection
        assert conn is not None
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")
        big = [context("r1", seq, content="x" * 8000) for seq in range(3, 53)]
        with pytest.raises(StoreError) as info:
            await store.append("r1", 3, big)
        assert not isinstance(info.value, SeqConflictError)
        assert "full" in str(info.value)
        assert str(path) in str(info.value)
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        assert not conn.in_transaction
        assert await store.load("r1") == before
        (summary,) = await store.list_runs()
        assert summary.events == 3
        assert count_rows(path, "SELECT count(*) FROM events") == 3
        assert count_rows(path, "SELECT next_seq FROM runs") == 3

        conn.execute("PRAGMA max_page_count = 1073741823")
        await store.append("r1", 3, big)
        assert [e.seq for e in await store.load("r1")] == list(range(53))
    finally:
        await store.close()


# --------------------------------------------------------------------------- open_store


async def test_open_store_memory() -> None:
    store = open_store("memory://")
    try:
        assert isinstance(store, MemoryStore)
        assert store.url == "memory://"
    finally:
        await store.close()


async def test_open_store_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///sub/runs.db")
    try:
        assert isinstance(store, SQLiteStore)
        assert store.url == "sqlite:///sub/runs.db"
        await store.append("r1", 0, [started()])
    finally:
        await store.close()
    assert (tmp_path / "sub" / "runs.db").is_file()


async def test_open_store_absolute_path(tmp_path: Path) -> None:
    path = tmp_path / "abs.db"
    url = f"sqlite:///{path}"
    assert url.startswith("sqlite:////")
    store = open_store(url)
    try:
        assert isinstance(store, SQLiteStore)
        assert store.url == url
        await store.append("r1", 0, [started()])
    finally:
        await store.close()
    assert count_rows(path, "SELECT count(*) FROM events") == 1


@pytest.mark.parametrize("url", ["mysql://x/y", "runs.db", "memory:"])
def test_open_store_unknown_scheme(url: str) -> None:
    with pytest.raises(ConfigurationError, match="registered schemes are memory://, postgres://"):
        open_store(url)


def test_open_store_sqlite_with_two_slashes() -> None:
    with pytest.raises(ConfigurationError, match=r"no file path: use sqlite:///runs\.db"):
        open_store("sqlite://runs.db")


def test_open_store_empty_path() -> None:
    with pytest.raises(ConfigurationError, match="no file path"):
        open_store("sqlite:///")


async def test_default_store_url_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTCORE_STORE", raising=False)
    assert default_store_url() == "sqlite:///agentcore.db"
    monkeypatch.setenv("AGENTCORE_STORE", "memory://")
    assert default_store_url() == "memory://"
    store = open_store()
    try:
        assert isinstance(store, MemoryStore)
    finally:
        await store.close()
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("AGENTCORE_STORE", url)
    store = open_store(None)
    try:
        assert isinstance(store, SQLiteStore)
        assert store.url == url
    finally:
        await store.close()
    assert (tmp_path / "env.db").is_file()
