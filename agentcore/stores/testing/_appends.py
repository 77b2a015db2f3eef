"""Appending: one run's events in order, conditionally, under races."""

from __future__ import annotations

import asyncio

import pytest

from agentcore.contracts.errors import (
    LeaseLostError,
    RunNotFoundError,
    SeqConflictError,
    StoreError,
)
from agentcore.events import EVENT_TYPES, ContextAdded

from .._protocol import TranscriptStore
from ._builders import context, every_event_type, fresh_run_id, started


class AppendChecks:
    """Appending: one run's events in order, conditionally, under races.

    Part of :class:`StoreConformance`.
    """

    # ------------------------------------------------------------------ basics

    async def test_satisfies_the_protocol(self, store: TranscriptStore) -> None:
        assert isinstance(store, TranscriptStore)
        assert isinstance(store.url, str) and store.url

    async def test_every_event_type_reads_back_equal(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        events = every_event_type(run)
        await store.append(run, 0, events[:1])
        await store.append(run, 1, events[1:])
        assert await store.load(run) == events
        assert {ev.type for ev in events} == set(EVENT_TYPES)

    async def test_load_after(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        events = [started(run), *(context(run, i) for i in range(1, 6))]
        await store.append(run, 0, events)
        assert await store.load(run, after=-1) == events
        assert await store.load(run, after=-5) == events
        assert await store.load(run, after=0) == events[1:]
        assert await store.load(run, after=3) == events[4:]
        assert await store.load(run, after=5) == []
        assert await store.load(run, after=2**40) == []

    async def test_unknown_run(self, store: TranscriptStore) -> None:
        with pytest.raises(RunNotFoundError, match="nope"):
            await store.load("nope")
        with pytest.raises(RunNotFoundError, match="nope"):
            await store.load("nope", after=3)
        with pytest.raises(RunNotFoundError, match="nope"):
            await store.truncate("nope", after=0)
        with pytest.raises(RunNotFoundError, match="nope"):
            await store.request_cancel("nope", by="alice")
        with pytest.raises(RunNotFoundError, match="nope"):
            await store.cancel_request("nope")
        assert await store.list_runs() == []

    async def test_runs_are_independent(self, store: TranscriptStore) -> None:
        a, b = fresh_run_id(), fresh_run_id()
        await store.append(a, 0, [started(a)])
        await store.append(b, 0, [started(b), context(b, 1)])
        await store.append(a, 1, [context(a, 1, content="only a")])
        assert [ev.seq for ev in await store.load(a)] == [0, 1]
        assert [ev.seq for ev in await store.load(b)] == [0, 1]
        loaded = await store.load(a)
        assert isinstance(loaded[1], ContextAdded) and loaded[1].content == "only a"

    # ------------------------------------------------------------------ conditional appends

    @pytest.mark.parametrize("wrong", [0, 1, 3, 7])
    async def test_wrong_expected_seq_conflicts_and_writes_nothing(
        self, store: TranscriptStore, wrong: int
    ) -> None:
        run = fresh_run_id()
        await store.append(run, 0, [started(run), context(run, 1)])
        batch = [context(run, wrong + i, content="late") for i in range(3)]
        if wrong == 0:
            batch = [started(run), *[context(run, i) for i in range(1, 3)]]
        with pytest.raises(SeqConflictError) as info:
            await store.append(run, wrong, batch)
        assert run in str(info.value)
        assert await store.load(run) == [started(run), context(run, 1)]
        [summary] = await store.list_runs()
        assert summary.events == 2
        await store.append(run, 2, [context(run, 2)])  # the right seq still works

    async def test_append_past_the_start_of_a_new_run_conflicts(
        self, store: TranscriptStore
    ) -> None:
        run = fresh_run_id()
        with pytest.raises(SeqConflictError):
            await store.append(run, 1, [context(run, 1)])
        with pytest.raises(RunNotFoundError):
            await store.load(run)
        assert await store.list_runs() == []

    async def test_duplicate_first_append_conflicts(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        await store.append(run, 0, [started(run, task="first")])
        with pytest.raises(SeqConflictError):
            await store.append(run, 0, [started(run, task="second"), context(run, 1)])
        assert await store.load(run) == [started(run, task="first")]
        [summary] = await store.list_runs()
        assert summary.task == "first" and summary.events == 1

    @pytest.mark.parametrize(
        "problem",
        ["empty", "other run", "gap", "repeated seq", "first is not run_started"],
    )
    async def test_invalid_batches_write_nothing(
        self, store: TranscriptStore, problem: str
    ) -> None:
        run = fresh_run_id()
        await store.append(run, 0, [started(run)])
        expected, batch = 1, [context(run, 1), context(run, 2), context(run, 3)]
        match problem:
            case "empty":
                batch = []
            case "other run":
                batch[1] = context("someone-else", 2)
            case "gap":
                batch[2] = context(run, 4)
            case "repeated seq":
                batch[2] = context(run, 2)
            case _:
                run = fresh_run_id()
                expected, batch = 0, [context(run, 0), context(run, 1)]
        with pytest.raises(StoreError) as info:
            await store.append(run, expected, batch)
        assert not isinstance(info.value, SeqConflictError)
        if expected:
            assert await store.load(run) == [started(run)]
        else:
            with pytest.raises(RunNotFoundError):
                await store.load(run)

    async def test_racing_appenders_exactly_one_wins(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        """N writers append different batches at the same seq at once: one batch is stored
        whole, every other writer gets SeqConflictError, and nothing else is written."""
        run = fresh_run_id()
        await store.append(run, 0, [started(run), context(run, 1)])
        writers = [store] if peer is None else [store, peer]
        batches = [
            [context(run, 2 + i, content=f"writer {w}") for i in range(1 + w % 4)]
            for w in range(12)
        ]

        async def write(w: int) -> int:
            await writers[w % len(writers)].append(run, 2, batches[w])
            return w

        outcomes = await asyncio.gather(
            *(write(w) for w in range(len(batches))), return_exceptions=True
        )
        winners = [o for o in outcomes if isinstance(o, int)]
        losers = [o for o in outcomes if isinstance(o, SeqConflictError)]
        assert len(winners) == 1, outcomes
        assert len(losers) == len(batches) - 1, outcomes
        [w] = winners
        assert await store.load(run) == [started(run), context(run, 1), *batches[w]]
        [summary] = await store.list_runs()
        assert summary.events == 2 + len(batches[w])

    async def test_racing_creators_exactly_one_wins(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        run = fresh_run_id()
        writers = [store] if peer is None else [store, peer]
        batches = [
            [started(run, task=f"creator {w}"), *(context(run, i) for i in range(1, 1 + w % 3))]
            for w in range(8)
        ]

        async def create(w: int) -> int:
            await writers[w % len(writers)].append(run, 0, batches[w])
            return w

        outcomes = await asyncio.gather(*(create(w) for w in range(8)), return_exceptions=True)
        winners = [o for o in outcomes if isinstance(o, int)]
        assert len(winners) == 1, outcomes
        assert all(isinstance(o, SeqConflictError) for o in outcomes if o not in winners)
        assert await store.load(run) == batches[winners[0]]
        [summary] = await store.list_runs()
        assert summary.task == f"creator {winners[0]}"

    async def test_seqs_stay_in_order_over_many_batches(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        await store.append(run, 0, [started(run)])
        seq = 1
        for size in [1, 5, 2, 17, 1, 9, 3, 40, 1, 21]:
            await store.append(run, seq, [context(run, seq + i) for i in range(size)])
            seq += size
        loaded = await store.load(run)
        assert [ev.seq for ev in loaded] == list(range(seq))
        assert [ev.seq for ev in await store.load(run, after=57)] == list(range(58, seq))
        [summary] = await store.list_runs()
        assert summary.events == seq

    # ------------------------------------------------------------------ concurrent appends
    # Many runs appending at once (what group commit batches): each append keeps its own
    # conditions and its own outcome.

    async def test_concurrent_appends_to_many_runs_all_land(self, store: TranscriptStore) -> None:
        runs = [fresh_run_id("many") for _ in range(40)]
        await asyncio.gather(*(store.append(r, 0, [started(r, task=r)]) for r in runs))
        for seq in range(1, 4):  # each round: every run appends its next batch at once
            await asyncio.gather(
                *(
                    store.append(r, 2 * seq - 1, [context(r, 2 * seq - 1), context(r, 2 * seq)])
                    for r in runs
                )
            )
        for r in runs:
            assert await store.load(r) == [
                started(r, task=r),
                *(context(r, i) for i in range(1, 7)),
            ]
        summaries = await store.list_runs(limit=100)
        assert sorted(s.run_id for s in summaries) == sorted(runs)
        assert {s.events for s in summaries} == {7}

    async def test_a_conflicting_append_among_concurrent_ones_fails_alone(
        self, store: TranscriptStore
    ) -> None:
        runs = [fresh_run_id("conflict") for _ in range(9)]
        await asyncio.gather(*(store.append(r, 0, [started(r)]) for r in runs))
        late = runs[4]
        await store.append(late, 1, [context(late, 1, content="first")])
        outcomes = await asyncio.gather(
            *(store.append(r, 1, [context(r, 1), context(r, 2)]) for r in runs),
            return_exceptions=True,
        )
        assert isinstance(outcomes[4], SeqConflictError), outcomes
        assert [o for i, o in enumerate(outcomes) if i != 4] == [None] * 8
        assert await store.load(late) == [started(late), context(late, 1, content="first")]
        for r in runs[:4] + runs[5:]:
            assert await store.load(r) == [started(r), context(r, 1), context(r, 2)]

    async def test_a_fenced_append_among_concurrent_ones_fails_alone(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        runs = [fresh_run_id("fenced") for _ in range(6)]
        await asyncio.gather(*(store.append(r, 0, [started(r)]) for r in runs))
        leases = [await store.acquire(r, owner="worker", ttl_s=30) for r in runs]
        stolen = runs[2]
        await (peer or store).release(leases[2])
        await (peer or store).acquire(stolen, owner="thief", ttl_s=30)
        outcomes = await asyncio.gather(
            *(
                store.append(r, 1, [context(r, 1, content="w")], lease=lease)
                for r, lease in zip(runs, leases, strict=True)
            ),
            return_exceptions=True,
        )
        assert isinstance(outcomes[2], LeaseLostError) and "'thief'" in str(outcomes[2])
        assert [o for i, o in enumerate(outcomes) if i != 2] == [None] * 5
        assert await store.load(stolen) == [started(stolen)]
        for r in runs[:2] + runs[3:]:
            assert await store.load(r) == [started(r), context(r, 1, content="w")]

    async def test_an_invalid_append_among_concurrent_ones_fails_alone(
        self, store: TranscriptStore
    ) -> None:
        """An append the store refuses before writing (a value that would not read back)
        fails with StoreError; the appends made with it land."""
        runs = [fresh_run_id("invalid") for _ in range(5)]
        await asyncio.gather(*(store.append(r, 0, [started(r)]) for r in runs))
        bad = context(runs[1], 1, content="lone \udcff surrogate")
        outcomes = await asyncio.gather(
            *(store.append(r, 1, [bad if i == 1 else context(r, 1)]) for i, r in enumerate(runs)),
            return_exceptions=True,
        )
        assert isinstance(outcomes[1], StoreError), outcomes
        assert not isinstance(outcomes[1], SeqConflictError)
        assert [o for i, o in enumerate(outcomes) if i != 1] == [None] * 4
        assert await store.load(runs[1]) == [started(runs[1])]
        for r in runs[:1] + runs[2:]:
            assert await store.load(r) == [started(r), context(r, 1)]
