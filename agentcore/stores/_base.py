"""The store protocol: an append-only log of events per run, with conditional appends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentcore.contracts.errors import RunBusyError, StoreError

from .._state import status_after
from ..events import Event, RunStarted

__all__ = [
    "CancelRequest",
    "InProcessClaims",
    "RunClaim",
    "RunSummary",
    "TranscriptStore",
    "check_batch",
    "status_after",
]


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One line of ``list_runs``.

    Attributes:
        run_id: the run.
        status: the status after the last event (``running`` until the run stops).
        task: the task text.
        created_at, updated_at: Unix seconds of the first and last event.
        events: how many events the run has.
    """

    run_id: str
    status: str
    task: str
    created_at: float
    updated_at: float
    events: int


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """A person's (or a service's) request to cancel a run, recorded beside its transcript.

    The process advancing the run reads it between steps, records the running tool's
    outcome, then the cancellation; with no live process, the canceller appends it itself.

    Attributes:
        by: who asked (recorded).
        reason: why, when given.
        at: Unix seconds of the request.
    """

    by: str
    reason: str | None
    at: float


class RunClaim(Protocol):
    """Exclusive ownership of a run while one worker advances it."""

    def release(self) -> None:
        """Give the run back (idempotent). A dead process releases its claims by itself."""
        ...


class InProcessClaims:
    """Claims that hold within one process (MemoryStore)."""

    def __init__(self) -> None:
        self._held: set[str] = set()

    def claim(self, run_id: str) -> RunClaim:
        """Claim ``run_id`` or raise RunBusyError."""
        if run_id in self._held:
            raise RunBusyError(f"Run {run_id} is being advanced by another task right now.")
        self._held.add(run_id)
        return _Release(lambda: self._held.discard(run_id))


class _Release:
    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn: Callable[[], None] | None = fn

    def release(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


@runtime_checkable
class TranscriptStore(Protocol):
    """Where transcripts live. Implementations: MemoryStore, SQLiteStore.

    Appends are conditional: ``append(run_id, expected_seq, events)`` writes only if the
    run's next sequence number is ``expected_seq`` (0 for a new run), all events or none.
    Two writers can therefore never both append step N: the loser gets
    :class:`SeqConflictError` and nothing it sent is written.

    Errors: apart from :class:`RunNotFoundError` and :class:`RunBusyError` (answers about
    the run), every exception that leaves a store is a :class:`StoreError` whose message
    names the run and the seq concerned, with the underlying error as ``__cause__``. An
    event that would not read back as itself is refused at ``append``, never stored.
    """

    url: str

    async def append(self, run_id: str, expected_seq: int, events: Sequence[Event]) -> None:
        """Append ``events`` (whose seqs are ``expected_seq, expected_seq+1, ...``) atomically.

        Raises:
            SeqConflictError: the run is not at ``expected_seq``.
            StoreError: the write failed, or an event cannot be stored so that it reads back
                equal (a lone surrogate, a number or nesting past the decoder's limits, NaN);
                nothing was written.
        """
        ...

    async def load(self, run_id: str, *, after: int = -1) -> list[Event]:
        """Events of a run with ``seq > after``, in order.

        Raises:
            RunNotFoundError: no such run.
            StoreCorruptedError: an event cannot be decoded (names the run and seq).
            StoreError: the store failed.
        """
        ...

    async def list_runs(self, *, status: str | None = None, limit: int = 100) -> list[RunSummary]:
        """Runs, most recently updated first, optionally only those with ``status``.

        Raises:
            StoreError: the store failed, or ``limit`` is negative.
        """
        ...

    async def truncate(
        self, run_id: str, *, after: int, dry_run: bool = False
    ) -> list[tuple[int, str]]:
        """Repair: delete the run's events with ``seq > after``; an explicit act.

        Args:
            after: the last seq to keep (``run_started`` is never removed).
            dry_run: delete nothing; return what would be removed (to back it up first).

        Returns:
            The removed events as ``(seq, raw stored body)``, for the caller to keep.

        Raises:
            RunNotFoundError: no such run.
            StoreCorruptedError: an event that would be kept cannot be decoded (names its
                seq).
            StoreError: the store failed; nothing was deleted.
        """
        ...

    async def request_cancel(self, run_id: str, *, by: str, reason: str | None = None) -> None:
        """Record a request to cancel the run (replacing an earlier one); no event is written.

        Raises:
            RunNotFoundError: no such run.
            StoreError: the request cannot be recorded (names the run).
        """
        ...

    async def cancel_request(self, run_id: str) -> CancelRequest | None:
        """The run's recorded cancel request, or ``None``.

        Raises:
            RunNotFoundError: no such run.
            StoreError: the store failed (names the run).
        """
        ...

    def claim(self, run_id: str) -> RunClaim:
        """Take exclusive ownership of a run while advancing it.

        Conditional appends order writes; a claim keeps a second worker from even starting
        a step (and re-running a tool the first is still inside) while the first is alive.
        A claim dies with its process, so a crashed worker's run can be resumed at once.

        Raises:
            RunBusyError: another worker holds the run.
        """
        ...

    async def close(self) -> None:
        """Release connections. The store is unusable afterwards."""
        ...


def check_batch(run_id: str, expected_seq: int, events: Sequence[Event]) -> None:
    """Validate a batch before writing: non-empty, same run, consecutive seqs from expected."""
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
