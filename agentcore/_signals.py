"""Ending a worker process on SIGTERM the way a cancellation ends it: leases released.

A process manager (systemd, Kubernetes, Celery's warm shutdown, a deploy) stops a worker with
SIGTERM. Python's default is to die on the spot, so every run the worker held stays held
until its lease expires. :func:`run_until_signalled` turns the signal into a cancellation of
the main task instead: the agent records what it had, releases its leases (shielded, in
``Ownership.__aexit__``), and another worker acquires those runs at once.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

__all__ = ["run_until_signalled"]

T = TypeVar("T")


def run_until_signalled(
    main: Coroutine[Any, Any, T],  # Any: a coroutine's send and throw types
    *,
    signals: Sequence[signal.Signals] = (signal.SIGTERM,),
) -> T:
    """Run ``main`` like ``asyncio.run``, with ``signals`` cancelling it cleanly.

    The first of ``signals`` cancels the main task: ``finally`` blocks and ``async with``
    exits run, so an agent's in-flight :meth:`Agent.resume` / :meth:`Agent.advance` /
    :meth:`Agent.run` flushes what it recorded and releases the run's lease (a tool that
    is running is interrupted at its next ``await``, or left to its thread if it is sync;
    its call is then settled by the crash-safety rules when the run is resumed). Another
    signal after that ends the process at once (the default action). Only on the main
    thread, on Unix (``loop.add_signal_handler``).

    Example:
        >>> import sys
        >>> sys.exit(run_until_signalled(worker_main()))  # doctest: +SKIP

    Args:
        main: the worker's main coroutine.
        signals: the signals that stop it (default SIGTERM; SIGINT is already turned into
            a cancellation and ``KeyboardInterrupt`` by ``asyncio.run``).

    Returns:
        What ``main`` returned, when no signal came.

    Raises:
        SystemExit: with code ``128 + signal number`` (143 for SIGTERM, what a shell and a
            process manager expect of a process ended by SIGTERM) once ``main`` was
            cancelled by a signal and its clean-up has run.
    """
    received: list[signal.Signals] = []

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None  # we are running inside asyncio.run

        def stop(sig: signal.Signals) -> None:
            received.append(sig)
            for each in signals:  # a second signal gets the default action: die now
                loop.remove_signal_handler(each)
            task.cancel(f"received {sig.name}")

        for sig in signals:
            loop.add_signal_handler(sig, stop, sig)
        try:
            return await main
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    try:
        return asyncio.run(guarded())
    except asyncio.CancelledError:
        if not received:
            raise  # cancelled by something else: not ours to translate
        raise SystemExit(128 + received[0].value) from None
