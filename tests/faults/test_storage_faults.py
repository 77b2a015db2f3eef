"""Storage faults: a failed append, an undecodable event, a damaged database file."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agentcore import Agent, Policy, RunStatus, check_transcript, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import StoreCorruptedError, StoreError
from agentcore.stores import SQLiteStore
from faults._support import KILLED, RUN_ID, TIMEOUT_S, Case, assert_store_consistent, dumped
from faults.worker import ANSWER, TOOL_NAME, make_tool

pytestmark = pytest.mark.subprocess

KEY_2 = f"{RUN_ID}:2"  # the ledger tool runs at step 2 in the in-process script
BIG_ENTRY = "x" * 40_000  # needs new (overflow) pages, whatever free space the file has


# -- a failed append: disk full, read-only, locked past the busy timeout ----------------------


@tool(effect="read")
def lookup(order_id: str) -> dict[str, str]:
    """Look up one order.

    Args:
        order_id: the order's id.
    """
    return {"order_id": order_id, "status": "delivered"}


def _script(before_step_2: Callable[[], None]) -> Callable[[Sequence[Message]], Any]:
    """Step 1 reads, step 2 writes the ledger (big args), step 3 finishes.

    ``before_step_2`` runs when the model is asked for step 2 (the first time only): the
    fault is armed after a few events are durable, before the write's intent commit.
    """
    armed = [True]

    def next_action(messages: Sequence[Message]) -> dict[str, Any]:  # Any: a JSON action
        said = " ".join(m.content for m in messages if m.role == "user")
        if "lookup returned" not in said:
            args: dict[str, Any] = {"order_id": "A1"}  # Any: JSON values
            return {"type": "tool", "thought": "Look.", "tool": "lookup", "args": args}
        if f"{TOOL_NAME} returned" not in said:
            if armed[0]:
                armed[0] = False
                before_step_2()
            args = {"entry": BIG_ENTRY}
            return {"type": "tool", "thought": "Write.", "tool": TOOL_NAME, "args": args}
        return {"type": "finish", "thought": "Done.", "answer": ANSWER}

    return next_action


def _conn(store: SQLiteStore) -> sqlite3.Connection:
    conn = store._conn  # the store's own connection: PRAGMAs are per connection
    assert conn is not None
    return conn


@contextmanager
def _disk_full(store: SQLiteStore) -> Iterator[Callable[[], None]]:
    """SQLITE_FULL: cap the file at its current size (max_page_count) on the store's conn."""

    def arm() -> None:
        conn = _conn(store)
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")

    yield arm
    _conn(store).execute("PRAGMA max_page_count = 1073741823")  # the fault is cleared


@contextmanager
def _read_only(store: SQLiteStore) -> Iterator[Callable[[], None]]:
    """SQLITE_READONLY through ``query_only`` (the tests run as root: chmod does not stop us)."""

    def arm() -> None:
        _conn(store).execute("PRAGMA query_only = ON")

    yield arm
    _conn(store).execute("PRAGMA query_only = OFF")


@contextmanager
def _locked(store: SQLiteStore) -> Iterator[Callable[[], None]]:
    """SQLITE_BUSY: another connection holds the write lock past the store's busy timeout."""
    other = sqlite3.connect(store.path, isolation_level=None)

    def arm() -> None:
        _conn(store).execute("PRAGMA busy_timeout = 100")
        other.execute("BEGIN IMMEDIATE")

    try:
        yield arm
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()


