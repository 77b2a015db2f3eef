"""The PostgreSQL store, through psycopg 3 (extra ``agentcore[postgres]``).

``_store`` is the store; ``_schema`` its numbered migrations and prepared statements;
``_commit`` group commit; ``_listing`` the statements of ``list_runs`` and ``prune``;
``_integrity`` snapshots and what verification reads; ``_pools`` one connection pool per
event loop; ``_retry`` the retry of an operation whose connection was lost; ``_guards`` call
guards as advisory locks.

The store's modules load on first use of :class:`PostgresStore` (psycopg itself when a
store is constructed), so ``import agentcore.stores`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._store import PostgresStore, redact_dsn

__all__ = ["PostgresStore", "redact_dsn"]


def __getattr__(name: str) -> Any:  # Any: the store class or the DSN helper
    if name in __all__:
        from . import _store

        return getattr(_store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
