"""StoreBase: what the built-in stores share above their storage. ``append``,
``truncate``, ``list_runs`` and ``prune`` check their arguments here and hand each store
the checked request (a :class:`Batch`, a :class:`Listing`, a :class:`Pruning`);
``verify_chains`` pages through run ids here, over each store's ``verify_chain`` and
``_run_page``. The checks and helpers the stores call from their own methods (leases,
cancel requests, truncation, search) are here too."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic_core import to_json

from agentcore.contracts import check_tenant
from agentcore.contracts.errors import (
    ConfigurationError,
    LimitExceededError,
    RunNotFoundError,
    StoreCorruptedError,
    StoreError,
)

from .._status import FINISHED_STATUSES, RunStatus, status_after
from ..events import Event, RunStarted, decode_event
from ._batch import Batch, check_batch
from ._chain import ChainReport
from ._codec import DECODE_ERRORS, encode_batch, run_label
from ._lease import Lease
from ._protocol import CancelRequest, RunSummary
from ._quota import charges_of

__all__ = [
    "PRUNE_CHUNK",
    "Listing",
    "Pruning",
    "StoreBase",
    "check_cancel_text",
    "check_lease_request",
    "check_truncate",
    "kept_status",
    "like_escape",
    "metadata_text",
]

PRUNE_CHUNK: Final = 500
"""Runs deleted per transaction by ``prune``: short transactions, bounded lock times."""


_SEEN_CANCELS = 4096
"""Runs whose append-time cancel request a store keeps until their driver takes it."""


@dataclass(frozen=True, slots=True)
class Listing:
    """A ``list_runs`` request whose ``limit`` and ``tenant`` were checked (the arguments
    of :meth:`TranscriptStore.list_runs`)."""

    status: str | None
    tenant: str | None
    limit: int
    search: str | None
    after: tuple[float, str] | None


@dataclass(frozen=True, slots=True)
class Pruning:
    """A checked ``prune`` request (the arguments of :meth:`TranscriptStore.prune`).

    Attributes:
        statuses: the statuses to prune, known and distinct, in :class:`RunStatus` order.
        run_ids: the runs it is limited to, distinct and sorted, or ``None``: any run.
    """

    before: float
    statuses: tuple[str, ...]
    tenant: str | None
    run_ids: list[str] | None
    dry_run: bool


class StoreBase(ABC):
    """The base of the built-in stores: the public ``append``, ``truncate``, ``list_runs``,
    ``prune`` and ``verify_chains`` with their full signatures and argument checks, each
    over one hook of the store's."""

    url: str
    _appended_cancel: dict[str, CancelRequest | None]

    async def append(
        self,
        run_id: str,
        expected_seq: int,
        events: Sequence[Event],
        *,
        lease: Lease | None = None,
    ) -> None:
        """See :meth:`TranscriptStore.append`: the batch is checked and encoded here (an
        event that would not read back as itself is refused before the store sees it)."""
        check_batch(run_id, expected_seq, events, lease)
        # What an earlier append read of the run's cancel request is stale from now on: an
        # append that ends without reading it (refused, failed, retried after a lost
        # connection) leaves nothing, and the driver reads the request itself.
        self._forget_cancel(run_id)
        bodies = encode_batch(run_id, events)
        await self._append(Batch(run_id, expected_seq, events, bodies, lease, charges_of(events)))

    def cancel_at_append(self, run_id: str) -> CancelRequest | None:
        """See :meth:`CancelAtAppend.cancel_at_append`."""
        seen = self._cancels()
        if run_id not in seen:
            raise LookupError(run_id)
        return seen.pop(run_id)

    def _cancels(self) -> dict[str, CancelRequest | None]:
        """What appends read of their runs' cancel requests, not handed out yet (made on
        first use: the stores' own ``__init__`` need not know of it)."""
        try:
            return self._appended_cancel
        except AttributeError:
            self._appended_cancel = {}
            return self._appended_cancel

    def _saw_cancel(self, run_id: str, request: CancelRequest | None) -> None:
        """Keep what an append of ``run_id`` read of its cancel request as it committed
        (the latest few thousand runs': a run's driver takes it right after its append)."""
        seen = self._cancels()
        seen.pop(run_id, None)
        seen[run_id] = request
        if len(seen) > _SEEN_CANCELS:
            del seen[next(iter(seen))]

    def _forget_cancel(self, run_id: str) -> None:
        """Keep nothing for ``run_id``: its driver reads the request itself."""
        self._cancels().pop(run_id, None)

    async def truncate(
        self, run_id: str, *, after: int, dry_run: bool = False
    ) -> list[tuple[int, str]]:
        """See :meth:`TranscriptStore.truncate`."""
        check_truncate(run_id, after)
        return await self._truncate(run_id, after, dry_run)

    async def list_runs(
        self,
        *,
        status: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
        search: str | None = None,
        after: tuple[float, str] | None = None,
    ) -> list[RunSummary]:
        """See :meth:`TranscriptStore.list_runs`."""
        _check_listing(tenant, limit)
        return await self._list_runs(Listing(status, tenant, limit, search, after))

    async def prune(
        self,
        *,
        before: float,
        statuses: Collection[str] = FINISHED_STATUSES,
        tenant: str | None = None,
        run_ids: Collection[str] | None = None,
        dry_run: bool = False,
    ) -> list[str]:
        """See :meth:`TranscriptStore.prune`."""
        wanted = _check_pruning(before, statuses, tenant)
        ids = None if run_ids is None else sorted(set(run_ids))
        return await self._prune(Pruning(before, wanted, tenant, ids, dry_run))

    async def verify_chains(self, *, page: int = 200) -> AsyncIterator[ChainReport]:
        """See :meth:`ChainVerifier.verify_chains`: keyset pages of run ids
        (:meth:`_run_page`), each run checked by :meth:`verify_chain`."""
        after = ""
        while True:
            ids = await self._run_page(after, page)
            for run_id in ids:
                try:
                    yield await self.verify_chain(run_id)
                except RunNotFoundError:
                    continue
            if len(ids) < page:
                return
            after = ids[-1]

    @abstractmethod
    async def _append(self, batch: Batch, /) -> None:
        """Write the checked batch."""

    @abstractmethod
    async def _truncate(self, run_id: str, after: int, dry_run: bool) -> list[tuple[int, str]]:
        """Delete (or, for a dry run, pick) the run's events after ``after``; ``(seq,
        body)`` of each."""

    @abstractmethod
    async def verify_chain(self, run_id: str) -> ChainReport:
        """See :meth:`ChainVerifier.verify_chain`."""

    @abstractmethod
    async def _list_runs(self, listing: Listing) -> list[RunSummary]:
        """The runs ``listing`` asks for, most recently updated first."""

    @abstractmethod
    async def _prune(self, pruning: Pruning) -> list[str]:
        """Delete (or, for a dry run, pick) the runs ``pruning`` names; their ids."""

    @abstractmethod
    async def _run_page(self, after: str, page: int) -> Sequence[str]:
        """Up to ``page`` run ids above ``after``, in order."""


