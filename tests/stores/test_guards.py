"""Call guards under hostile names: any run id and idempotency key (control characters,
NUL, lone surrogates, long text) names one guard, held while its block runs and free
after, on every store that keeps guards; two different names never share a guard."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from agentcore.stores import CallGuardStore

from .conftest import hostile_text, on_memory_and_sqlite, on_postgres

NAMES = hostile_text(min_size=1, max_size=300)


async def _check(store: CallGuardStore, run_id: str, key: str, other: str) -> None:
    assert not await store.call_running(run_id, key)
    async with store.guard_call(run_id, key) as held:
        assert held
        assert await store.call_running(run_id, key)
        if other != key:
            assert not await store.call_running(run_id, other)
            async with store.guard_call(run_id, other) as apart:
                assert apart
        async with store.guard_call(run_id, key) as again:
            assert not again
    assert not await store.call_running(run_id, key)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(run_id=NAMES, key=NAMES, other=NAMES)
def test_any_names_hold_and_free_one_guard(run_id: str, key: str, other: str) -> None:
    on_memory_and_sqlite(lambda store: _check(store, run_id, key, other))


@pytest.mark.postgres
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(run_id=NAMES, key=NAMES, other=NAMES)
def test_any_names_hold_and_free_one_guard_on_postgres(
    postgres_dsn: str, pg_schema: str, run_id: str, key: str, other: str
) -> None:
    on_postgres(postgres_dsn, pg_schema, lambda store: _check(store, run_id, key, other))
