"""Cancel requests under hostile text: any name and reason (control characters, NUL, lone
surrogates, long text) is either refused with a StoreError, recording nothing, or read
back exactly, by ``cancel_request`` and by the next append (``cancel_at_append``), on
every built-in store; text with a lone surrogate is refused by every one of them alike."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.errors import StoreError
from agentcore.stores import CancelRequest, MemoryStore, PostgresStore, SQLiteStore
from agentcore.stores.testing import context, started

from .conftest import hostile_text, on_memory_and_sqlite, on_postgres

TEXT = hostile_text()
NAMES = hostile_text(min_size=1)
_runs = itertools.count()


async def _check(
    store: MemoryStore | SQLiteStore | PostgresStore, by: str, reason: str | None
) -> None:
    run = f"cancel-text-{next(_runs)}"
    await store.append(run, 0, [started(run)])
    utf8 = _utf8(by) and _utf8(reason or "")
    try:
        await store.request_cancel(run, by=by, reason=reason)
    except StoreError:
        # Only what UTF-8 cannot carry is refused on every store; memory and SQLite keep
        # any other text (PostgreSQL also refuses NUL).
        assert not utf8 or ("\x00" in by + (reason or "") and isinstance(store, PostgresStore))
        assert await store.cancel_request(run) is None  # refused: nothing recorded
        await store.append(run, 1, [context(run, 1)])
        assert store.cancel_at_append(run) is None
        return
    assert utf8, "a lone surrogate was recorded"
    read = await store.cancel_request(run)
    assert isinstance(read, CancelRequest)
    assert (read.by, read.reason) == (by, reason)
    await store.append(run, 1, [context(run, 1)])
    assert store.cancel_at_append(run) == read


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(by=NAMES, reason=st.none() | TEXT)
def test_any_request_is_refused_or_read_back_exactly(by: str, reason: str | None) -> None:
    on_memory_and_sqlite(lambda store: _check(store, by, reason))


@pytest.mark.postgres
@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(by=NAMES, reason=st.none() | TEXT)
def test_any_request_is_refused_or_read_back_exactly_on_postgres(
    postgres_dsn: str, pg_schema: str, by: str, reason: str | None
) -> None:
    on_postgres(postgres_dsn, pg_schema, lambda store: _check(store, by, reason))
