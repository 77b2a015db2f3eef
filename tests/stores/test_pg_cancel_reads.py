"""PostgreSQL cancel reads gathered per event loop (``postgres._reads``): many runs' reads
share a statement, each caller gets its own run's answer (a request, none, or no such run),
and one caller's trouble (cancelled, an id PostgreSQL cannot hold) is its own."""

from __future__ import annotations

import asyncio

import pytest

from agentcore.errors import RunNotFoundError, StoreError
from agentcore.stores import CancelRequest, PostgresStore
from agentcore.stores.testing import started

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store


async def test_concurrent_reads_share_statements_and_get_their_own_answers(
    store: PostgresStore,
) -> None:
    runs = [f"run-{i}" for i in range(60)]
    for run in runs:
        await store.append(run, 0, [started(run)])
    for run in runs[::3]:
        await store.request_cancel(run, by=f"ops-{run}", reason="why ✓")
    before = store._reads.statements  # pyright: ignore[reportPrivateUsage]
    answers = await asyncio.gather(
        *(store.cancel_request(r) for r in runs),
        store.cancel_request("no-such-run"),
        return_exceptions=True,
    )
    statements = store._reads.statements - before  # pyright: ignore[reportPrivateUsage]
    assert statements <= 3  # one alone, then the rest together (61 reads)
    for run, answer in zip(runs, answers, strict=False):
        if runs.index(run) % 3 == 0:
            assert isinstance(answer, CancelRequest)
            assert (answer.by, answer.reason) == (f"ops-{run}", "why ✓")
        else:
            assert answer is None
    assert isinstance(answers[-1], RunNotFoundError)


async def test_a_cancelled_reader_leaves_the_others_their_answers(store: PostgresStore) -> None:
    for run in ("a", "b", "c"):
        await store.append(run, 0, [started(run)])
    await store.request_cancel("c", by="ops")
    first = asyncio.ensure_future(store.cancel_request("a"))  # goes alone, at once
    await asyncio.sleep(0)
    waiting = [asyncio.ensure_future(store.cancel_request(r)) for r in ("b", "c")]
    first.cancel()
    b, c = await asyncio.gather(*waiting)
    assert b is None
    assert c is not None and c.by == "ops"
    assert await store.cancel_request("a") is None  # the store still reads


async def test_an_id_postgresql_cannot_hold_fails_its_own_read_only(store: PostgresStore) -> None:
    await store.append("ok", 0, [started("ok")])
    await store.request_cancel("ok", by="ops")
    answers = await asyncio.gather(
        store.cancel_request("ok"),
        store.cancel_request("bad\x00id"),
        store.cancel_request("bad\udc80id"),
        store.cancel_request("ok"),
        return_exceptions=True,
    )
    assert [type(a) for a in answers] == [CancelRequest, StoreError, StoreError, CancelRequest]
    assert "text fields cannot contain NUL" in str(answers[1])
    assert "can't encode" in str(answers[2])
