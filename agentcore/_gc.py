"""``tune_gc``: CPython's cyclic garbage collector set for a process that advances many runs.

With CPython's default thresholds ``(700, 10, 10)`` a process advancing hundreds of runs at
once spends a large share of its CPU in full collections: each one traverses every
tracked object (the runs' events since their last snapshot, their rendered messages, and
the long-lived modules and pydantic validators, which are costly to traverse), and the
runs' steady allocation triggers one every few hundred steps. Measured on one
``PostgresStore`` with 500 concurrent 20-step runs (``bench/RESULTS.md``): 43-49% of the
process's CPU in the collector with the defaults, 11-14% after :func:`tune_gc`.
"""

from __future__ import annotations

import gc

from agentcore.contracts.errors import ConfigurationError

__all__ = ["tune_gc"]

DEFAULT_THRESHOLD = 10_000
"""Allocations between two young-generation collections (CPython's default: 700)."""


def tune_gc(*, threshold: int = DEFAULT_THRESHOLD, freeze: bool = True) -> tuple[int, int, int]:
    """Set the garbage collector for a worker or service that advances many runs at once.
    Call it once, after the imports and the set-up (agents built, stores opened); it is
    process-wide, and agentcore calls it only when asked to (the Celery integration's
    ``install(..., tune_gc=True)``).

    - ``freeze``: everything alive now moves to the permanent generation
      (``gc.freeze()``), so the modules, validators and agents of the start-up are not
      traversed again by every full collection (a Celery prefork worker: call it in the
      parent before the fork, and the children share those pages unwritten as well).
    - ``threshold``: the young generation is collected every ``threshold`` allocations
      instead of 700 (``gc.set_threshold(threshold, 10, 10)``), so full collections come
      ``threshold / 700`` times less often. Reference cycles are still collected, later;
      memory that only a cycle holds lives longer, by about ``threshold`` allocations'
      worth.

    Returns:
        The thresholds before the call (``gc.set_threshold(*before)`` restores them).

    Raises:
        ConfigurationError: ``threshold`` is not a whole number >= 1.
    """
    if type(threshold) is not int or threshold < 1:
        raise ConfigurationError(f"threshold must be a whole number >= 1, got {threshold!r}")
    before = gc.get_threshold()
    if freeze:
        gc.collect()  # what is garbage now is not frozen with the rest
        gc.freeze()
    gc.set_threshold(threshold, before[1], before[2])
    return before
