"""Fault-suite setup: the store tests' PostgreSQL fixtures, with their rule.

``postgres_dsn`` reads ``AGENTCORE_TEST_POSTGRES_DSN``; without it (or without psycopg, or
without a server) a PostgreSQL test skips with the reason locally and fails under
``CI=true``. ``pg_schema`` is a fresh schema per test, dropped afterwards. ``fleet``: worker
processes over one run, once per store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from stores.conftest import pg_schema, postgres_dsn

from ._fleet import Fleet

__all__ = ["fleet", "pg_schema", "postgres_dsn"]

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    """Worker processes over one run, on SQLite and on PostgreSQL (a schema of its own)."""
    if request.param == "postgres":
        dsn = str(request.getfixturevalue("postgres_dsn"))
        schema = str(request.getfixturevalue("pg_schema"))
        shared = Fleet(tmp_path, "postgres", dsn=dsn, schema=schema)
    else:
        shared = Fleet(tmp_path, "sqlite")
    try:
        yield shared
    finally:
        shared.stop_all()
