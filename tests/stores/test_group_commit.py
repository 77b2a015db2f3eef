"""Group commit (SQLite and PostgreSQL): concurrent appends share one transaction, each
keeps its own outcome, a failing transaction fails its whole batch, a lone append waits for
nothing, and an append returns only after the commit that wrote it.

What counts as "one transaction" is observed outside the store's own counters too:
PostgreSQL stamps every row with the id of the transaction that wrote it (``xmin``), and a
SQLite commit is one commit frame in the write-ahead log.
"""

from __future__ import annotations

import asyncio
import sqlite3
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentcore.errors import LeaseLostError, SeqConflictError, StoreError
from agentcore.stores import CommitStats, PostgresStore, SQLiteStore
from agentcore.stores.testing import context, fresh_run_id, started


@dataclass
class Backend:
    """One durable store under test, with ways to look at it from outside the store."""

    name: str
    make: Callable[[bool], SQLiteStore | PostgresStore]
    committed: Callable[[str], int]
    """How many events of a run another connection sees (blocking: nothing else runs)."""
    transactions: Callable[[list[str]], int]
    """How many transactions wrote the events of these runs, seen from outside (SQLite:
    commit frames added to the WAL since the backend was made, whatever they wrote)."""
    fault: Callable[[str], None]
    """Install a fault: ``"statement"``: an event whose body contains ``stmt-boom`` fails
    its insert; ``"commit"``: one whose body contains ``commit-boom`` fails the COMMIT."""


# -- SQLite -------------------------------------------------------------------------------