FAULTS = {
    "disk_full": (_disk_full, "SQLITE_FULL"),
    "read_only": (_read_only, "SQLITE_READONLY"),
    "locked": (_locked, "SQLITE_BUSY"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_failed_append_before_the_tool_means_the_tool_does_not_run(
    tmp_path: Path, fault: str
) -> None:
    fixture, code = FAULTS[fault]
    db, ledger = tmp_path / "runs.db", tmp_path / "ledger.txt"

    async def go() -> None:
        store = SQLiteStore(db)
        with fixture(store) as arm:
            agent = Agent(
                tools=[lookup, make_tool("non_idempotent", str(ledger))],
                model=ScriptedModel(_script(arm)),
                store=store,
                policy=Policy(plan_before_writes=False),
            )
            with pytest.raises(StoreError) as caught:
                await agent.run("Look up A1, then record it.", run_id=RUN_ID)
            assert not isinstance(caught.value, StoreCorruptedError)
            assert str(db) in str(caught.value) and code in str(caught.value)
            assert not ledger.exists()  # the intent was not durable: the tool did not run
            durable = await store.load(RUN_ID)
            assert [ev.type for ev in durable][-1] == "tool_started"  # step 1's intent
            assert check_transcript(durable) == []
        # The fault is cleared: resume continues from the transcript and completes.
        result = await agent.resume(RUN_ID)
        assert result.status is RunStatus.COMPLETED, result
        assert ledger.read_text().splitlines() == [KEY_2]
        events = await store.load(RUN_ID)
        assert dumped(events)[: len(durable)] == dumped(durable)
        assert check_transcript(events) == []
        await store.close()

    asyncio.run(go())
    assert_store_consistent(db, RUN_ID)


# -- a corrupted last event ---------------------------------------------------------------


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCORE_", "FAULT_"))}
    return subprocess.run(
        [sys.executable, "-m", "agentcore.cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp,
        env={**env, "COLUMNS": "200"},
        timeout=TIMEOUT_S,
        check=False,
    )


GARBAGE = {
    "not_json": "{garbage \x00 not json",
    # Bytes that are not UTF-8 (bit rot, a torn write): stored as TEXT by raw SQLite.
    "not_utf8": b"{garbage \xff\xfe not utf-8",
}


@pytest.mark.parametrize("garbage", list(GARBAGE))
def test_corrupted_last_event_is_reported_then_repaired_explicitly(
    tmp_path: Path, garbage: str
) -> None:
    body = GARBAGE[garbage]
    case = Case(tmp_path, "idempotent")
    assert case.run("start", crash="after_intent_commit").returncode == KILLED
    events = case.events()
    last = events[-1].seq
    assert events[-1].type == "tool_started"
    conn = sqlite3.connect(case.db)
    with conn:
        conn.execute(
            "UPDATE events SET body = CAST(? AS TEXT) WHERE run_id = ? AND seq = ?",
            (body, RUN_ID, last),
        )
    conn.close()

    refused = case.run("resume")
    assert refused.returncode == 1, refused
    assert refused.result is not None and refused.result["error"] == "StoreCorruptedError"
    message = str(refused.result["message"])
    assert RUN_ID in message and f"seq {last}" in message
    assert not case.ledger.exists()  # nothing was guessed, nothing ran

    backup = tmp_path / "removed.jsonl"
    repaired = _cli(
        tmp_path,
        *("repair", RUN_ID, "--truncate-after", str(last - 1)),
        *("--backup", str(backup), "--store", f"sqlite:///{case.db}"),
    )
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    saved = [json.loads(line) for line in backup.read_text().splitlines()]
    assert [(s["run_id"], s["seq"]) for s in saved] == [(RUN_ID, last)]
    expected_raw = body if isinstance(body, str) else body.decode("utf-8", "replace")
    assert saved[0]["raw"] == expected_raw
    assert_store_consistent(case.db, RUN_ID)

    resumed = case.run("resume")
    assert resumed.returncode == 0, resumed
    assert resumed.status == "completed"
    # The cut intent never ran: the decided action runs from the transcript, once.
    assert case.ledger_lines() == [f"{RUN_ID}:1"]
    after = case.events()
    assert dumped(after)[:last] == dumped(events[:last])
    assert check_transcript(after) == []
    assert_store_consistent(case.db, RUN_ID)


# -- a damaged database file --------------------------------------------------------------


def _populated_store(db: Path, runs: int) -> list[str]:
    """A closed store file with a few completed runs (big events: many pages)."""

    async def go() -> list[str]:
        store = SQLiteStore(db)
        agent = Agent(
            tools=[lookup],
            model=ScriptedModel(
                lambda messages: (
                    {"type": "finish", "thought": "Done.", "answer": "y" * 3000}
                    if any(m.role == "assistant" for m in messages)
                    else {
                        "type": "tool",
                        "thought": "z" * 3000,
                        "tool": "lookup",
                        "args": {"order_id": "A1"},
                    }
                )
            ),
            store=store,
        )
        ids = []
        for i in range(runs):
            result = await agent.run("Look up A1.", run_id=f"run-{i}")
            assert result.status is RunStatus.COMPLETED
            ids.append(result.run_id)
        await store.close()
        return ids

    return asyncio.run(go())


def _events_page(db: Path, pagetype: str) -> tuple[int, int]:
    """(page size, number of a ``pagetype`` page in the middle of the events table)."""
    conn = sqlite3.connect(db)
    try:
        (size,) = conn.execute("PRAGMA page_size").fetchone()
        pages = [
            p
            for (p,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = ? ORDER BY pageno",
                (pagetype,),
            )
        ]
    finally:
        conn.close()
    assert pages, f"no {pagetype} page in the events table"
    return size, pages[len(pages) // 2]


async def _read_everything(db: Path, run_ids: list[str]) -> None:
    store = SQLiteStore(db)
    try:
        await store.list_runs()
        for run_id in run_ids:
            await store.load(run_id)
    finally:
        await store.close()


@pytest.mark.parametrize("where", ["leaf_page", "overflow_page", "header"])
def test_damaged_database_file_is_reported_and_never_recreated(tmp_path: Path, where: str) -> None:
    db = tmp_path / "runs.db"
    run_ids = _populated_store(db, runs=12)
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    data = bytearray(db.read_bytes())
    if where == "header":
        data[0:16] = b"not a database!\x00"
    else:  # a page in the middle of the file, inside the events table
        page_size, page = _events_page(db, where.removesuffix("_page"))
        offset = (page - 1) * page_size
        data[offset : offset + page_size] = b"\xa5" * page_size
    db.write_bytes(bytes(data))
    damaged, inode = db.read_bytes(), db.stat().st_ino

    with pytest.raises(StoreError) as caught:
        asyncio.run(_read_everything(db, run_ids))
    assert str(db) in str(caught.value)
    if where != "overflow_page":  # a damaged b-tree page or header: SQLITE_CORRUPT / NOTADB
        assert isinstance(caught.value, StoreCorruptedError), caught.value
    assert db.read_bytes() == damaged
    assert db.stat().st_ino == inode
