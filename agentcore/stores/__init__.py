"""Transcript stores and ``open_store(url)``.

URLs: ``memory://`` and ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``;
``postgresql://user@host/db`` (or ``postgres://``) with the ``agentcore[postgres]`` extra.
The default URL is ``$AGENTCORE_STORE`` or ``sqlite:///agentcore.db``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agentcore.contracts.errors import ConfigurationError

from ._admin import SchemaStatus, schema_status, upgrade_schema
from ._base import (
    FINISHED_STATUSES,
    CancelAtAppend,
    CancelRequest,
    ChainVerifier,
    Lease,
    RunSummary,
    SnapshotStore,
    TranscriptStore,
)
from ._chain import ChainReport
from ._commits import CommitStats
from ._guards import CallGuardStore
from ._memory import MemoryStore
from ._snapshots import Snapshot
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "DEFAULT_STORE_URL",
    "FINISHED_STATUSES",
    "CallGuardStore",
    "CancelAtAppend",
    "CancelRequest",
    "ChainReport",
    "ChainVerifier",
    "CommitStats",
    "Lease",
    "MemoryStore",
    "PostgresStore",
    "RunSummary",
    "SQLiteStore",
    "SchemaStatus",
    "Snapshot",
    "SnapshotStore",
    "TranscriptStore",
    "default_store_url",
    "open_store",
    "schema_status",
    "upgrade_schema",
]

DEFAULT_STORE_URL = "sqlite:///agentcore.db"


def default_store_url() -> str:
    """``$AGENTCORE_STORE`` if set, else ``sqlite:///agentcore.db``."""
    return os.environ.get("AGENTCORE_STORE") or DEFAULT_STORE_URL


def open_store(url: str | None = None, *, migrate: bool = True) -> TranscriptStore:
    """Open a store by URL (``None``: :func:`default_store_url`).

    Args:
        migrate: bring an older layout up to date on open (default). When false (for
            code that only reads, such as listings), an older durable store is refused
            with a StoreError naming ``agentcore db upgrade``; a new one is still created.

    Raises:
        ConfigurationError: an unknown scheme or a malformed URL.
        StoreCorruptedError: the SQLite file exists but is not a usable database.
        StoreError: the PostgreSQL database cannot be reached, or the store has a newer
            layout (or an older one and ``migrate`` is false).
    """
    url = url or default_store_url()
    if url == "memory://":
        return MemoryStore()
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise ConfigurationError(f"Store URL {url!r} has no file path: use sqlite:///runs.db")
        return SQLiteStore(path, migrate=migrate)
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(url, migrate=migrate)
    raise ConfigurationError(
        f"Unknown store URL {url!r}. Valid forms: 'memory://', 'sqlite:///path/to/file.db', "
        "'postgresql://user@host/dbname'."
    )


def __getattr__(name: str) -> Any:  # Any: the PostgreSQL store class
    # The PostgreSQL store's modules load on first use (psycopg itself when a store is
    # constructed): ~5% of `import agentcore` otherwise.
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
