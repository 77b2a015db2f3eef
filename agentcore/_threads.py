"""The threads sync tools run in: one pool per process, and how a call is handed over.

A sync tool runs in a worker thread of agentcore's own pool, kept warm across runs and event
loops; the loop waits a few microseconds for a quick call's outcome and otherwise awaits a
future the worker settles, so a blocking tool never holds up the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["in_thread"]


_AT_THREADS_EXIT: Callable[[Callable[[], None]], None] | None = getattr(
    threading, "_register_atexit", None
)
"""``threading._register_atexit``, what ``concurrent.futures`` uses: a function it registers
runs at exit before the interpreter joins the non-daemon threads."""


class _Pool:
    """The threads sync tools run in: one pool per process, started on first use and kept
    warm across runs and event loops (``asyncio.to_thread`` goes through the loop's default
    executor, which ``asyncio.run`` shuts down at the end of every run). Leaner than a
    ``ThreadPoolExecutor`` (no per-call future, no bookkeeping between the call and the
    worker's next wait), which is a few microseconds and, more, one wake-up less of the
    loop's thread per call. A thread is started when no worker is idle, up to
    ``min(32, cores + 4)`` (the default executor's size); beyond that calls queue. As with
    the executor, the interpreter waits at exit for calls still running (a sync tool's
    thread is left to finish), and idle workers are told to stop then.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Handoff | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0
        self._max = min(32, (os.cpu_count() or 1) + 4)
        if _AT_THREADS_EXIT is not None:
            _AT_THREADS_EXIT(self._stop)

    def submit(self, handoff: _Handoff) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1  # claimed: that worker takes this call
            elif self._threads < self._max:
                self._threads += 1
                name = f"agentcore-tool_{self._threads}"
                daemon = _AT_THREADS_EXIT is None  # else the interpreter could not exit
                threading.Thread(target=self._work, name=name, daemon=daemon).start()
            # else: every thread is busy; the call waits for the first one free
        self._queue.put(handoff)

    def _work(self) -> None:
        while (handoff := self._queue.get()) is not None:
            handoff.run()
            with self._lock:
                self._idle += 1  # before the hand-back: nothing of ours runs after it
            handoff.hand_back()  # then straight to the queue, where the GIL is let go

    def _stop(self) -> None:
        """At exit: each worker stops once it has finished what it runs."""
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._queue.put(None)


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _tool_pool() -> _Pool:
    global _pool  # noqa: PLW0603  # one lazily created pool per process
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = _Pool()
    return _pool


def _forget_pool() -> None:
    """In a forked child (a Celery prefork worker): the parent's threads do not exist here,
    so the child starts a pool of its own on first use."""
    global _pool, _pool_lock  # see _tool_pool
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_pool)


_QUICK_WAIT_S = 20e-6
"""How long the loop waits for a sync tool's worker before it goes on with other work: a
quick tool's outcome is taken straight from the worker (no wake-up of the loop through its
self-pipe, no future, no task switch). The loop is blocked at most this long per call, plus
the OS's timer slack (50 us on Linux): never for the tool's own duration."""


class _Handoff:
    """One sync call handed to the pool, and the way its outcome comes back."""

    __slots__ = ("call", "cancelled", "done", "exc", "finished", "future", "guard", "loop", "value")

    def __init__(self, call: Callable[[], Any]) -> None:  # Any: the result
        self.call = call
        self.cancelled = False  # the caller stopped waiting before a worker took the call
        self.guard = threading.Lock()
        self.finished = threading.Lock()  # released by the worker for a loop still waiting
        self.finished.acquire()
        self.done = False  # under guard: the outcome is in value/exc
        self.loop: asyncio.AbstractEventLoop | None = None  # under guard: the loop stopped
        self.future: asyncio.Future[None] | None = None  # the loop awaits this instead
        self.value: Any = None  # Any: the result
        self.exc: BaseException | None = None

    def run(self) -> None:
        """In a worker: make the call, unless the caller stopped waiting before it started."""
        with self.guard:
            if self.cancelled:
                return  # never started: nobody waits for it
        try:
            self.value = self.call()
        except BaseException as exc:  # handed to the awaiting task, as run_in_executor does
            self.exc = exc
        self.call = _NOTHING  # drop the call's arguments with the call

    def hand_back(self) -> None:
        """In a worker: give the outcome to the loop, directly if it is still waiting."""
        with self.guard:
            self.done = True
            loop = self.loop
        if loop is None:
            self.finished.release()  # the loop is waiting, or reads the outcome under guard
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits the call
            loop.call_soon_threadsafe(_settle, self)

    def outcome(self) -> Any:  # Any: the result
        exc = self.exc
        if exc is None:
            return self.value
        if isinstance(exc, StopIteration):  # a coroutine or future refuses it (PEP 479)
            raise RuntimeError(f"the tool raised StopIteration: {exc!r}") from exc  # noqa: TRY004  # what the caller saw before: not a type error of ours
        raise exc


async def in_thread(call: Callable[[], Any]) -> Any:  # Any: the result
    """Run ``call`` in the tool pool and return its outcome.

    The loop first waits up to :data:`_QUICK_WAIT_S` for the worker (most sync tools
    finish in that time, and the outcome is read directly); past that it stops waiting and
    awaits a future the worker settles through ``call_soon_threadsafe``, so a blocking tool
    never holds up the loop. Cancelling the wait cancels a call not yet started.
    """
    handoff = _Handoff(call)
    _tool_pool().submit(handoff)
    if not handoff.finished.acquire(timeout=_QUICK_WAIT_S):
        loop = asyncio.get_running_loop()
        with handoff.guard:
            if not handoff.done:
                handoff.future = loop.create_future()
                handoff.loop = loop
        if (future := handoff.future) is not None:
            future.add_done_callback(functools.partial(_cancel_unstarted, handoff))
            await future
    return handoff.outcome()


def _settle(handoff: _Handoff) -> None:
    future = handoff.future
    if future is None or future.done():  # cancelled: a timeout or a cancelled run left it
        return
    future.set_result(None)  # the awaiting coroutine reads the outcome from the handoff


def _cancel_unstarted(handoff: _Handoff, future: asyncio.Future[None]) -> None:
    if future.cancelled():
        with handoff.guard:
            handoff.cancelled = True  # a no-op once the call runs: a thread cannot be stopped


def _nothing() -> None:
    return None


_NOTHING: Callable[[], Any] = _nothing  # Any: a call's result
