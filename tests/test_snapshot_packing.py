"""A snapshot's history chunk is kept deflated (zlib in base64, behind ``z1:<bytes>:``):
smaller by several times for a real run, restored to exactly the messages it held, and any
packed text that is not such a chunk (junk, a wrong size, a deflate bomb, trailing data) is
refused as unusable, so the run is read from its events instead."""

from __future__ import annotations

import base64
import json
import sqlite3
import zlib
from pathlib import Path

import structlog
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentcore import Agent, Budget, RunStatus, tool
from agentcore._render import Renderer
from agentcore.adapters import ScriptedModel
from agentcore.stores import SnapshotStore, SQLiteStore
from agentcore.stores._snapshots import Snapshot, seal
from agentcore.testing import call, finish

STEPS = 40


@tool(effect="read")
def get_order(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"order_id": order_id, "status": "shipped", "eta": "2 days"}


def lookups(n: int) -> list[dict[str, object]]:
    return [call("get_order", order_id=f"A{i:05d}") for i in range(n)] + [finish("All shipped.")]


async def a_run(path: Path, every: int) -> tuple[SQLiteStore, str]:
    store = SQLiteStore(path)
    agent = Agent(
        tools=[get_order], model=ScriptedModel(lookups(STEPS)), store=store, snapshot_every=every
    )
    done = await agent.run("Look up the orders.", budget=Budget(max_steps=STEPS + 1))
    assert done.status is RunStatus.COMPLETED
    return store, done.run_id


def unpacked_size(history: str) -> int:
    return int(history.split(":", 2)[1])


async def test_history_chunks_are_kept_deflated_and_restore_the_same_conversation(
    tmp_path: Path,
) -> None:
    store, run_id = await a_run(tmp_path / "runs.db", every=50)
    snaps = await store.load_snapshot(run_id)
    assert len(snaps) >= 2
    for snap in snaps:
        assert snap.history.startswith("z1:")
        assert len(snap.history) * 3 < unpacked_size(snap.history)  # 40 similar steps: >3x
    restored = Renderer.restored(2_000, [s.history for s in snaps])
    replayed = Renderer(2_000)
    events = await store.load(run_id)
    replayed.render(events, snaps[-1].seq + 1)
    assert [(m.role, m.content, m.call_id) for m in restored.messages] == [
        (m.role, m.content, m.call_id) for m in replayed.messages
    ]
    await store.close()


def packed(data: bytes, size: int | None = None) -> str:
    body = base64.b64encode(zlib.compress(data, 1)).decode()
    return f"z1:{len(data) if size is None else size}:{body}"


CHUNK = json.dumps({"from": 0, "upto": 0, "messages": [], "last": None, "dropped": []}).encode()


@settings(max_examples=200, derandomize=True, deadline=None)
@given(text=st.text(max_size=80) | st.builds(lambda t: "z1:" + t, st.text(max_size=80)))
@example(text=packed(CHUNK, size=len(CHUNK) - 1))  # says fewer bytes than it holds
@example(text=packed(CHUNK, size=len(CHUNK) + 1))  # says more
@example(text=packed(CHUNK) + "AAAA")  # data after the deflate stream
@example(text=packed(b"x" * 50_000_000, size=10))  # a bomb: stops after 11 bytes
@example(text=packed(b"\xff\xfe" * 10))  # not UTF-8
@example(text=packed(CHUNK, size=10**30))  # a size past any chunk
@example(text=packed(CHUNK).replace("z1:", "z1:\u0661", 1))  # a non-ASCII digit
@example(text=packed(CHUNK)[:-8])  # cut short
def test_any_text_that_is_not_a_packed_chunk_is_refused_as_unusable(text: str) -> None:
    try:
        Renderer.restored(2_000, [text])
    except ValueError:
        return
    raise AssertionError(f"restored from {text[:60]!r}")


def test_a_packed_chunk_restores(tmp_path: Path) -> None:
    assert Renderer.restored(2_000, [packed(CHUNK)]).messages == []


async def test_a_deflate_bomb_in_a_resealed_snapshot_is_ignored_and_the_events_used(
    tmp_path: Path,
) -> None:
    # A keyless store's seal is a plain hash: an edit that rewrote it too is only refused
    # by the format. The run's result comes from its events, and nothing inflates 50 MB.
    path = tmp_path / "runs.db"
    store, run_id = await a_run(path, every=50)
    assert isinstance(store, SnapshotStore)
    last = (await store.load_snapshot(run_id))[-1]
    bomb = Snapshot(last.seq, last.start, last.tag, last.state, packed(b"[" * 50_000_000, size=64))
    conn = sqlite3.connect(path, isolation_level=None)
    (digest,) = conn.execute(
        "SELECT chain FROM snapshots WHERE run_id = ? AND seq = ?", (run_id, last.seq)
    ).fetchone()
    conn.execute(
        "UPDATE snapshots SET history = ?, seal = ? WHERE run_id = ? AND seq = ?",
        (bomb.history, seal(None, run_id, bomb, bytes(digest)), run_id, last.seq),
    )
    conn.close()
    assert (await store.load_snapshot(run_id))[-1].history == bomb.history
    agent = Agent(tools=[get_order], model=ScriptedModel([]), store=store)
    with structlog.testing.capture_logs() as logs:
        result = await agent.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.answer == "All shipped."
    assert result.usage.steps == STEPS + 1
    assert [e["seq"] for e in logs if e["event"] == "snapshot_ignored"] == [last.seq]
    await store.close()
