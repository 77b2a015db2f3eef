"""Run claims for the PostgreSQL store: session-level advisory locks.

Superseded by leases with fencing (``PostgresStore.acquire`` / ``renew`` / ``release``);
kept only until the agent calls those instead of ``claim``, then removed.

``claim`` is synchronous in the store protocol, and an async pool cannot be used from
synchronous code running inside the loop it belongs to. Claims therefore use one small
synchronous connection per store, dedicated to claims: a claim is a session-level
``pg_try_advisory_lock`` on it, released by ``release()`` or when the connection (or the
process) dies. One connection serves all of a store's claims, so a thousand runs in flight
hold a thousand locks, not a thousand connections. A claim or release is one round trip on
the caller's thread (about 0.1 ms on a local server; the first also connects).

If the claim connection dies while a claim is held, the lock is gone and another worker
can claim the run while the first still believes it holds it; only leases with fencing
(which replace this module) close that gap.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentcore.contracts.errors import RunBusyError, StoreError

from ._base import RunClaim
from ._codec import run_label
from ._pg_schema import lock_key

if TYPE_CHECKING:
    import psycopg

__all__ = ["AdvisoryClaims"]


class AdvisoryClaims:
    """Run claims as session-level advisory locks on one synchronous connection.

    A session may take the same advisory lock twice, so the runs this store holds are also
    tracked here: a second claim of a held run through the same store is refused too.
    """

    def __init__(
        self,
        dsn: str,
        *,
        namespace: str,
        connect_timeout: int,
        error: Callable[[Exception, str], StoreError],
    ) -> None:
        self._dsn = dsn
        self._namespace = namespace
        self._connect_timeout = connect_timeout
        self._error = error
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._held: dict[str, psycopg.Connection[Any]] = {}

    def claim(self, run_id: str) -> RunClaim:
        import psycopg

        key = lock_key("claim", self._namespace, run_id)
        busy = f"Run {run_id} is being advanced by another worker right now."
        with self._lock:
            if run_id in self._held:
                raise RunBusyError(busy)
            try:
                conn = self._connection()
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            except psycopg.Error as exc:
                self._drop()
                raise self._error(exc, f"cannot claim run {run_label(run_id)}") from exc
            if row is None or not row[0]:
                raise RunBusyError(busy)
            self._held[run_id] = conn
        return _AdvisoryClaim(self, run_id, key, conn)

    def release(self, run_id: str, key: int, conn: psycopg.Connection[Any]) -> None:
        import psycopg

        with self._lock:
            if self._held.get(run_id) is not conn:
                return
            del self._held[run_id]
            if conn.closed:
                return  # the lock died with the connection
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except psycopg.Error:
                self._drop()  # a broken connection: its locks are gone with it

    def close(self) -> None:
        """Give every claim back before the connection goes: a closed connection's locks
        are freed only when its server process exits, a moment after ``close`` returns, so a
        claim taken right after could still find the run busy."""
        import psycopg

        with self._lock:
            conn = self._conn
            if self._held and conn is not None and not (conn.closed or conn.broken):
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SELECT pg_advisory_unlock_all()")
            self._held.clear()
            self._drop()

    def _connection(self) -> psycopg.Connection[Any]:
        import psycopg

        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            self._conn = psycopg.connect(
                self._dsn, autocommit=True, connect_timeout=self._connect_timeout
            )
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
            for run_id in [r for r, c in self._held.items() if c is conn]:
                del self._held[run_id]


class _AdvisoryClaim:
    """A held advisory lock; :meth:`release` gives it back (idempotent)."""

    def __init__(
        self, claims: AdvisoryClaims, run_id: str, key: int, conn: psycopg.Connection[Any]
    ) -> None:
        self._claims: AdvisoryClaims | None = claims
        self._args = (run_id, key, conn)

    def release(self) -> None:
        claims, self._claims = self._claims, None
        if claims is not None:
            claims.release(*self._args)
