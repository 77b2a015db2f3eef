"""Quota counters: an append's charges applied in its transaction, all or none."""

from __future__ import annotations

import asyncio

import pytest

from agentcore.contracts.errors import LeaseLostError, QuotaExceededError, SeqConflictError

from .._protocol import TranscriptStore
from .._quota import QuotaStore, QuotaUsage
from ._builders import context, fresh_run_id, started
from ._quota_builders import charge, charged_call, released


def _quotas(store: TranscriptStore) -> QuotaStore:
    if not isinstance(store, QuotaStore):
        pytest.skip(f"{type(store).__name__} keeps no quota counters (not a QuotaStore)")
    return store


async def _new_run(store: TranscriptStore, tenant: str | None = None) -> str:
    run = fresh_run_id("quota")
    await store.append(run, 0, [started(run, tenant=tenant)])
    return run


class QuotaChecks:
    """Quota counters: an append's charges applied in its transaction, all or none.

    Part of :class:`StoreConformance`; skipped for a store that is not a
    :class:`~agentcore.stores.QuotaStore`.
    """

    async def test_quota_charges_are_applied_with_the_events(self, store: TranscriptStore) -> None:
        quotas = _quotas(store)
        run = await _new_run(store)
        events = charged_call(run, 1, [charge("a", 2.5, limit=10), charge("b", 1)])
        await store.append(run, 1, events)
        assert await store.load(run, after=0) == events
        assert await quotas.quota_usage(["a", "b"]) == {"a": 2.5, "b": 1.0}
        # Events without charges leave the counters alone.
        await store.append(run, 3, [context(run, 3)])
        assert await quotas.quota_usage(["a", "b"]) == {"a": 2.5, "b": 1.0}

    async def test_quota_unknown_counters_hold_zero(self, store: TranscriptStore) -> None:
        quotas = _quotas(store)
        assert await quotas.quota_usage([]) == {}
        assert await quotas.quota_usage(["never", "charged"]) == {"never": 0.0, "charged": 0.0}
        assert await quotas.list_quota_usage() == []

    async def test_quota_over_a_limit_refuses_the_whole_batch(self, store: TranscriptStore) -> None:
        quotas = _quotas(store)
        run = await _new_run(store)
        await store.append(run, 1, charged_call(run, 1, [charge("a", 4, limit=5)]))
        # The first charge fits (a: 4 + 1 <= 5); the second passes b's limit: nothing of
        # the batch is written, the first charge included.
        refused = charged_call(run, 3, [charge("a", 1, limit=5), charge("b", 2, limit=1.5)])
        with pytest.raises(QuotaExceededError, match="nothing was written") as info:
            await store.append(run, 3, [*refused, context(run, 5)])
        error = info.value
        assert (error.quota, error.key, error.used, error.amount, error.limit) == (
            "refunds",
            "b",
            0.0,
            2.0,
            1.5,
        )
        assert [ev.seq for ev in await store.load(run)] == [0, 1, 2]
        assert await quotas.quota_usage(["a", "b"]) == {"a": 4.0, "b": 0.0}
        assert [u.key for u in await quotas.list_quota_usage()] == ["a"]
        # A batch of two calls whose second passes a limit: the first is not written either.
        two = [
            *charged_call(run, 3, [charge("a", 1, limit=5)], call_id="first"),
            *charged_call(run, 5, [charge("a", 1, limit=5)], call_id="second"),
        ]
        with pytest.raises(QuotaExceededError) as info:
            await store.append(run, 3, two)
        assert (info.value.used, info.value.amount, info.value.limit) == (5.0, 1.0, 5.0)
        assert await quotas.quota_usage(["a"]) == {"a": 4.0}
        assert len(await store.load(run)) == 3
        # The run goes on at the same seq: the refusal left nothing behind.
        await store.append(run, 3, charged_call(run, 3, [charge("a", 1, limit=5)]))
        assert await quotas.quota_usage(["a"]) == {"a": 5.0}

    async def test_quota_a_new_counter_over_its_limit_is_refused(
        self, store: TranscriptStore
    ) -> None:
        quotas = _quotas(store)
        run = await _new_run(store)
        with pytest.raises(QuotaExceededError) as info:
            await store.append(run, 1, charged_call(run, 1, [charge("fresh", 3, limit=2)]))
        assert (info.value.key, info.value.used, info.value.amount) == ("fresh", 0.0, 3.0)
        assert await quotas.list_quota_usage() == []
        assert len(await store.load(run)) == 1
        # Exactly at the limit fits.
        await store.append(run, 1, charged_call(run, 1, [charge("fresh", 2, limit=2)]))
        assert await quotas.quota_usage(["fresh"]) == {"fresh": 2.0}

    async def test_quota_releases_lower_a_counter(self, store: TranscriptStore) -> None:
        quotas = _quotas(store)
        run = await _new_run(store)
        await store.append(run, 1, charged_call(run, 1, [charge("a", 3, limit=3)], call_id="c"))
        with pytest.raises(QuotaExceededError):
            await store.append(run, 3, charged_call(run, 3, [charge("a", 1, limit=3)]))
        # A release is never refused, even on a counter at its limit.
        await store.append(run, 3, [released(run, 3, "c", [charge("a", -2)])])
        assert await quotas.quota_usage(["a"]) == {"a": 1.0}
        await store.append(run, 4, charged_call(run, 4, [charge("a", 2, limit=3)]))
        assert await quotas.quota_usage(["a"]) == {"a": 3.0}
        # A negative amount with a limit is a release too: not checked.
        await store.append(run, 6, charged_call(run, 6, [charge("a", -1, limit=0)]))
        assert await quotas.quota_usage(["a"]) == {"a": 2.0}

    async def test_quota_charges_to_one_counter_in_one_batch_add_up(
        self, store: TranscriptStore
    ) -> None:
        quotas = _quotas(store)
        run = await _new_run(store)
        three = [charge("a", 1, limit=3), charge("a", 1, limit=3), charge("a", 1, limit=3)]
        await store.append(run, 1, charged_call(run, 1, three))
        assert await quotas.quota_usage(["a"]) == {"a": 3.0}
        other = await _new_run(store)
        # 2 fits, 2 + 2 does not: the batch is refused though each charge alone would fit.
        with pytest.raises(QuotaExceededError) as info:
            await store.append(
                other, 1, charged_call(other, 1, [charge("b", 2, limit=3), charge("b", 2, limit=3)])
            )
        assert (info.value.used, info.value.amount) == (2.0, 2.0)
        assert await quotas.quota_usage(["b"]) == {"b": 0.0}
        # Charges are checked in order: a release between two charges makes room.
        inside = [charge("b", 2, limit=3), charge("b", -1), charge("b", 2, limit=3)]
        await store.append(other, 1, charged_call(other, 1, inside))
        assert await quotas.quota_usage(["b"]) == {"b": 3.0}
        # A charge without a limit may pass what a later charge's limit allows.
        with pytest.raises(QuotaExceededError):
            await store.append(
                other, 3, charged_call(other, 3, [charge("c", 5), charge("c", 1, limit=5.5)])
            )
        assert await quotas.quota_usage(["c"]) == {"c": 0.0}

    async def test_quota_sums_are_exact(self, store: TranscriptStore) -> None:
        quotas = _quotas(store)
        run = await _new_run(store)
        await store.append(run, 1, charged_call(run, 1, [charge("eur", 0.1, limit=0.3)]))
        await store.append(run, 3, charged_call(run, 3, [charge("eur", 0.2, limit=0.3)]))
        assert 0.1 + 0.2 > 0.3  # in floats: the store must not add them as floats
        assert await quotas.quota_usage(["eur"]) == {"eur": 0.3}
        with pytest.raises(QuotaExceededError):
            await store.append(run, 5, charged_call(run, 5, [charge("eur", 0.000001, limit=0.3)]))
        await store.append(run, 5, charged_call(run, 5, [charge("eur", -0.1), charge("eur", 0.1)]))
        [usage] = await quotas.list_quota_usage()
        assert usage.used == 0.3

    async def test_quota_counters_list_by_tenant_and_quota(self, store: TranscriptStore) -> None:
        quotas = _quotas(store)
        run = await _new_run(store)
        charges = [
            charge("k3", 3, quota="tokens", tenant="acme", window_end=86400.0),
            charge("k1", 1, quota="refunds", tenant="acme"),
            charge("k2", 2, quota="refunds", tenant="globex", window_end=3600.0),
            charge("k4", 4, quota="refunds"),
        ]
        await store.append(run, 1, charged_call(run, 1, charges))
        # A later charge does not change what a counter is listed by.
        await store.append(run, 3, charged_call(run, 3, [charge("k1", 1, quota="x", tenant="y")]))
        everything = await quotas.list_quota_usage()
        assert everything == [
            QuotaUsage("k1", "refunds", "acme", 2.0, None),
            QuotaUsage("k2", "refunds", "globex", 2.0, 3600.0),
            QuotaUsage("k3", "tokens", "acme", 3.0, 86400.0),
            QuotaUsage("k4", "refunds", None, 4.0, None),
        ]
        assert [u.key for u in await quotas.list_quota_usage(tenant="acme")] == ["k1", "k3"]
        assert [u.key for u in await quotas.list_quota_usage(quota="refunds")] == [
            "k1",
            "k2",
            "k4",
        ]
        assert [u.key for u in await quotas.list_quota_usage(tenant="acme", quota="tokens")] == [
            "k3"
        ]
        assert await quotas.list_quota_usage(tenant="nobody") == []

    async def test_quota_counters_list_in_code_point_order(self, store: TranscriptStore) -> None:
        quotas = _quotas(store)
        run = await _new_run(store)
        keys = ["b", "B", "a", "é", "z", "Z", "😀", "\uff41", "_", "10", "9"]
        await store.append(run, 1, charged_call(run, 1, [charge(k, 1) for k in keys]))
        assert [u.key for u in await quotas.list_quota_usage()] == sorted(keys)

    async def test_quota_prune_by_window_end(self, store: TranscriptStore) -> None:
        quotas = _quotas(store)
        run = await _new_run(store)
        charges = [
            charge("hour-1", 1, window_end=3600.0),
            charge("hour-2", 1, window_end=7200.0),
            charge("forever", 1),
        ]
        await store.append(run, 1, charged_call(run, 1, charges))
        assert await quotas.prune_quota_usage(3599.0) == 0
        assert await quotas.prune_quota_usage(3600.0) == 1  # closed at ``before``: pruned
        assert [u.key for u in await quotas.list_quota_usage()] == ["forever", "hour-2"]
        assert await quotas.prune_quota_usage(1e12) == 1
        assert await quotas.prune_quota_usage(1e12) == 0
        assert await quotas.quota_usage(["hour-1", "forever"]) == {"hour-1": 0.0, "forever": 1.0}
        # A pruned counter starts again at zero.
        await store.append(run, 3, charged_call(run, 3, [charge("hour-1", 1, limit=1)]))
        assert await quotas.quota_usage(["hour-1"]) == {"hour-1": 1.0}

    async def test_quota_a_refused_append_charges_nothing(self, store: TranscriptStore) -> None:
        quotas = _quotas(store)
        run = await _new_run(store)
        await store.append(run, 1, [context(run, 1)])
        with pytest.raises(SeqConflictError):
            await store.append(run, 1, charged_call(run, 1, [charge("a", 1, limit=5)]))
        with pytest.raises(SeqConflictError):  # a new run's id taken already
            await store.append(run, 0, [started(run), *charged_call(run, 1, [charge("a", 1)])])
        lease = await store.acquire(run, owner="a", ttl_s=30)
        await store.release(lease)
        await store.acquire(run, owner="b", ttl_s=30)
        with pytest.raises(LeaseLostError):
            await store.append(run, 2, charged_call(run, 2, [charge("a", 1, limit=5)]), lease=lease)
        assert await quotas.quota_usage(["a"]) == {"a": 0.0}
        assert await quotas.list_quota_usage() == []

    async def test_quota_racing_appends_never_pass_a_limit(
        self, store: TranscriptStore, peer: TranscriptStore | None
    ) -> None:
        """Twelve runs charge one counter of limit 5 at once (with group commit, in shared
        transactions; across two store objects when there is a peer): five are written."""
        quotas = _quotas(store)
        writers = [store] if peer is None else [store, peer]
        runs = [await _new_run(store) for _ in range(12)]

        async def spend(i: int, run: str) -> bool:
            try:
                await writers[i % len(writers)].append(
                    run, 1, charged_call(run, 1, [charge("shared", 1, limit=5)])
                )
            except QuotaExceededError:
                return False
            return True

        outcomes = await asyncio.gather(*(spend(i, run) for i, run in enumerate(runs)))
        assert sum(outcomes) == 5
        assert await quotas.quota_usage(["shared"]) == {"shared": 5.0}
        for run, written in zip(runs, outcomes, strict=True):
            assert len(await store.load(run)) == (3 if written else 1)
