"""The SQLite store: transcripts in one file, through the standard library's ``sqlite3``.

``_store`` is the store; ``_schema`` its numbered migrations; ``_commit`` group commit;
``_leases`` the lease rows and the per-run flocks; ``_listing`` the statements of
``list_runs`` and ``prune``; ``_integrity`` snapshots and what verification reads;
``_transaction`` the write transaction; ``_readonly`` opening a file only to read it.
"""

from __future__ import annotations

from ._schema import SCHEMA_VERSION
from ._store import SQLiteStore

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]
