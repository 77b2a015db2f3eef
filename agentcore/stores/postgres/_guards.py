"""Call guards on PostgreSQL: a session-level advisory lock per running call.

The lock is held on a connection of its own, opened for the call and closed when the tool
returns, so the guard is exactly that database session: the server frees it when the
session ends (the worker's process died, or its connection was closed) and keeps it while
the process is stopped. Checking is a transaction-level try-lock on a pooled connection,
which conflicts with the session-level lock and ends with its transaction.

The locks use the two-key form (``pg_advisory_lock(int4, int4)``), a key space of its own
that the bigint locks of migrations never meet; the 64-bit key is a hash of the store's
schema, the run and the call, so stores in other schemas of one database do not collide.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from .._guards import guard_digest

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from agentcore.contracts.errors import StoreError

__all__ = ["PgGuards"]

_TAKE = "SELECT pg_try_advisory_lock(%s, %s)"
_FREE = "SELECT pg_advisory_unlock(%s, %s)"
_PROBE = "SELECT pg_try_advisory_xact_lock(%s, %s)"


@dataclass(frozen=True, slots=True)
class PgGuards:
    """The call guards of one PostgreSQL store.

    Attributes:
        dsn: the database to connect to.
        namespace: the store's schema ("" for the default), part of every key.
        connect_timeout: libpq's connect timeout, whole seconds.
        pool: the running loop's pool (raises StoreError).
        error: turns a psycopg error into the store's StoreError.
    """

    dsn: str = field(repr=False)  # it may hold a password
    _: KW_ONLY
    namespace: str
    connect_timeout: int
    pool: Callable[[str], Awaitable[AsyncConnectionPool[Any]]]
    error: Callable[[Exception, str], StoreError]

    def _keys(self, run_id: str, key: str) -> tuple[int, int]:
        digest = guard_digest(f"{self.namespace}\0{run_id}", key)
        return (
            int.from_bytes(digest[:4], "big", signed=True),
            int.from_bytes(digest[4:8], "big", signed=True),
        )

    def guard_call(self, run_id: str, key: str) -> AbstractAsyncContextManager[bool]:
        """See :meth:`CallGuardStore.guard_call`."""
        return _PgGuard(self, self._keys(run_id, key), f"cannot take the guard of call {key!r}")

    async def call_running(self, run_id: str, key: str) -> bool:
        """See :meth:`CallGuardStore.call_running`."""
        import psycopg

        where = f"cannot read the guard of call {key!r}"
        pool = await self.pool(where)
        try:
            async with pool.connection() as conn, conn.transaction():
                row = await (await conn.execute(_PROBE, self._keys(run_id, key))).fetchone()
        except (psycopg.Error, UnicodeError) as exc:
            raise self.error(exc, where) from exc
        return row is None or not row[0]


class _PgGuard:
    """One call's guard: its own connection, holding the lock until ``__aexit__``."""

    def __init__(self, guards: PgGuards, keys: tuple[int, int], where: str) -> None:
        self._guards, self._keys, self._where = guards, keys, where
        self._conn: Any = None  # Any: psycopg.AsyncConnection, imported lazily

    async def __aenter__(self) -> bool:
        import psycopg

        g = self._guards
        try:
            conn = await psycopg.AsyncConnection.connect(
                g.dsn, autocommit=True, connect_timeout=g.connect_timeout
            )
        except (psycopg.Error, UnicodeError) as exc:
            raise g.error(exc, self._where) from exc
        try:
            row = await (await conn.execute(_TAKE, self._keys)).fetchone()
        except (psycopg.Error, UnicodeError) as exc:
            with contextlib.suppress(psycopg.Error):
                await conn.close()
            raise g.error(exc, self._where) from exc
        if row is None or not row[0]:
            with contextlib.suppress(psycopg.Error):
                await conn.close()
            return False
        self._conn = conn
        return True

    async def __aexit__(self, *exc: object) -> None:
        import psycopg

        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            # Closing the session frees the lock too; unlocking first frees it before the
            # server has noticed the closed connection.
            with contextlib.suppress(psycopg.Error):
                await conn.execute(_FREE, self._keys)
        finally:
            with contextlib.suppress(psycopg.Error):
                await conn.close()
