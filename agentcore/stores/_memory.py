"""MemoryStore: transcripts in a dict. For tests and short-lived processes.

Leases live beside the transcripts, timed by the machine's clock (``time.time()``); every
holder is in this process, so a lease ends only by release or expiry.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager

from pydantic_core import to_json

from agentcore.contracts.errors import RunNotFoundError, SeqConflictError
from agentcore.events import Event, RunStarted, encode_event_body

from .._status import status_after
from ._base import Listing, Pruning, StoreBase, check_cancel_text, check_lease_request
from ._batch import Batch
from ._chain import ChainKey, ChainReport, WrittenHeads, check_chain, extend, truncated_head
from ._codec import run_label
from ._errors import busy_error, lost_error
from ._guards import LocalGuards
from ._lease import Lease
from ._protocol import CancelRequest, RunSummary
from ._quota import UNITS, Counter, QuotaUsage, apply_charges
from ._snapshots import Snapshot, StoredRow, audit, check_snapshot, no_event, seal, usable

__all__ = ["MemoryStore"]


class MemoryStore(StoreBase):
    """An in-process store. Same conditional-append semantics as the durable stores, and the
    same refusal of events that would not read back as themselves, and the same hash chain
    (``_chain``) with its head signed by ``chain_key`` (default ``$AGENTCORE_CHAIN_KEY``)."""

    def __init__(self, *, chain_key: bytes | str | None = None) -> None:
        self.url = "memory://"
        self._key = ChainKey.configured(chain_key)
        self._chains: dict[str, list[bytes]] = {}
        self._heads: dict[str, str] = {}
        self._written = WrittenHeads()
        self._runs: dict[str, list[Event]] = {}
        self._status: dict[str, str] = {}
        self._tenant: dict[str, str | None] = {}
        self._cancel: dict[str, CancelRequest] = {}
        self._guards = LocalGuards()
        # run_id -> (owner or None when released, epoch, expires_at or None)
        self._leases: dict[str, tuple[str | None, int, float | None]] = {}
        # run_id -> [(snapshot, the digest of its event when saved, seal)] in seq order
        self._snapshots: dict[str, list[tuple[Snapshot, bytes, bytes]]] = {}
        self._quota: dict[str, Counter] = {}

    async def _append(self, batch: Batch) -> None:
        """Refuses what the durable stores refuse (``StoreBase.append`` encodes the batch)."""
        run_id, expected_seq, events = batch.run_id, batch.expected_seq, batch.events
        if batch.lease is not None:
            self._check_lease(batch.lease, what="Nothing was written")
        log = self._runs.get(run_id)
        current = 0 if log is None else len(log)
        if current != expected_seq:
            raise SeqConflictError(
                f"run {run_label(run_id)}: expected to append at seq {expected_seq}, but the "
                f"transcript has {current} events (another writer advanced it)"
            )
        if batch.charges:
            apply_charges(self._quota, batch.charges)  # all or none, before anything else
        chains, head = extend(self._key, batch, self._heads.get(run_id), written=self._written)
        if log is None:
            log = self._runs[run_id] = []
            self._status[run_id] = "running"
            first = events[0]
            self._tenant[run_id] = first.tenant if isinstance(first, RunStarted) else None
        log.extend(events)
        self._chains.setdefault(run_id, []).extend(chains)
        self._heads[run_id] = head
        status = self._status[run_id]
        for ev in events:
            status = status_after(status, ev)
        self._status[run_id] = status
        self._saw_cancel(run_id, self._cancel.get(run_id))

    async def load(self, run_id: str, *, after: int = -1) -> list[Event]:
        """See :meth:`TranscriptStore.load`."""
        log = self._runs.get(run_id)
        if log is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")
        return log[max(after + 1, 0) :]

    async def _truncate(self, run_id: str, after: int, dry_run: bool) -> list[tuple[int, str]]:
        log = self._runs.get(run_id)
        if log is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")
        removed = [(ev.seq, encode_event_body(ev)) for ev in log[after + 1 :]]
        if dry_run:
            return removed
        chains = self._chains[run_id]
        kept = list(enumerate(chains[: after + 1]))
        head = truncated_head(self._key, run_id, self._heads.get(run_id), kept)
        del log[after + 1 :]
        del chains[after + 1 :]
        kept_snapshots = [row for row in self._snapshots.get(run_id, []) if row[0].seq <= after]
        self._snapshots[run_id] = kept_snapshots
        if head is None:
            self._heads.pop(run_id, None)
        else:
            self._heads[run_id] = head
        status = "running"
        for ev in log:
            status = status_after(status, ev)
        self._status[run_id] = status
        return removed

    async def _list_runs(self, listing: Listing) -> list[RunSummary]:
        """A scan of every run (the listing's filters on each), then a sort."""
        status, tenant, after = listing.status, listing.tenant, listing.after
        needle = _ascii_lower(listing.search) if listing.search else None
        out: list[RunSummary] = []
        for run_id, log in self._runs.items():
            st = self._status[run_id]
            if status is not None and st != status:
                continue
            owner = self._tenant[run_id]
            if tenant is not None and owner != tenant:
                continue
            first = log[0]
            task = first.task if isinstance(first, RunStarted) else ""
            if after is not None and (-log[-1].at, run_id) <= (-after[0], after[1]):
                continue
            if needle is not None and not (
                _ascii_lower(run_id).startswith(needle)
                or needle in _ascii_lower(task)
                or (
                    isinstance(first, RunStarted)
                    and needle in _ascii_lower(to_json(first.metadata).decode())
                )
            ):
                continue
            holder, _, until = self._leases.get(run_id, (None, 0, None))
            out.append(
                RunSummary(run_id, st, task, first.at, log[-1].at, len(log), owner, holder, until)
            )
        out.sort(key=lambda s: (-s.updated_at, s.run_id))
        return out[: listing.limit]

    async def _prune(self, pruning: Pruning) -> list[str]:
        """One step: nothing else runs meanwhile."""
        wanted, before, tenant = pruning.statuses, pruning.before, pruning.tenant
        only = None if pruning.run_ids is None else set(pruning.run_ids)
        now = time.time()
        doomed: list[tuple[float, str]] = []
        for run_id, log in self._runs.items():
            holder, _, until = self._leases.get(run_id, (None, 0, None))
            if (
                self._status[run_id] in wanted
                and log[-1].at < before
                and (tenant is None or self._tenant[run_id] == tenant)
                and (only is None or run_id in only)
                and not (holder is not None and until is not None and until >= now)
            ):
                doomed.append((log[-1].at, run_id))
        pruned = [run_id for _, run_id in sorted(doomed)]
        if not pruning.dry_run:
            for run_id in pruned:
                for table in (
                    self._runs,
                    self._status,
                    self._tenant,
                    self._cancel,
                    self._leases,
                    self._chains,
                    self._heads,
                    self._snapshots,
                ):
                    table.pop(run_id, None)
        return pruned

    async def request_cancel(self, run_id: str, *, by: str, reason: str | None = None) -> None:
        """See :meth:`TranscriptStore.request_cancel`."""
        if run_id not in self._runs:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")
        check_cancel_text(self.url, run_id, by, reason)
        self._cancel[run_id] = CancelRequest(by=by, reason=reason, at=time.time())

    async def cancel_request(self, run_id: str) -> CancelRequest | None:
        """See :meth:`TranscriptStore.cancel_request`."""
        if run_id not in self._runs:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")
        return self._cancel.get(run_id)

    async def acquire(self, run_id: str, *, owner: str, ttl_s: float) -> Lease:
        """See :meth:`TranscriptStore.acquire`."""
        check_lease_request(owner, ttl_s)
        if run_id not in self._runs:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")
        holder, epoch, until = self._leases.get(run_id, (None, 0, None))
        now = time.time()
        if holder is not None and until is not None and until >= now:
            raise busy_error(run_label(run_id), holder, epoch, until, now)
        lease = Lease(run_id, owner, epoch + 1, ttl_s, now + ttl_s, holder)
        self._leases[run_id] = (owner, lease.epoch, lease.expires_at)
        return lease

    async def renew(self, lease: Lease) -> Lease:
        """See :meth:`TranscriptStore.renew`."""
        self._check_lease(lease, what="It was not renewed")
        expires_at = time.time() + lease.ttl_s
        self._leases[lease.run_id] = (lease.owner, lease.epoch, expires_at)
        return Lease(lease.run_id, lease.owner, lease.epoch, lease.ttl_s, expires_at)

    async def release(self, lease: Lease) -> None:
        """See :meth:`TranscriptStore.release`."""
        holder, epoch, _ = self._leases.get(lease.run_id, (None, 0, None))
        if holder == lease.owner and epoch == lease.epoch:
            self._leases[lease.run_id] = (None, epoch, None)

    async def verify_chain(self, run_id: str) -> ChainReport:
        """See :meth:`ChainVerifier.verify_chain`."""
        log = self._runs.get(run_id)
        if log is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self.url}")
        chains = self._chains.get(run_id, [])
        rows = [
            (
                ev.seq,
                ev.type,
                encode_event_body(ev).encode(),
                chains[i] if i < len(chains) else None,
            )
            for i, ev in enumerate(log)
        ]
        report = check_chain(run_id, len(log), self._heads.get(run_id), rows, self._key)
        return audit(report, self._key, run_id, self._snapshot_rows(run_id))

    async def _run_page(self, after: str, page: int) -> list[str]:
        return sorted(run_id for run_id in self._runs if run_id > after)[:page]

    def guard_call(self, run_id: str, key: str) -> AbstractAsyncContextManager[bool]:
        """See :meth:`CallGuardStore.guard_call` (held in this process: so is the store)."""
        return self._guards.guard_call(run_id, key)

    async def call_running(self, run_id: str, key: str) -> bool:
        """See :meth:`CallGuardStore.call_running`."""
        return await self._guards.call_running(run_id, key)

    async def save_snapshot(self, run_id: str, snapshot: Snapshot, *, lease: Lease) -> None:
        """See :meth:`SnapshotStore.save_snapshot`."""
        check_snapshot(run_id, snapshot)
        self._check_lease(lease, what="The snapshot was not saved")
        chains = self._chains.get(run_id, [])
        if snapshot.seq >= len(chains):
            raise no_event(run_id, snapshot.seq)
        digest = chains[snapshot.seq]
        rows = [row for row in self._snapshots.get(run_id, []) if row[0].seq < snapshot.start]
        rows.append((snapshot, digest, seal(self._key, run_id, snapshot, digest)))
        self._snapshots[run_id] = rows

    async def load_snapshot(self, run_id: str) -> list[Snapshot]:
        """See :meth:`SnapshotStore.load_snapshot`."""
        return usable(self._key, run_id, self._snapshot_rows(run_id))

    def _snapshot_rows(self, run_id: str) -> list[StoredRow]:
        chains = self._chains.get(run_id, [])
        return [
            (
                snap.seq,
                snap.start,
                snap.tag,
                digest,
                chains[snap.seq] if snap.seq < len(chains) else None,
                sealed,
                snap.state,
                snap.history,
            )
            for snap, digest, sealed in self._snapshots.get(run_id, [])
        ]

    def _check_lease(self, lease: Lease, *, what: str) -> None:
        """LeaseLostError unless ``lease`` is the run's current lease (expired or not)."""
        holder, epoch, until = self._leases.get(lease.run_id, (None, 0, None))
        if holder == lease.owner and epoch == lease.epoch:
            return
        known = epoch if lease.run_id in self._runs else None
        raise lost_error(
            run_label(lease.run_id), lease, holder, known, until, time.time(), what=what
        )

    async def quota_usage(self, keys: Sequence[str]) -> Mapping[str, float]:
        """See :meth:`QuotaStore.quota_usage`."""
        return {k: (row.used / UNITS if (row := self._quota.get(k)) else 0.0) for k in keys}

    async def list_quota_usage(
        self, *, tenant: str | None = None, quota: str | None = None
    ) -> list[QuotaUsage]:
        """See :meth:`QuotaStore.list_quota_usage`."""
        return [
            QuotaUsage(key, row.quota, row.tenant, row.used / UNITS, row.window_end)
            for key, row in sorted(self._quota.items())
            if (tenant is None or row.tenant == tenant) and (quota is None or row.quota == quota)
        ]

    async def prune_quota_usage(self, before: float) -> int:
        """See :meth:`QuotaStore.prune_quota_usage`."""
        gone = [
            k
            for k, row in self._quota.items()
            if row.window_end is not None and row.window_end <= before
        ]
        for key in gone:
            del self._quota[key]
        return len(gone)

    async def close(self) -> None:
        """Nothing to release."""


def _ascii_lower(text: str) -> str:
    """Lower-case ASCII letters only, as SQL's ``LIKE`` compares them."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
