"""Write transactions on a store's connection: ``BEGIN IMMEDIATE`` (the file's write lock
taken up front, so a reader never has to upgrade and deadlock), and a rollback that never
hides the error that caused it."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Generator
from contextlib import contextmanager

__all__ = ["immediate", "rollback"]


def _always() -> bool:
    return True


@contextmanager
def immediate(conn: sqlite3.Connection, *, keep: Callable[[], bool] = _always) -> Generator[None]:
    """Run the block in one ``BEGIN IMMEDIATE`` transaction: committed when the block ends
    and ``keep()`` is true (a dry run, or nothing worth writing, rolls back instead), rolled
    back when the block raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT" if keep() else "ROLLBACK")
    except BaseException:
        rollback(conn)
        raise


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is open; a failing rollback must not hide the first error."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
