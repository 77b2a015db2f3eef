"""Snapshots (``agentcore._snapshot``): a resume, a confirmation or a worker's shift reads
a run's last snapshot and the events after it. A snapshot must never change what a run
does or what a model is shown, and must never be trusted when it does not match the
events: every test compares against the same run read from its events alone."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
from conftest import Toolbox, make_toolbox
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stores.conftest import pg_schema, postgres_dsn  # the PostgreSQL fixtures

from agentcore import Agent, Budget, Policy, RunStatus
from agentcore._render import Renderer
from agentcore._snapshot import UNUSABLE, dump_state, load_state, restore, snapshot_tag
from agentcore._state import RunState
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import ConfigurationError, LeaseLostError, StoreError
from agentcore.events import Event
from agentcore.stores import (
    ChainReport,
    MemoryStore,
    PostgresStore,
    Snapshot,
    SnapshotStore,
    SQLiteStore,
    TranscriptStore,
)
from agentcore.stores._snapshots import seal
from agentcore.testing import call, finish, plan

__all__ = ["pg_schema", "postgres_dsn"]  # fixtures, imported to be found here

KEY = "snapshot-test-key"
AnyStore = MemoryStore | SQLiteStore | PostgresStore


# Every kind of event and fold field: a read, an invalid reply (re-ask), a write refused
# for want of a plan, a plan, the write, a failing tool, a destructive call that waits for
# a person; then, after the approval (in another agent, which reads the run back), more
# steps with context on every step.
BEFORE_PAUSE: list[Any] = [
    call("lookup", order_id="A1"),
    "this is not JSON",
    call("update_note", order_id="A1", note="first"),
    plan("look it up", "write the note"),
    call("update_note", order_id="A1", note="second"),
    call("explode", reason="on purpose"),
    call("delete_order", order_id="A1"),
]
AFTER_PAUSE: list[Any] = [
    call("lookup", order_id="A2"),
    call("fetch_status", service="billing"),
    call("lookup", order_id="A3"),
    finish("All done."),
]


def context(request: Any) -> str:  # Any: agentcore's ContextRequest
    return f"note for step {request.step}"


def agent_on(store: TranscriptStore, box: Toolbox, model: Any, every: int) -> Agent:  # Any: model
    return Agent(
        tools=box.all,
        model=model,
        store=store,
        context=context,
        snapshot_every=every,
        policy=Policy(max_repeated_failures=5),
    )


async def scenario(store: TranscriptStore, every: int) -> tuple[str, list[list[str]]]:
    """Run the scenario on ``store`` (snapshots every ``every`` events); returns the run id
    and what the model was shown in each request after the approval."""
    box = make_toolbox()
    agent = agent_on(store, box, ScriptedModel(BEFORE_PAUSE), every)
    paused = await agent.run("Tidy order A1.", budget=Budget(max_steps=30))
    assert paused.status is RunStatus.AWAITING_CONFIRMATION, paused
    shown: list[list[str]] = []

    def model_fn(messages: Sequence[Message]) -> dict[str, Any]:
        shown.append([f"{m.role}|{m.call_id}|{m.content}|{m.action!r}" for m in messages])
        return AFTER_PAUSE[len(shown) - 1]

    again = agent_on(store, box, ScriptedModel(model_fn, name="second"), every)
    done = await again.confirm(paused.run_id, approve=True, by="ops")
    assert done.status is RunStatus.COMPLETED and done.answer == "All done.", done
    return paused.run_id, shown


# -- the fold and the renderer, cut at every event --------------------------------------------


@pytest.fixture
async def transcript() -> list[Event]:
    store = MemoryStore()
    run_id, _ = await scenario(store, every=0)
    return await store.load(run_id)


def folded(events: Sequence[Event]) -> RunState:
    state = RunState(events[0].run_id)
    for ev in events:
        state.apply(ev)
    return state


def rendered(renderer: Renderer, events: Sequence[Event], base: int) -> list[Message]:
    renderer.render(events, base + len(events), base)
    return list(renderer.messages)


async def test_a_snapshot_at_any_event_continues_exactly_like_the_events(
    transcript: list[Event],
) -> None:
    run_id = transcript[0].run_id
    whole = folded(transcript)
    limit = whole.policy.max_observation_chars
    expected = rendered(Renderer(limit), transcript, 0)
    assert len(transcript) > 40 and any(m.action is not None for m in expected)
    for cut in range(len(transcript)):
        # Two chunks (split in the middle) taken as a driver takes them, at a cut.
        renderer, chunks = Renderer(limit), []
        for end in sorted({cut // 2, cut}):
            chunks.append(renderer.chunk(transcript, end + 1))
        state = folded(transcript[: cut + 1])
        snaps = [
            Snapshot(end, start, snapshot_tag(), dump_state(state), chunk)
            for (start, end), chunk in zip(
                [(0, cut // 2), (cut // 2 + 1, cut)][-len(chunks) :], chunks, strict=True
            )
        ]
        restored, rest = restore(run_id, snaps)
        assert restored == state, f"cut at seq {cut}"
        for ev in transcript[cut + 1 :]:
            restored.apply(ev)
        assert restored == whole, f"cut at seq {cut}"
        assert rendered(rest, transcript[cut + 1 :], cut + 1) == expected, f"cut at seq {cut}"


def test_every_field_of_the_fold_survives_a_snapshot(transcript: list[Event]) -> None:
    # Across the scenario's prefixes the fold's fields leave their defaults (a field a
    # snapshot dropped would show; a new field without a codec fails dump_state itself).
    default = RunState(transcript[0].run_id)
    changed: set[str] = set()
    for cut in range(1, len(transcript) + 1):
        state = folded(transcript[:cut])
        assert load_state(state.run_id, dump_state(state)) == state, f"cut at seq {cut - 1}"
        changed |= {
            f for f in state.__dataclass_fields__ if getattr(state, f) != getattr(default, f)
        }
        if state.call is not None:
            changed |= {
                f"call.{f}"
                for f in ("confirmation", "started", "finished")
                if getattr(state.call, f)
            }
    untouched = set(default.__dataclass_fields__) - changed
    # restored from snapshots elsewhere: compensating (tests/test_compensation.py), tenant
    # and metadata (tests/test_run_bound.py), untrusted_text and untrusted_reads
    # (tests/test_provenance.py), confirmed_plan (tests/test_injected_plans.py), output_hash
    # (tests/test_typed_output.py), child_steps and child_tool_calls
    # (tests/test_subagent_governance.py)
    elsewhere = {"compensating", "tenant", "metadata", "untrusted_text", "output_hash"}
    elsewhere |= {"untrusted_reads", "confirmed_plan", "child_steps", "child_tool_calls"}
    # a conversation's (tests/test_conversations.py)
    elsewhere |= {"turn_mark", "conversation_budget", "reply_keys"}
    elsewhere.add("charged")  # quotas (tests/test_quotas.py)
    elsewhere.add("past_calls")  # rules over the run's history (tests/test_history_rules.py)
    assert untouched <= {"run_id", "recoveries", "person_plan_approved", *elsewhere}, untouched
    assert {"call.confirmation", "call.started", "call.finished"} <= changed


# -- the three stores ---------------------------------------------------------------------------


@dataclass
class Backend:
    name: str
    make: Callable[[str | None], AnyStore]
    """A store on the same data, with this chain key."""
    raw: Callable[[str, tuple[object, ...]], list[tuple[Any, ...]]] | None
    """Run SQL on the snapshots table (``{snapshots}``); durable stores only."""


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made: list[AnyStore] = []
    if request.param == "memory":
        memories: dict[str | None, MemoryStore] = {}

        def make_memory(key: str | None) -> AnyStore:
            return memories.setdefault(key, MemoryStore(chain_key=key))

        yield Backend("memory", make_memory, None)
        return
    if request.param == "sqlite":
        path = tmp_path / "runs.db"

        def make_sqlite(key: str | None) -> AnyStore:
            store = SQLiteStore(path, chain_key=key)
            made.append(store)
            return store

        def raw_sqlite(query: str, args: tuple[object, ...]) -> list[tuple[Any, ...]]:
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                return conn.execute(query.format(snapshots="snapshots"), args).fetchall()
            finally:
                conn.close()

        yield Backend("sqlite", make_sqlite, raw_sqlite)
    else:
        import psycopg

        dsn: str = request.getfixturevalue("postgres_dsn")
        schema: str = request.getfixturevalue("pg_schema")

        def make_pg(key: str | None) -> AnyStore:
            store = PostgresStore(dsn, schema=schema, chain_key=key)
            made.append(store)
            return store

        def raw_pg(query: str, args: tuple[object, ...]) -> list[tuple[Any, ...]]:
            table = f'"{schema}".agentcore_snapshots'
            with psycopg.connect(dsn, autocommit=True) as conn:
                cur = conn.execute(query.format(snapshots=table).replace("?", "%s").encode(), args)
                return cur.fetchall() if cur.description else []

        yield Backend("postgres", make_pg, raw_pg)
    for store in made:
        await store.close()


def raw_access(backend: Backend) -> Callable[[str, tuple[object, ...]], list[tuple[Any, ...]]]:
    """The backend's raw SQL on the snapshots table; the test is skipped without one."""
    if backend.raw is None:
        pytest.skip("needs raw access to the snapshots")
    return backend.raw


