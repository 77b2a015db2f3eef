"""Opening a SQLite store only to read it (``SQLiteStore(path, read_only=True)``).

For the CLI's listings (``runs``, ``show``, ``export``, ``stats``, ``check``): nothing is
created (no file, no directory, no ``<database>.locks/``), nothing is migrated, and a file or
directory without write permission can still be read. The file is opened with SQLite's
``mode=ro``; in a directory nobody can write to, where SQLite cannot create the WAL's
shared-memory file, it is opened ``immutable`` (no other process can be writing to it there).
A file at another schema version is refused, naming ``agentcore db upgrade``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from agentcore.contracts.errors import StoreError

from ._schema import SCHEMA_VERSION, read_checked

__all__ = ["open_read_only"]


def open_read_only(path: str, busy_timeout_s: float) -> sqlite3.Connection:
    """A read-only connection to the agentcore store at ``path``.

    Raises:
        StoreError: no such file, or a file that is not an agentcore store at this version.
        sqlite3.Error: the file cannot be read (the caller names the cause).
    """
    file = Path(path)
    if not file.is_file():
        raise StoreError(f"No SQLite store at {path}: nothing to read (nothing was created).")
    uri = file.resolve().as_uri() + "?mode=ro"
    if not os.access(file.parent, os.W_OK):
        uri += "&immutable=1"
    conn = sqlite3.connect(
        uri, uri=True, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        _check_version(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _check_version(conn: sqlite3.Connection, path: str) -> None:
    version = read_checked(conn, path)
    if version != SCHEMA_VERSION:
        what = "has no agentcore tables yet" if version == 0 else f"is at version {version}"
        raise StoreError(
            f"SQLite store {path} {what}; this agentcore reads version {SCHEMA_VERSION}. "
            f"Upgrade it with: agentcore db upgrade --store sqlite:///{path}"
        )
