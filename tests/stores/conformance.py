"""The store conformance suite: what every :class:`TranscriptStore` must do.

A store passes by subclassing :class:`StoreConformance` in a ``Test...`` class and
overriding the ``store`` fixture (and ``peer`` when a second store object can open the same
data, so that races and leases are also checked across objects)::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        async def store(self) -> AsyncIterator[TranscriptStore]:
            s = MyStore(...)
            yield s
            await s.close()

Every test starts from an empty store.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore._state import RunState
from agentcore.contracts import FinishAction, PlanAction, ToolAction
from agentcore.contracts.errors import (
    ConfigurationError,
    LeaseLostError,
    RunBusyError,
    RunNotFoundError,
    SeqConflictError,
    StoreError,
)
from agentcore.events import (
    ActionProposed,
    Confirmation,
    ContextAdded,
    Decision,
    Event,
    ModelCalled,
    Resolution,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolFinished,
    ToolStarted,
    encode_event_body,
)
from agentcore.limits import MAX_DEPTH, MAX_EVENT_BYTES, MAX_INT, MAX_STRING_CHARS, MIN_INT
from agentcore.stores import CallGuardStore, Lease, TranscriptStore

__all__ = ["StoreConformance", "every_event_type", "started"]

UNICODE_SAMPLES = [
    "emoji 😀👩🏽‍💻🇺🇦",
    "RTL: שלום עולם, مرحبا بالعالم",
    "a NUL \u0000 in the middle, and \u0000 twice",
    "astral plane: \U0001d518\U0001d52b\U0001d526 \U00013000 \U0010fffd 😀",
    "combining: e\u0301 a\u0308, ZWJ \u200d, BOM \ufeff, bidi \u202e override",
    "controls: \t\n\r\x1b[31m \x7f \u2028 \u2029",
    'quotes and escapes: " \\ \\u0000 </script> {"json": true}',
]

_run_numbers = itertools.count()


def fresh_run_id(prefix: str = "run") -> str:
    """A run id no other test of this process uses."""
    return f"{prefix}-{next(_run_numbers)}"


def started(
    run_id: str, *, at: float = 1.0, task: str = "do the thing", tenant: str | None = None
) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        seq=0,
        at=at,
        task=task,
        scope=["lookup", "delete_order"],
        budget={"max_steps": 10},
        policy={"plan_before_writes": False},
        contract={"hash": "sha256:abc"},
        route=["scripted/a", "scripted/b"],
        tools={"lookup": {"effect": "read", "schema": {"type": "object"}}},
        metadata={"user": "ünïcødé ✓", "n": 3, "nested": {"a": [1, None, True, 2.5]}},
        tenant=tenant,
    )


def context(
    run_id: str, seq: int, *, at: float | None = None, content: str = "ctx"
) -> ContextAdded:
    return ContextAdded(
        run_id=run_id,
        seq=seq,
        at=at if at is not None else 1.0 + seq,
        step=1,
        source="files",
        content=content,
    )


def finished(run_id: str, seq: int, status: str, *, at: float) -> RunFinished:
    return RunFinished(run_id=run_id, seq=seq, at=at, status=status, reason="for the test")


def tool_result(run_id: str, seq: int, result: object, *, at: float | None = None) -> ToolFinished:
    return ToolFinished.model_validate(
        {
            "run_id": run_id,
            "seq": seq,
            "at": at if at is not None else 1.0 + seq,
            "step": 1,
            "call_id": "c1",
            "tool": "lookup",
            "ok": True,
            "result": result,
        }
    )


def every_event_type(run_id: str) -> list[Event]:
    """A run that walks through every event type, with non-default optional fields, in an
    order the state fold accepts; its status moves through every value a listing shows."""
    return [
        started(run_id),
        ContextAdded(run_id=run_id, seq=1, at=2.5, step=1, source="files", content="a\nb"),
        ModelCalled(
            run_id=run_id,
            seq=2,
            at=3.25,
            step=1,
            model="scripted/a",
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
            action=PlanAction(thought="plan it", steps=["look", "delete"]),
        ),
        Decision(run_id=run_id, seq=4, at=4.25, step=1, call_id="c1", verdict="execute"),
        ActionProposed(
            run_id=run_id,
            seq=5,
            at=4.5,
            step=2,
            call_id="c2",
            action=ToolAction(thought="delete it", tool="delete_order", args={"id": "A1"}),
        ),
        Decision(
            run_id=run_id,
            seq=6,
            at=4.75,
            step=2,
            call_id="c2",
            verdict="needs_confirmation",
            reason="destructive",
            args_hash="h1",
        ),
        RunFinished(run_id=run_id, seq=7, at=5.0, status="awaiting_confirmation"),
        Confirmation(
            run_id=run_id,
            seq=8,
            at=5.5,
            step=2,
            call_id="c2",
            approved=True,
            by="alice",
            reason="ok",
            args={"id": "A2"},
            args_hash="h2",
        ),
        ToolStarted(
            run_id=run_id,
            seq=9,
            at=6.0,
            step=2,
            call_id="c2",
            tool="delete_order",
            args={"id": "A2"},
            idempotency_key=f"{run_id}:c2",
        ),
        RunFinished(run_id=run_id, seq=10, at=6.5, status="needs_attention", reason="outcome lost"),
        Resolution(
            run_id=run_id,
            seq=11,
            at=7.0,
            step=2,
            call_id="c2",
            decision="rerun",
            by="bob",
            reason="it did not happen",
        ),
        ToolFinished(
            run_id=run_id,
            seq=12,
            at=7.5,
            step=2,
            call_id="c2",
            tool="delete_order",
            ok=False,
            result={"partial": [1, 2.5, "x", None]},
            error="EIO",
            duration_ms=12.5,
        ),
        RunFinished(run_id=run_id, seq=13, at=8.0, status="budget_exhausted", reason="steps"),
        RunResumed(run_id=run_id, seq=14, at=8.5, budget={"max_steps": 20}, by="carol"),
        ActionProposed(
            run_id=run_id,
            seq=15,
            at=9.0,
            step=3,
            call_id="c3",
            action=FinishAction(thought="done", answer="the answer"),
        ),
        RunFinished(run_id=run_id, seq=16, at=9.5, status="completed", answer="the answer"),
    ]


def folded_status(events: Sequence[Event]) -> str:
    """The status of the run state folded from ``events``."""
    state = RunState(events[0].run_id)
    for ev in events:
        state.apply(ev)
    return state.status.value


class StoreConformance:
    """The behaviour every transcript store shares. Override ``store`` (and ``peer``)."""

    @pytest.fixture
    async def store(self) -> TranscriptStore:
        """The store under test, empty, closed afterwards. Subclasses must override it."""
        pytest.fail(f"{type(self).__name__} must override the `store` fixture")

    @pytest.fixture
    async def peer(self, store: TranscriptStore) -> TranscriptStore | None:
        """A second store object on the same data as ``store``, or ``None`` where a store
        cannot be opened twice (MemoryStore). Used to race and claim across objects."""
        return None

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
        assert {ev.type for ev in events} == {
            "run_started",
            "context_added",
            "model_called",
            "action_proposed",
            "decision",
            "confirmation",
            "tool_started",
            "tool_finished",
            "resolution",
            "run_resumed",
            "run_finished",
        }

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

    # ------------------------------------------------------------------ listing

    async def test_list_runs_order_status_and_limit(self, store: TranscriptStore) -> None:
        runs = {name: fresh_run_id(name) for name in ("old", "mid", "new", "done")}
        await store.append(runs["old"], 0, [started(runs["old"], at=10.0, task="old task")])
        await store.append(runs["mid"], 0, [started(runs["mid"], at=20.0)])
        await store.append(runs["new"], 0, [started(runs["new"], at=30.0)])
        await store.append(runs["done"], 0, [started(runs["done"], at=5.0)])
        await store.append(
            runs["done"],
            1,
            [
                context(runs["done"], 1, at=6.0),
                RunFinished(run_id=runs["done"], seq=2, at=25.0, status="completed", answer="42"),
            ],
        )
        listed = await store.list_runs()
        assert [s.run_id for s in listed] == [runs[n] for n in ("new", "done", "mid", "old")]
        done = listed[1]
        assert (done.status, done.created_at, done.updated_at, done.events) == (
            "completed",
            5.0,
            25.0,
            3,
        )
        assert listed[3].task == "old task" and listed[3].created_at == listed[3].updated_at
        assert [s.run_id for s in await store.list_runs(status="completed")] == [runs["done"]]
        assert [s.run_id for s in await store.list_runs(status="running")] == [
            runs[n] for n in ("new", "mid", "old")
        ]
        assert await store.list_runs(status="failed") == []
        assert [s.run_id for s in await store.list_runs(limit=2)] == [runs["new"], runs["done"]]
        assert [s.run_id for s in await store.list_runs(status="running", limit=1)] == [runs["new"]]
        assert await store.list_runs(limit=0) == []
        # an append moves a run to the top
        await store.append(runs["old"], 1, [context(runs["old"], 1, at=40.0)])
        assert (await store.list_runs(limit=1))[0].run_id == runs["old"]

    async def test_list_runs_search_and_pages(self, store: TranscriptStore) -> None:
        ids = [fresh_run_id("pg") for _ in range(5)]
        tasks = ["Refund order A1", "Cancel 100% of it", "nothing", "under_score", "x"]
        meta = [{}, {}, {"ticket": "T-42", "user": "Ada"}, {}, {"note": "Refund later"}]
        for i, (run_id, task, md) in enumerate(zip(ids, tasks, meta, strict=True)):
            first = started(run_id, at=float(10 + i), task=task).model_copy(update={"metadata": md})
            await store.append(run_id, 0, [first])

        async def found(text: str, status: str | None = None) -> list[str]:
            return [s.run_id for s in await store.list_runs(search=text, status=status)]

        assert await found("refund") == [ids[4], ids[0]]  # task or metadata, any ASCII case
        assert await found("t-42") == [ids[2]]
        assert await found("ada") == [ids[2]]
        assert await found(ids[3]) == [ids[3]]  # by id
        assert await found("100%") == [ids[1]]  # wildcards match literally
        assert await found("nde_") == []  # "_" is no wildcard either
        assert await found("under_") == [ids[3]]
        assert await found("refund", status="completed") == []
        assert await found("nope") == []
        # pages: each page starts after the previous page's last (updated_at, run_id)
        seen: list[str] = []
        after: tuple[float, str] | None = None
        while page := await store.list_runs(limit=2, after=after):
            seen += [s.run_id for s in page]
            after = (page[-1].updated_at, page[-1].run_id)
        assert seen == ids[::-1]
        assert [s.run_id for s in await store.list_runs(search="refund", after=(14.0, ids[4]))] == [
            ids[0]
        ]

    async def test_listing_keeps_exact_event_times(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        at = 1_764_567_890.123_456_7  # time.time()-like, more digits than microseconds
        await store.append(run, 0, [started(run, at=at), context(run, 1, at=at + 0.000_000_3)])
        [summary] = await store.list_runs()
        assert summary.created_at == at and summary.updated_at == at + 0.000_000_3

    # ------------------------------------------------------------------ tenants

    async def test_list_runs_by_tenant(self, store: TranscriptStore) -> None:
        acme_old, acme_new, globex, nobody = (fresh_run_id(n) for n in ("ao", "an", "g", "n"))
        await store.append(acme_old, 0, [started(acme_old, at=10.0, tenant="acme")])
        await store.append(acme_new, 0, [started(acme_new, at=20.0, tenant="acme")])
        await store.append(globex, 0, [started(globex, at=30.0, tenant="globex ✓")])
        await store.append(nobody, 0, [started(nobody, at=40.0)])
        await store.append(acme_old, 1, [finished(acme_old, 1, "completed", at=25.0)])
        listed = await store.list_runs()
        assert [(s.run_id, s.tenant) for s in listed] == [
            (nobody, None),
            (globex, "globex ✓"),
            (acme_old, "acme"),
            (acme_new, "acme"),
        ]
        assert [s.run_id for s in await store.list_runs(tenant="acme")] == [acme_old, acme_new]
        assert [s.run_id for s in await store.list_runs(tenant="acme", limit=1)] == [acme_old]
        assert [s.run_id for s in await store.list_runs(tenant="acme", status="running")] == [
            acme_new
        ]
        assert [s.run_id for s in await store.list_runs(tenant="acme", status="completed")] == [
            acme_old
        ]
        assert [s.run_id for s in await store.list_runs(tenant="globex ✓")] == [globex]
        assert await store.list_runs(tenant="initech") == []
        assert await store.list_runs(tenant="globex ✓", status="failed") == []
        # the tenant stays with the run through later appends and a truncation
        await store.truncate(acme_old, after=0)
        running = await store.list_runs(tenant="acme", status="running")
        assert {(s.run_id, s.tenant) for s in running} == {(acme_old, "acme"), (acme_new, "acme")}

    @pytest.mark.parametrize("bad", ["", "a\nb", "nul\u0000", "x" * 201])
    async def test_an_invalid_tenant_is_refused_and_nothing_is_written(
        self, store: TranscriptStore, bad: str
    ) -> None:
        run = fresh_run_id()
        with pytest.raises(StoreError, match="tenant"):
            await store.append(run, 0, [started(run, tenant=bad)])
        with pytest.raises(RunNotFoundError):
            await store.load(run)
        with pytest.raises(StoreError, match="tenant"):
            await store.list_runs(tenant=bad)

    # ------------------------------------------------------------------ prune

    async def _runs_for_pruning(self, store: TranscriptStore) -> dict[str, str]:
        """Runs named by what they are; every one last updated at 100 unless it says new."""
        runs = {
            name: fresh_run_id(name)
            for name in (
                "completed",
                "failed",
                "cancelled",
                "running",
                "awaiting",
                "attention",
                "budget",
                "completed_new",
                "acme_completed",
                "acme_attention",
            )
        }
        statuses = {
            "completed": "completed",
            "failed": "failed",
            "cancelled": "cancelled",
            "awaiting": "awaiting_confirmation",
            "attention": "needs_attention",
            "budget": "budget_exhausted",
            "completed_new": "completed",
            "acme_completed": "completed",
            "acme_attention": "needs_attention",
        }
        for name, run in runs.items():
            tenant = "acme" if name.startswith("acme") else None
            at = 200.0 if name.endswith("new") else 100.0
            await store.append(run, 0, [started(run, at=at - 1, tenant=tenant)])
            if name in statuses:
                await store.append(run, 1, [finished(run, 1, statuses[name], at=at)])
            else:
                await store.append(run, 1, [context(run, 1, at=at)])
        return runs

    async def test_prune_removes_old_finished_runs_and_nothing_else(
        self, store: TranscriptStore
    ) -> None:
        runs = await self._runs_for_pruning(store)
        await store.request_cancel(runs["completed"], by="ops")
        doomed = {runs[n] for n in ("completed", "failed", "cancelled", "acme_completed")}
        assert set(await store.prune(before=150.0, dry_run=True)) == doomed
        assert len(await store.list_runs()) == len(runs)  # a dry run deletes nothing
        pruned = await store.prune(before=150.0)
        assert sorted(pruned) == sorted(doomed)
        left = {s.run_id for s in await store.list_runs()}
        assert left == set(runs.values()) - doomed
        for run in doomed:
            with pytest.raises(RunNotFoundError):
                await store.load(run)
            with pytest.raises(RunNotFoundError):
                await store.cancel_request(run)
        # every event went with the row: the id starts afresh
        again = runs["completed"]
        await store.append(again, 0, [started(again, at=300.0)])
        assert [ev.seq for ev in await store.load(again)] == [0]
        assert await store.cancel_request(again) is None
        assert await store.prune(before=150.0) == []
        assert await store.prune(before=100.0, statuses=["needs_attention"]) == []  # not before

    async def test_prune_by_status_and_tenant(self, store: TranscriptStore) -> None:
        runs = await self._runs_for_pruning(store)
        assert await store.prune(before=150.0, tenant="acme") == [runs["acme_completed"]]
        assert await store.prune(
            before=150.0, statuses=("needs_attention",), tenant="acme", dry_run=True
        ) == [runs["acme_attention"]]
        named = await store.prune(
            before=150.0, statuses=("awaiting_confirmation", "needs_attention", "running")
        )
        assert sorted(named) == sorted(
            runs[n] for n in ("awaiting", "attention", "acme_attention", "running")
        )
        assert await store.prune(before=250.0, run_ids=[runs["completed_new"], "no-such"]) == [
            runs["completed_new"]
        ]
        left = {s.run_id for s in await store.list_runs()}
        assert left == {runs[n] for n in ("completed", "failed", "cancelled", "budget")}

    async def test_prune_keeps_a_run_whose_lease_has_not_expired(
        self, store: TranscriptStore
    ) -> None:
        run = fresh_run_id()
        await store.append(run, 0, [started(run), finished(run, 1, "completed", at=2.0)])
        lease = await store.acquire(run, owner="w", ttl_s=30)
        assert await store.prune(before=10.0) == []
        await store.release(lease)
        assert await store.prune(before=10.0) == [run]

    async def test_invalid_prune_requests(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        await store.append(run, 0, [started(run), finished(run, 1, "completed", at=2.0)])
        for kwargs in (
            {"statuses": ()},
            {"statuses": ("done",)},
            {"statuses": "completed,failed"},
            {"tenant": ""},
        ):
            with pytest.raises(ConfigurationError):
                await store.prune(before=10.0, **kwargs)  # pyright: ignore[reportArgumentType]  # wrong on purpose
        with pytest.raises(ConfigurationError):
            await store.prune(before=float("nan"))
        assert await store.prune(before=10.0, statuses="completed") == [run]  # one status

    async def test_status_rule_matches_the_fold(self, store: TranscriptStore) -> None:
        """After every event, the listed status is the status of the folded state: one rule."""
        run = fresh_run_id()
        events = every_event_type(run)
        for i, ev in enumerate(events):
            await store.append(run, i, [ev])
            [summary] = await store.list_runs()
            assert summary.status == folded_status(events[: i + 1]), f"after {ev.type} (seq {i})"
        whole = fresh_run_id()
        batch = every_event_type(whole)
        await store.append(whole, 0, batch[:8])  # ends awaiting_confirmation
        await store.append(whole, 8, batch[8:12])  # ends with the resolution: running
        [summary] = [s for s in await store.list_runs() if s.run_id == whole]
        assert summary.status == folded_status(batch[:12]) == "running"

    async def test_status_after_truncate_matches_the_fold(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        events = every_event_type(run)
        await store.append(run, 0, events)
        for after in range(len(events) - 1, -1, -1):
            await store.truncate(run, after=after)
            [summary] = await store.list_runs()
            assert summary.status == folded_status(events[: after + 1]), f"kept 0..{after}"
            assert summary.events == after + 1

    # ------------------------------------------------------------------ truncate

    async def test_truncate_and_dry_run(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        events = [
            started(run),
            context(run, 1, content="keep"),
            context(run, 2, content="drop \u0000 😀"),
            RunFinished(run_id=run, seq=3, at=9.0, status="failed", reason="boom"),
        ]
        await store.append(run, 0, events)
        expected = [(2, encode_event_body(events[2])), (3, encode_event_body(events[3]))]
        assert await store.truncate(run, after=1, dry_run=True) == expected
        assert await store.load(run) == events
        assert (await store.list_runs())[0].status == "failed"
        assert await store.truncate(run, after=1) == expected
        assert await store.load(run) == events[:2]
        [summary] = await store.list_runs()
        assert (summary.status, summary.events) == ("running", 2)
        await store.append(run, 2, [context(run, 2, content="again")])
        assert [ev.seq for ev in await store.load(run)] == [0, 1, 2]
        assert await store.truncate(run, after=5) == []
        with pytest.raises(StoreError):
            await store.truncate(run, after=-1)
        assert len(await store.load(run)) == 3

    # ------------------------------------------------------------------ call guards

    async def test_a_call_guard_is_seen_by_every_object_until_let_go(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        """A store that keeps call guards (optional: a store without them sends every
        lost non-idempotent call to a person): while one holder has a call's guard, every
        store object on the same data sees the call running and cannot take the guard;
        once let go, nobody sees it, and it can be taken again. Other calls are apart."""
        if not isinstance(store, CallGuardStore):
            pytest.skip(f"{type(store).__name__} keeps no call guards")
        run = fresh_run_id()
        others = [store] if peer is None else [store, peer]
        for other in others:
            assert isinstance(other, CallGuardStore)
            assert not await other.call_running(run, f"{run}:1")
        async with store.guard_call(run, f"{run}:1") as held:
            assert held
            for other in others:
                assert isinstance(other, CallGuardStore)
                assert await other.call_running(run, f"{run}:1")
                assert not await other.call_running(run, f"{run}:2")
                assert not await other.call_running(f"{run}-other", f"{run}:1")
                async with other.guard_call(run, f"{run}:1") as second:
                    assert not second
                async with other.guard_call(run, f"{run}:2") as apart:
                    assert apart
            assert await store.call_running(run, f"{run}:1")  # the refused one let go nothing
        for other in others:
            assert isinstance(other, CallGuardStore)
            assert not await other.call_running(run, f"{run}:1")
        async with (peer or store).guard_call(run, f"{run}:1") as again:
            assert isinstance(again, bool) and again
            assert await store.call_running(run, f"{run}:1")

    # ------------------------------------------------------------------ leases

    async def _new_run(self, store: TranscriptStore) -> str:
        run = fresh_run_id("leased")
        await store.append(run, 0, [started(run)])
        return run

    async def _expired(self, store: TranscriptStore, run: str, owner: str) -> Lease:
        """A lease of ``owner`` that has just expired (by any store's clock)."""
        lease = await store.acquire(run, owner=owner, ttl_s=0.2)
        await asyncio.sleep(0.35)
        return lease

    async def test_acquire_a_fresh_run(self, store: TranscriptStore) -> None:
        run = await self._new_run(store)
        before = time.time()
        lease = await store.acquire(run, owner="host:1:a", ttl_s=30)
        assert isinstance(lease, Lease)
        assert (lease.run_id, lease.owner, lease.ttl_s) == (run, "host:1:a", 30)
        assert lease.epoch >= 1
        # the store's clock may be another machine's: only roughly ours
        assert before + 30 - 5 <= lease.expires_at <= time.time() + 30 + 5

    async def test_acquire_while_held_is_busy_and_names_the_holder(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        run = await self._new_run(store)
        await store.acquire(run, owner="worker-a", ttl_s=30)
        for other in [store] if peer is None else [store, peer]:
            with pytest.raises(RunBusyError, match="worker-a") as info:
                await other.acquire(run, owner="worker-b", ttl_s=30)
            assert run in str(info.value)
        with pytest.raises(RunBusyError):  # even for the same owner: one lease at a time
            await store.acquire(run, owner="worker-a", ttl_s=30)
        other_run = await self._new_run(store)
        await store.acquire(other_run, owner="worker-b", ttl_s=30)  # other runs stay free

    async def test_acquire_after_release(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        run = await self._new_run(store)
        first = await store.acquire(run, owner="a", ttl_s=30)
        await store.release(first)
        second = await (peer or store).acquire(run, owner="b", ttl_s=30)
        assert second.epoch == first.epoch + 1

    async def test_acquire_after_expiry(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        run = await self._new_run(store)
        first = await self._expired(store, run, "a")
        second = await (peer or store).acquire(run, owner="b", ttl_s=30)
        assert (second.owner, second.epoch) == ("b", first.epoch + 1)
        assert second.taken_over == "a"  # a worker that did not finish its turn

    async def test_a_free_or_released_run_is_not_taken_over(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        run = await self._new_run(store)
        first = await store.acquire(run, owner="a", ttl_s=30)
        assert first.taken_over is None
        await store.release(first)
        second = await (peer or store).acquire(run, owner="b", ttl_s=30)
        assert second.taken_over is None

    async def test_listing_shows_the_lease_holder_and_expiry(self, store: TranscriptStore) -> None:
        """What a sweep needs to tell a held run from one nobody advances."""
        run = await self._new_run(store)

        async def listed() -> tuple[str | None, float | None]:
            (summary,) = [s for s in await store.list_runs(limit=1000) if s.run_id == run]
            return summary.owner, summary.lease_expires_at

        assert await listed() == (None, None)  # never acquired
        lease = await store.acquire(run, owner="worker-a", ttl_s=30)
        assert await listed() == ("worker-a", pytest.approx(lease.expires_at, abs=0.01))
        await store.release(lease)
        assert await listed() == (None, None)
        expired = await self._expired(store, run, "worker-b")
        owner, until = await listed()
        assert owner == "worker-b" and until == pytest.approx(expired.expires_at, abs=0.01)
        assert until < time.time() + 1  # past (by the store's clock, give or take a second)

    async def test_every_acquire_bumps_the_epoch_by_one(self, store: TranscriptStore) -> None:
        run = await self._new_run(store)
        epochs: list[int] = []
        for i in range(4):
            lease = await store.acquire(run, owner=f"w{i % 2}", ttl_s=30)
            epochs.append(lease.epoch)
            await store.release(lease)
        assert epochs == list(range(epochs[0], epochs[0] + 4))

    async def test_renew_extends_the_lease(self, store: TranscriptStore) -> None:
        run = await self._new_run(store)
        lease = await store.acquire(run, owner="a", ttl_s=1.0)
        await asyncio.sleep(0.5)
        renewed = await store.renew(lease)
        assert (renewed.run_id, renewed.owner, renewed.epoch) == (run, "a", lease.epoch)
        assert renewed.ttl_s == 1.0
        assert renewed.expires_at >= lease.expires_at + 0.4
        await asyncio.sleep(0.7)  # past the first expiry, before the renewed one
        with pytest.raises(RunBusyError, match="'a'"):
            await store.acquire(run, owner="b", ttl_s=30)

    async def test_renew_after_expiry_works_while_nobody_took_the_run(
        self, store: TranscriptStore
    ) -> None:
        run = await self._new_run(store)
        lease = await self._expired(store, run, "a")
        renewed = await store.renew(lease)
        assert renewed.epoch == lease.epoch
        await store.append(run, 1, [context(run, 1)], lease=renewed)
        await store.append(run, 2, [context(run, 2)], lease=lease)  # the same lease
        with pytest.raises(RunBusyError):
            await store.acquire(run, owner="b", ttl_s=30)

    async def test_renew_after_someone_else_acquired_is_lost(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        run = await self._new_run(store)
        stale = await self._expired(store, run, "a")
        current = await (peer or store).acquire(run, owner="b", ttl_s=30)
        with pytest.raises(LeaseLostError, match="'b'") as info:
            await store.renew(stale)
        assert run in str(info.value)
        assert isinstance(info.value, StoreError)
        # the new holder keeps the run
        with pytest.raises(RunBusyError, match="'b'"):
            await store.acquire(run, owner="c", ttl_s=30)
        assert (await store.renew(current)).epoch == current.epoch

    async def test_append_with_a_stale_lease_is_fenced_and_writes_nothing(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        run = await self._new_run(store)
        stale = await self._expired(store, run, "a")
        # expiry alone does not fence: the late holder can still append
        await store.append(run, 1, [context(run, 1, content="late but fine")], lease=stale)
        current = await (peer or store).acquire(run, owner="b", ttl_s=30)
        batch = [context(run, 2, content="stale"), context(run, 3, content="stale")]
        with pytest.raises(LeaseLostError, match="'b'"):
            await store.append(run, 2, batch, lease=stale)
        with pytest.raises(LeaseLostError):  # at a wrong seq too: the lease is checked first
            await store.append(run, 5, [context(run, 5)], lease=stale)
        expected = [started(run), context(run, 1, content="late but fine")]
        assert await store.load(run) == expected
        assert [s.events for s in await store.list_runs()] == [2]
        # the current holder appends; a wrong seq is still a seq conflict for it
        with pytest.raises(SeqConflictError):
            await store.append(run, 1, [context(run, 1)], lease=current)
        await (peer or store).append(run, 2, [context(run, 2, content="b")], lease=current)
        assert await store.load(run, after=1) == [context(run, 2, content="b")]
        # appends without a lease are unchanged (conditional on the seq only)
        await store.append(run, 3, [context(run, 3)])
        assert len(await store.load(run)) == 4

    async def test_a_lease_is_only_good_for_its_own_run(self, store: TranscriptStore) -> None:
        run, other = await self._new_run(store), await self._new_run(store)
        lease = await store.acquire(run, owner="a", ttl_s=30)
        await store.acquire(other, owner="b", ttl_s=30)
        with pytest.raises(StoreError) as info:
            await store.append(other, 1, [context(other, 1)], lease=lease)
        assert run in str(info.value) and other in str(info.value)
        assert await store.load(other) == [started(other)]
        new = fresh_run_id("never-leased")
        with pytest.raises(LeaseLostError):  # a run that does not exist has no lease
            await store.append(new, 0, [started(new)], lease=Lease(new, "a", 1, 30, 0))
        with pytest.raises(RunNotFoundError):
            await store.load(new)

    async def test_release_is_idempotent(self, store: TranscriptStore) -> None:
        run = await self._new_run(store)
        lease = await store.acquire(run, owner="a", ttl_s=30)
        await store.release(lease)
        await store.release(lease)
        again = await store.acquire(run, owner="b", ttl_s=30)
        assert again.epoch == lease.epoch + 1
        with pytest.raises(LeaseLostError):  # a released lease is gone for good
            await store.renew(lease)

    async def test_releasing_a_lost_lease_does_not_free_the_new_holders_run(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        run = await self._new_run(store)
        stale = await self._expired(store, run, "a")
        current = await (peer or store).acquire(run, owner="b", ttl_s=30)
        await store.release(stale)  # no error, no effect
        with pytest.raises(RunBusyError, match="'b'"):
            await store.acquire(run, owner="c", ttl_s=30)
        await (peer or store).append(run, 1, [context(run, 1)], lease=current)
        assert (await (peer or store).renew(current)).epoch == current.epoch

    async def test_concurrent_acquirers_exactly_one_wins(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        run = await self._new_run(store)
        stores = [store] if peer is None else [store, peer]

        async def take(i: int) -> Lease:
            return await stores[i % len(stores)].acquire(run, owner=f"w{i}", ttl_s=30)

        for _ in range(2):  # a never-leased run, then a released one
            outcomes = await asyncio.gather(*(take(i) for i in range(12)), return_exceptions=True)
            winners = [o for o in outcomes if isinstance(o, Lease)]
            assert len(winners) == 1, outcomes
            assert all(isinstance(o, RunBusyError) for o in outcomes if o is not winners[0])
            await store.append(run, 1, [context(run, 1)], lease=winners[0])
            await store.truncate(run, after=0)
            await store.release(winners[0])

    async def test_acquire_an_unknown_run(self, store: TranscriptStore) -> None:
        with pytest.raises(RunNotFoundError, match="nope"):
            await store.acquire("nope", owner="a", ttl_s=30)
        ghost = Lease("nope", "a", 1, 30, 0)
        with pytest.raises(LeaseLostError):
            await store.renew(ghost)
        await store.release(ghost)  # nothing to give back: no error

    @pytest.mark.parametrize(
        ("owner", "ttl_s"),
        [("", 30.0), ("a\x00b", 30.0), ("a", 0.0), ("a", -1.0), ("a", float("nan"))],
    )
    async def test_invalid_lease_requests(
        self, store: TranscriptStore, owner: str, ttl_s: float
    ) -> None:
        run = await self._new_run(store)
        with pytest.raises(ConfigurationError):
            await store.acquire(run, owner=owner, ttl_s=ttl_s)
        await store.acquire(run, owner="a", ttl_s=30)  # nothing was taken

    # ------------------------------------------------------------------ cancel requests

    async def test_cancel_requests(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        await store.append(run, 0, [started(run)])
        assert await store.cancel_request(run) is None
        await store.request_cancel(run, by="alice")
        first = await store.cancel_request(run)
        assert first is not None and (first.by, first.reason) == ("alice", None)
        assert first.at > 1_600_000_000  # a real clock, Unix seconds
        await store.request_cancel(run, by="bob ✓", reason="too slow \u0000 😀")
        second = await store.cancel_request(run)
        assert second is not None and (second.by, second.reason) == ("bob ✓", "too slow \u0000 😀")
        assert second.at >= first.at
        assert await store.load(run) == [started(run)]  # no event is written
        assert [s.events for s in await store.list_runs()] == [1]
        other = fresh_run_id()
        await store.append(other, 0, [started(other)])
        assert await store.cancel_request(other) is None

    # ------------------------------------------------------------------ content

    @pytest.mark.parametrize("text", UNICODE_SAMPLES)
    async def test_unicode_round_trips(self, store: TranscriptStore, text: str) -> None:
        run = fresh_run_id("ünï-😀-שלום")
        events: list[Event] = [
            started(run, task=text),
            context(run, 1, content=text),
            tool_result(run, 2, {text: [text, {"k": text}]}),
        ]
        await store.append(run, 0, events)
        assert await store.load(run) == events
        [summary] = await store.list_runs()
        assert summary.run_id == run and summary.task == text

    async def test_large_events_round_trip(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        big = ("0123456789abcdef" * 16 * 1024)[: 256 * 1024]  # 256 KB
        events: list[Event] = [
            started(run),
            tool_result(run, 1, big),
            tool_result(run, 2, {"rows": [big[:65536]] * 4, "note": "ünï \u0000"}),
            context(run, 3, content=big[::-1]),
        ]
        await store.append(run, 0, events[:2])
        await store.append(run, 2, events[2:])
        loaded = await store.load(run)
        assert loaded == events
        assert isinstance(loaded[1], ToolFinished) and loaded[1].result == big

    async def test_values_at_the_limits_round_trip(self, store: TranscriptStore) -> None:
        """The largest values the limits let into a transcript read back equal."""
        run = fresh_run_id()
        deep: object = "bottom"
        for _ in range(MAX_DEPTH - 1):
            deep = [deep]
        longest = "\u20ac" * MAX_STRING_CHARS  # 3 bytes each in UTF-8: a 3 MB body
        events: list[Event] = [
            started(run),
            tool_result(run, 1, deep),
            tool_result(run, 2, {"max": MAX_INT, "min": MIN_INT, "float": 1.7976931348623157e308}),
            context(run, 3, content=longest),
        ]
        assert len(encode_event_body(events[3]).encode()) < MAX_EVENT_BYTES
        await store.append(run, 0, events)
        assert await store.load(run) == events
        assert await store.load(run, after=2) == events[3:]

    @settings(
        max_examples=25,
        deadline=None,
        # each example uses its own run; each subclass (executor) its own store
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
        ],
    )
    @given(texts=st.lists(st.text(), min_size=1, max_size=3))
    def test_any_text_round_trips_from_fresh_event_loops(
        self, store: TranscriptStore, texts: list[str]
    ) -> None:
        """Any text reads back as itself; each example runs in its own ``asyncio.run`` (as
        the CLI and the ``*_sync`` methods use a store)."""
        run = fresh_run_id("hyp")
        events: list[Event] = [
            started(run, task=texts[0]),
            *(context(run, i, content=t) for i, t in enumerate(texts, start=1)),
            tool_result(run, len(texts) + 1, {t: t for t in texts}),
        ]

        async def round_trip() -> list[Event]:
            await store.append(run, 0, events)
            return await store.load(run)

        assert asyncio.run(round_trip()) == events
