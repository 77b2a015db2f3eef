"""The hash chain in every store: appends extend it inside their transaction (group commit
included), the head is signed with the store's key, truncation re-signs it, and an append
refuses a head that does not fit rather than sign over it. Tampering itself is tested in
``tests/security/test_tamper.py``."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentcore.errors import StoreCorruptedError, StoreError
from agentcore.stores import MemoryStore, PostgresStore, SQLiteStore, TranscriptStore
from agentcore.stores.testing import context, started

KEY = "chain-test-key"

AnyStore = MemoryStore | SQLiteStore | PostgresStore


@dataclass
class Backend:
    name: str
    make: Callable[[str | None], AnyStore]
    """A store on the same data, with this chain key (``None``: none)."""
    set_head: Callable[[str, str | None], None] | None
    """Write a run's chain head from outside the store (durable stores only)."""


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made: list[AnyStore] = []
    if request.param == "memory":
        memory = MemoryStore(chain_key=KEY)

        def make_memory(key: str | None) -> AnyStore:
            if key != KEY:
                pytest.skip("a memory store's data belongs to one store object")
            return memory

        yield Backend("memory", make_memory, None)
        return
    if request.param == "sqlite":
        path = tmp_path / "runs.db"

        def make_sqlite(key: str | None) -> AnyStore:
            store = SQLiteStore(path, chain_key=key)
            made.append(store)
            return store

        def set_sqlite(run_id: str, head: str | None) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute("UPDATE runs SET chain_head = ? WHERE run_id = ?", (head, run_id))
            conn.close()

        yield Backend("sqlite", make_sqlite, set_sqlite)
    else:
        dsn: str = request.getfixturevalue("postgres_dsn")
        schema: str = request.getfixturevalue("pg_schema")

        def make_pg(key: str | None) -> AnyStore:
            store = PostgresStore(dsn, schema=schema, chain_key=key)
            made.append(store)
            return store

        def set_pg(run_id: str, head: str | None) -> None:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(
                    f'UPDATE "{schema}".agentcore_runs SET chain_head = %s '
                    "WHERE run_id = %s".encode(),
                    (head, run_id),
                )

        yield Backend("postgres", make_pg, set_pg)
    for store in made:
        await store.close()


async def three(store: TranscriptStore, run_id: str) -> None:
    await store.append(run_id, 0, [started(run_id)])
    await store.append(run_id, 1, [context(run_id, 1), context(run_id, 2)])


async def test_appends_are_chained_and_the_head_signed(backend: Backend) -> None:
    store = backend.make(KEY)
    await three(store, "r")
    report = await store.verify_chain("r")
    assert report.intact, report
    assert (report.first, report.last, report.unchained, report.signature) == (0, 2, 0, "valid")
    assert report.describe() == "intact: chained seq 0..2; head signed, signature valid"