def _check_listing(tenant: str | None, limit: int) -> None:
    """Refuse a listing no store can answer.

    Raises:
        StoreError: a negative ``limit`` or an invalid tenant.
    """
    if limit < 0:
        raise StoreError(f"list_runs(limit={limit}): the limit must be >= 0")
    if tenant is not None:
        try:
            check_tenant(tenant)
        except LimitExceededError as exc:
            raise StoreError(f"list_runs(tenant={tenant!r}): {exc}") from exc


def _check_pruning(before: float, statuses: Collection[str], tenant: str | None) -> tuple[str, ...]:
    """The statuses to prune, checked and deduplicated (in a stable order).

    Raises:
        ConfigurationError: ``before`` is not a finite number, ``statuses`` is empty or
            names an unknown status, or ``tenant`` is invalid.
    """
    if not math.isfinite(before):
        raise ConfigurationError(f"prune(before={before!r}): give Unix seconds, e.g. a date.")
    if isinstance(statuses, str):
        statuses = (statuses,)
    valid = [s.value for s in RunStatus]
    unknown = sorted(set(statuses) - set(valid))
    if unknown or not statuses:
        raise ConfigurationError(
            f"prune(statuses={tuple(statuses)!r}): "
            + (f"unknown {', '.join(unknown)}" if unknown else "name at least one")
            + f"; valid: {', '.join(valid)}."
        )
    if tenant is not None:
        try:
            check_tenant(tenant)
        except LimitExceededError as exc:
            raise ConfigurationError(f"prune(tenant={tenant!r}): {exc}") from exc
    return tuple(s for s in valid if s in statuses)


