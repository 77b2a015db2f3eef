"""Retrying a PostgreSQL store operation once its connection was lost.

A pooled connection can die under a statement or while idle: an operator's
``pg_terminate_backend``, a proxy or firewall dropping an idle TCP connection, a failover,
PostgreSQL restarting. psycopg then raises an ``OperationalError`` (``AdminShutdown``,
SQLSTATE 57P01, or a client-side "server closed the connection unexpectedly"), the pool
discards that connection when it comes back, and the store turns the error into a
StoreError. Without a retry the caller sees that StoreError although the database is fine a
millisecond later. These decorators retry such an operation a few times with a short
backoff, after letting the pool test its idle connections (``AsyncConnectionPool.check``:
a restart kills all of them at once, not only the one that failed).

Only connection-level failures are retried: an ``OperationalError`` whose SQLSTATE is
missing (client side) or in class 08 (connection exception) or 57P01-57P03 (the server is
shutting down or restarting). A statement timeout (57014), a lock timeout, a constraint
violation or a pool that stayed empty for its whole timeout (``PoolTimeout``) is not.

Safety, operation by operation:

- Reads (``load``, ``list_runs``, ``cancel_request``) repeat.
- ``renew``, ``release`` and ``request_cancel`` are idempotent: doing one twice is doing it
  once (the second renew extends the same lease from a later time).
- ``append``: the first attempt may have committed before the connection died (the reply was
  lost, not the transaction). Its retry then finds the run advanced and raises
  SeqConflictError (or, if another worker took the run in between, LeaseLostError); the
  decorator reads the events stored at those seqs and, when they are this batch (the same
  bodies), reports success. Otherwise the error stands: nothing was written by this call.
- ``acquire``: a first attempt that committed leaves the run held by this same owner, and
  its retry answers RunBusyError naming it. Nothing is owned twice; the run is free again
  once that lease expires (one ``ttl_s``), like a worker that died after acquiring.
- ``truncate`` and ``prune`` are not retried: they are a person's one-off operations whose
  answer (what was removed) a repeat would change.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from types import CoroutineType
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from agentcore._observability._log import get_logger
from agentcore.contracts.errors import LeaseLostError, SeqConflictError, StoreError
from agentcore.events import Event, dump_event

from .._batch import Batch

__all__ = ["BACKOFF_S", "connection_lost", "retried", "retried_append"]

BACKOFF_S = (0.05, 0.25)
"""The pause before each retry: so at most ``len(BACKOFF_S) + 1`` attempts."""

_CONNECTION_STATES = ("08", "57P01", "57P02", "57P03")


class Reconnecting(Protocol):
    """What a retry needs from the store: one plain method, so that checking a store
    against it never evaluates the store's own retried methods."""

    async def check_connections(self) -> None:
        """Test the pool's idle connections, replacing the dead ones; never raises."""
        ...


class ReadingBack(Reconnecting, Protocol):
    """What an append's retry needs besides: reading back what the lost attempt stored.
    Its ``load`` may itself be :func:`retried` (over :class:`Reconnecting` only, so the two
    checks do not wait on each other)."""

    async def load(self, run_id: str, *, after: int = -1) -> list[Event]:
        """The store's ``load``."""
        ...


S = TypeVar("S", bound=Reconnecting)
A = TypeVar("A", bound=ReadingBack)
P = ParamSpec("P")
T = TypeVar("T")


def connection_lost(exc: BaseException | None) -> bool:
    """Whether ``exc`` (a StoreError's cause) says the connection died, not the statement."""
    import psycopg
    from psycopg_pool import PoolTimeout

    if not isinstance(exc, psycopg.OperationalError) or isinstance(exc, PoolTimeout):
        return False
    sqlstate = exc.sqlstate
    return sqlstate is None or sqlstate.startswith(_CONNECTION_STATES)


def retried(
    method: Callable[Concatenate[S, P], CoroutineType[Any, Any, T]],  # Any: coroutine send/throw
) -> Callable[Concatenate[S, P], CoroutineType[Any, Any, T]]:
    """Repeat a store operation that is safe to repeat after its connection was lost."""

    @functools.wraps(method)
    async def wrapper(store: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        for pause in (*BACKOFF_S, None):
            try:
                return await method(store, *args, **kwargs)
            except StoreError as exc:
                if pause is None or not _lost(exc):
                    raise
                await _before_retry(store, method.__name__, exc, pause)
        raise AssertionError("unreachable: the last attempt returns or raises")

    return wrapper


def retried_append(
    method: Callable[[A, Batch], CoroutineType[Any, Any, None]],  # Any: coroutine types
) -> Callable[[A, Batch], CoroutineType[Any, Any, None]]:
    """Repeat an append (the store's ``_append(batch)``) after a lost connection; a repeat
    that finds its own batch already stored (the first attempt committed, its reply was
    lost) is a success."""

    @functools.wraps(method)
    async def wrapper(store: A, batch: Batch, /) -> None:
        retrying = False
        for pause in (*BACKOFF_S, None):
            try:
                await method(store, batch)
            except (SeqConflictError, LeaseLostError):
                if not retrying:
                    raise
                if not await _already_stored(store, batch):
                    raise
                get_logger().bind(run_id=batch.run_id).info(
                    "store_append_committed_before_connection_lost", seq=batch.expected_seq
                )
                return
            except StoreError as exc:
                if pause is None or not _lost(exc):
                    raise
                await _before_retry(store, "append", exc, pause)
                retrying = True
            else:
                return
        raise AssertionError("unreachable: the last attempt returns or raises")

    return wrapper


def _lost(exc: StoreError) -> bool:
    return type(exc) is StoreError and connection_lost(exc.__cause__)


async def _before_retry(store: Reconnecting, what: str, exc: StoreError, pause: float) -> None:
    get_logger().warning("store_connection_lost", operation=what, retry_in_s=pause, error=str(exc))
    await store.check_connections()
    await asyncio.sleep(pause)


async def _already_stored(store: ReadingBack, batch: Batch) -> bool:
    """Whether the events stored at the batch's seqs are the batch itself."""
    events = batch.events
    try:
        stored = await store.load(batch.run_id, after=batch.expected_seq - 1)
    except StoreError:
        return False  # cannot tell: the conflict stands
    if len(stored) < len(events):
        return False
    return [dump_event(ev) for ev in stored[: len(events)]] == [dump_event(ev) for ev in events]