def reseal_plain(backend: Backend, run_id: str, snap: Snapshot) -> None:
    """Store ``snap`` (its history and seal) as a keyless store would have sealed it."""
    raw = raw_access(backend)
    (digest,) = raw(
        "SELECT chain FROM {snapshots} WHERE run_id = ? AND seq = ?", (run_id, snap.seq)
    )[0]
    raw(
        "UPDATE {snapshots} SET history = ?, seal = ? WHERE run_id = ? AND seq = ?",
        (snap.history, seal(None, run_id, snap, bytes(digest)), run_id, snap.seq),
    )


def restores_to_events(run_id: str, snaps: Sequence[Snapshot], events: Sequence[Event]) -> bool:
    """Whether the snapshots plus the events after the last one fold to the events' state."""
    state, _ = restore(run_id, snaps)
    for ev in events[snaps[-1].seq + 1 :]:
        state.apply(ev)
    return state == folded(events)


async def test_runs_continue_from_snapshots_as_from_their_events(backend: Backend) -> None:
    store = backend.make(KEY)
    run_id, shown = await scenario(store, every=3)
    reference_id, reference = await scenario(MemoryStore(), every=0)
    assert shown == reference  # the model saw the same conversation after the resume
    assert isinstance(store, SnapshotStore)
    snaps = await store.load_snapshot(run_id)
    assert len(snaps) >= 10 and snaps[0].start == 0
    assert all(b.start == a.seq + 1 for a, b in itertools.pairwise(snaps))
    assert restores_to_events(run_id, snaps, await store.load(run_id))
    del reference_id


