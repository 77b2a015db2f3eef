"""Write transactions on a store's connection: ``BEGIN IMMEDIATE`` (the file's write lock
taken up front, so a reader never has to upgrade and deadlock), and a rollback that never
hides the error that caused it."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from types import TracebackType

__all__ = ["immediate", "rollback"]


def _always() -> bool:
    return True


class immediate:  # noqa: N801  # used as a function: `with immediate(conn):`
    """Run the block in one ``BEGIN IMMEDIATE`` transaction: committed when the block ends
    and ``keep()`` is true (a dry run, or nothing worth writing, rolls back instead), rolled
    back when the block raises. A class, not a generator: it is on every append's path."""

    __slots__ = ("_conn", "_keep")

    def __init__(self, conn: sqlite3.Connection, *, keep: Callable[[], bool] = _always) -> None:
        self._conn = conn
        self._keep = keep

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            rollback(self._conn)
            return
        try:
            self._conn.execute("COMMIT" if self._keep() else "ROLLBACK")
        except BaseException:
            rollback(self._conn)
            raise


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is open; a failing rollback must not hide the first error."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
