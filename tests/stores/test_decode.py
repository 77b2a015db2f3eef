"""Loading a long transcript: bodies are validated many at a time, and a bad row anywhere
(past the first chunk, too) is still reported at its own seq, never guessed at."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentcore.errors import StoreCorruptedError
from agentcore.events import ContextAdded, Event, RunStarted, ToolFinished
from agentcore.stores import MemoryStore, SQLiteStore
from agentcore.stores._codec import DECODE_CHUNK

RUN = "long-run"
COUNT = DECODE_CHUNK * 2 + 7


def transcript() -> list[Event]:
    events: list[Event] = [
        RunStarted(
            run_id=RUN,
            seq=0,
            at=1.0,
            task="t",
            scope=[],
            budget={},
            policy={},
            contract={},
            route=[],
            tools={},
        )
    ]
    for seq in range(1, COUNT):
        if seq % 2:
            events.append(
                ContextAdded(run_id=RUN, seq=seq, at=2.0, step=1, source="s", content="é")
            )
        else:
            events.append(
                ToolFinished(
                    run_id=RUN,
                    seq=seq,
                    at=2.5,
                    step=1,
                    call_id="c1",
                    tool="t",
                    ok=True,
                    result={"n": seq, "x": [1.5, None, "\x00"]},
                )
            )
    return events


async def written(path: Path) -> list[Event]:
    events = transcript()
    store = SQLiteStore(path)
    try:
        await store.append(RUN, 0, events)
    finally:
        await store.close()
    return events


async def test_a_long_transcript_reads_back_equal(tmp_path: Path) -> None:
    events = await written(tmp_path / "runs.db")
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        assert await store.load(RUN) == events
        assert await store.load(RUN, after=DECODE_CHUNK + 3) == events[DECODE_CHUNK + 4 :]
    finally:
        await store.close()
    memory = MemoryStore()
    await memory.append(RUN, 0, events)
    assert await memory.load(RUN) == events


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("UPDATE events SET body = '{not json' WHERE seq = ?", "cannot be decoded"),
        ("UPDATE events SET body = replace(body, '\"v\":1', '\"v\":9') WHERE seq = ?", "newer"),
        ("UPDATE events SET type = 'model_called' WHERE seq = ?", "type column says"),
        ("DELETE FROM events WHERE seq = ?", "missing"),
    ],
    ids=["bad-json", "newer-format", "type-column", "gap"],
)
async def test_a_bad_row_past_the_first_chunk_is_named(tmp_path: Path, sql: str, why: str) -> None:
    path = tmp_path / "runs.db"
    await written(path)
    bad = DECODE_CHUNK + 5
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(sql, (bad,))
    finally:
        conn.close()
    store = SQLiteStore(path)
    try:
        with pytest.raises(StoreCorruptedError, match=rf"'{RUN}'.*seq {bad}\b") as info:
            await store.load(RUN)
        assert why in str(info.value)
        assert len(await store.load(RUN, after=bad)) == COUNT - bad - 1
    finally:
        await store.close()
