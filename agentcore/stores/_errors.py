"""The errors every store raises in the same words: a busy run, a lost lease, and a
driver's exception translated into a StoreError."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

from agentcore.contracts.errors import LeaseLostError, RunBusyError, StoreError

from ._lease import Lease

__all__ = ["busy_error", "lost_error", "translated"]


def _when(at: float | None, now: float) -> str:
    if at is None:
        return "with no expiry recorded"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    left = at - now
    return f"until {stamp} ({left:.1f} s from now)" if left >= 0 else f"expired at {stamp}"


def busy_error(
    run_label: str, owner: str | None, epoch: int, expires_at: float | None, now: float
) -> RunBusyError:
    """RunBusyError naming the run's holder and when its lease expires."""
    if owner is None:
        return RunBusyError(
            f"Run {run_label} is being advanced by another worker right now (it holds the "
            "run's lock without a lease). Try again once it lets go."
        )
    return RunBusyError(
        f"Run {run_label} is held by {owner!r} (epoch {epoch}) {_when(expires_at, now)}. "
        "Try again after that, or once it releases the run."
    )


def lost_error(
    run_label: str,
    lease: Lease,
    owner: str | None,
    epoch: int | None,
    expires_at: float | None,
    now: float,
    *,
    what: str,
) -> LeaseLostError:
    """LeaseLostError naming who holds the run now."""
    if epoch is None:
        holder = "the run does not exist"
    elif owner is None:
        holder = f"nobody holds it now (epoch {epoch})"
    else:
        holder = f"it is held by {owner!r} (epoch {epoch}) {_when(expires_at, now)}"
    return LeaseLostError(
        f"Run {run_label}: the lease of {lease.owner!r} (epoch {lease.epoch}) was lost; "
        f"{holder}. {what}; stop advancing the run."
    )


class translated:  # noqa: N801  # used as a function: `with translated(...):`
    """Run the block; an exception of ``errors`` (the driver's) leaves it as the store's
    ``error(exc, what)``, with the driver's exception as its cause. ``what`` may be a
    function, for a message that says how far the block got. A class, not a generator: it
    wraps every store call, a few on each step."""

    __slots__ = ("_error", "_errors", "_what")

    def __init__(
        self,
        errors: tuple[type[Exception], ...],
        error: Callable[[Exception, str], StoreError],
        what: str | Callable[[], str],
    ) -> None:
        self._errors = errors
        self._error = error
        self._what = what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, self._errors):
            what = self._what
            raise self._error(exc, what() if callable(what) else what) from exc
