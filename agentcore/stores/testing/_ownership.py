"""Who advances a run: call guards and leases."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentcore.contracts.errors import (
    ConfigurationError,
    LeaseLostError,
    RunBusyError,
    RunNotFoundError,
    SeqConflictError,
    StoreError,
)

from .._guards import CallGuardStore
from .._lease import Lease
from .._protocol import TranscriptStore
from ._builders import context, fresh_run_id, started


class OwnershipChecks:
    """Who advances a run: call guards and leases. Part of :class:`StoreConformance`."""

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
        holder = peer or store
        assert isinstance(holder, CallGuardStore)
        async with holder.guard_call(run, f"{run}:1") as again:
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

    async def _taken_over(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> tuple[str, Lease, Lease]:
        """A new run whose lease of ``"a"`` expired and that ``"b"`` then took (through the
        peer store, when there is one): the run, a's stale lease and b's."""
        run = await self._new_run(store)
        stale = await self._expired(store, run, "a")
        return run, stale, await (peer or store).acquire(run, owner="b", ttl_s=30)

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
        _, first, second = await self._taken_over(store, peer)
        assert (second.owner, second.epoch) == ("b", first.epoch + 1)
        assert second.taken_over == "a"  # a worker that did not finish its shift

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
        # past, by the store's clock (give or take a second)
        assert until is not None and until < time.time() + 1

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
        run, stale, current = await self._taken_over(store, peer)
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
