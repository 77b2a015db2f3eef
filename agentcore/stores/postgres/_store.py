"""PostgresStore: transcripts in PostgreSQL, through psycopg 3 (async) and a connection pool.

psycopg is imported only when a store is constructed (extra ``agentcore[postgres]``), so
``import agentcore`` stays fast and works without it.

Layout (schema version 1):
    ``agentcore_runs`` holds one row per run with everything an append reads or checks:
    status, task, created_at / updated_at (the events' own times, Unix seconds), next_seq,
    the lease (owner, epoch, lease_until), the cancel request, and columns reserved for
    what comes next (tenant, chain_head), so that tenants and chaining need no rewrite.
    ``agentcore_events`` holds one row per event, ``PRIMARY KEY (run_id, seq)``; the body is
    the event's compact JSON without ``run_id`` and ``seq``, stored as TEXT, not jsonb:
    jsonb refuses the ``\\u0000`` escape, and an event must round-trip whatever it holds.
    ``list_runs`` reads only ``agentcore_runs`` (indexed by updated_at and by status).
    Times are DOUBLE PRECISION Unix seconds so a run's times read back exactly as the events
    carry them; lease times come from the database clock, hence TIMESTAMPTZ.
    PostgreSQL text cannot hold a NUL character, which a task may contain: the row's free
    text (``task``, ``cancel_by``, ``cancel_reason``) is therefore kept as a JSON string
    literal (``"the task"``), escaped the same way as the bodies.
    ``agentcore_quota_usage`` holds one row per quota counter (``_quota``), charged by the
    appends in their own statement (``_schema``), which checks and adds atomically.

Migrations (``_schema``):
    Numbered steps, additions only, applied on open in one transaction under an advisory
    lock, so processes opening at once do not race; a newer database is refused, untouched.

Appends:
    One statement, so one round trip: a data-modifying CTE advances the run row only if it
    is at the expected seq (``UPDATE ... WHERE next_seq = expected``; for a new run
    ``INSERT ... ON CONFLICT DO NOTHING``) and inserts the events only if it did. The row
    lock taken by the update orders concurrent writers: the loser re-checks ``next_seq``
    after the winner commits, matches nothing and writes nothing. A unique violation (an
    event row already there) fails the whole statement the same way: SeqConflictError.
    An append made with a lease adds ``AND owner = ... AND epoch = ...`` to the same
    UPDATE, so fencing costs no round trip; only a refused append reads the row again, to
    say whether the lease was lost (LeaseLostError) or the seq moved (SeqConflictError).

Group commit (``_commit``, ``group_commit=True`` by default):
    Appends made at once on one event loop share one transaction: their statements are
    pipelined on one connection (``BEGIN``, the statements in run id order, ``COMMIT``:
    one round trip, one WAL flush), each keeping its own conditions and outcome. The
    commit starts as soon as none is in flight; what queues meanwhile is the next batch.

Leases (``acquire`` / ``renew`` / ``release``):
    Each is one statement on the run's row. ``acquire`` is ``UPDATE ... SET owner, epoch =
    epoch + 1, lease_until = clock_timestamp() + ttl WHERE run_id = ... AND (owner IS NULL
    OR lease_until < clock_timestamp()) RETURNING ...``: concurrent acquirers queue on the
    row lock and re-check the condition against the winner's row, so exactly one wins; a
    refusal reads the row to tell "no such run" from "busy, held by X until T". Every time
    is the database's clock, which all workers share, never a worker's. Nothing is held on
    a connection: a worker that dies, or whose connection drops, keeps its run until its
    lease expires, and is fenced by the epoch if it comes back after someone took over.

Event loops (``_pools``):
    A pool belongs to the event loop that opened it, so the store keeps one per running
    loop, opened on first use and closed when that loop ends: code that calls
    ``asyncio.run`` repeatedly with one store (the CLI, the ``*_sync`` methods) works.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any

from agentcore.contracts.errors import (
    ConfigurationError,
    LeaseLostError,
    RunBusyError,
    RunNotFoundError,
    SeqConflictError,
    StoreCorruptedError,
    StoreError,
)
from agentcore.events import Event, RunStarted

from ..._status import status_after
from .._base import (
    PRUNE_CHUNK,
    Listing,
    Pruning,
    StoreBase,
    check_lease_request,
    kept_status,
    metadata_text,
)
from .._batch import Batch
from .._chain import ChainKey, ChainReport, WrittenHeads, check_chain, extend, truncated_head
from .._codec import decode_rows, run_label
from .._commits import CommitStats
from .._errors import busy_error, lost_error, translated
from .._lease import Lease
from .._protocol import CancelRequest, RunSummary
from .._quota import UNITS, QuotaUsage
from .._snapshots import Snapshot, StoredRow, audit, check_snapshot, usable
from ._arrays import Byteas, Float8s, Int8s, Texts
from ._commit import PgAppend, PgCommits
from ._dsn import redact_dsn
from ._guards import PgGuards
from ._integrity import chain_rows, save_snapshot, snapshot_rows
from ._listing import list_statement, prune, summaries, text_in, text_out
from ._pools import LoopPools
from ._quota import quota_locks, quota_params
from ._reads import CancelReads
from ._retry import retried, retried_append
from ._schema import Statements, upgrade

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresStore", "redact_dsn"]

_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")

_EMPTY_STATUS = ""  # fold start: a batch that changes no status leaves the row's as it is

_KNOWN_HEADS = 10_000
"""How many runs' chain heads a store remembers from its own appends (the oldest go first):
an append to a remembered run needs no read of its head (``PostgresStore.append``)."""


class _ChainMovedError(SeqConflictError):
    """The run is at the expected seq, but its chain head is not the one the append
    extended (another process truncated the run, or someone changed the head)."""


def _require_psycopg() -> None:
    try:  # checked here so that the error names the extra
        importlib.import_module("psycopg")
        importlib.import_module("psycopg_pool")
    except ImportError as exc:
        raise ConfigurationError(
            f"The PostgreSQL store needs psycopg 3 and psycopg-pool ({exc}): "
            "pip install 'agentcore[postgres]'"
        ) from exc


class PostgresStore(StoreBase):
    """A durable store in PostgreSQL; the same semantics as :class:`SQLiteStore`.

    Any number of processes and store objects may share a database: conditional appends
    keep them consistent, and a run's lease is exclusive across all of them. The
    constructor connects once, synchronously, to check (or create, or upgrade) the schema,
    so a bad DSN or a newer database fails at open; the pools open on first use in each
    event loop.

    Args:
        dsn: a ``postgresql://`` / ``postgres://`` URL or a libpq ``key=value`` string.
        schema: the schema to keep the tables in (created if missing); by default the
            connection's ``search_path`` decides (e.g. ``?options=-csearch_path%3Dmine``).
        min_connections: the smallest size of each event loop's pool.
        max_connections: the largest size of each event loop's pool.
        connect_timeout_s: how long opening a connection (or waiting for a free one from
            the pool) may take before a StoreError.
        migrate: bring an older schema up to date on open (default). When false, an older
            schema is refused with a StoreError; an empty database is still initialised.
        group_commit: appends made at once (concurrent runs on one event loop) share one
            transaction and one WAL flush, each returning once its own events are durable;
            when false, every append is a transaction of its own.
        chain_key: the key that signs each run's chain head (``_chain``); default
            ``$AGENTCORE_CHAIN_KEY`` when set. Without one the chain is still kept, its head
            unsigned. Never stored, sent to the database or shown.

    Attributes:
        url: the DSN as given (it may contain a password; messages never show it).
        schema: the schema given, or ``None``.
        stats: transactions and appends so far (:class:`CommitStats`).

    Raises:
        ConfigurationError: psycopg is not installed (``pip install 'agentcore[postgres]'``),
            or an invalid option.
        StoreError: the database cannot be reached, or its schema is newer than this code.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_connections: int = 1,
        max_connections: int = 10,
        connect_timeout_s: float = 10.0,
        migrate: bool = True,
        group_commit: bool = True,
        chain_key: bytes | str | None = None,
    ) -> None:
        if schema is not None and not _SCHEMA_NAME.match(schema):
            raise ConfigurationError(
                f"Invalid schema name {schema!r}: use letters, digits and underscores, "
                "starting with a letter or underscore (at most 63 characters)."
            )
        if not 0 <= min_connections <= max_connections or max_connections < 1:
            raise ConfigurationError(
                f"Invalid pool size min_connections={min_connections}, "
                f"max_connections={max_connections}: need 0 <= min <= max and max >= 1."
            )
        if connect_timeout_s <= 0:
            raise ConfigurationError(f"connect_timeout_s must be > 0, got {connect_timeout_s!r}")
        _require_psycopg()
        self._key = ChainKey.configured(chain_key)
        # run_id -> (next seq, chain head) as this store's last append to it left them
        self._heads: dict[str, tuple[int, str | None]] = {}
        self._written = WrittenHeads()
        self.url = dsn
        self.schema = schema
        self._display = redact_dsn(dsn)
        self._connect_timeout = max(1, round(connect_timeout_s))  # libpq takes whole seconds
        self._sql = Statements.build(schema)
        self._closed = False
        self._migrate(migrate)
        self._pools = LoopPools(
            dsn, min_size=min_connections, max_size=max_connections, timeout=connect_timeout_s
        )
        self._reads = CancelReads(
            self._pool, self._sql.cancel_request, self._sql.cancel_requests, self._error
        )
        self._commits = PgCommits(
            self._pool,
            self._sql.run_state,
            self._sql.quota_lock,
            self._error,
            self._refusal,
            group=group_commit,
        )
        self._guards = PgGuards(
            dsn,
            namespace=schema or "",
            connect_timeout=self._connect_timeout,
            pool=self._pool,
            error=self._error,
        )

    @property
    def stats(self) -> CommitStats:
        """Transactions and appends so far (how well group commit shares them)."""
        return self._commits.stats

    # ------------------------------------------------------------------ protocol

    @retried_append
    async def _append(self, batch: Batch) -> None:
        """With a lease, the run's owner and epoch are checked by the same one-statement
        append as the seq (no extra round trip). With group commit, concurrent appends share
        one transaction (``_commit``); each returns once it is durable.

        The batch's digests extend the run's chain head (``_chain``), computed here: the head
        is the one this store's own last append to the run wrote, or else read first (one
        more round trip, once per run per store object); the append's statement writes only
        if the row still holds that head, in the same condition as the seq and the lease, so
        a head changed meanwhile is read again and the append tried once more."""
        for attempt in (1, 2):
            try:
                await self._append_chained(batch)
            except _ChainMovedError as exc:
                self._heads.pop(batch.run_id, None)
                if attempt == 2:
                    raise SeqConflictError(str(exc)) from exc
            except BaseException:
                self._heads.pop(batch.run_id, None)
                raise
            else:
                return

    async def _append_chained(self, batch: Batch) -> None:
        """One attempt of :meth:`append` with the chain head known or read now."""
        run_id, expected_seq, events = batch.run_id, batch.expected_seq, batch.events
        prev_head: str | None = None
        previous_chained = moved = False
        known = self._heads.get(run_id)
        if expected_seq and known is not None:
            current, prev_head = known
        elif expected_seq:
            current, prev_head, previous_chained = await self._chain_state(run_id)
        else:
            current = 0
        # Not at the expected seq: the statement writes nothing (unless the run moved there
        # meanwhile: then its head is another, and the statement refuses too) and the
        # refusal says why (the lease, checked first, or the seq): the head is not checked.
        moved = current != expected_seq
        chains, head = extend(
            self._key,
            batch,
            None if moved else prev_head,
            previous_chained=previous_chained and not moved,
            written=None if moved else self._written,
        )
        end = expected_seq + len(events)
        status = _EMPTY_STATUS if expected_seq else "running"
        for ev in events:
            status = status_after(status, ev)
        first = events[0]
        params: dict[str, Any] = {  # Any: query parameters of several types
            "run_id": run_id,
            "expected": expected_seq,
            "end": end,
            "updated": events[-1].at,
            "status": status or None,
            "task": text_in(first.task if isinstance(first, RunStarted) else ""),
            "tenant": first.tenant if isinstance(first, RunStarted) else None,
            "metadata": metadata_text(first),
            "created": first.at,
            "seqs": Int8s([ev.seq for ev in events]),
            "types": Texts([ev.type for ev in events]),
            "ats": Float8s([ev.at for ev in events]),
            "bodies": Texts(batch.bodies),
            "chains": Byteas(chains),
            "head": head,
            "prev_head": prev_head,
        }
        sql, charges = self._sql, batch.charges
        if batch.lease is not None:
            # A new run has no lease yet: at seq 0 this matches no row, and the follow-up
            # read says why (no run: the lease is not the run's; a run: a seq conflict).
            statement = sql.append_leased_charged if charges else sql.append_leased
            params["owner"], params["epoch"] = batch.lease.owner, batch.lease.epoch
        elif expected_seq == 0:
            statement = sql.append_new_charged if charges else sql.append_new
        else:
            statement = sql.append_next_charged if charges else sql.append_next
        if charges:
            params.update(quota_params(charges))
        if self._closed:
            raise StoreError(f"The store {self._display} is closed; open a new one")
        item = PgAppend(
            run_id,
            expected_seq,
            len(events),
            statement,
            params,
            batch.lease,
            charges=charges,
            locks=quota_locks(charges, self.schema) if charges else (),
        )
        # Known before the commit, so a second batch of the run in the same group extends it.
        self._heads.pop(run_id, None)
        self._heads[run_id] = (end, head)
        if len(self._heads) > _KNOWN_HEADS:
            del self._heads[next(iter(self._heads))]
        await self._commits.append(item)
        try:
            request = None if item.cancel is None else self._cancel_of(run_id, item.cancel)
        except StoreCorruptedError:
            self._forget_cancel(run_id)  # the driver reads it, and is told why it cannot
        else:
            self._saw_cancel(run_id, request)

    async def _one_row(self, sql: Any, params: Any, where: str) -> Any:  # Any: a psycopg row
        """The first row of one statement on a pooled connection (``None``: no row), with
        a failure reported as ``where``."""

        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                return await (await conn.execute(sql, params)).fetchone()

    @retried
    async def _chain_state(self, run_id: str) -> tuple[int | None, str | None, bool]:
        """The run's next seq (``None``: no such run), its stored chain head, and whether
        its last event carries a digest."""
        where = f"cannot read the chain head of run {run_label(run_id)}"
        row = await self._one_row(self._sql.chain_state, (run_id,), where)
        return (None, None, False) if row is None else (int(row[0]), row[1], bool(row[2]))

    @retried
    async def load(self, run_id: str, *, after: int = -1) -> list[Event]:
        """See :meth:`TranscriptStore.load`."""

        where = f"cannot load run {run_label(run_id)} after seq {after}"
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                cur = await conn.execute(self._sql.load, (after, run_id))
                rows = await cur.fetchall()
        if not rows:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self._display}")
        return decode_rows(run_id, after, int(rows[0][0]), rows, self._corrupted)

    async def _truncate(self, run_id: str, after: int, dry_run: bool) -> list[tuple[int, str]]:
        """One transaction, under the run's row lock."""
        where = f"cannot truncate run {run_label(run_id)} after seq {after}; nothing was deleted"
        pool = await self._pool(where)
        try:
            with self._translated(where):
                async with pool.connection() as conn, conn.transaction():
                    found = await (await conn.execute(self._sql.lock_run, (run_id,))).fetchone()
                    if found is None:
                        raise RunNotFoundError(f"No run {run_label(run_id)} in {self._display}")
                    rows = await (await conn.execute(self._sql.bodies, (run_id,))).fetchall()
                    head = truncated_head(
                        self._key,
                        run_id,
                        found[0],
                        [
                            (int(seq), None if c is None else bytes(c))
                            for seq, _, c in rows
                            if seq <= after
                        ],
                    )
                    status, kept = kept_status(
                        run_id, self._display, ((seq, body) for seq, body, _ in rows), after
                    )
                    if not dry_run:
                        await conn.execute(self._sql.delete_after, (run_id, after))
                        await conn.execute(self._sql.snapshots_after, (run_id, after))
                        await conn.execute(self._sql.reset_run, (kept, status, head, run_id))
        finally:
            self._heads.pop(run_id, None)
        return [(int(seq), str(body)) for seq, body, _ in rows if seq > after]

    @retried
    async def _list_runs(self, listing: Listing) -> list[RunSummary]:
        """Each filter combination walks an index in the listing's order (``_schema``):
        no sort, no scan. A search tests each run in that order (id, task and metadata on
        its row) until ``limit`` matched."""
        where = "cannot list runs"
        statement, params = list_statement(self._sql, listing)
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                rows = await (await conn.execute(statement, params)).fetchall()
        return summaries(rows, self._display)

    async def _prune(self, pruning: Pruning) -> list[str]:
        """One ``DELETE ... RETURNING`` per chunk (its own transaction), which picks the
        runs through the ``(status, updated_at)`` index, skips rows a writer holds, and
        takes the events along by ``ON DELETE CASCADE`` (``_listing``)."""
        where = "cannot prune runs"
        pruned: list[str] = []
        pool = await self._pool(where)
        with self._translated(lambda: f"{where} ({len(pruned)} pruned before the failure)"):
            async with pool.connection() as conn:
                await prune(conn, self._sql, pruning, pruned)
        return pruned

    @retried
    async def quota_usage(self, keys: Sequence[str]) -> Mapping[str, float]:
        """See :meth:`QuotaStore.quota_usage`."""
        where = "cannot read quota counters"
        wanted = list(dict.fromkeys(keys))
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                cur = await conn.execute(self._sql.quota_read, (Texts(wanted),))
                rows = await cur.fetchall()
        found = {str(key): int(used) for key, used in rows}
        return {key: found.get(key, 0) / UNITS for key in wanted}

    @retried
    async def list_quota_usage(
        self, *, tenant: str | None = None, quota: str | None = None
    ) -> list[QuotaUsage]:
        """See :meth:`QuotaStore.list_quota_usage`."""
        where = "cannot list quota counters"
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                params = {"tenant": tenant, "quota": quota}
                rows = await (await conn.execute(self._sql.quota_list, params)).fetchall()
        return [
            QuotaUsage(key, name, owner, int(used) / UNITS, None if end is None else float(end))
            for key, name, owner, used, end in rows
        ]

    async def prune_quota_usage(self, before: float) -> int:
        """See :meth:`QuotaStore.prune_quota_usage`: one ``DELETE`` per chunk of
        :data:`PRUNE_CHUNK` counters (its own transaction); counters an append holds at
        that moment are left for the next prune."""
        where = "cannot prune quota counters"
        pruned = 0
        pool = await self._pool(where)
        with self._translated(lambda: f"{where} ({pruned} pruned before the failure)"):
            async with pool.connection() as conn:
                while True:
                    cur = await conn.execute(
                        self._sql.quota_prune, {"before": before, "limit": PRUNE_CHUNK}
                    )
                    pruned += cur.rowcount
                    if cur.rowcount < PRUNE_CHUNK:
                        return pruned

    @retried
    async def request_cancel(self, run_id: str, *, by: str, reason: str | None = None) -> None:
        """See :meth:`TranscriptStore.request_cancel`. The request's time is the database's
        clock, the one every worker shares."""
        where = f"cannot record a cancel request for run {run_label(run_id)}"
        params = (text_in(by), None if reason is None else text_in(reason), run_id)
        row = await self._one_row(self._sql.request_cancel, params, where)
        if row is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self._display}")

    @retried
    async def cancel_request(self, run_id: str) -> CancelRequest | None:
        """See :meth:`TranscriptStore.cancel_request`."""
        where = f"cannot read the cancel request of run {run_label(run_id)}"
        if _plain_text(run_id):  # read with the other runs' requests of this loop
            row = await self._reads.read(run_id, where)
        else:  # an id PostgreSQL cannot hold (NUL, a lone surrogate) fails its read alone
            row = await self._one_row(self._sql.cancel_request, (run_id,), where)
        if row is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self._display}")
        return self._cancel_of(run_id, row)

    def _cancel_of(self, run_id: str, row: Sequence[Any]) -> CancelRequest | None:  # Any: a row
        """The cancel request of the run's ``(cancel_by, cancel_reason, cancel_at)``.

        Raises:
            StoreCorruptedError: the stored request cannot be read.
        """
        by, reason, at = row
        if by is None:
            return None
        try:
            return CancelRequest(
                by=text_out(by),
                reason=None if reason is None else text_out(reason),
                at=float(at),
            )
        except (ValueError, TypeError) as exc:
            raise StoreCorruptedError(
                f"Run {run_label(run_id)} in {self._display}: its cancel request cannot be read "
                f"({exc})"
            ) from exc

    @retried
    async def acquire(self, run_id: str, *, owner: str, ttl_s: float) -> Lease:
        """See :meth:`TranscriptStore.acquire`: one ``UPDATE ... RETURNING`` that takes the
        run if nobody holds it or the holder's lease has expired by the database's clock.
        A dead worker's run is taken once its lease expires."""

        check_lease_request(owner, ttl_s)
        where = f"cannot acquire run {run_label(run_id)}"
        params: dict[str, Any] = {"run_id": run_id, "owner": owner, "ttl": float(ttl_s)}
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                for _ in range(3):  # again if it came free between the two statements
                    row = await (await conn.execute(self._sql.acquire, params)).fetchone()
                    if row is not None:
                        return Lease(run_id, owner, int(row[0]), ttl_s, float(row[1]), row[2])
                    found = await (await conn.execute(self._sql.lease_state, (run_id,))).fetchone()
                    if found is None:
                        raise RunNotFoundError(f"No run {run_label(run_id)} in {self._display}")
                    holder, epoch, until, now = found
                    if holder is not None and until is not None and until >= now:
                        raise busy_error(
                            run_label(run_id), holder, int(epoch), float(until), float(now)
                        )
        raise RunBusyError(
            f"Run {run_label(run_id)} changed hands repeatedly while this worker tried to "
            "acquire it; try again."
        )

    @retried
    async def renew(self, lease: Lease) -> Lease:
        """See :meth:`TranscriptStore.renew` (from the database's ``clock_timestamp()``)."""

        where = f"cannot renew the lease of run {run_label(lease.run_id)}"
        params: dict[str, Any] = {
            "run_id": lease.run_id,
            "owner": lease.owner,
            "epoch": lease.epoch,
            "ttl": float(lease.ttl_s),
        }
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                row = await (await conn.execute(self._sql.renew, params)).fetchone()
                if row is not None:
                    return Lease(lease.run_id, lease.owner, lease.epoch, lease.ttl_s, float(row[0]))
                found = await (
                    await conn.execute(self._sql.lease_state, (lease.run_id,))
                ).fetchone()
        raise self._lost(lease, found, what="It was not renewed")

    @retried
    async def release(self, lease: Lease) -> None:
        """See :meth:`TranscriptStore.release`."""

        where = f"cannot release the lease of run {run_label(lease.run_id)}"
        params = {"run_id": lease.run_id, "owner": lease.owner, "epoch": lease.epoch}
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                await conn.execute(self._sql.release, params)

    async def save_snapshot(self, run_id: str, snapshot: Snapshot, *, lease: Lease) -> None:
        """See :meth:`SnapshotStore.save_snapshot`: one transaction that locks the run's
        row, checks the lease, reads event ``seq``'s digest and replaces the run's
        snapshots from ``snapshot.start`` on. Not retried: a snapshot is only a cache."""

        check_snapshot(run_id, snapshot)
        where = f"cannot save a snapshot of run {run_label(run_id)} at seq {snapshot.seq}"
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                await save_snapshot(conn, self._sql, self._key, run_id, snapshot, lease)

    @retried
    async def load_snapshot(self, run_id: str) -> list[Snapshot]:
        """See :meth:`SnapshotStore.load_snapshot`."""
        return usable(self._key, run_id, await self._snapshot_rows(run_id))

    async def _snapshot_rows(self, run_id: str) -> list[StoredRow]:
        where = f"cannot read the snapshots of run {run_label(run_id)}"
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                return await snapshot_rows(conn, self._sql, run_id)

    @retried
    async def verify_chain(self, run_id: str) -> ChainReport:
        """See :meth:`ChainVerifier.verify_chain` (the row and the events in one statement)."""
        where = f"cannot read run {run_label(run_id)} to verify it"
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                found = await chain_rows(conn, self._sql, run_id)
        if found is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self._display}")
        report = check_chain(run_id, *found, self._key)
        return audit(report, self._key, run_id, await self._snapshot_rows(run_id))

    async def _run_page(self, after: str, page: int) -> list[str]:
        where = "cannot list runs to verify them"
        pool = await self._pool(where)
        with self._translated(where):
            async with pool.connection() as conn:
                ids = await (await conn.execute(self._sql.run_page, (after, page))).fetchall()
        return [str(run_id) for (run_id,) in ids]

    def guard_call(self, run_id: str, key: str) -> AbstractAsyncContextManager[bool]:
        """See :meth:`CallGuardStore.guard_call`: a session-level advisory lock on a
        connection opened for the call, freed by the server when that session ends."""
        if self._closed:
            raise StoreError(f"The store {self._display} is closed; open a new one")
        return self._guards.guard_call(run_id, key)

    async def call_running(self, run_id: str, key: str) -> bool:
        """See :meth:`CallGuardStore.call_running`."""
        return await self._guards.call_running(run_id, key)

    async def check_connections(self) -> None:
        """Test this event loop's idle pooled connections and replace the dead ones. The
        store calls it itself before retrying an operation whose connection was lost
        (``_retry``); never raises."""
        await self._pools.check()

    async def close(self) -> None:
        """Close every pool. Idempotent.
        This loop's appends already queued are committed first."""
        await self._commits.wait()
        self._closed = True
        await self._pools.close()

    # ------------------------------------------------------------------ internals

    async def _pool(self, where: str) -> AsyncConnectionPool[Any]:
        """This event loop's pool (Any: psycopg's row type)."""
        import psycopg

        if self._closed:
            raise StoreError(f"The store {self._display} is closed; open a new one")
        try:
            return await self._pools.get()
        except psycopg.Error as exc:
            raise self._error(exc, f"{where}: cannot connect") from exc

    def _migrate(self, migrate: bool) -> None:
        """Create or upgrade the schema (synchronously: called by the constructor)."""
        import psycopg

        with (
            self._translated("cannot open the database"),
            psycopg.connect(
                self.url, autocommit=True, connect_timeout=self._connect_timeout
            ) as conn,
        ):
            upgrade(conn, self._sql, schema=self.schema, display=self._display, migrate=migrate)

    def _translated(self, what: str | Callable[[], str]) -> AbstractContextManager[None]:
        """psycopg's errors (and a lone surrogate it cannot send: UnicodeError) leave the
        block as :meth:`_error`."""
        import psycopg

        return translated((psycopg.Error, UnicodeError), self._error, what)

    def _error(self, exc: Exception, what: str) -> StoreError:
        sqlstate = getattr(exc, "sqlstate", None)
        code = f" (SQLSTATE {sqlstate})" if sqlstate else ""
        text = str(exc).strip() or type(exc).__name__
        return StoreError(f"PostgreSQL store {self._display}: {what}: {text}{code}")

    def _refusal(self, item: PgAppend, found: Sequence[Any] | None) -> Exception:
        """Why ``item`` wrote nothing, from its run's ``(next_seq, owner, epoch,
        lease_until, now)`` read after the commit, or ``None``: no such run (Any: a row)."""
        holder = None if found is None else found[1:5]
        lease = item.lease
        if lease is not None and (holder is None or holder[:2] != (lease.owner, lease.epoch)):
            return self._lost(lease, holder, what="Nothing was written")
        current = 0 if found is None else int(found[0])
        if found is not None and current == item.expected_seq:
            return _ChainMovedError(
                f"run {run_label(item.run_id)}: its chain head changed while appending at seq "
                f"{current} (another process truncated the run, or the head was changed); "
                "nothing was written"
            )
        return SeqConflictError(
            f"run {run_label(item.run_id)}: expected to append at seq {item.expected_seq}, but "
            f"the transcript has {current} events (another writer advanced it); nothing was "
            "written"
        )

    def _lost(self, lease: Lease, found: Sequence[Any] | None, *, what: str) -> LeaseLostError:
        """LeaseLostError from the run's ``(owner, epoch, lease_until, now)``, or ``None``
        when there is no such run (Any: a database row)."""
        if not found:
            return lost_error(run_label(lease.run_id), lease, None, None, None, 0.0, what=what)
        owner, epoch, until, now = found
        return lost_error(
            run_label(lease.run_id),
            lease,
            owner,
            int(epoch),
            None if until is None else float(until),
            float(now),
            what=what,
        )

    def _corrupted(self, run_id: str, seq: int, why: str) -> StoreCorruptedError:
        return StoreCorruptedError(
            f"Run {run_label(run_id)} in {self._display} is corrupted at seq {seq}: {why}. The "
            "transcript is not guessed at: repair or remove the bad event explicitly."
        )


def _plain_text(text: str) -> bool:
    """Whether PostgreSQL's text holds ``text`` as it is (no NUL, no lone surrogate)."""
    if "\x00" in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
