"""Raw writes to a store's data, as someone who can write its tables but has no key would
make them: what the conformance kit uses to check that tampering is found."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Tamper"]


@dataclass(frozen=True, slots=True)
class Tamper:
    """How a test writes to a store's data behind its back (the ``tamper`` fixture of
    :class:`StoreConformance`). Each function changes exactly one stored value and nothing
    else: no digest, head, seal or counter is brought in line.

    Attributes:
        event_body: ``(run_id, seq, body)``: the stored body of event ``seq`` becomes
            ``body`` (the JSON of another event of the same type, seq and run).
        snapshot_state: ``(run_id, seq, state)``: the stored state of the run's snapshot at
            ``seq`` becomes ``state``.
    """

    event_body: Callable[[str, int, str], None]
    snapshot_state: Callable[[str, int, str], None]
