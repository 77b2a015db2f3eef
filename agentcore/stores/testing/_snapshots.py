"""Snapshots: kept and read back as saved, bound to the events they were taken from, and
never handed back once those events changed (a resume would restore a state the
transcript does not say)."""

from __future__ import annotations

import pytest

from agentcore.contracts.errors import LeaseLostError, StoreError

from .._lease import Lease
from .._protocol import ChainVerifier, SnapshotStore, TranscriptStore
from .._snapshots import Snapshot
from ._builders import context, fresh_run_id, started
from ._tamper import Tamper


def _snapshots(store: TranscriptStore) -> SnapshotStore:
    if not isinstance(store, SnapshotStore):
        pytest.skip(f"{type(store).__name__} keeps no snapshots (it is not a SnapshotStore)")
    return store


def snap(seq: int, start: int = 0, state: str = '{"step": 1}') -> Snapshot:
    """A snapshot covering ``start..seq`` (its state and history are opaque to a store)."""
    return Snapshot(seq=seq, start=start, tag="kit", state=state, history='[{"m": "hi"}]')


async def _run(store: TranscriptStore, events: int = 4) -> tuple[str, Lease]:
    """A new run of ``events`` events, held by a lease (a snapshot is saved under one)."""
    run = fresh_run_id("snap")
    await store.append(run, 0, [started(run), *(context(run, s) for s in range(1, events))])
    return run, await store.acquire(run, owner="kit", ttl_s=60.0)


class SnapshotChecks:
    """Snapshots (:class:`SnapshotStore`); skipped for a store that keeps none.

    Part of :class:`StoreConformance`.
    """

    async def test_a_snapshot_reads_back_as_saved(self, store: TranscriptStore) -> None:
        snaps = _snapshots(store)
        run, lease = await _run(store)
        assert await snaps.load_snapshot(run) == []
        first = snap(1, state='{"text": "ünï 😀", "n": [1, 2]}')
        await snaps.save_snapshot(run, first, lease=lease)
        assert await snaps.load_snapshot(run) == [first]
        second = snap(3, start=2)
        await snaps.save_snapshot(run, second, lease=lease)
        assert await snaps.load_snapshot(run) == [first, second]

    async def test_a_snapshot_replaces_those_from_its_start_on(
        self, store: TranscriptStore
    ) -> None:
        snaps = _snapshots(store)
        run, lease = await _run(store)
        first, second = snap(1), snap(3, start=2)
        await snaps.save_snapshot(run, first, lease=lease)
        await snaps.save_snapshot(run, second, lease=lease)
        again = snap(3, start=2, state='{"step": 2}')
        await snaps.save_snapshot(run, again, lease=lease)
        assert await snaps.load_snapshot(run) == [first, again]
        whole = snap(2, start=0, state='{"step": 3}')
        await snaps.save_snapshot(run, whole, lease=lease)
        assert await snaps.load_snapshot(run) == [whole]

    async def test_a_worker_that_lost_the_run_saves_no_snapshot(
        self, store: TranscriptStore
    ) -> None:
        snaps = _snapshots(store)
        run, lease = await _run(store)
        await store.release(lease)
        await store.acquire(run, owner="another", ttl_s=60.0)
        with pytest.raises(LeaseLostError):
            await snaps.save_snapshot(run, snap(2), lease=lease)
        assert await snaps.load_snapshot(run) == []

    async def test_a_snapshot_of_no_event_is_refused(self, store: TranscriptStore) -> None:
        snaps = _snapshots(store)
        run, lease = await _run(store, events=3)
        for bad in (snap(3), snap(1, start=2), snap(-1, start=-1)):
            with pytest.raises(StoreError):
                await snaps.save_snapshot(run, bad, lease=lease)
        assert await snaps.load_snapshot(run) == []

    async def test_text_that_cannot_be_stored_is_refused(self, store: TranscriptStore) -> None:
        snaps = _snapshots(store)
        run, lease = await _run(store)
        with pytest.raises(StoreError):
            await snaps.save_snapshot(run, snap(1, state='"\ud800"'), lease=lease)
        assert await snaps.load_snapshot(run) == []

    async def test_a_snapshot_of_rewritten_events_is_never_used(
        self, store: TranscriptStore
    ) -> None:
        """Truncated and written again from another history, the run's later snapshot is
        not handed back: it was folded from events that are no longer there."""
        snaps = _snapshots(store)
        run, lease = await _run(store)
        first, second = snap(1), snap(3, start=2)
        await snaps.save_snapshot(run, first, lease=lease)
        await snaps.save_snapshot(run, second, lease=lease)
        await store.truncate(run, after=2)
        assert await snaps.load_snapshot(run) == [first]
        await store.append(run, 3, [context(run, 3, content="another history")], lease=lease)
        assert await snaps.load_snapshot(run) == [first]
        await store.truncate(run, after=0)
        await store.append(run, 1, [context(run, 1, content="rewritten")], lease=lease)
        assert await snaps.load_snapshot(run) == []

    async def test_a_tampered_snapshot_is_never_used_and_is_found(
        self, store: TranscriptStore, tamper: Tamper | None
    ) -> None:
        snaps = _snapshots(store)
        if tamper is None:
            pytest.skip("the store's test gives no `tamper` fixture")
        run, lease = await _run(store)
        first, second = snap(1), snap(3, start=2)
        await snaps.save_snapshot(run, first, lease=lease)
        await snaps.save_snapshot(run, second, lease=lease)
        tamper.snapshot_state(run, 1, '{"step": 99}')
        assert await snaps.load_snapshot(run) == []  # nor any later one: it builds on it
        if isinstance(store, ChainVerifier):
            report = await store.verify_chain(run)
            assert not report.intact and report.broken_seq == 1, report
