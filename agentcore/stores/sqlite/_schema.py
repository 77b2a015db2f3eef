"""The SQLite store's layout: its numbered migrations, and how a file is checked and upgraded.

The version is ``PRAGMA user_version``; ``PRAGMA application_id`` marks a file as ours (from
version 2; files of 0.1.0 have 0 there). Before anything is written, the file is checked:
an empty file becomes a store; a file of another application (tables of its own and
user_version 0, a foreign application id, or a version without our tables) is refused; a
file of a newer agentcore is refused. Everything else is upgraded in one ``BEGIN IMMEDIATE``
transaction, which re-reads the version first, so concurrent openers upgrade once.

Opening waits for the file's lock as a write does, up to the connection's busy timeout: SQLite
answers SQLITE_BUSY at once, without waiting, when a new file's journal mode is switched to WAL
while another process is opening it too, so the whole open is retried until that bound.
"""

from __future__ import annotations

import sqlite3
import time

from agentcore.contracts.errors import StoreError

from .._migrations import Migration, numbered, pending
from ._transaction import immediate, rollback

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "check_ours",
    "open_schema",
    "read_checked",
    "read_version",
]

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
    Migration(
        4,
        "indexes that list runs newest first, by status and by tenant, without a sort",
        (
            # list_runs orders by updated_at DESC, run_id: each filter shape (none, status,
            # tenant, tenant and status) gets an index with its equality columns first and
            # that order after, so a listing walks the index and stops at its limit instead
            # of sorting every matching run. The price: every append rewrites updated_at, so
            # runs_by_updated and runs_by_status_updated take an index write per append, and
            # the two tenant indexes only for runs that have a tenant (partial indexes).
            "CREATE INDEX IF NOT EXISTS runs_by_updated ON runs (updated_at DESC, run_id)",
            """CREATE INDEX IF NOT EXISTS runs_by_status_updated
                ON runs (status, updated_at DESC, run_id)""",
            """CREATE INDEX IF NOT EXISTS runs_by_tenant_updated
                ON runs (tenant, updated_at DESC, run_id) WHERE tenant IS NOT NULL""",
            """CREATE INDEX IF NOT EXISTS runs_by_tenant_status_updated
                ON runs (tenant, status, updated_at DESC, run_id) WHERE tenant IS NOT NULL""",
        ),
    ),
    Migration(
        5,
        "the run's metadata on its row, so a search reads no events",
        (
            # run_started.metadata as compact JSON (NULL when empty): list_runs(search=...)
            # matches it on the row instead of one events lookup per run (100,000 runs:
            # ~15 ms instead of ~200 ms). Written once, by the append that creates the run.
            "ALTER TABLE runs ADD COLUMN metadata TEXT",
            """UPDATE runs SET metadata = (
                SELECT json_extract(e.body, '$.metadata') FROM events AS e
                WHERE e.run_id = runs.run_id AND e.seq = 0
                    AND json_type(e.body, '$.metadata') = 'object'
                    AND json_extract(e.body, '$.metadata') != '{}'
            )""",
        ),
    ),
    Migration(
        6,
        "tamper evidence: a digest per event and the run's signed chain head",
        (
            # Each event's sha256 over the one before it (``_chain``); NULL for the events
            # written before this migration, which are never back-filled.
            "ALTER TABLE events ADD COLUMN chain BLOB",
            # The run's head: first and last chained seq, last digest, HMAC (``_chain``).
            "ALTER TABLE runs ADD COLUMN chain_head TEXT",
        ),
    ),
    Migration(
        7,
        "snapshots: a run's folded state and rendered history every few hundred events",
        (
            # agentcore._snapshot: a cache of what the events say, bound to the digest of
            # event ``seq`` and sealed; a resume reads these and the events after the last.
            """CREATE TABLE IF NOT EXISTS snapshots (
                run_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                start INTEGER NOT NULL,
                tag TEXT NOT NULL,
                chain BLOB NOT NULL,
                seal BLOB NOT NULL,
                state TEXT NOT NULL,
                history TEXT NOT NULL,
                PRIMARY KEY (run_id, seq)
            )""",
        ),
    ),
    Migration(
        8,
        "quota counters: what the appends charged, per counter",
        (
            # ``_quota``: one row per counter, ``used`` in whole millionths, written only by
            # the appends that charge it (in their transaction) and by its prune.
            """CREATE TABLE IF NOT EXISTS quota_usage (
                key TEXT PRIMARY KEY,
                quota TEXT NOT NULL,
                tenant TEXT,
                used INTEGER NOT NULL,
                window_end REAL
            ) WITHOUT ROWID""",
            """CREATE INDEX IF NOT EXISTS quota_usage_by_tenant
                ON quota_usage (tenant, key) WHERE tenant IS NOT NULL""",
            "CREATE INDEX IF NOT EXISTS quota_usage_by_quota ON quota_usage (quota, key)",
            """CREATE INDEX IF NOT EXISTS quota_usage_by_window_end
                ON quota_usage (window_end) WHERE window_end IS NOT NULL""",
        ),
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The layout this code writes, recorded in ``PRAGMA user_version``."""

_OUR_TABLES = frozenset({"events", "runs"})
_FIRST_PAUSE_S = 0.002
_LONGEST_PAUSE_S = 0.05


def open_schema(
    conn: sqlite3.Connection, path: str, synchronous: str, *, migrate: bool = True
) -> int:
    """Check that the file is an agentcore store (or empty), then bring it up to date.

    Args:
        migrate: apply pending migrations; when false, a store at an older version is
            refused (an empty file still becomes a store).

    Returns:
        The version the file had before (0: it was empty).

    Raises:
        StoreError: the file belongs to another application or to a newer agentcore, or
            is older and ``migrate`` is false, or another connection held its lock for
            longer than this connection's busy timeout; it was not modified.
        sqlite3.Error: the file cannot be read or written (the caller names the cause).
    """
    (timeout_ms,) = conn.execute("PRAGMA busy_timeout").fetchone()
    deadline = time.monotonic() + int(timeout_ms) / 1000
    pause = _FIRST_PAUSE_S
    while True:
        try:
            return _open_schema(conn, path, synchronous, migrate)
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreError(
                    f"SQLite store {path}: cannot open the database: another connection held "
                    f"its lock for longer than the busy timeout ({int(timeout_ms) / 1000:g} s) "
                    f"({exc}). The file was not changed by this open: retry, or give the store "
                    "a longer busy_timeout_s."
                ) from exc
            time.sleep(min(pause, left))
            pause = min(pause * 2, _LONGEST_PAUSE_S)


def _open_schema(conn: sqlite3.Connection, path: str, synchronous: str, migrate: bool) -> int:
    """One attempt of :func:`open_schema`; SQLITE_BUSY leaves nothing half done (the
    migrations' transaction is rolled back)."""
    # Reads only, so a refused file stays byte for byte as it was. The first statement that
    # reads the file fails on a non-database (SQLITE_NOTADB).
    version = read_checked(conn, path)
    if pending(MIGRATIONS, version, store=path) and version and not migrate:
        raise StoreError(
            f"SQLite store {path} has schema version {version}, older than this agentcore's "
            f"({SCHEMA_VERSION}); upgrade it with: agentcore db upgrade --store "
            f"sqlite:///{path}"
        )
    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if str(mode).lower() != "wal":
        raise StoreError(
            f"SQLite store {path}: could not enable WAL mode (journal_mode is {mode!r}); "
            "use a local file system that supports shared memory."
        )
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    if version == SCHEMA_VERSION:
        return version
    with immediate(conn):
        current = read_version(conn)  # another process may have upgraded it meanwhile
        for migration in pending(MIGRATIONS, current, store=path):
            for statement in migration.statements:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return current


def read_checked(conn: sqlite3.Connection, path: str) -> int:
    """The file's version, once :func:`check_ours` accepted it, both read in one read
    transaction: another process creating the store meanwhile is seen wholly or not at all
    (never its tables with the version still 0).

    Raises:
        StoreError: it is not an agentcore store.
        sqlite3.Error: the file cannot be read.
    """
    conn.execute("BEGIN DEFERRED")
    try:
        version = read_version(conn)
        check_ours(conn, path, version)
    finally:
        rollback(conn)  # it only read
    return version


def read_version(conn: sqlite3.Connection) -> int:
    """The file's ``PRAGMA user_version`` (0: a new, empty file)."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def check_ours(conn: sqlite3.Connection, path: str, version: int) -> None:
    """Refuse a file of another application (reads only).

    Raises:
        StoreError: it is not an agentcore store.
    """
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
