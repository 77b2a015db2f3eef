"""The store protocol: an append-only log of events per run, with conditional appends and
leases (:class:`TranscriptStore`), the capabilities a store may add (snapshots, the cancel
request read at append, the hash chain), and the values they exchange."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .._status import FINISHED_STATUSES
from ..events import Event
from ._chain import ChainReport
from ._lease import Lease
from ._snapshots import Snapshot

__all__ = [
    "CancelAtAppend",
    "CancelRequest",
    "ChainVerifier",
    "RunSummary",
    "SnapshotStore",
    "TranscriptStore",
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
        tenant: the run's namespace (``run_started.tenant``), or ``None``.
        owner: who holds the run's lease, or ``None`` (never acquired, or released).
        lease_expires_at: when that lease ends unless renewed (Unix seconds, the store's
            clock, as :attr:`Lease.expires_at`); a past time means its holder stopped
            renewing and nobody has taken the run over yet.
    """

    run_id: str
    status: str
    task: str
    created_at: float
    updated_at: float
    events: int
    tenant: str | None = None
    owner: str | None = None
    lease_expires_at: float | None = None


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


@runtime_checkable
class TranscriptStore(Protocol):
    """Where transcripts live. Implementations: MemoryStore, SQLiteStore, PostgresStore.

    Appends are conditional: ``append(run_id, expected_seq, events)`` writes only if the
    run's next sequence number is ``expected_seq`` (0 for a new run), all events or none.
    Two writers can therefore never both append step N: the loser gets
    :class:`SeqConflictError` and nothing it sent is written.

    Ownership is a lease with fencing: ``acquire`` takes a run for ``ttl_s`` seconds (by
    the store's clock) and bumps the run's epoch; ``renew`` extends it; ``release`` gives
    it back. An append made with a lease is also conditional on the run's owner and epoch
    still being the lease's, checked in the same transaction as the seq, so a holder that
    stalled past its lease and was taken over gets :class:`LeaseLostError` and writes
    nothing. Expiry alone does not fence: until someone else acquires the run, a late
    holder can still renew and append.

    Errors: apart from :class:`RunNotFoundError` and :class:`RunBusyError` (answers about
    the run), every exception that leaves a store is a :class:`StoreError` whose message
    names the run and the seq concerned, with the underlying error as ``__cause__``. An
    event that would not read back as itself is refused at ``append``, never stored.
    """

    url: str

    async def append(
        self,
        run_id: str,
        expected_seq: int,
        events: Sequence[Event],
        *,
        lease: Lease | None = None,
    ) -> None:
        """Append ``events`` (whose seqs are ``expected_seq, expected_seq+1, ...``) atomically.

        Args:
            lease: when given, the append also requires the run's owner and epoch to be the
                lease's, checked together with ``expected_seq`` (expiry alone does not
                fence; another acquire does).

        Raises:
            LeaseLostError: ``lease`` is given and the run is held by someone else now (or
                by nobody); nothing was written. Checked before the seq.
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

    async def list_runs(
        self,
        *,
        status: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
        search: str | None = None,
        after: tuple[float, str] | None = None,
    ) -> list[RunSummary]:
        """Runs, most recently updated first, optionally only those with ``status`` and only
        those of ``tenant`` (``None``: every run, with a tenant or without).

        Args:
            search: only runs whose id starts with it, or whose task or metadata (the JSON
                of ``run_started.metadata``) contains it, ignoring ASCII case.
            after: a page's last ``(updated_at, run_id)``: only the runs listed after it
                (keyset pagination: stable while runs are appended to).

        Raises:
            StoreError: the store failed, ``limit`` is negative or ``tenant`` is invalid.
        """
        ...

    async def prune(
        self,
        *,
        before: float,
        statuses: Collection[str] = FINISHED_STATUSES,
        tenant: str | None = None,
        run_ids: Collection[str] | None = None,
        dry_run: bool = False,
    ) -> list[str]:
        """Retention: delete whole runs (events, row, cancel request) last updated before
        ``before``, in transactions of at most :data:`PRUNE_CHUNK` runs each.

        Only runs whose status is in ``statuses`` go: by default the finished ones; a run
        that is running, awaiting confirmation, needs attention or exhausted its budget is
        pruned only when its status is named. A run whose lease has not expired is never
        pruned (someone is advancing it). Each run's conditions are checked again in the
        transaction that deletes it, so a run that moved on meanwhile is kept.

        Args:
            before: Unix seconds; runs whose last event is at or after it are kept.
            statuses: the statuses to prune (each a :class:`RunStatus` value).
            tenant: only runs of this tenant (``None``: any tenant, or none).
            run_ids: only these runs (still subject to every other condition), e.g. the
                ones a caller has exported.
            dry_run: delete nothing; return what would be deleted.

        Returns:
            The run ids pruned (or, with ``dry_run``, that would be).

        Raises:
            ConfigurationError: an empty or unknown status, a ``before`` that is not a
                finite number, an invalid tenant.
            StoreError: the store failed; the chunks committed before stay deleted, the
                failing one is rolled back.
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
            StoreError: the request cannot be recorded (names the run): the store failed, or
                ``by`` or ``reason`` is not valid text (a lone surrogate), on every store.
        """
        ...

    async def cancel_request(self, run_id: str) -> CancelRequest | None:
        """The run's recorded cancel request, or ``None``.

        Raises:
            RunNotFoundError: no such run.
            StoreError: the store failed (names the run).
        """
        ...

    async def acquire(self, run_id: str, *, owner: str, ttl_s: float) -> Lease:
        """Take the run for ``ttl_s`` seconds as ``owner``; the run's epoch goes up by one.

        Succeeds when nobody holds the run, when its holder released it, when the holder's
        lease expired (by the store's clock), and, where the store can tell (SQLite, memory),
        when the holder's process is gone.

        Raises:
            RunBusyError: someone holds the run (the message names them and when their
                lease expires).
            RunNotFoundError: no such run.
            ConfigurationError: an empty owner or a ``ttl_s`` that is not a positive number.
            StoreError: the store failed.
        """
        ...

    async def renew(self, lease: Lease) -> Lease:
        """Extend the lease by ``lease.ttl_s`` from now (store clock).

        Works while the run's owner and epoch are still the lease's, even if the lease
        expired meanwhile but nobody took the run.

        Raises:
            LeaseLostError: someone else acquired the run (the message names them).
            StoreError: the store failed.
        """
        ...

    async def release(self, lease: Lease) -> None:
        """Give the run back if ``lease`` still holds it; otherwise do nothing. Idempotent.

        Raises:
            StoreError: the store failed.
        """
        ...

    async def close(self) -> None:
        """Release connections. The store is unusable afterwards."""
        ...


@runtime_checkable
class SnapshotStore(Protocol):
    """A store that keeps run snapshots (``agentcore._snapshot``): the three built-in
    stores do. The agent uses them when its store has these methods, and reads whole
    transcripts otherwise; a snapshot is only ever a cache of what the events say."""

    async def save_snapshot(self, run_id: str, snapshot: Snapshot, *, lease: Lease) -> None:
        """Keep ``snapshot``, bound to the digest event ``snapshot.seq`` has now and sealed
        (``_snapshots``), in place of the run's snapshots from ``snapshot.start`` on.

        Raises:
            LeaseLostError: ``lease`` is not the run's lease (nothing was saved): a worker
                that lost the run cannot leave a snapshot of events it never wrote.
            StoreError: no chained event at ``snapshot.seq``, or the store failed.
        """
        ...

    async def load_snapshot(self, run_id: str) -> list[Snapshot]:
        """The run's usable snapshots in seq order (empty: none): each row whose digest is
        still its event's and whose seal holds, up to the first that is not.

        Raises:
            StoreError: the store failed (the caller reads the events instead).
        """
        ...


@runtime_checkable
class CancelAtAppend(Protocol):
    """A store whose ``append`` also reads the run's cancel request, in the append's own
    transaction (the three built-in stores do). A worker then learns of a request made
    before the write-ahead commit of a call's ``tool_started`` from that commit, not from
    one more read per step."""

    def cancel_at_append(self, run_id: str) -> CancelRequest | None:
        """The cancel request the run's latest append through this store object saw when
        it committed (``None``: none), handed out once.

        Raises:
            LookupError: no append of the run through this object since the last call
                (read the request with :meth:`TranscriptStore.cancel_request`).
        """
        ...


@runtime_checkable
class ChainVerifier(Protocol):
    """A store that keeps each run's hash chain and can check it (``agentcore verify``):
    the three built-in stores do."""

    async def verify_chain(self, run_id: str) -> ChainReport:
        """Check the run's hash chain, its signed head (with the store's key) and its
        snapshots' seals: intact, or the first broken seq and why.

        Raises:
            RunNotFoundError: no such run.
            StoreError: the store failed.
        """
        ...

    def verify_chains(self, *, page: int = 200) -> AsyncIterator[ChainReport]:
        """:meth:`verify_chain` for every run, in run id order, reading ``page`` run ids at
        a time (memory stays flat however many runs there are). A run deleted meanwhile is
        skipped.

        Raises:
            StoreError: the store failed.
        """
        ...
