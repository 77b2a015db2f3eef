"""The runs listing, status counts and prune's pick read indexes of the runs table, never
scan the events or sort every run: checked on the query plans of SQLite and PostgreSQL,
with enough rows (and fresh statistics) that each planner chooses as it would in
production."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore.stores import PostgresStore, SQLiteStore
from agentcore.stores.postgres._schema import Statements
from agentcore.stores.sqlite._listing import list_query, prune_query

RUNS = 20_000
EVENTS_PER_RUN = 10
# Most runs are finished; a few wait for someone; one in ten has no tenant.
STATUS_SQL = """CASE WHEN i % 50 = 0 THEN 'running' WHEN i % 50 = 1 THEN 'needs_attention'
    WHEN i % 50 = 2 THEN 'awaiting_confirmation' WHEN i % 10 = 3 THEN 'failed'
    ELSE 'completed' END"""
TENANT_SQL = "CASE WHEN i % 10 = 0 THEN NULL ELSE 'tenant-' || (i % 20) END"

LISTINGS = [  # (status, tenant, the index that must serve it without a sort)
    (None, None, "updated"),
    ("completed", None, "status"),
    ("needs_attention", None, "status"),
    (None, "tenant-3", "tenant"),
    ("completed", "tenant-3", "tenant_status"),
    ("running", "tenant-3", "tenant_status"),
]


# --------------------------------------------------------------------------- SQLite

SQLITE_INDEX = {
    "updated": "runs_by_updated",
    "status": "runs_by_status_updated",
    "tenant": "runs_by_tenant_updated",
    "tenant_status": "runs_by_tenant_status_updated",
}


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    path: Path = tmp_path_factory.mktemp("plans") / "runs.db"
    asyncio.run(SQLiteStore(path).close())
    conn = sqlite3.connect(path)
    series = f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {RUNS})"
    conn.execute(
        f"""INSERT INTO runs (run_id, status, task, created_at, updated_at, next_seq, tenant)
        {series} SELECT 'run-' || i, {STATUS_SQL}, 't', i, i + 0.5, {EVENTS_PER_RUN},
        {TENANT_SQL} FROM n"""
    )
    conn.execute(
        f"""INSERT INTO events (run_id, seq, type, at, body)
        {series}, s(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM s WHERE j < {EVENTS_PER_RUN - 1})
        SELECT 'run-' || i, j, 'context_added', i, '{{}}' FROM n, s"""
    )
    conn.commit()
    conn.execute("ANALYZE")
    yield conn
    conn.close()


def sqlite_plan(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[str]:
    return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]


@pytest.mark.parametrize(("status", "tenant", "index"), LISTINGS)
def test_sqlite_listing_walks_an_index_in_order(
    sqlite_db: sqlite3.Connection, status: str | None, tenant: str | None, index: str
) -> None:
    sql, params = list_query(status=status, tenant=tenant)
    plan = sqlite_plan(sqlite_db, sql, (*params, 100))
    assert len(plan) == 1 and f"USING INDEX {SQLITE_INDEX[index]}" in plan[0], plan
    assert not any("TEMP B-TREE" in step or "events" in step for step in plan), plan


@pytest.mark.parametrize(("status", "tenant", "index"), LISTINGS)
def test_sqlite_pages_and_searches_walk_the_same_index(
    sqlite_db: sqlite3.Connection, status: str | None, tenant: str | None, index: str
) -> None:
    """A page cursor starts the walk at the cursor (a range on ``updated_at``); a search
    tests each run's row along the walk and reads no events."""
    for search, after in ((None, (5.0, "run-5")), ("T-42", None), ("T-42", (5.0, "run-5"))):
        sql, params = list_query(status=status, tenant=tenant, search=search, after=after)
        plan = sqlite_plan(sqlite_db, sql, (*params, 100))
        assert len(plan) == 1 and f"USING INDEX {SQLITE_INDEX[index]}" in plan[0], plan
        if after is not None:
            assert "updated_at<?" in plan[0].replace(" ", ""), plan
        assert not any("TEMP B-TREE" in step or "events" in step for step in plan), plan


@pytest.mark.parametrize(
    ("sql", "params", "index"),
    [
        ("SELECT status, count(*) FROM runs GROUP BY status", (), "runs_by_status"),
        (
            "SELECT status, count(*) FROM runs WHERE tenant = ? GROUP BY status",
            ("tenant-3",),
            "runs_by_tenant",
        ),
        ("SELECT count(*) FROM runs WHERE status = ?", ("needs_attention",), "runs_by_status"),
    ],
)
def test_sqlite_status_counts_read_a_covering_index(
    sqlite_db: sqlite3.Connection, sql: str, params: tuple[str, ...], index: str
) -> None:
    plan = sqlite_plan(sqlite_db, sql, params)
    assert all("COVERING INDEX " + index in step for step in plan if "runs" in step), plan
    assert not any("events" in step for step in plan), plan


@pytest.mark.parametrize("tenant", [None, "tenant-3"])
def test_sqlite_prune_picks_through_the_status_index(
    sqlite_db: sqlite3.Connection, tenant: str | None
) -> None:
    statuses = ("completed", "cancelled", "failed")
    sql = prune_query(statuses, tenant=tenant is not None, run_ids=0, limit=True)
    params = (*statuses, 100.0, 0.0, *([tenant] if tenant else []), 500)
    plan = sqlite_plan(sqlite_db, sql, params)
    assert len(plan) == 1 and "updated_at<?" in plan[0] and "USING INDEX" in plan[0], plan