class CountingStore(MemoryStore):
    """A memory store that records from where each load read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[int] = []

    async def load(self, run_id: str, *, after: int = -1) -> list[Event]:
        self.reads.append(after)
        return await super().load(run_id, after=after)


async def test_a_resume_reads_only_the_events_after_the_last_snapshot() -> None:
    store = CountingStore()
    box = make_toolbox()
    steps = [call("lookup", order_id=f"A{i}") for i in range(70)]
    agent = agent_on(store, box, ScriptedModel(steps), every=50)
    stopped = await agent.run("Look them all up.", budget=Budget(max_steps=60))
    assert stopped.status is RunStatus.BUDGET_EXHAUSTED
    last = (await store.load_snapshot(stopped.run_id))[-1].seq
    total = len(await store.load(stopped.run_id))
    assert total - last <= 50 + 5
    store.reads.clear()
    resumed = agent_on(store, box, ScriptedModel([finish()], name="second"), every=50)
    done = await resumed.resume(stopped.run_id, budget=Budget(max_steps=70))
    assert done.status is RunStatus.COMPLETED
    assert store.reads and min(store.reads) >= last  # never the whole transcript


async def test_a_tampered_snapshot_is_not_used(backend: Backend) -> None:
    raw = raw_access(backend)
    store = backend.make(KEY)
    run_id, shown = await scenario(store, every=3)
    assert isinstance(store, SnapshotStore)
    before = await store.load_snapshot(run_id)
    # Grant what the events never granted: a bigger step count, no failures.
    forged = json.loads(before[-1].state)
    forged["steps"], forged["failures"] = 0, {}
    raw(
        "UPDATE {snapshots} SET state = ? WHERE run_id = ? AND seq = ?",
        (json.dumps(forged), run_id, before[-1].seq),
    )
    after = await store.load_snapshot(run_id)
    assert [s.seq for s in after] == [s.seq for s in before[:-1]]  # the forged row is gone
    agent = agent_on(store, make_toolbox(), ScriptedModel([]), every=3)
    result = await agent.result(run_id)
    assert result.usage.steps == folded(await store.load(run_id)).steps
    # A store without the key cannot vouch for the rows the key sealed.
    keyless = backend.make(None)
    assert isinstance(keyless, SnapshotStore)
    assert await keyless.load_snapshot(run_id) == []
    del shown


async def test_verify_checks_the_snapshots_as_a_resume_reads_them(backend: Backend) -> None:
    store = backend.make(KEY)
    run_id, _ = await scenario(store, every=3)
    assert isinstance(store, SnapshotStore)
    snaps = await store.load_snapshot(run_id)
    report = await store.verify_chain(run_id)
    assert report.intact and report.snapshots == len(snaps) >= 10
    assert f"{len(snaps)} snapshot(s) verify" in report.describe()
    if backend.raw is None:
        return
    raw = backend.raw
    # Saved before a key was set (sealed with a plain hash): ignored, not a break.
    reseal_plain(backend, run_id, snaps[0])
    report = await store.verify_chain(run_id)
    assert report.intact and (report.snapshots, report.unkeyed_snapshots) == (len(snaps) - 1, 1)
    assert "1 snapshot(s) sealed without a key" in report.describe()
    # Without the key, the plain-hash seal is checked and the keyed ones are not.
    keyless = await backend.make(None).verify_chain(run_id)
    assert keyless.intact and (keyless.snapshots, keyless.unchecked_snapshots) == (
        1,
        len(snaps) - 1,
    )
    assert f"{len(snaps) - 1} snapshot(s) sealed under a key, NOT checked" in keyless.describe()
    # A state edited in place: the events are intact, the run is not.
    middle = snaps[len(snaps) // 2]
    forged = json.loads(middle.state)
    forged["steps"] = 0
    raw(
        "UPDATE {snapshots} SET state = ? WHERE run_id = ? AND seq = ?",
        (json.dumps(forged), run_id, middle.seq),
    )
    report = await store.verify_chain(run_id)
    assert not report.intact and report.broken_seq == middle.seq
    assert report.reason is not None and "its seal does not verify under the key" in report.reason
    assert f"covering seq {middle.start}..{middle.seq}" in report.reason
    # Bound to another event than the one stored: named as such, whatever the seal says.
    last = snaps[-1]
    raw(
        "UPDATE {snapshots} SET chain = ? WHERE run_id = ? AND seq = ?",
        (b"\0" * 32, run_id, last.seq),
    )
    raw("DELETE FROM {snapshots} WHERE run_id = ? AND seq = ?", (run_id, middle.seq))
    report = await store.verify_chain(run_id)
    assert not report.intact and report.broken_seq == last.seq
    assert report.reason is not None and "taken from another event" in report.reason
    # ... and a resume reads the events past the damage, as before.
    result = await agent_on(store, make_toolbox(), ScriptedModel([]), every=3).result(run_id)
    assert result.usage.steps == folded(await store.load(run_id)).steps


async def test_verify_without_any_key_breaks_a_run_whose_snapshot_was_changed(
    backend: Backend,
) -> None:
    # No key ever: every seal is a plain hash, so one that does not verify was changed,
    # and "sealed under a key" is not an excuse the run's unsigned head allows.
    raw = raw_access(backend)
    store = backend.make(None)
    run_id, _ = await scenario(store, every=3)
    assert isinstance(store, SnapshotStore)
    snaps = await store.load_snapshot(run_id)
    assert (await store.verify_chain(run_id)).snapshots == len(snaps)
    raw(
        "UPDATE {snapshots} SET history = ? WHERE run_id = ? AND seq = ?",
        ("[]", run_id, snaps[-1].seq),
    )
    report = await store.verify_chain(run_id)
    assert not report.intact and report.broken_seq == snaps[-1].seq, report
    assert report.reason is not None and "no key sealed it" in report.reason
    assert report.signature == "unsigned"


async def test_a_truncated_run_drops_its_later_snapshots(backend: Backend) -> None:
    store = backend.make(KEY)
    run_id, _ = await scenario(store, every=3)
    assert isinstance(store, SnapshotStore)
    events = await store.load(run_id)
    keep = len(events) // 2
    await store.truncate(run_id, after=keep)
    snaps = await store.load_snapshot(run_id)
    assert snaps and all(s.seq <= keep for s in snaps)
    if backend.raw is not None:
        rows = backend.raw("SELECT seq FROM {snapshots} WHERE run_id = ?", (run_id,))
        assert all(seq <= keep for (seq,) in rows)
    assert restores_to_events(run_id, snaps, await store.load(run_id))


async def test_snapshots_from_other_code_are_ignored_and_replaced(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentcore._run._loop as runner

    store = backend.make(KEY)
    box = make_toolbox()
    with monkeypatch.context() as patched:
        patched.setattr(runner, "snapshot_tag", lambda: "s1:an-older-agentcore")
        old = agent_on(store, box, ScriptedModel(BEFORE_PAUSE), every=3)
        paused = await old.run("Tidy order A1.", budget=Budget(max_steps=30))
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    assert isinstance(store, SnapshotStore)
    assert {s.tag for s in await store.load_snapshot(paused.run_id)} == {"s1:an-older-agentcore"}
    new = agent_on(store, box, ScriptedModel(AFTER_PAUSE, name="second"), every=3)
    with structlog.testing.capture_logs() as logs:
        done = await new.confirm(paused.run_id, approve=True, by="ops")
    assert done.status is RunStatus.COMPLETED and done.answer == "All done."
    ignored = [e for e in logs if e["event"] == "snapshot_ignored"]
    assert ignored and "another version" in ignored[0]["error"]
    snaps = await store.load_snapshot(paused.run_id)
    assert snaps and {s.tag for s in snaps} == {snapshot_tag()} and snaps[0].start == 0
    assert restores_to_events(paused.run_id, snaps, await store.load(paused.run_id))


async def test_a_snapshot_that_passes_its_seal_but_not_its_format_is_ignored(
    backend: Backend,
) -> None:
    # Without a key the seal is a plain hash: corruption that rewrote it too (a bug, a
    # hand edit) must still not be trusted blindly: the history no longer parses.
    raw_access(backend)  # skips without it
    store = backend.make(None)
    run_id, _ = await scenario(store, every=3)
    assert isinstance(store, SnapshotStore)
    last = (await store.load_snapshot(run_id))[-1]
    broken = Snapshot(last.seq, last.start, last.tag, last.state, '{"from": "nonsense"}')
    reseal_plain(backend, run_id, broken)
    assert (await store.load_snapshot(run_id))[-1].history == broken.history
    agent = agent_on(store, make_toolbox(), ScriptedModel([]), every=3)
    with structlog.testing.capture_logs() as logs:
        result = await agent.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert result.usage.steps == folded(await store.load(run_id)).steps
    assert [e["seq"] for e in logs if e["event"] == "snapshot_ignored"] == [last.seq]


async def test_only_the_runs_holder_saves_a_snapshot(backend: Backend) -> None:
    store = backend.make(KEY)
    box = make_toolbox()
    agent = agent_on(store, box, ScriptedModel([call("lookup", order_id="A1"), finish()]), 0)
    done = await agent.run("Look it up.")
    assert isinstance(store, SnapshotStore)
    state = folded(await store.load(done.run_id))
    history = Renderer(state.policy.max_observation_chars).chunk(
        await store.load(done.run_id), state.next_seq
    )
    snap = Snapshot(state.next_seq - 1, 0, snapshot_tag(), dump_state(state), history)
    first = await store.acquire(done.run_id, owner="w1", ttl_s=30)
    await store.release(first)
    second = await store.acquire(done.run_id, owner="w2", ttl_s=30)
    with pytest.raises(LeaseLostError):
        await store.save_snapshot(done.run_id, snap, lease=first)  # fenced
    assert await store.load_snapshot(done.run_id) == []
    beyond = Snapshot(state.next_seq + 5, 0, snapshot_tag(), dump_state(state), history)
    with pytest.raises(StoreError, match="no chained event at seq"):
        await store.save_snapshot(done.run_id, beyond, lease=second)
    await store.save_snapshot(done.run_id, snap, lease=second)
    assert [s.seq for s in await store.load_snapshot(done.run_id)] == [snap.seq]


def test_snapshot_interval_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    box = make_toolbox()
    with pytest.raises(ConfigurationError, match="snapshot_every"):
        Agent(tools=box.all, model=ScriptedModel([]), store="memory://", snapshot_every=-1)
    monkeypatch.setenv("AGENTCORE_SNAPSHOT_EVERY", "often")
    with pytest.raises(ConfigurationError, match="AGENTCORE_SNAPSHOT_EVERY"):
        Agent(tools=box.all, model=ScriptedModel([]), store="memory://")
    monkeypatch.setenv("AGENTCORE_SNAPSHOT_EVERY", "7")
    assert Agent(tools=box.all, model=ScriptedModel([]), store="memory://").snapshot_every == 7


# -- hostile snapshot bodies -------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # read only: one transcript
)
@given(data=st.data())
def test_any_edit_of_a_state_either_reads_back_typed_or_is_refused(
    transcript: list[Event], data: st.DataObject
) -> None:
    # What a keyless store would hand back after an edit that also rewrote the seal: the
    # snapshot is refused (the run is then read from its events), or it is a state of
    # the right shape; never a state that breaks later, mid-run, on a wrong type.
    cut = data.draw(st.integers(0, len(transcript) - 1), label="cut")
    state = folded(transcript[: cut + 1])
    fields = json.loads(dump_state(state))
    name = data.draw(st.sampled_from(sorted(fields)), label="field")
    fields[name] = data.draw(JSON, label="value")
    try:
        edited = load_state(state.run_id, json.dumps(fields))
    except UNUSABLE:
        return
    assert load_state(edited.run_id, dump_state(edited)) == edited


@pytest.fixture(scope="module")
def keyless_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A SQLite file holding one run with snapshots every 3 events, written without a key."""
    import asyncio

    path = tmp_path_factory.mktemp("keyless") / "runs.db"

    async def write() -> str:
        store = SQLiteStore(path)
        try:
            return (await scenario(store, every=3))[0]
        finally:
            await store.close()

    return path, asyncio.run(write())


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    which=st.integers(min_value=0),
    column=st.sampled_from(["state", "history", "tag", "seal", "chain", "start"]),
    junk=st.binary(min_size=1, max_size=40),
)
def test_verify_breaks_a_run_at_any_edited_snapshot_column(
    keyless_run: tuple[Path, str],
    tmp_path_factory: pytest.TempPathFactory,
    which: int,
    column: str,
    junk: bytes,
) -> None:
    # Whatever a row's column is changed to, verify names that row (nothing changed goes
    # uncounted as "sealed under a key": this run's head is unsigned).
    import asyncio
    import shutil

    source, run_id = keyless_run
    path = tmp_path_factory.mktemp("edit") / "runs.db"
    shutil.copy(source, path)
    conn = sqlite3.connect(path, isolation_level=None)
    seqs = [s for (s,) in conn.execute("SELECT seq FROM snapshots ORDER BY seq")]
    seq = seqs[which % len(seqs)]
    old = conn.execute(f"SELECT {column} FROM snapshots WHERE seq = ?", (seq,)).fetchone()[0]
    new: object = (
        (old + 1 + len(junk)) % (seq + 1)
        if column == "start"
        else junk
        if isinstance(old, bytes)
        else junk.decode("latin-1")
    )
    if new == old:
        new = (
            (old + 1) % (seq + 1)
            if column == "start"
            else old + (b"x" if column in ("seal", "chain") else "x")
        )
    conn.execute(f"UPDATE snapshots SET {column} = ? WHERE seq = ?", (new, seq))
    conn.close()

    async def check() -> ChainReport:
        store = SQLiteStore(path)
        try:
            return await store.verify_chain(run_id)
        finally:
            await store.close()

    report = asyncio.run(check())
    assert not report.intact and report.broken_seq == seq, (column, report)
    assert report.reason is not None and "the snapshot covering" in report.reason
