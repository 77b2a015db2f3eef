"""What group commit shares: the counters both durable stores keep of their transactions."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CommitStats"]


@dataclass(slots=True)
class CommitStats:
    """What the store's appends cost in transactions (read it, e.g. in tests and benchmarks).

    Attributes:
        batches: transactions started for appends (each carries one batch).
        commits: transactions that committed appends.
        appends: appends written by them (refused appends are not counted).
        largest_batch: the most appends one transaction carried (refused ones included).
        failed_commits: transactions that failed as a whole (each append of theirs got a
            StoreError).
    """

    batches: int = 0
    commits: int = 0
    appends: int = 0
    largest_batch: int = 0
    failed_commits: int = 0
