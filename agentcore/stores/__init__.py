"""Transcript stores and ``open_store(url)``.

URLs: ``memory://`` and ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``;
``postgresql://user@host/db`` (or ``postgres://``) with the ``agentcore[postgres]`` extra;
a store of your own under the scheme it registers (:func:`register_store`). The default URL
is ``$AGENTCORE_STORE`` or ``sqlite:///agentcore.db``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._status import FINISHED_STATUSES
from ._chain import ChainReport
from ._commits import CommitStats
from ._guards import CallGuardStore
from ._layout import SchemaStatus, StoreLayout
from ._lease import Lease
from ._memory import MemoryStore
from ._protocol import (
    CancelAtAppend,
    CancelRequest,
    ChainVerifier,
    RunSummary,
    SnapshotStore,
    TranscriptStore,
)
from ._quota import QuotaStore, QuotaUsage, quota_store
from ._registry import (
    DEFAULT_STORE_URL,
    StoreFactory,
    default_store_url,
    open_read_only,
    open_store,
    register_store,
    registered_stores,
    schema_status,
    store_layout,
    upgrade_schema,
)
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
    "QuotaStore",
    "QuotaUsage",
    "RunSummary",
    "SQLiteStore",
    "SchemaStatus",
    "Snapshot",
    "SnapshotStore",
    "StoreFactory",
    "StoreLayout",
    "TranscriptStore",
    "default_store_url",
    "open_read_only",
    "open_store",
    "quota_store",
    "register_store",
    "registered_stores",
    "schema_status",
    "store_layout",
    "upgrade_schema",
]


def __getattr__(name: str) -> Any:  # Any: the PostgreSQL store class
    # The PostgreSQL store's modules load on first use (psycopg itself when a store is
    # constructed): ~5% of `import agentcore` otherwise.
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
