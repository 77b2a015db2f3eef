"""Transcript stores and ``open_store(url)``.

URLs: ``memory://`` and ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``;
``postgresql://user@host/db`` (or ``postgres://``) with the ``agentcore[postgres]`` extra.
The default URL is ``$AGENTCORE_STORE`` or ``sqlite:///agentcore.db``.
"""

from __future__ import annotations

import os

from agentcore.contracts.errors import ConfigurationError

from ._base import CancelRequest, Lease, RunSummary, TranscriptStore
from ._memory import MemoryStore
from ._postgres import PostgresStore  # imports psycopg only when a store is constructed
from ._sqlite import SQLiteStore

__all__ = [
    "DEFAULT_STORE_URL",
    "CancelRequest",
    "Lease",
    "MemoryStore",
    "PostgresStore",
    "RunSummary",
    "SQLiteStore",
    "TranscriptStore",
    "default_store_url",
    "open_store",
]

DEFAULT_STORE_URL = "sqlite:///agentcore.db"


def default_store_url() -> str:
    """``$AGENTCORE_STORE`` if set, else ``sqlite:///agentcore.db``."""
    return os.environ.get("AGENTCORE_STORE") or DEFAULT_STORE_URL


def open_store(url: str | None = None) -> TranscriptStore:
    """Open a store by URL (``None``: :func:`default_store_url`).

    Raises:
        ConfigurationError: an unknown scheme or a malformed URL.
        StoreCorruptedError: the SQLite file exists but is not a usable database.
        StoreError: the PostgreSQL database cannot be reached or has a newer schema.
    """
    url = url or default_store_url()
    if url == "memory://":
        return MemoryStore()
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise ConfigurationError(f"Store URL {url!r} has no file path: use sqlite:///runs.db")
        return SQLiteStore(path)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url)
    raise ConfigurationError(
        f"Unknown store URL {url!r}. Valid forms: 'memory://', 'sqlite:///path/to/file.db', "
        "'postgresql://user@host/dbname'."
    )