def _wal_commits(path: Path) -> int:
    """Commit frames in a SQLite WAL file (frames whose salts match the header's and whose
    "database size after commit" field is set)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    if len(data) < 32:
        return 0
    page_size = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    count, offset = 0, 32
    while offset + 24 + page_size <= len(data):
        header = data[offset : offset + 24]
        if header[8:16] != salts:
            break
        if struct.unpack(">I", header[4:8])[0]:
            count += 1
        offset += 24 + page_size
    return count


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Backend:
    path = tmp_path / "runs.db"
    made: list[SQLiteStore] = []

    def make(group: bool) -> SQLiteStore:
        store = SQLiteStore(path, group_commit=group)
        store._conn.execute("PRAGMA wal_autocheckpoint = 0")  # pyright: ignore[reportPrivateUsage, reportOptionalMemberAccess]  # keep every commit frame in the WAL to count them
        made.append(store)
        return store

    def committed(run_id: str) -> int:
        with sqlite3.connect(path) as conn:
            return conn.execute(
                "SELECT count(*) FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()[0]

    start = _wal_commits(Path(f"{path}-wal"))

    def transactions(run_ids: list[str]) -> int:
        return _wal_commits(Path(f"{path}-wal")) - start

    def fault(kind: str) -> None:
        conn = made[-1]._conn  # pyright: ignore[reportPrivateUsage]  # the store's own connection: PRAGMAs are per connection
        assert conn is not None
        if kind == "statement":
            conn.execute(
                """CREATE TRIGGER stmt_boom BEFORE INSERT ON events
                WHEN NEW.body LIKE '%stmt-boom%' BEGIN SELECT RAISE(ABORT, 'stmt-boom'); END"""
            )
        else:  # a deferred foreign key is checked at COMMIT, and fails it
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("CREATE TABLE boom_parent (id INTEGER PRIMARY KEY)")
            conn.execute(
                """CREATE TABLE boom_child (parent INTEGER
                REFERENCES boom_parent (id) DEFERRABLE INITIALLY DEFERRED)"""
            )
            conn.execute(
                """CREATE TRIGGER commit_boom AFTER INSERT ON events
                WHEN NEW.body LIKE '%commit-boom%'
                BEGIN INSERT INTO boom_child VALUES (1); END"""
            )

    return Backend("sqlite", make, committed, transactions, fault)


# -- PostgreSQL ---------------------------------------------------------------------------


@pytest.fixture
def postgres_backend(postgres_dsn: str, pg_schema: str) -> Backend:
    import psycopg

    events = f'"{pg_schema}".agentcore_events'

    def make(group: bool) -> PostgresStore:
        return PostgresStore(postgres_dsn, schema=pg_schema, group_commit=group)

    def query(sql: str, params: Any = None) -> Any:  # Any: a row of the test's own query
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            return conn.execute(sql.encode(), params).fetchone()

    def committed(run_id: str) -> int:
        return query(f"SELECT count(*) FROM {events} WHERE run_id = %s", (run_id,))[0]

    def transactions(run_ids: list[str]) -> int:
        return query(
            f"SELECT count(DISTINCT xmin::text) FROM {events} WHERE run_id = ANY(%s)", (run_ids,)
        )[0]

    def fault(kind: str) -> None:
        marker, timing = ("stmt-boom", "BEFORE") if kind == "statement" else ("commit-boom", "")
        function = f'"{pg_schema}".{kind}_boom'
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(
                f"""CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF NEW.body LIKE '%%{marker}%%' THEN RAISE EXCEPTION '{marker}'; END IF;
                    RETURN NEW;
                END $$""".encode()
            )
            if timing:
                conn.execute(
                    f"""CREATE TRIGGER {kind}_boom BEFORE INSERT ON {events}
                    FOR EACH ROW EXECUTE FUNCTION {function}()""".encode()
                )
            else:  # checked at COMMIT, and fails it
                conn.execute(
                    f"""CREATE CONSTRAINT TRIGGER {kind}_boom AFTER INSERT ON {events}
                    DEFERRABLE INITIALLY DEFERRED
                    FOR EACH ROW EXECUTE FUNCTION {function}()""".encode()
                )

    return Backend("postgres", make, committed, transactions, fault)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.getfixturevalue(f"{request.param}_backend")


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[SQLiteStore | PostgresStore]:
    s = backend.make(True)
    try:
        yield s
    finally:
        await s.close()


async def _create(store: SQLiteStore | PostgresStore, n: int, prefix: str) -> list[str]:
    runs = [fresh_run_id(prefix) for _ in range(n)]
    await asyncio.gather(*(store.append(r, 0, [started(r)]) for r in runs))
    return runs


def _delta(after: CommitStats, before: CommitStats) -> tuple[int, int, int]:
    """(batches, commits, appends) added between two snapshots."""
    return (
        after.batches - before.batches,
        after.commits - before.commits,
        after.appends - before.appends,
    )


def _snapshot(store: SQLiteStore | PostgresStore) -> CommitStats:
    s = store.stats
    return CommitStats(s.batches, s.commits, s.appends, s.largest_batch, s.failed_commits)


# -- sharing ------------------------------------------------------------------------------


async def test_concurrent_appends_share_one_transaction(
    backend: Backend, store: SQLiteStore | PostgresStore
) -> None:
    await store.append("warm-up", 0, [started("warm-up")])  # opens the pool (PostgreSQL)
    runs = [fresh_run_id("shared") for _ in range(20)]
    before, transactions = _snapshot(store), backend.transactions(runs)
    await asyncio.gather(*(store.append(r, 0, [started(r), context(r, 1)]) for r in runs))
    assert _delta(store.stats, before) == (1, 1, 20)
    assert store.stats.largest_batch == 20
    assert backend.transactions(runs) - transactions == 1
    for r in runs:
        assert await store.load(r) == [started(r), context(r, 1)]


async def test_without_group_commit_each_append_is_a_transaction(backend: Backend) -> None:
    store = backend.make(False)
    try:
        await store.append("warm-up", 0, [started("warm-up")])
        runs = [fresh_run_id("alone") for _ in range(12)]
        before, transactions = _snapshot(store), backend.transactions(runs)
        await asyncio.gather(*(store.append(r, 0, [started(r)]) for r in runs))
        assert _delta(store.stats, before) == (12, 12, 12)
        assert store.stats.largest_batch == 1
        assert backend.transactions(runs) - transactions == 12
    finally:
        await store.close()


async def test_appends_made_during_a_commit_form_the_next_batch(
    store: SQLiteStore | PostgresStore,
) -> None:
    """Runs that keep appending (as agents do) commit in a few shared transactions, each
    batch taken as soon as the previous one ends."""
    runs = await _create(store, 30, "waves")
    before = _snapshot(store)

    async def advance(run_id: str) -> None:
        for seq in range(1, 11):
            await store.append(run_id, seq, [context(run_id, seq)])

    await asyncio.gather(*(advance(r) for r in runs))
    batches, commits, appends = _delta(store.stats, before)
    assert appends == 300
    assert commits == batches <= 30  # ten rounds of 30: far fewer than 300 transactions
    for r in runs:
        assert len(await store.load(r)) == 11


# -- one outcome per append ---------------------------------------------------------------


async def test_a_conflict_in_a_batch_fails_alone(
    backend: Backend, store: SQLiteStore | PostgresStore
) -> None:
    runs = await _create(store, 8, "conflict")
    before, transactions = _snapshot(store), backend.transactions(runs)
    outcomes = await asyncio.gather(
        *(store.append(r, 1, [context(r, 1)]) for r in runs),
        store.append(runs[3], 1, [context(runs[3], 1, content="second writer")]),
        store.append(runs[5], 7, [context(runs[5], 7)]),
        return_exceptions=True,
    )
    assert outcomes[:8] == [None] * 8
    assert isinstance(outcomes[8], SeqConflictError), outcomes
    assert isinstance(outcomes[9], SeqConflictError), outcomes
    assert _delta(store.stats, before) == (1, 1, 8)
    assert backend.transactions(runs) - transactions == 1
    for r in runs:
        assert await store.load(r) == [started(r), context(r, 1)]


async def test_a_fenced_append_in_a_batch_fails_alone(
    backend: Backend, store: SQLiteStore | PostgresStore
) -> None:
    runs = await _create(store, 6, "fenced")
    leases = [await store.acquire(r, owner="worker", ttl_s=30) for r in runs]
    await store.release(leases[1])
    await store.acquire(runs[1], owner="thief", ttl_s=30)
    before = _snapshot(store)
    outcomes = await asyncio.gather(
        *(
            store.append(r, 1, [context(r, 1)], lease=lease)
            for r, lease in zip(runs, leases, strict=True)
        ),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], LeaseLostError) and "'thief'" in str(outcomes[1])
    assert [o for i, o in enumerate(outcomes) if i != 1] == [None] * 5
    assert _delta(store.stats, before) == (1, 1, 5)
    assert backend.committed(runs[1]) == 1
    assert all(backend.committed(r) == 2 for i, r in enumerate(runs) if i != 1)


async def test_a_statement_that_raises_fails_its_append_alone(
    backend: Backend, store: SQLiteStore | PostgresStore
) -> None:
    runs = await _create(store, 6, "raising")
    backend.fault("statement")
    before = _snapshot(store)
    outcomes = await asyncio.gather(
        *(
            store.append(r, 1, [context(r, 1, content="stmt-boom" if i == 2 else "fine")])
            for i, r in enumerate(runs)
        ),
        return_exceptions=True,
    )
    assert isinstance(outcomes[2], StoreError), outcomes
    assert not isinstance(outcomes[2], SeqConflictError)
    assert "stmt-boom" in str(outcomes[2]) and repr(runs[2]) in str(outcomes[2])
    assert [o for i, o in enumerate(outcomes) if i != 2] == [None] * 5
    _, commits, appends = _delta(store.stats, before)
    assert (commits, appends) == (1, 5)
    assert backend.committed(runs[2]) == 1
    assert all(backend.committed(r) == 2 for i, r in enumerate(runs) if i != 2)
    await store.append(runs[2], 1, [context(runs[2], 1)])  # the run itself is fine


async def test_a_failing_commit_fails_every_append_of_its_batch(
    backend: Backend, store: SQLiteStore | PostgresStore
) -> None:
    runs = await _create(store, 6, "doomed")
    backend.fault("commit")
    before = _snapshot(store)
    outcomes = await asyncio.gather(
        *(
            store.append(r, 1, [context(r, 1, content="commit-boom" if i == 4 else "fine")])
            for i, r in enumerate(runs)
        ),
        return_exceptions=True,
    )
    assert all(type(o) is StoreError for o in outcomes), outcomes
    assert all(repr(r) in str(o) for r, o in zip(runs, outcomes, strict=True))
    assert all(o.__cause__ is not None for o in outcomes if isinstance(o, BaseException))
    assert store.stats.failed_commits - before.failed_commits == 1
    assert _delta(store.stats, before)[1:] == (0, 0)
    assert [backend.committed(r) for r in runs] == [1] * 6  # nothing of the batch
    # the next batch is not affected
    await asyncio.gather(*(store.append(r, 1, [context(r, 1)]) for r in runs))
    assert [backend.committed(r) for r in runs] == [2] * 6


# -- no delay, write-ahead ----------------------------------------------------------------


async def test_a_lone_append_starts_its_commit_at_once_without_a_timer(
    store: SQLiteStore | PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Structural: between the append and the start of its commit, no timer is scheduled
    on the loop, and the commit starts within two loop iterations (one to queue it, one
    to start the commit): no window waits for company. (Timers after the start, such as
    the pool's timeout for a connection, are not a delay.)"""
    await store.append("warm-up", 0, [started("warm-up")])  # opens the pool (PostgreSQL)
    loop = asyncio.get_running_loop()
    before = store.stats.batches
    timers: list[float] = []  # scheduled before the commit started
    real_call_at = loop.call_at

    def call_at(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:  # Any: passed on
        if store.stats.batches == before:
            timers.append(when)
        return real_call_at(when, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", call_at)
    task = asyncio.create_task(store.append("lone", 0, [started("lone")]))
    await asyncio.sleep(0)  # the append queues itself
    await asyncio.sleep(0)  # the commit starts
    assert store.stats.batches == before + 1
    assert timers == []
    monkeypatch.undo()
    await task
    assert store.stats.largest_batch == 1


async def test_each_append_returns_only_after_its_commit(
    backend: Backend, store: SQLiteStore | PostgresStore
) -> None:
    """Write-ahead: the moment an append's await returns, another connection already sees
    its events (read blocking, so no commit can happen in between)."""
    runs = await _create(store, 25, "ahead")
    seen: list[tuple[int, int]] = []

    async def advance(run_id: str) -> None:
        for seq in range(1, 6):
            await store.append(run_id, seq, [context(run_id, seq)])
            seen.append((backend.committed(run_id), seq + 1))

    await asyncio.gather(*(advance(r) for r in runs))
    assert len(seen) == 125
    assert all(count == expected for count, expected in seen), seen
    assert store.stats.largest_batch > 1  # and they were batched


async def test_an_append_cancelled_before_its_commit_writes_nothing(
    backend: Backend, store: SQLiteStore | PostgresStore
) -> None:
    await store.append("warm-up", 0, [started("warm-up")])
    before = store.stats.batches
    task = asyncio.create_task(store.append("gone", 0, [started("gone")]))
    await asyncio.sleep(0)  # queued, its commit not started
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    await store.append("after", 0, [started("after")])
    assert backend.committed("gone") == 0
    assert backend.committed("after") == 1
    assert store.stats.batches - before == 1  # the cancelled one's commit never started
