"""The SQLite store's layout: its numbered migrations, and how a file is checked and upgraded.

The version is ``PRAGMA user_version``; ``PRAGMA application_id`` marks a file as ours (from
version 2; files of 0.1.0 have 0 there). Before anything is written, the file is checked:
an empty file becomes a store; a file of another application (tables of its own and
user_version 0, a foreign application id, or a version without our tables) is refused; a
file of a newer agentcore is refused. Everything else is upgraded in one ``BEGIN IMMEDIATE``
transaction, which re-reads the version first, so concurrent openers upgrade once.
"""

from __future__ import annotations

import contextlib
import sqlite3

from agentcore.contracts.errors import StoreError

from ._migrations import Migration, numbered, pending

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "open_schema"]

APPLICATION_ID = int.from_bytes(b"agtc", "big")
"""``PRAGMA application_id`` of an agentcore store (from schema version 2)."""

MIGRATIONS = numbered(
    Migration(
        1,
        "events and runs (agentcore 0.1.0)",
        (
            """CREATE TABLE IF NOT EXISTS events (
                run_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                type TEXT NOT NULL,
                at REAL NOT NULL,
                body TEXT NOT NULL,
                PRIMARY KEY (run_id, seq)
            ) WITHOUT ROWID""",
            """CREATE TABLE IF NOT EXISTS runs (
                run_id TEXT PRIMARY KEY,
                status TEXT NOT NULL,
                task TEXT NOT NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL,
                next_seq INTEGER NOT NULL
            ) WITHOUT ROWID""",
            # Only ``status`` is indexed: every append updates ``updated_at`` and
            # ``next_seq``, and an index on them would be rewritten on every step.
            "CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status)",
        ),
    ),
    Migration(
        2,
        "cancel requests on runs; the application id",
        (
            "ALTER TABLE runs ADD COLUMN cancel_by TEXT",
            "ALTER TABLE runs ADD COLUMN cancel_reason TEXT",
            "ALTER TABLE runs ADD COLUMN cancel_at REAL",
            f"PRAGMA application_id = {APPLICATION_ID}",
        ),
    ),
    Migration(
        3,
        "leases with fencing (owner, epoch, lease_until, lease_flock); tenants",
        (
            # Who holds the run's lease (NULL: nobody), its fencing token (+1 on every
            # acquire), and its end in Unix seconds of the machine's clock.
            "ALTER TABLE runs ADD COLUMN owner TEXT",
            "ALTER TABLE runs ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN lease_until REAL",
            # 1 while the lease's holder also holds the run's flock: when another process
            # then gets the flock, the holder is gone and its lease is void at once. 0 for
            # a lease taken while a stalled holder kept the flock: it only expires.
            "ALTER TABLE runs ADD COLUMN lease_flock INTEGER NOT NULL DEFAULT 0",
            # A run's namespace; filled in by a later version.
            "ALTER TABLE runs ADD COLUMN tenant TEXT",
            "CREATE INDEX IF NOT EXISTS runs_by_tenant ON runs (tenant, status)",
        ),
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The layout this code writes, recorded in ``PRAGMA user_version``."""

_OUR_TABLES = frozenset({"events", "runs"})


def open_schema(conn: sqlite3.Connection, path: str, synchronous: str) -> None:
    """Check that the file is an agentcore store (or empty), then bring it up to date.

    Raises:
        StoreError: the file belongs to another application or to a newer agentcore; it
            was not modified.
        sqlite3.Error: the file cannot be read or written (the caller names the cause).
    """
    # Reads only, so a refused file stays byte for byte as it was. The first statement that
    # reads the file fails on a non-database (SQLITE_NOTADB).
    version = _version(conn)
    _check_ours(conn, path, version)
    pending(MIGRATIONS, version, store=path)
    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if str(mode).lower() != "wal":
        raise StoreError(
            f"SQLite store {path}: could not enable WAL mode (journal_mode is {mode!r}); "
            "use a local file system that supports shared memory."
        )
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = _version(conn)  # another process may have upgraded it meanwhile
        for migration in pending(MIGRATIONS, current, store=path):
            for statement in migration.statements:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def _version(conn: sqlite3.Connection) -> int:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def _check_ours(conn: sqlite3.Connection, path: str, version: int) -> None:
    (app_id,) = conn.execute("PRAGMA application_id").fetchone()
    names: list[tuple[str, str]] = conn.execute(
        "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    tables = {name for kind, name in names if kind == "table"}
    if app_id not in (0, APPLICATION_ID):
        why = f"its application_id is {app_id:#x}, not agentcore's {APPLICATION_ID:#x}"
    elif version == 0 and names:
        listed = ", ".join(name for _, name in names[:8]) + (", ..." if len(names) > 8 else "")
        why = f"it has user_version 0 and schema objects of its own ({listed})"
    elif 0 < version <= SCHEMA_VERSION and not tables >= _OUR_TABLES:
        why = f"it has user_version {version} but not agentcore's tables (events, runs)"
    else:
        return
    raise StoreError(
        f"SQLite file {path} is not an agentcore store: {why}. It was left untouched: "
        "give agentcore a file of its own, e.g. sqlite:///runs.db."
    )