async def test_without_a_key_the_chain_is_kept_and_the_head_unsigned(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend.name == "memory":
        store: AnyStore = MemoryStore()
    else:
        monkeypatch.delenv("AGENTCORE_CHAIN_KEY", raising=False)
        store = backend.make(None)
    await three(store, "r")
    report = await store.verify_chain("r")
    assert report.intact and report.signature == "unsigned"
    assert "head NOT signed" in report.describe()


async def test_the_key_comes_from_the_environment(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCORE_CHAIN_KEY", KEY)
    store = MemoryStore() if backend.name == "memory" else backend.make(None)
    await three(store, "r")
    assert (await store.verify_chain("r")).signature == "valid"
    assert KEY not in repr(vars(store))  # the key is never shown


async def test_two_batches_of_a_run_in_one_commit_chain_in_order(backend: Backend) -> None:
    store = backend.make(KEY)
    await store.append("r", 0, [started("r")])
    await asyncio.gather(
        store.append("r", 1, [context("r", 1)]),
        store.append("r", 2, [context("r", 2), context("r", 3)]),
    )
    assert [e.seq for e in await store.load("r")] == [0, 1, 2, 3]
    report = await store.verify_chain("r")
    assert report.intact and report.last == 3, report


async def test_a_truncation_signs_the_shorter_chain(backend: Backend) -> None:
    store = backend.make(KEY)
    await three(store, "r")
    await store.truncate("r", after=1)
    report = await store.verify_chain("r")
    assert report.intact and (report.first, report.last) == (0, 1), report
    await store.append("r", 2, [context("r", 2, content="again")])
    assert (await store.verify_chain("r")).last == 2


async def test_an_append_without_the_key_does_not_unsign_a_signed_run(backend: Backend) -> None:
    if backend.name == "memory":
        pytest.skip("a memory store's data belongs to one store object")
    await three(backend.make(KEY), "r")
    keyless = backend.make(None)
    with pytest.raises(StoreError, match="chain head is signed, but this store has no chain key"):
        await keyless.append("r", 3, [context("r", 3)])
    with pytest.raises(StoreError, match="no chain key"):
        await keyless.truncate("r", after=1)
    assert (await backend.make(KEY).verify_chain("r")).intact


async def test_an_append_refuses_a_head_signed_with_another_key(backend: Backend) -> None:
    if backend.name == "memory":
        pytest.skip("a memory store's data belongs to one store object")
    await three(backend.make(KEY), "r")
    with pytest.raises(StoreCorruptedError, match=r"signature does not verify.*agentcore verify"):
        await backend.make("another key").append("r", 3, [context("r", 3)])


async def test_an_append_refuses_a_head_that_does_not_fit(backend: Backend) -> None:
    if backend.set_head is None:
        pytest.skip("needs raw access to the head")
    store = backend.make(KEY)
    await three(store, "r")
    await three(store, "s")
    backend.set_head("r", None)  # removed: the events are chained, the head is gone
    fresh = backend.make(KEY)  # one that has not written the head itself
    outcomes = await asyncio.gather(
        fresh.append("r", 3, [context("r", 3)]),
        fresh.append("s", 3, [context("s", 3)]),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], StoreCorruptedError), outcomes
    assert "its events are chained but it has no head" in str(outcomes[0])
    assert outcomes[1] is None  # in the same commit group: only the tampered run fails
    backend.set_head("s", "c1:0:-:1:" + "00" * 32 + ":-")  # an old head put back
    with pytest.raises(StoreCorruptedError, match="its chain head ends at seq 1"):
        await backend.make(KEY).append("s", 4, [context("s", 4)])


async def test_a_run_begun_without_a_key_says_where_signing_began(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend.name == "memory":
        pytest.skip("a memory store's data belongs to one store object")
    monkeypatch.delenv("AGENTCORE_CHAIN_KEY", raising=False)
    await three(backend.make(None), "r")
    keyed = backend.make(KEY)
    await keyed.append("r", 3, [context("r", 3)])
    report = await keyed.verify_chain("r")
    assert report.intact and report.signature == "valid" and report.signed_from == 3
    assert "signed only from seq 3: seq 0..2 were chained while the head was unsigned" in (
        report.describe()
    )


async def test_postgres_a_head_moved_by_another_store_is_read_again(backend: Backend) -> None:
    if backend.name != "postgres":
        pytest.skip("only PostgreSQL remembers the heads it wrote")
    first, second = backend.make(KEY), backend.make(KEY)
    await three(first, "r")
    await second.truncate("r", after=1)
    await second.append("r", 2, [context("r", 2, content="the second store's")])
    # ``first`` still remembers the head it wrote at seq 2: the statement refuses it, and
    # the append reads the head again and succeeds.
    await first.append("r", 3, [context("r", 3)])
    report = await first.verify_chain("r")
    assert report.intact and report.last == 3, report


async def test_verify_chains_walks_every_run_in_pages(backend: Backend) -> None:
    store = backend.make(KEY)
    for i in range(5):
        await store.append(f"run-{i}", 0, [started(f"run-{i}")])
    reports = [r async for r in store.verify_chains(page=2)]
    assert [r.run_id for r in reports] == [f"run-{i}" for i in range(5)]
    assert all(r.intact for r in reports)
