"""PostgresStore beyond the conformance suite: schema and migrations, the TEXT bodies,
corruption reports, errors, and event loops."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore.contracts.errors import (
    ConfigurationError,
    SeqConflictError,
    StoreCorruptedError,
    StoreError,
)
from agentcore.stores import PostgresStore, open_store
from agentcore.stores._migrations import Migration
from agentcore.stores.postgres import _schema as pg_module
from agentcore.stores.testing import context, fresh_run_id, started, tool_result

pytestmark = pytest.mark.postgres


def tagged(dsn: str, schema: str) -> str:
    """The DSN with an application_name unique to the test, to find its connections."""
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={schema}"


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store


@pytest.fixture
def sql(postgres_dsn: str, pg_schema: str) -> Iterator[Any]:  # Any: a psycopg connection
    """A plain autocommit connection whose search_path is the test's schema."""
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"'.encode())
        yield conn


def one(conn: Any, query: str, *params: object) -> Any:  # Any: psycopg connection and value
    row = conn.execute(query.encode(), params).fetchone()
    assert row is not None
    return row[0]


# --------------------------------------------------------------------------- opening


async def test_open_store_urls(postgres_dsn: str, pg_schema: str, sql: Any) -> None:
    sql.execute(f'CREATE SCHEMA "{pg_schema}"'.encode())  # search_path names it, not creates
    url = f"{postgres_dsn}?options=-csearch_path%3D{pg_schema}"
    for scheme_url in (url, url.replace("postgresql://", "postgres://", 1)):
        s = open_store(scheme_url)
        try:
            assert isinstance(s, PostgresStore) and s.url == scheme_url
            run = fresh_run_id()
            await s.append(run, 0, [started(run)])
            assert await s.load(run) == [started(run)]
        finally:
            await s.close()


def test_search_path_in_the_url_decides_where_tables_go(
    postgres_dsn: str, pg_schema: str, sql: Any
) -> None:
    sql.execute(f'CREATE SCHEMA "{pg_schema}"'.encode())
    PostgresStore(f"{postgres_dsn}?options=-csearch_path%3D{pg_schema}")
    tables = sql.execute(
        b"SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (pg_schema,)
    ).fetchall()
    assert [t for (t,) in tables] == [
        "agentcore_events",
        "agentcore_quota_usage",
        "agentcore_runs",
        "agentcore_schema",
        "agentcore_snapshots",
    ]


def test_missing_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, postgres_dsn: str
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg -> ImportError
    with pytest.raises(ConfigurationError, match=r"pip install 'agentcore\[postgres\]'"):
        PostgresStore(postgres_dsn)
    with pytest.raises(ConfigurationError, match=r"agentcore\[postgres\]"):
        open_store(postgres_dsn)