def metadata_text(first: Event) -> str | None:
    """A new run's metadata as its row keeps it for searching: compact JSON, ``None`` when
    empty (or when the first event is not ``run_started``)."""
    if not isinstance(first, RunStarted) or not first.metadata:
        return None
    return to_json(first.metadata).decode()


def like_escape(text: str) -> str:
    """``text`` for a ``LIKE ... ESCAPE '\\'`` pattern: its wildcards matched literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def check_lease_request(owner: str, ttl_s: float) -> None:
    """Refuse an owner or a ttl that no store can hold.

    Raises:
        ConfigurationError: an empty owner, one with a NUL or a lone surrogate, or a ttl
            that is not a finite number of seconds above zero.
    """
    if not owner or "\x00" in owner:
        raise ConfigurationError(
            f"Invalid lease owner {owner!r}: use a non-empty string without NUL characters, "
            "e.g. 'host:pid:uuid'."
        )
    try:
        owner.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(f"Invalid lease owner {owner!r}: {exc}") from exc
    if not math.isfinite(ttl_s) or ttl_s <= 0:
        raise ConfigurationError(
            f"Invalid lease ttl_s={ttl_s!r}: give a number of seconds above zero, e.g. 30.0"
        )


def check_cancel_text(url: str, run_id: str, by: str, reason: str | None) -> None:
    """Refuse a cancel request's text that UTF-8 cannot carry, as the SQL stores' drivers
    do (the memory store checks it here, so a test on it sees what production would).

    Raises:
        StoreError: ``by`` or ``reason`` holds a lone surrogate.
    """
    for text in (by, reason or ""):
        try:
            text.encode()
        except UnicodeEncodeError as exc:
            raise StoreError(
                f"{url}: cannot record a cancel request for run {run_label(run_id)}: {exc} "
                "(UnicodeEncodeError)"
            ) from exc


def check_truncate(run_id: str, after: int) -> None:
    """Refuse a truncation that would remove ``run_started``.

    Raises:
        StoreError: ``after`` is negative.
    """
    if after < 0:
        raise StoreError(
            f"run {run_label(run_id)}: truncate after seq {after}? It keeps at least "
            "run_started: use after >= 0"
        )


def kept_status(
    run_id: str, where: str, bodies: Iterable[tuple[int, str | bytes]], after: int
) -> tuple[str, int]:
    """The status a truncated run has (:func:`status_after` over the events it keeps) and
    how many events it keeps, from the run's stored ``(seq, body)`` pairs.

    Raises:
        StoreCorruptedError: an event that would be kept cannot be decoded (names it).
    """
    status, kept = "running", 0
    for seq, body in bodies:
        if seq > after:
            continue
        try:
            status = status_after(status, decode_event(run_id, seq, body))
        except DECODE_ERRORS as exc:
            raise StoreCorruptedError(
                f"Run {run_label(run_id)} in {where} is corrupted at seq {seq}, which the "
                f"truncation would keep: its body cannot be decoded ({exc}); truncate earlier"
            ) from exc
        kept += 1
    return status, kept