# --------------------------------------------------------------------------- PostgreSQL

WIDER = {"updated": (), "status": ("updated",), "tenant": (), "tenant_status": ("tenant",)}
PG_INDEX = {
    "updated": "agentcore_runs_by_updated",
    "status": "agentcore_runs_by_status",
    "tenant": "agentcore_runs_by_tenant",
    "tenant_status": "agentcore_runs_by_tenant_status",
}


@pytest.fixture(scope="module")
def pg(postgres_dsn: str) -> Iterator[tuple[Any, Statements]]:  # Any: a psycopg connection
    import asyncio
    import secrets

    import psycopg

    from .conftest import drop_schema

    schema = f"agentcore_plans_{secrets.token_hex(6)}"
    asyncio.run(PostgresStore(postgres_dsn, schema=schema).close())
    sql = Statements.build(schema)
    try:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(
                f"""INSERT INTO {sql.runs}
                (run_id, status, task, created_at, updated_at, next_seq, tenant)
                SELECT 'run-' || i, {STATUS_SQL}, '"t"', i, i + 0.5, {EVENTS_PER_RUN},
                    {TENANT_SQL}
                FROM generate_series(1, {RUNS}) AS i""".encode()
            )
            conn.execute(
                f"""INSERT INTO {sql.events} (run_id, seq, type, at, body)
                SELECT 'run-' || i, j, 'context_added', i, '{{}}'
                FROM generate_series(1, {RUNS}) AS i,
                    generate_series(0, {EVENTS_PER_RUN - 1}) AS j""".encode()
            )
            conn.execute(f"ANALYZE {sql.runs}".encode())
            conn.execute(f"ANALYZE {sql.events}".encode())
            yield conn, sql
    finally:
        drop_schema(postgres_dsn, schema)


def pg_plan(conn: Any, statement: bytes, params: Any) -> list[dict[str, Any]]:  # Any: JSON
    """Every node of the plan, depth first."""
    (row,) = conn.execute(b"EXPLAIN (FORMAT JSON) " + statement, params).fetchall()
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    nodes: list[dict[str, Any]] = []
    todo = [doc[0]["Plan"]]
    while todo:
        node = todo.pop()
        nodes.append(node)
        todo += node.get("Plans", [])
    return nodes


@pytest.mark.postgres
@pytest.mark.parametrize(("status", "tenant", "index"), LISTINGS)
def test_postgres_listing_walks_an_index_in_order(
    pg: tuple[Any, Statements], status: str | None, tenant: str | None, index: str
) -> None:
    conn, sql = pg
    statement, params = {
        (False, False): (sql.list_all, (100,)),
        (True, False): (sql.list_status, (status, 100)),
        (False, True): (sql.list_tenant, (tenant, 100)),
        (True, True): (sql.list_tenant_status, (tenant, status, 100)),
    }[status is not None, tenant is not None]
    nodes = pg_plan(conn, statement, params)
    # PostgreSQL may also walk a wider index in order and filter, when most rows match (a
    # common status): no sort, and it stops at the limit. When it expects only a handful of
    # rows it may fetch them through the shape's own index and sort just those. Never a
    # sequential scan, never the events.
    allowed = {PG_INDEX[index], *(PG_INDEX[i] for i in WIDER[index])}
    used = {n["Index Name"] for n in nodes if "Index Name" in n}
    assert used and used <= allowed, nodes
    assert {n.get("Relation Name") for n in nodes} <= {None, "agentcore_runs"}, nodes
    assert not any(n["Node Type"] == "Seq Scan" for n in nodes), nodes
    if any("Sort" in n["Node Type"] for n in nodes):
        assert used == {PG_INDEX[index]}, nodes
    if status == "needs_attention":  # rare: its own index
        assert used == {PG_INDEX[index]}, nodes


@pytest.mark.postgres
@pytest.mark.parametrize("tenant", [None, "tenant-3"])
def test_postgres_status_counts_never_read_the_events(
    pg: tuple[Any, Statements], tenant: str | None
) -> None:
    conn, sql = pg
    where = " WHERE tenant = %s" if tenant else ""
    statement = f"SELECT status, count(*) FROM {sql.runs}{where} GROUP BY status".encode()
    nodes = pg_plan(conn, statement, (tenant,) if tenant else ())
    relations = {n.get("Relation Name") for n in nodes} - {None}
    assert relations == {"agentcore_runs"}, nodes
    one = f"SELECT count(*) FROM {sql.runs} WHERE status = %s".encode()
    nodes = pg_plan(conn, one, ("needs_attention",))
    assert {n.get("Index Name") for n in nodes} & {PG_INDEX["status"]}, nodes


INDEXED = {"Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Bitmap Index Scan"}


@pytest.mark.postgres
@pytest.mark.parametrize("tenant", [None, "tenant-3"])
def test_postgres_prune_picks_through_an_index(
    pg: tuple[Any, Statements], tenant: str | None
) -> None:
    conn, sql = pg
    statement = sql.prune(tenant=tenant is not None, run_ids=False, dry_run=False)
    params = {
        "statuses": ["completed", "cancelled", "failed"],
        "before": 100.0,
        "tenant": tenant,
        "limit": 500,
    }
    nodes = pg_plan(conn, statement, params)
    runs_scans = [
        n for n in nodes if n.get("Relation Name") == "agentcore_runs" and "Scan" in n["Node Type"]
    ]
    assert runs_scans, nodes
    assert all(n["Node Type"] in INDEXED for n in runs_scans), nodes
    assert not any(n.get("Relation Name") == "agentcore_events" for n in nodes), nodes
