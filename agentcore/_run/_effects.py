"""Effects: the one at-most-once protocol of a tool call, a batch member and an undo.

Record the intent under a guard, run, record the outcome; a lost outcome is reconciled or
put to a person. What each kind of effect records and says lives with it
(``_tool_calls``, ``_compensation``); what they share lives here, once:

- where an effect takes its guard (:func:`guards_for`: every non-idempotent effect, on a
  store that keeps call guards) and how it holds it (:func:`run_guarded`: taken before the
  intent is written, let go when the effect returns, kept until a timed-out thread returns
  or, if the thread outlives the loop, until the process ends);
- whether another process may still be running an effect (:func:`free_now`,
  :func:`wait_for_guard`: a look, or a bounded wait) and the refusal of a person's rerun
  while it may (:func:`refuse_while_running`);
- asking ``reconcile(key)`` (:func:`ask_reconcile`), and whether a recorded call's outcome
  is unknown (:func:`outcome_lost`);
- running a sync effect in the tools' pool within a timeout, a timed-out one being an
  :class:`Unknown` outcome (:func:`run_effect`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from agentcore.contracts.errors import CallStillRunningError, StoreError, ToolOutcomeUnknownError

from .._threads import in_thread
from ..events import ToolFinished
from ..stores import CallGuardStore
from ._commands import OUTCOME_UNKNOWN

__all__ = [
    "HELD",
    "Failed",
    "GuardLook",
    "Held",
    "Running",
    "Unknown",
    "ask_reconcile",
    "free_now",
    "guards_for",
    "outcome_lost",
    "refuse_while_running",
    "release_when_done",
    "run_effect",
    "run_guarded",
    "wait_for_guard",
]

T = TypeVar("T")
Running = asyncio.Future[Any]  # Any: a timed-out effect's result, which nobody reads
"""A timed-out effect's thread, still running."""


@dataclass(frozen=True, slots=True)
class Unknown:
    """An effect's outcome is unknown: it may have happened, or still be happening (a sync
    effect's thread outlived its timeout). Never a failure: it is reconciled or put to a
    person."""

    why: str
    still_running: Running | None = None
    """The timed-out thread, when it may still be running (its guard is kept until it
    returns)."""


@dataclass(frozen=True, slots=True)
class Failed:
    """User code (an effect, a ``reconcile``) raised: its error, for a person."""

    error: str


@dataclass(frozen=True, slots=True)
class Elsewhere(Failed):
    """``reconcile`` says the outcome is settled somewhere else, not by a person's word on
    this call (a sub-agent's run that waits for a person, or another worker is advancing
    it): ``error`` says where. Anything that does not know this case reads it as a failure
    of ``reconcile``, which only a person settles."""


class Held:
    """Another process holds the effect's guard: the effect did not run here."""


HELD: Final = Held()


def guards_for(store: object, *, idempotent: bool) -> CallGuardStore | None:
    """Where an effect takes its guard: every non-idempotent one, so that a rerun
    (``reconcile`` finding nothing, or a person's) never starts while it may still be
    running; ``None`` for an idempotent effect or a store that keeps no guards."""
    if idempotent or not isinstance(store, CallGuardStore):
        return None
    return store


async def run_guarded(
    guards: CallGuardStore,
    run_id: str,
    key: str,
    body: Callable[[], Awaitable[tuple[T, Running | None]]],
    *,
    thread: bool,
) -> T | Held:
    """Run ``body`` (record the intent, run, record the outcome) under the guard of
    ``key``, or return :data:`HELD` without running it when another process holds it.

    ``body`` returns its value and, when its effect timed out in a thread, that thread:
    the guard is then let go only when it returns. ``thread``: a cancelled wait does not
    stop the effect (a sync function), so its guard stays held until this process ends.
    """
    guard = contextlib.AsyncExitStack()
    if not await guard.enter_async_context(guards.guard_call(run_id, key)):
        await guard.aclose()
        return HELD
    running: Running | None = None
    keep = False
    try:
        value, running = await body()
    except asyncio.CancelledError:
        keep = thread
        raise
    finally:
        if keep:
            _KEPT_GUARDS.append(guard.pop_all())
        elif running is not None and not running.done():
            release_when_done(guard.pop_all(), running)
        else:
            await guard.aclose()
    return value


_KEPT_GUARDS: list[contextlib.AsyncExitStack] = []
"""Guards of effects whose thread may still be running after their task was cancelled:
held (never let go, never collected) until this process ends and its OS or database
session frees them."""

_RELEASING: set[asyncio.Future[Any]] = set()  # Any: unused results; kept from collection


def release_when_done(guard: contextlib.AsyncExitStack, running: Running) -> None:
    """Let go of a timed-out effect's guard once its thread returns (a rerun waits until
    then); if the loop ends first, the guard is held until this process ends."""

    _KEPT_GUARDS.append(guard)  # until the thread returns; for good if the loop ends first

    async def release() -> None:
        with contextlib.suppress(Exception):  # the thread's own outcome: nobody reads it
            await asyncio.shield(running)
        _KEPT_GUARDS.remove(guard)
        await guard.aclose()

    task = asyncio.ensure_future(release())
    _RELEASING.add(task)
    task.add_done_callback(_RELEASING.discard)


@dataclass(frozen=True, slots=True)
class GuardLook:
    """What the guard of an effect said: ``free`` (no process can still be running it),
    ``held`` (one may), ``unreadable`` (it could not be read: taken as held)."""

    state: Literal["free", "held", "unreadable"]
    error: StoreError | None = None
    waited: bool = False


