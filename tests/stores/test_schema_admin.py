"""``agentcore db status`` / ``db upgrade`` against a real PostgreSQL database (the SQLite
side is in tests/test_retention.py)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from typer.testing import CliRunner

from agentcore.cli import app
from agentcore.contracts.errors import StoreError
from agentcore.stores import PostgresStore, schema_status

from .conftest import drop_schema

pytestmark = pytest.mark.postgres


@pytest.fixture
def url(postgres_dsn: str) -> Iterator[str]:
    """The test database with a fresh schema first on its search_path."""
    import psycopg

    schema = f"agentcore_db_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"'.encode())
    sep = "&" if "?" in postgres_dsn else "?"
    try:
        yield f"{postgres_dsn}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        drop_schema(postgres_dsn, schema)


def cli(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args, "--store", url])
    return result.exit_code, result.output


def test_status_then_upgrade_of_an_empty_database(url: str) -> None:
    latest = schema_status(url).latest
    code, output = cli(url, "db", "status")
    assert code == 0, output
    assert f"schema version: 0 (this agentcore: {latest})" in output
    assert "1  runs (with room for" in output
    assert schema_status(url).version == 0  # status wrote nothing
    code, output = cli(url, "db", "upgrade")
    assert code == 0, output
    assert f"upgraded from version 0 to {latest}" in output
    code, output = cli(url, "db", "status")
    assert code == 0 and "up to date" in output
    code, output = cli(url, "db", "upgrade")
    assert code == 0 and "nothing to apply" in output


def test_an_older_database_gets_only_what_it_lacks(url: str, postgres_dsn: str) -> None:
    import psycopg

    assert cli(url, "db", "upgrade")[0] == 0
    with psycopg.connect(url, autocommit=True) as conn:  # back to version 1
        conn.execute(b"DROP INDEX agentcore_runs_by_tenant, agentcore_runs_by_tenant_status")
        conn.execute(b"DELETE FROM agentcore_schema WHERE version > 1")
    code, output = cli(url, "db", "status")
    assert "schema version: 1" in output and "2  indexes that list a tenant" in output
    with pytest.raises(StoreError, match="agentcore db upgrade"):
        PostgresStore(url, migrate=False)  # what code that only reads opens
    code, output = cli(url, "db", "upgrade")
    assert code == 0 and "upgraded from version 1 to" in output, output
    with psycopg.connect(url) as conn:
        (count,) = conn.execute(
            b"SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'agentcore_runs_by_tenant%%'"
            b" AND schemaname = current_schema()"
        ).fetchone() or (0,)
    assert count == 2


def test_a_newer_database_is_refused_untouched(url: str) -> None:
    import psycopg

    assert cli(url, "db", "upgrade")[0] == 0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(b"INSERT INTO agentcore_schema (version) VALUES (99)")
    for command in (("db", "status"), ("db", "upgrade")):
        code, output = cli(url, *command)
        assert code == 9, output
        assert "newer than this agentcore" in output
    assert schema_status(url).version == 99
