"""A lease: time-limited ownership of a run, with the fencing token that refuses a late
holder's writes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Lease"]


@dataclass(frozen=True, slots=True)
class Lease:
    """Time-limited ownership of a run, with a fencing token (``acquire``, ``renew``).

    Attributes:
        run_id: the run.
        owner: who holds it, chosen by the caller (e.g. ``"host:pid:uuid"``).
        epoch: the fencing token: the run's epoch goes up by one on every acquire, so a
            holder whose run was taken over has a smaller epoch than the run's, and the
            store refuses its appends (:class:`LeaseLostError`).
        ttl_s: how long each acquire or renew lasts, in seconds.
        expires_at: Unix seconds when the lease ends unless renewed, by the store's clock
            (PostgreSQL: the database's ``now()``; SQLite and memory: the machine's).
        taken_over: on the lease ``acquire`` returned, the owner whose lease it voided (it
            had expired, or its process died without releasing): the run was taken over
            from a worker that did not finish its shift. ``None`` when the run was free.
    """

    run_id: str
    owner: str
    epoch: int
    ttl_s: float
    expires_at: float
    taken_over: str | None = None