async def wait_for_guard(
    guards: CallGuardStore,
    run_id: str,
    key: str,
    *,
    deadline: float,
    on_wait: Callable[[], Awaitable[None]] | None = None,
    between: Callable[[], Awaitable[bool]] | None = None,
    on_unreadable: Callable[[StoreError], object] | None = None,
    poll_s: float,
) -> GuardLook | None:
    """Look at the guard of ``key`` until it is free or ``deadline`` (``time.time()``)
    passes: one look when it already has.

    ``on_wait`` runs once before the first wait; ``between`` after each wait, and a true
    answer (a cancel request honoured) ends the wait with ``None``; ``on_unreadable`` is
    told of each look that could not read the guard.
    """
    waited = False
    while True:
        try:
            running = await guards.call_running(run_id, key)
            error: StoreError | None = None
        except StoreError as exc:  # cannot tell now: assume it may run, ask again
            running, error = True, exc
            if on_unreadable is not None:
                on_unreadable(exc)
        if not running:
            return GuardLook("free", waited=waited)
        now = time.time()
        if now >= deadline:
            return GuardLook("held" if error is None else "unreadable", error, waited)
        if not waited:
            waited = True
            if on_wait is not None:
                await on_wait()
        await asyncio.sleep(min(poll_s, deadline - now))
        if between is not None and await between():
            return None


async def free_now(
    store: object,
    run_id: str,
    key: str,
    on_unreadable: Callable[[StoreError], object] | None = None,
) -> bool:
    """Whether no process holds the guard of ``key`` now, without waiting (a store that
    keeps no guards, or a guard that cannot be read: taken as held)."""
    guards = guards_for(store, idempotent=False)
    if guards is None:
        return False
    look = await wait_for_guard(
        guards, run_id, key, deadline=0.0, poll_s=0.0, on_unreadable=on_unreadable
    )
    return look is not None and look.state == "free"


def outcome_lost(finished: ToolFinished) -> bool:
    """Whether a call's ``tool_finished`` says its outcome is unknown (it may have
    happened): its ``outcome_unknown``, or, in a body that leaves the field out, its
    error's first words (``outcome unknown: ``)."""
    return finished.outcome_unknown or (
        not finished.ok and (finished.error or "").startswith(OUTCOME_UNKNOWN)
    )


async def refuse_while_running(
    store: object, run_id: str, key: str, *, guarded: bool, what: tuple[str, str], instead: str
) -> None:
    """Before a person's rerun of a lost effect is recorded: refuse it while the process
    that started the effect still holds its guard (a timed-out thread, a stalled
    worker), so that one rerun never runs beside it. ``what`` names the effect and its
    guard (``call run:3 (pay)``, ``the call's guard``); ``instead`` says how to settle it
    now without a rerun.

    Raises:
        CallStillRunningError: its guard is held, or cannot be read (nothing is recorded).
    """
    if not guarded or not isinstance(store, CallGuardStore):
        return  # whether it still runs cannot be told: the person decides
    try:
        running = await store.call_running(run_id, key)
    except StoreError as exc:
        raise CallStillRunningError(
            f"Run {run_id}: whether {what[0]} is still running cannot be told now "
            f"({what[1]} could not be read: {exc}); nothing was recorded. Try the rerun again."
        ) from exc
    if running:
        raise CallStillRunningError(
            f"Run {run_id}: {what[0]} may still be running: the process that started it "
            f"still holds {what[1]} (a timed-out thread or a stalled worker). Nothing was "
            "recorded. Rerun it once that process's call has returned or the process is "
            f"gone, or {instead}."
        )


async def ask_reconcile(
    reconcile: Callable[[str], Any], key: str
) -> Any:  # Any: the user's callable and its JSON answer
    """What ``reconcile(key)`` found (``None``: no record), :class:`Elsewhere` when it
    raised a ``ToolOutcomeUnknownError`` whose outcome is settled elsewhere, or
    :class:`Failed` when it raised anything else."""
    try:
        found = reconcile(key)
        if inspect.isawaitable(found):
            found = await found
    except ToolOutcomeUnknownError as exc:
        if exc.settled_elsewhere:
            return Elsewhere(str(exc))
        return Failed(f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # user code: its failure is a reason for a person
        return Failed(f"{type(exc).__name__}: {exc}")
    return found


async def run_effect(
    fn: Callable[..., Any], *args: object, within: float | None
) -> Any:  # Any: the effect's result, a Failed or an Unknown
    """Run user code that has an effect (async on the loop, sync in the tools' pool, each
    in the caller's context), waiting up to ``within`` seconds: its result, :class:`Failed`
    when it raised, :class:`Unknown` when the wait ran out (a sync one's thread is left
    running, an async one is cancelled: either may have acted)."""
    try:
        if inspect.iscoroutinefunction(fn):
            call: Awaitable[Any] = fn(*args)  # Any: its result
            value = await (call if within is None else asyncio.wait_for(call, within))
        else:
            context = contextvars.copy_context()  # the caller's: its ToolContext, its span
            running = asyncio.ensure_future(in_thread(functools.partial(context.run, fn, *args)))
            if within is not None:
                try:
                    finished, _ = await asyncio.wait((running,), timeout=within)
                except asyncio.CancelledError:
                    running.cancel()  # a call not yet started in its thread never starts
                    raise
                if not finished:
                    return Unknown(f"timed out after {within:g}s", running)
            value = await running
            if inspect.isawaitable(value):
                value = await value
    except TimeoutError:
        return Unknown(f"timed out after {within:g}s")
    except Exception as exc:  # user code: its failure stops for a person
        return Failed(f"{type(exc).__name__}: {exc}")
    return value
