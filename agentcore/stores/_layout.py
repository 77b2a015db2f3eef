"""Durable layouts: a store's layout version, read and upgraded by URL (``agentcore db
status`` and ``agentcore db upgrade``), and the SQLite and PostgreSQL stores' layouts.

Opening a store applies pending migrations by default; these functions let an operator see
and apply them as an explicit step (before a deploy, with the workers stopped or not:
migrations only add, in one transaction). Reading the status writes nothing, not even a
new empty file.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agentcore.contracts.errors import ConfigurationError, StoreCorruptedError, StoreError

from ._migrations import Migration, pending
from .postgres._schema import MIGRATIONS as PG_MIGRATIONS
from .postgres._schema import SCHEMA_VERSION as PG_VERSION
from .postgres._schema import Statements, schema_version, upgrade
from .sqlite._schema import MIGRATIONS as SQLITE_MIGRATIONS
from .sqlite._schema import SCHEMA_VERSION as SQLITE_VERSION
from .sqlite._schema import check_ours, open_schema, read_version

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import psycopg

__all__ = ["POSTGRES_LAYOUT", "SQLITE_LAYOUT", "SchemaStatus", "StoreLayout", "sqlite_path"]

_CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """Where a store's layout stands against this agentcore's migrations.

    Attributes:
        store: the store's URL, without a password.
        version: the version the store records (0: a new or empty store).
        latest: the version this agentcore writes.
        pending: ``(version, summary)`` of each migration an upgrade would apply, in order
            (empty when the store is current or newer).
    """

    store: str
    version: int
    latest: int
    pending: tuple[tuple[int, str], ...]

    @property
    def newer(self) -> bool:
        """The store was written by a newer agentcore: this one refuses to open it."""
        return self.version > self.latest


@dataclass(frozen=True, slots=True)
class StoreLayout:
    """How a durable store's layout version is read and upgraded by URL (``agentcore db
    status`` and ``agentcore db upgrade``), as :func:`register_store` takes it.

    Attributes:
        status: reads the layout version, writing nothing (:func:`schema_status`).
        upgrade: applies the pending migrations in one transaction and returns the
            version before and after (:func:`upgrade_schema`).
    """

    status: Callable[[str], SchemaStatus]
    upgrade: Callable[[str], tuple[int, int]]


def _sqlite_status(url: str) -> SchemaStatus:
    return _status(url, SQLITE_MIGRATIONS, _sqlite_version(sqlite_path(url)))


def _sqlite_upgrade_url(url: str) -> tuple[int, int]:
    before = _sqlite_upgrade(sqlite_path(url))
    return before, max(before, SQLITE_VERSION)


def _pg_status(url: str) -> SchemaStatus:
    return _status(_redact_dsn(url), PG_MIGRATIONS, _pg_version(url))


def _pg_upgrade_url(url: str) -> tuple[int, int]:
    before = _pg_upgrade(url)
    return before, max(before, PG_VERSION)


SQLITE_LAYOUT: Final = StoreLayout(_sqlite_status, _sqlite_upgrade_url)
"""The SQLite store's layout (``PRAGMA user_version``)."""

POSTGRES_LAYOUT: Final = StoreLayout(_pg_status, _pg_upgrade_url)
"""The PostgreSQL store's layout (its version table)."""


def _redact_dsn(url: str) -> str:
    from .postgres import redact_dsn  # the PostgreSQL modules load on first use

    return redact_dsn(url)


def _status(store: str, migrations: Sequence[Migration], version: int) -> SchemaStatus:
    todo = () if version > len(migrations) else pending(migrations, version, store=store)
    steps = tuple((m.version, m.summary) for m in todo)
    return SchemaStatus(store, version, len(migrations), steps)


def sqlite_path(url: str) -> str:
    """The file a ``sqlite:///`` URL names.

    Raises:
        ConfigurationError: no file path, or two slashes where three belong.
    """
    path = url.removeprefix("sqlite:///")
    if path == url or not path:
        raise ConfigurationError(
            f"Store URL {url!r} has no file path: use sqlite:///runs.db (a relative path) or "
            "sqlite:////var/lib/runs.db (an absolute one)"
        )
    return path


def _sqlite_version(path: str) -> int:
    if not Path(path).exists():
        return 0  # opening it would create an empty store
    uri = Path(path).absolute().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite store {path}: cannot open the file: {exc}") from exc
    try:
        version = read_version(conn)
        check_ours(conn, path, version)
    except sqlite3.DatabaseError as exc:
        raise StoreCorruptedError(
            f"SQLite store {path} is not a usable database ({exc}); it was left untouched."
        ) from exc
    finally:
        conn.close()
    return version


def _sqlite_upgrade(path: str) -> int:
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"SQLite store {path}: cannot open the file: {exc}") from exc
    try:
        return open_schema(conn, path, "FULL", migrate=True)
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"SQLite store {path}: the upgrade failed and was rolled back: {exc}"
        ) from exc
    finally:
        conn.close()


def _pg_connect(url: str) -> psycopg.Connection[Any]:  # Any: psycopg's row type
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigurationError(
            f"The PostgreSQL store needs psycopg 3 ({exc}): pip install 'agentcore[postgres]'"
        ) from exc
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise StoreError(f"PostgreSQL store {_redact_dsn(url)}: cannot connect: {exc}") from exc


def _pg_version(url: str) -> int:
    import psycopg

    sql = Statements.build(None)
    with _pg_connect(url) as conn:
        try:
            return schema_version(conn, sql)
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL store {_redact_dsn(url)}: {exc}") from exc


def _pg_upgrade(url: str) -> int:
    import psycopg

    sql = Statements.build(None)
    display = _redact_dsn(url)
    with _pg_connect(url) as conn:
        try:
            return upgrade(conn, sql, schema=None, display=display, migrate=True)
        except psycopg.Error as exc:
            raise StoreError(
                f"PostgreSQL store {display}: the upgrade failed and was rolled back: {exc}"
            ) from exc
