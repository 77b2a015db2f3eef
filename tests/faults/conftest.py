"""Fault-suite setup: the store tests' PostgreSQL fixtures, with their rule.

``postgres_dsn`` reads ``AGENTCORE_TEST_POSTGRES_DSN``; without it (or without psycopg, or
without a server) a PostgreSQL test skips with the reason locally and fails under
``CI=true``. ``pg_schema`` is a fresh schema per test, dropped afterwards.
"""

from __future__ import annotations

from stores.conftest import pg_schema, postgres_dsn

__all__ = ["pg_schema", "postgres_dsn"]
