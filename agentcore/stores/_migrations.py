"""Numbered schema migrations: the rule every durable store's layout follows.

A store's layout is the result of migrations numbered 1, 2, 3, ... applied in order. The
store records the number of the last one applied (SQLite: ``PRAGMA user_version``; a server
database: a version table), and opening it applies the missing ones, all of them in one
transaction, so a store is at its old version or at the new one, never in between.

Migrations only add: tables, columns, indexes, markers. None drops, renames or rewrites
what is stored, so no upgrade can lose a transcript. A store whose version is newer than
the code's last migration was written by a newer agentcore and is refused, not misread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentcore.contracts.errors import StoreError

__all__ = ["Migration", "numbered", "pending"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of a store's layout.

    Attributes:
        version: its number; the store is at ``version`` once it has been applied.
        summary: what it adds, in a few words (shown by upgrade tools).
        statements: the SQL, executed in order inside the upgrade's transaction.
    """

    version: int
    summary: str
    statements: tuple[str, ...]


def numbered(*migrations: Migration) -> tuple[Migration, ...]:
    """The migrations as a checked sequence: numbered 1, 2, 3, ... with no gap.

    Raises:
        ValueError: a gap or a duplicate number (a programming error, caught at import).
    """
    for index, migration in enumerate(migrations, start=1):
        if migration.version != index:
            raise ValueError(
                f"migration {migration.summary!r} is numbered {migration.version}, expected "
                f"{index}: migrations are numbered 1, 2, 3, ... in order"
            )
    return migrations


def pending(migrations: Sequence[Migration], current: int, *, store: str) -> Sequence[Migration]:
    """The migrations a store at version ``current`` still needs, in order.

    Args:
        migrations: a sequence made by :func:`numbered`.
        current: the version the store records (0: a new, empty store).
        store: the store's name for the error message (a path or URL without secrets).

    Raises:
        StoreError: ``current`` is newer than the last migration, or negative.
    """
    latest = len(migrations)
    if current > latest:
        raise StoreError(
            f"Store {store} has schema version {current}, newer than this agentcore reads "
            f"({latest}): upgrade agentcore to open it. The store was left untouched."
        )
    if current < 0:
        raise StoreError(
            f"Store {store} records schema version {current}, which no agentcore writes: it "
            "is not an agentcore store, or it was damaged. The store was left untouched."
        )
    return migrations[current:]
