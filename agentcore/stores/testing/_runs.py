"""The runs a store keeps: listing, tenants, prune, truncate, cancel requests."""

from __future__ import annotations

import pytest

from agentcore.contracts.errors import ConfigurationError, RunNotFoundError, StoreError
from agentcore.events import RunFinished, encode_event_body

from .._protocol import CancelAtAppend, TranscriptStore
from ._builders import context, every_event_type, finished, folded_status, fresh_run_id, started


class RunChecks:
    """The runs a store keeps: listing, tenants, prune, truncate, cancel requests.

    Part of :class:`StoreConformance`.
    """

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

    async def test_an_append_reads_the_cancel_request_as_it_commits(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        """A store that says it can (:class:`CancelAtAppend`) hands out, once, the cancel
        request each append saw in its transaction, made through any store object."""
        if not isinstance(store, CancelAtAppend):
            pytest.skip(f"{type(store).__name__} does not read cancel requests as it appends")
        run = fresh_run_id()
        with pytest.raises(LookupError):
            store.cancel_at_append(run)  # no append yet
        await store.append(run, 0, [started(run)])
        assert store.cancel_at_append(run) is None
        with pytest.raises(LookupError):
            store.cancel_at_append(run)  # handed out once
        await (peer or store).request_cancel(run, by="bob ✓", reason="too slow \u0000 😀")
        await store.append(run, 1, [context(run, 1)])
        seen = store.cancel_at_append(run)
        assert seen is not None and (seen.by, seen.reason) == ("bob ✓", "too slow \u0000 😀")
        assert seen == await store.cancel_request(run)
        await store.append(run, 2, [context(run, 2)])  # read, not taken
        with pytest.raises(StoreError):  # refused (the seq moved on): nothing is handed out,
            await store.append(run, 2, [context(run, 2)])  # not even the earlier append's
        with pytest.raises(LookupError):
            store.cancel_at_append(run)
