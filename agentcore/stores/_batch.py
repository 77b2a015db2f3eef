"""An append's batch: its events checked (:func:`check_batch`) before a store sees them,
and encoded (:class:`Batch`) for the store to write and chain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentcore.contracts import check_tenant
from agentcore.contracts.errors import LimitExceededError, StoreError

from ..events import Charge, Event, RunStarted
from ._lease import Lease

__all__ = ["Batch", "check_batch"]


@dataclass(frozen=True, slots=True)
class Batch:
    """An ``append`` whose events were checked and encoded (the arguments of
    :meth:`TranscriptStore.append`, and ``bodies``: each event's encoded body)."""

    run_id: str
    expected_seq: int
    events: Sequence[Event]
    bodies: Sequence[str]
    lease: Lease | None
    charges: Sequence[Charge] = ()
    """What the events charge to quota counters (``_quota``), applied in the append's
    transaction."""


def check_batch(
    run_id: str, expected_seq: int, events: Sequence[Event], lease: Lease | None = None
) -> None:
    """Validate a batch before writing: non-empty, same run, consecutive seqs from expected,
    and a lease (if any) of this run."""
    if lease is not None and lease.run_id != run_id:
        raise StoreError(
            f"run {run_id!r}: append() at seq {expected_seq} was given the lease of run "
            f"{lease.run_id!r}; nothing was written"
        )
    if not events:
        raise StoreError(f"run {run_id!r}: append() at seq {expected_seq} needs at least one event")
    for i, ev in enumerate(events):
        if ev.run_id != run_id or ev.seq != expected_seq + i:
            raise StoreError(
                f"run {run_id!r}: event {i} of the batch has run_id={ev.run_id!r} "
                f"seq={ev.seq}; expected seq={expected_seq + i}; nothing was written"
            )
    if expected_seq == 0 and not isinstance(events[0], RunStarted):
        raise StoreError(
            f"run {run_id!r}: the event at seq 0 is {events[0].type}; a run's first event must "
            "be run_started"
        )
    first = events[0]
    if isinstance(first, RunStarted) and first.tenant is not None:
        try:
            check_tenant(first.tenant)
        except LimitExceededError as exc:
            raise StoreError(f"run {run_id!r}: {exc} Nothing was written.") from exc