def test_importing_agentcore_does_not_import_psycopg(tmp_path: Path) -> None:
    code = "import sys, agentcore, agentcore.stores; print('psycopg' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"schema": "bad-name"}, "schema name"),
        ({"schema": 'x"; DROP TABLE y; --'}, "schema name"),
        ({"min_connections": 5, "max_connections": 2}, "pool size"),
        ({"max_connections": 0}, "pool size"),
        ({"connect_timeout_s": 0}, "connect_timeout_s"),
    ],
)
def test_invalid_options(postgres_dsn: str, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        PostgresStore(postgres_dsn, **kwargs)


def test_unreachable_server_is_a_store_error_without_the_password() -> None:
    with pytest.raises(StoreError, match="cannot open the database") as info:
        PostgresStore("postgresql://agent:s3cret@127.0.0.1:1/nowhere", connect_timeout_s=2)
    assert "s3cret" not in str(info.value) and "***" in str(info.value)
    with pytest.raises(StoreError) as info:
        PostgresStore("host=127.0.0.1 port=1 password='s3 cret' dbname=x", connect_timeout_s=2)
    assert "s3 cret" not in str(info.value) and "s3" not in str(info.value)


# --------------------------------------------------------------------------- schema


def test_empty_database_gets_the_schema(store: PostgresStore, sql: Any) -> None:
    versions = sql.execute(b"SELECT version, applied_at FROM agentcore_schema").fetchall()
    assert [v for v, _ in versions] == list(range(1, pg_module.SCHEMA_VERSION + 1))
    columns = {
        name: (kind, nullable)
        for name, kind, nullable in sql.execute(
            b"""SELECT column_name, data_type, is_nullable FROM information_schema.columns
            WHERE table_schema = %s AND table_name = 'agentcore_runs'""",
            (store.schema,),
        ).fetchall()
    }
    # reserved for leases, tenants, cancel requests and chaining: no table rewrite later
    assert columns["tenant"] == ("text", "YES")
    assert columns["owner"] == ("text", "YES")
    assert columns["epoch"] == ("bigint", "NO")
    assert columns["lease_until"] == ("timestamp with time zone", "YES")
    assert columns["chain_head"] == ("text", "YES")
    assert {"cancel_by", "cancel_reason", "cancel_at"} <= set(columns)
    body = one(
        sql,
        """SELECT data_type FROM information_schema.columns
        WHERE table_schema = %s AND table_name = 'agentcore_events' AND column_name = 'body'""",
        store.schema,
    )
    assert body == "text"
    indexes = {
        name
        for (name,) in sql.execute(
            b"SELECT indexname FROM pg_indexes WHERE schemaname = %s", (store.schema,)
        ).fetchall()
    }
    assert {
        "agentcore_runs_by_updated",
        "agentcore_runs_by_status",
        "agentcore_runs_by_tenant",
        "agentcore_runs_by_tenant_status",
    } <= indexes


async def test_reopening_applies_nothing(store: PostgresStore, postgres_dsn: str, sql: Any) -> None:
    run = fresh_run_id()
    await store.append(run, 0, [started(run)])
    again = PostgresStore(postgres_dsn, schema=store.schema)
    try:
        assert await again.load(run) == [started(run)]
    finally:
        await again.close()
    assert one(sql, "SELECT count(*) FROM agentcore_schema") == pg_module.SCHEMA_VERSION


def test_newer_database_is_refused_untouched(
    store: PostgresStore, postgres_dsn: str, sql: Any
) -> None:
    sql.execute(b"INSERT INTO agentcore_schema (version) VALUES (99)")
    with pytest.raises(StoreError, match=r"schema version 99, newer .* upgrade agentcore"):
        PostgresStore(postgres_dsn, schema=store.schema)
    assert one(sql, "SELECT count(*) FROM agentcore_schema") == pg_module.SCHEMA_VERSION + 1


def test_later_migrations_apply_on_open_unless_told_not_to(
    store: PostgresStore, postgres_dsn: str, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = pg_module.SCHEMA_VERSION
    extra = Migration(n + 1, "snapshots", ("ALTER TABLE {runs} ADD COLUMN snapshot TEXT",))
    monkeypatch.setattr(pg_module, "MIGRATIONS", (*pg_module.MIGRATIONS, extra))
    with pytest.raises(StoreError, match=r"older than this agentcore's.*agentcore db upgrade"):
        PostgresStore(postgres_dsn, schema=store.schema, migrate=False)
    assert one(sql, "SELECT max(version) FROM agentcore_schema") == n
    PostgresStore(postgres_dsn, schema=store.schema)
    assert one(sql, "SELECT max(version) FROM agentcore_schema") == n + 1
    assert one(sql, "SELECT count(snapshot) FROM agentcore_runs") == 0


def test_failed_migration_leaves_the_old_version(
    store: PostgresStore, postgres_dsn: str, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = pg_module.SCHEMA_VERSION
    broken = Migration(n + 1, "broken", ("ALTER TABLE {runs} ADD COLUMN fine TEXT", "NOT SQL"))
    monkeypatch.setattr(pg_module, "MIGRATIONS", (*pg_module.MIGRATIONS, broken))
    with pytest.raises(StoreError, match="syntax error"):
        PostgresStore(postgres_dsn, schema=store.schema)
    assert one(sql, "SELECT max(version) FROM agentcore_schema") == n
    assert (
        one(
            sql,
            """SELECT count(*) FROM information_schema.columns
            WHERE table_schema = %s AND column_name = 'fine'""",
            store.schema,
        )
        == 0
    )


def test_processes_opening_at_once_do_not_race(postgres_dsn: str, pg_schema: str) -> None:
    """Eight openers on an empty schema at once: the advisory lock lets one migrate."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def open_one() -> None:
        barrier.wait()
        try:
            PostgresStore(postgres_dsn, schema=pg_schema)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    import psycopg

    with psycopg.connect(postgres_dsn) as conn:
        count = conn.execute(
            f'SELECT count(*) FROM "{pg_schema}".agentcore_schema'.encode()
        ).fetchone()
    assert count == (pg_module.SCHEMA_VERSION,)


# --------------------------------------------------------------------------- what is stored


async def test_bodies_are_text_with_nul_escaped_which_jsonb_refuses(
    store: PostgresStore, sql: Any
) -> None:
    import psycopg

    run = fresh_run_id()
    await store.append(run, 0, [started(run, task="t\u0000"), tool_result(run, 1, "a\u0000b")])
    body = one(sql, "SELECT body FROM agentcore_events WHERE run_id = %s AND seq = 1", run)
    assert "\\u0000" in body and "\x00" not in body
    assert '"run_id"' not in body and '"seq"' not in body  # kept as columns
    with pytest.raises(psycopg.errors.UntranslatableCharacter):
        sql.execute(b"SELECT body::jsonb FROM agentcore_events WHERE run_id = %s", (run,))
    assert one(sql, "SELECT task FROM agentcore_runs WHERE run_id = %s", run) == '"t\\u0000"'
    [summary] = await store.list_runs()
    assert summary.task == "t\u0000"


async def test_unique_violation_is_a_conflict_that_writes_nothing(
    store: PostgresStore, sql: Any
) -> None:
    """A stray event row past next_seq (a damaged store) makes the batch conflict whole."""
    run = fresh_run_id()
    await store.append(run, 0, [started(run)])
    sql.execute(
        b"""INSERT INTO agentcore_events (run_id, seq, type, at, body)
        VALUES (%s, 3, 'context_added', 0, '{}')""",
        (run,),
    )
    with pytest.raises(SeqConflictError, match=r"seq 1\.\.4 is already stored") as info:
        await store.append(run, 1, [context(run, i) for i in range(1, 5)])
    assert run in str(info.value)
    assert one(sql, "SELECT next_seq FROM agentcore_runs WHERE run_id = %s", run) == 1
    assert one(sql, "SELECT count(*) FROM agentcore_events WHERE run_id = %s", run) == 2


@pytest.mark.parametrize(
    ("damage", "seq", "match"),
    [
        ("UPDATE agentcore_events SET body = 'not json' WHERE seq = 2", 2, "cannot be decoded"),
        ('UPDATE agentcore_events SET body = \'{"type":"x"}\' WHERE seq = 1', 1, "decoded"),
        ("UPDATE agentcore_events SET type = 'decision' WHERE seq = 2", 2, "type column"),
        ("DELETE FROM agentcore_events WHERE seq = 1", 1, "missing"),
        ("DELETE FROM agentcore_events WHERE seq = 3", 3, "missing"),
    ],
)
async def test_corruption_names_the_run_and_seq(
    store: PostgresStore, sql: Any, damage: str, seq: int, match: str
) -> None:
    run = fresh_run_id()
    await store.append(run, 0, [started(run), *(context(run, i) for i in range(1, 4))])
    sql.execute(damage.encode())
    with pytest.raises(StoreCorruptedError, match=match) as info:
        await store.load(run)
    assert f"{run!r}" in str(info.value) and f"seq {seq}" in str(info.value)


async def test_truncate_refuses_to_keep_an_undecodable_event(
    store: PostgresStore, sql: Any
) -> None:
    run = fresh_run_id()
    await store.append(run, 0, [started(run), *(context(run, i) for i in range(1, 4))])
    sql.execute(b"UPDATE agentcore_events SET body = 'garbage' WHERE seq = 1")
    with pytest.raises(StoreCorruptedError, match=r"(?s)seq 1.*truncate earlier"):
        await store.truncate(run, after=2)
    assert one(sql, "SELECT count(*) FROM agentcore_events") == 4  # nothing deleted
    removed = await store.truncate(run, after=0)
    assert [seq for seq, _ in removed] == [1, 2, 3] and removed[0][1] == "garbage"


# --------------------------------------------------------------------------- failures


async def test_database_errors_are_store_errors_naming_the_run_and_seq(
    store: PostgresStore, sql: Any
) -> None:
    run = fresh_run_id()
    await store.append(run, 0, [started(run)])
    sql.execute(b"ALTER TABLE agentcore_events RENAME TO gone")
    with pytest.raises(StoreError, match=rf"run '{run}' at seq 1; nothing was written") as info:
        await store.append(run, 1, [context(run, 1)])
    assert not isinstance(info.value, SeqConflictError)
    assert info.value.__cause__ is not None
    with pytest.raises(StoreError, match=f"cannot load run '{run}'"):
        await store.load(run)
    sql.execute(b"ALTER TABLE gone RENAME TO agentcore_events")
    await store.append(run, 1, [context(run, 1)])


async def test_unstorable_arguments_are_store_errors(store: PostgresStore) -> None:
    """Values PostgreSQL cannot bind (a lone surrogate, NUL in text, a number past bigint)
    are StoreErrors naming the run, like every other failure."""
    run = fresh_run_id()
    await store.append(run, 0, [started(run)])
    calls = {
        "load surrogate": lambda: store.load("a\ud800"),
        "load NUL": lambda: store.load("a\x00"),
        "cancel_request surrogate": lambda: store.cancel_request("a\ud800"),
        "request_cancel surrogate": lambda: store.request_cancel(run, by="x\ud800"),
        "list_runs surrogate": lambda: store.list_runs(status="\ud800"),
        "list_runs huge limit": lambda: store.list_runs(limit=2**70),
        "list_runs negative limit": lambda: store.list_runs(limit=-1),
        "truncate surrogate": lambda: store.truncate("a\ud800", after=0),
    }
    for name, call in calls.items():
        with pytest.raises(StoreError) as info:
            await call()
        assert not isinstance(info.value, SeqConflictError | StoreCorruptedError), name
    assert await store.load(run, after=2**70) == []


async def test_a_killed_connection_is_retried_on_a_fresh_one_and_the_call_succeeds(
    postgres_dsn: str, pg_schema: str, sql: Any
) -> None:
    store = PostgresStore(tagged(postgres_dsn, pg_schema), schema=pg_schema)
    try:
        run = fresh_run_id()
        await store.append(run, 0, [started(run)])
        killed = sql.execute(
            b"""SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE application_name = %s""",
            (pg_schema,),
        ).fetchall()
        assert (True,) in killed  # (the constructor's schema check may still be leaving)
        outcomes: list[str] = []
        for _ in range(3):
            try:
                await store.list_runs()
                outcomes.append("ok")
            except StoreError as exc:
                outcomes.append("error" if "cannot list runs" in str(exc) else str(exc))
        assert outcomes == ["ok", "ok", "ok"]  # the store retries (postgres._retry)
        assert await store.load(run) == [started(run)]
    finally:
        await store.close()


async def test_closed_store(store: PostgresStore) -> None:
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        await store.list_runs()


# --------------------------------------------------------------------------- event loops


def test_one_store_across_successive_event_loops(postgres_dsn: str, pg_schema: str) -> None:
    """The CLI and the *_sync methods call asyncio.run per command with one store."""
    store = PostgresStore(postgres_dsn, schema=pg_schema)
    run = fresh_run_id()
    asyncio.run(store.append(run, 0, [started(run)]))
    for i in range(1, 6):
        asyncio.run(store.append(run, i, [context(run, i)]))
        assert len(asyncio.run(store.load(run))) == i + 1
    asyncio.run(store.close())


def test_one_store_from_two_threads_each_with_its_loop(postgres_dsn: str, pg_schema: str) -> None:
    store = PostgresStore(postgres_dsn, schema=pg_schema)
    errors: list[BaseException] = []

    def work(name: str) -> None:
        async def steps() -> None:
            run = fresh_run_id(name)
            await store.append(run, 0, [started(run)])
            for i in range(1, 20):
                await store.append(run, i, [context(run, i)])
            assert len(await store.load(run)) == 20

        try:
            asyncio.run(steps())
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(asyncio.run(store.list_runs())) == 2
    asyncio.run(store.close())


def test_a_finished_loop_leaves_no_connection_behind(
    postgres_dsn: str, pg_schema: str, sql: Any
) -> None:
    def settled_connections() -> list[Any]:  # Any: rows of pg_stat_activity
        """The test's connections, once closed ones have left (a backend exits shortly
        after its client closes: the constructor's own schema check is one of them)."""
        query = b"""SELECT pid, state, backend_start, query FROM pg_stat_activity
            WHERE application_name = %s"""
        rows: list[Any] = []
        for _ in range(250):
            rows = sql.execute(query, (pg_schema,)).fetchall()
            if not rows:
                break
            time.sleep(0.02)
        return rows

    store = PostgresStore(tagged(postgres_dsn, pg_schema), schema=pg_schema, min_connections=2)
    assert settled_connections() == []
    run = fresh_run_id()
    asyncio.run(store.append(run, 0, [started(run)]))
    for _ in range(5):
        asyncio.run(store.list_runs())
    assert settled_connections() == []
    asyncio.run(store.close())
