"""SQLite layouts: numbered migrations applied on open, and files that are not ours refused.

A store file moves forward by numbered migrations, all pending ones in one transaction,
never destructively; a file of another application or of a newer agentcore is refused and
left byte for byte (and mtime) as it was.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from agentcore.errors import StoreCorruptedError, StoreError
from agentcore.events import ContextAdded, RunStarted
from agentcore.stores import SQLiteStore, open_store
from agentcore.stores.sqlite import SCHEMA_VERSION

FIXTURE = Path(__file__).parent / "fixtures" / "store-0.1.0.db"
APPLICATION_ID = int.from_bytes(b"agtc", "big")

# Migration 1, exactly as agentcore 0.1.0 created it.
V1_SCHEMA = (
    """CREATE TABLE events (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, at REAL NOT NULL,
        body TEXT NOT NULL, PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, status TEXT NOT NULL, task TEXT NOT NULL,
        created_at REAL NOT NULL, updated_at REAL NOT NULL, next_seq INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX runs_by_status ON runs (status)",
)


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def pragma(path: Path, name: str) -> int:
    conn = raw(path)
    try:
        (value,) = conn.execute(f"PRAGMA {name}").fetchone()
        return int(value)
    finally:
        conn.close()


def columns(path: Path, table: str) -> list[tuple[str, str, int]]:
    conn = raw(path)
    try:
        return [(r[1], r[2], r[3]) for r in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


def make_file(path: Path, *statements: str) -> None:
    conn = raw(path)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def fingerprint(path: Path) -> tuple[bytes, int, list[str]]:
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(os.listdir(path.parent))


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


# --------------------------------------------------------------------------- migrations


async def test_a_new_file_gets_every_migration(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    store = SQLiteStore(path)
    await store.close()
    assert pragma(path, "user_version") == SCHEMA_VERSION
    assert pragma(path, "application_id") == APPLICATION_ID
    names = [c[0] for c in columns(path, "runs")]
    assert names[-10:] == [
        *("cancel_by", "cancel_reason", "cancel_at"),
        *("owner", "epoch", "lease_until", "lease_flock", "tenant"),
        "metadata",
        "chain_head",
    ]
    assert [c[0] for c in columns(path, "events")][-1] == "chain"


async def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    store = SQLiteStore(path)
    try:
        await store.append("r1", 0, [started("r1")])
        assert [e.type for e in await store.load("r1")] == ["run_started"]
    finally:
        await store.close()
    assert pragma(path, "user_version") == SCHEMA_VERSION


async def test_a_0_1_0_file_is_migrated_without_losing_anything(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURE, path)
    assert pragma(path, "user_version") == 1
    events_before, runs_before = columns(path, "events"), columns(path, "runs")
    conn = raw(path)
    rows_before = conn.execute("SELECT * FROM events ORDER BY run_id, seq").fetchall()
    conn.close()

    store = SQLiteStore(path)
    try:
        listed = await store.list_runs()
        assert len(listed) == 7
        await store.append("new", 0, [started("new")])
    finally:
        await store.close()

    assert pragma(path, "user_version") == SCHEMA_VERSION
    assert pragma(path, "application_id") == APPLICATION_ID
    # Only additions: every column of 0.1.0 is still there, unchanged, in its place.
    assert columns(path, "events") == [*events_before, ("chain", "BLOB", 0)]
    assert columns(path, "runs")[: len(runs_before)] == runs_before
    assert columns(path, "runs")[len(runs_before) :] == [
        ("cancel_by", "TEXT", 0),
        ("cancel_reason", "TEXT", 0),
        ("cancel_at", "REAL", 0),
        ("owner", "TEXT", 0),
        ("epoch", "INTEGER", 1),
        ("lease_until", "REAL", 0),
        ("lease_flock", "INTEGER", 1),
        ("tenant", "TEXT", 0),
        ("metadata", "TEXT", 0),
        ("chain_head", "TEXT", 0),
    ]
    conn = raw(path)
    rows_after = conn.execute(  # the old events are not back-filled: their chain stays NULL
        "SELECT run_id, seq, type, at, body FROM events WHERE run_id != 'new' "
        "AND chain IS NULL ORDER BY run_id, seq"
    ).fetchall()
    conn.close()
    assert rows_after == rows_before


async def test_pending_migrations_apply_in_one_transaction(tmp_path: Path) -> None:
    # A version-1 file where migration 2's last column already exists: migration 2 fails
    # half-way, and the file must be exactly at version 1 afterwards, not in between.
    path = tmp_path / "half.db"
    make_file(
        path,
        *V1_SCHEMA,
        "ALTER TABLE runs ADD COLUMN cancel_at REAL",
        "PRAGMA user_version = 1",
    )
    with pytest.raises(StoreError, match="cannot open the database") as info:
        SQLiteStore(path)
    assert not isinstance(info.value, StoreCorruptedError)
    assert pragma(path, "user_version") == 1
    assert pragma(path, "application_id") == 0
    assert "cancel_by" not in [c[0] for c in columns(path, "runs")]


async def test_a_store_opened_twice_migrates_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURE, path)
    first, second = SQLiteStore(path), SQLiteStore(path)
    try:
        assert len(await first.list_runs()) == len(await second.list_runs()) == 7
    finally:
        await first.close()
        await second.close()
    assert pragma(path, "user_version") == SCHEMA_VERSION


async def test_a_newer_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    newer = SCHEMA_VERSION + 1
    make_file(path, *V1_SCHEMA, f"PRAGMA user_version = {newer}")
    before = fingerprint(path)
    with pytest.raises(
        StoreError,
        match=rf"schema version {newer}, newer than this agentcore reads \({SCHEMA_VERSION}\)",
    ):
        SQLiteStore(path)
    assert fingerprint(path) == before


# --------------------------------------------------------------------------- not our file


@pytest.mark.parametrize(
    ("statements", "why"),
    [
        (
            ("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)",),
            r"it has user_version 0 and schema objects of its own \(notes\)",
        ),
        (
            # Another application's table named like ours is still not ours.
            ("CREATE TABLE runs (id INTEGER PRIMARY KEY)", "CREATE VIEW v AS SELECT 1"),
            r"it has user_version 0 and schema objects of its own \(runs, v\)",
        ),
        (
            ("CREATE TABLE notes (id INTEGER)", "PRAGMA user_version = 1"),
            r"it has user_version 1 but not agentcore's tables",
        ),
        (
            (*V1_SCHEMA, "PRAGMA user_version = 2", "PRAGMA application_id = 1234"),
            r"its application_id is 0x4d2",
        ),
    ],
    ids=["own-tables", "table-named-runs", "versioned-foreign", "foreign-application-id"],
)
async def test_a_file_of_another_application_is_refused_and_never_modified(
    tmp_path: Path, statements: tuple[str, ...], why: str
) -> None:
    path = tmp_path / "theirs.db"
    make_file(path, *statements)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # an mtime any write would change
    before = fingerprint(path)
    with pytest.raises(StoreError, match="is not an agentcore store: " + why) as info:
        open_store(f"sqlite:///{path}")
    assert not isinstance(info.value, StoreCorruptedError)
    assert "left untouched" in str(info.value)
    assert fingerprint(path) == before


def test_a_file_of_another_application_is_refused_by_the_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentcore.cli import app

    path = tmp_path / "theirs.db"
    make_file(path, "CREATE TABLE notes (id INTEGER)")
    before = fingerprint(path)
    result = CliRunner().invoke(app, ["runs", "--store", f"sqlite:///{path}"])
    assert result.exit_code != 0
    assert "is not an agentcore store" in result.output
    assert fingerprint(path) == before


async def test_our_own_events_still_load_after_the_check(tmp_path: Path) -> None:
    # The check reads sqlite_master before anything else; a store with runs passes it.
    path = tmp_path / "ours.db"
    store = SQLiteStore(path)
    try:
        ctx = ContextAdded(run_id="r", seq=1, at=2.0, step=1, source="s", content="c")
        await store.append("r", 0, [started("r"), ctx])
    finally:
        await store.close()
    again = SQLiteStore(path)
    try:
        assert [e.type for e in await again.load("r")] == ["run_started", "context_added"]
    finally:
        await again.close()
