"""Celery delivers runs to workers; the store keeps them correct (extra ``agentcore[celery]``).

The service (a web process) gives its agents a :class:`CeleryQueue`: ``submit``,
``confirm``, ``resume`` and ``resolve`` record what was asked and publish one message,
``agentcore.advance(agent_name, run_id)``. The worker's app calls :func:`install` with the
same agents, which registers two tasks:

- ``agentcore.advance``: one bounded shift on the run (``shift_steps`` steps and
  ``shift_seconds`` seconds, checked between steps) under its fenced lease. A run still
  ``running`` after its shift is published again, so no delivery stays unacknowledged for
  long (RabbitMQ closes a channel whose delivery stays unacked past its consumer timeout,
  30 minutes by default). ``acks_late`` with ``reject_on_worker_lost``: the message of a
  worker that dies mid-shift is delivered again.
- ``agentcore.sweep``: publishes running runs that nobody is advancing (:func:`sweep`),
  every ``sweep_every`` seconds when a ``celery beat`` runs.

Every shift in a worker process runs on one asyncio event loop (a thread started on first
use; Celery's pool threads hand their shifts to it), so one process advances many runs at
once and they share the store's connections and group commit. Run workers with the
threads pool::

    celery -A service worker --pool threads --concurrency 64

Each pool thread waits for one shift while the shifts interleave on the loop: the concurrency
is how many runs one process has in flight, not CPU parallelism (a step is I/O: a model
call, a tool, a store write). Run one process per core for CPU. The prefork pool also
works (one run at a time per child); gevent and eventlet do not (asyncio in a patched
process).

What a worker does with a message:

- the run is held by another worker (a duplicate, or a redelivery while the holder
  lives): acknowledge it and do nothing. The holder publishes the next shift; a holder that
  died leaves a lease that expires, and the sweep publishes the run again.
- the message is stale (it carries the run's ``seq`` when it was published, and the run
  has moved past it): do nothing. Every shift publishes the next one with the seq it
  reached, so of two messages for one run only one stays current: duplicates die out
  instead of each advancing the run and publishing again.
- no such run: log and drop.
- the lease was lost during the shift (the worker stalled and was taken over): the store
  refused every later write, and the new owner carries on.
- the run's tools differ from the worker's (a rolling deploy): ``Agent.advance`` stops it
  as ``needs_attention`` naming the difference, and nothing is published again.
- the store failed: the task is retried with backoff (``max_retries``), then left to the
  sweep.

Shutdown: a warm shutdown (SIGTERM) waits for the shifts in progress, which are bounded:
each ends between steps, releases its lease and publishes the next shift; a message
delivered meanwhile goes back to the queue unstarted; then the stores are closed. A worker
killed outright (SIGKILL, out of memory, a lost machine) leaves its leases to expire: its
unacknowledged messages come back at once and find the runs still held, and the sweep
publishes each run once its lease has expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import threading
import time
import warnings
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from celery import Celery, signals  # pyright: ignore[reportMissingTypeStubs]  # celery ships no stubs
from celery.exceptions import Reject  # pyright: ignore[reportMissingTypeStubs]  # celery ships no stubs

from agentcore import Agent, RunStatus
from agentcore.errors import (
    ConfigurationError,
    LeaseLostError,
    RunBusyError,
    RunNotFoundError,
    StoreError,
)
from agentcore.events import RunStarted
from agentcore.stores import RunSummary, TranscriptStore

__all__ = [
    "ADVANCE_TASK",
    "SWEEP_TASK",
    "CeleryQueue",
    "Orphan",
    "Registry",
    "find_orphans",
    "install",
    "sweep",
]

ADVANCE_TASK: Final = "agentcore.advance"
"""The task name a :class:`CeleryQueue` publishes: ``(agent_name, run_id, seq=None)``."""

SWEEP_TASK: Final = "agentcore.sweep"
"""The periodic task that publishes runs nobody advances."""

T = TypeVar("T")
log = logging.getLogger("agentcore.celery")


class CeleryQueue:
    """A :class:`~agentcore.queue.RunQueue` that publishes ``agentcore.advance`` by name.

    Publishing needs only the broker: no result backend, and the publishing process need
    not import the worker's tasks. ``enqueue`` blocks for one publish (about a millisecond
    on a local broker).

    Args:
        app: the Celery app whose broker carries the messages.
        queue: the Celery queue to publish to (default: the app's routing, ``celery``
            unless configured).
    """

    def __init__(self, app: Celery, *, queue: str | None = None) -> None:
        self.app = app
        self.queue = queue

    def enqueue(self, agent: str, run_id: str) -> None:
        """Publish one shift on ``run_id`` for the agent named ``agent``."""
        self.publish(agent, run_id)

    def publish(self, agent: str, run_id: str, *, seq: int | None = None) -> None:
        """Publish one shift; with ``seq`` (the run's next seq now), a worker that finds the
        run past it drops the message as stale."""
        args = (agent, run_id, seq)
        if self.queue is None:
            self.app.send_task(ADVANCE_TASK, args=args, ignore_result=True)  # pyright: ignore[reportUnknownMemberType]  # celery ships no type information
        else:
            self.app.send_task(ADVANCE_TASK, args=args, ignore_result=True, queue=self.queue)  # pyright: ignore[reportUnknownMemberType]  # celery ships no type information


@dataclass(frozen=True, slots=True)
class Orphan:
    """A running run that nobody is advancing, found by :func:`find_orphans`.

    Attributes:
        agent: the name of the agent it belongs to.
        run_id: the run.
        seq: its next seq (the message carries it, so a duplicate dies out).
        why: ``"lease expired"`` (its holder stopped renewing: died or stalled) or
            ``"idle"`` (nobody holds it and no event came for ``idle_after`` seconds).
    """

    agent: str
    run_id: str
    seq: int
    why: str


def _orphaned(run: RunSummary, now: float, idle_after: float) -> str | None:
    """Why nobody advances this run, or ``None`` if someone may be."""
    if run.status != RunStatus.RUNNING.value:
        return None
    if run.owner is not None and run.lease_expires_at is not None:
        return "lease expired" if run.lease_expires_at < now else None  # else: held
    return "idle" if now - run.updated_at >= idle_after else None


async def find_orphans(
    agents: Iterable[Agent], *, idle_after: float = 120.0, limit: int = 10_000, page: int = 500
) -> list[Orphan]:
    """Running runs that nobody advances: their holder's lease expired (the worker died
    or stalled), or nobody holds them and no event came for ``idle_after`` seconds (the
    run was recorded and never published, or its message was lost).

    A run held under a live lease is left alone, however long its step. A released run
    is normally between shifts with its next message queued: ``idle_after`` should exceed
    the longest time a message waits in the queue, or the sweep publishes a duplicate,
    which costs one delivery that finds the run busy or stale, never a second step.
    Expiry is judged by this machine's clock against the store's (PostgreSQL: the
    database's); a run published early is found busy and swept again later.

    Agents that share a store (same URL and schema) split its runs by scope: a run
    belongs to the one agent that has every tool in its ``run_started.scope``; a run that
    fits none or several is logged and left alone.

    Args:
        agents: the agents whose stores to look at (each needs a ``name``).
        idle_after: seconds without an event after which a running run that nobody holds
            counts as lost.
        limit: at most this many orphans are returned (the rest are found by the next
            sweep, once these have been advanced).
        page: running runs read per store query: every running run is read, a page at a
            time (keyset pages, so memory stays flat however many runs are running).

    Raises:
        ConfigurationError: an agent has no name, or ``page`` or ``limit`` is out of range.
        StoreError: a store failed.
    """
    if page < 1 or limit < 0:
        raise ConfigurationError(f"find_orphans: page >= 1 and limit >= 0, got {page} and {limit}.")
    by_store: dict[str, list[Agent]] = {}
    stores: dict[str, TranscriptStore] = {}
    for agent in agents:
        if not agent.name:
            raise ConfigurationError("find_orphans: every agent needs a name= to be queued by.")
        store = agent.store
        key = f"{store.url}#{getattr(store, 'schema', None) or ''}"  # PostgreSQL: a schema
        by_store.setdefault(key, []).append(agent)
        stores.setdefault(key, store)
    found: list[Orphan] = []
    for url, group in by_store.items():
        store = stores[url]
        now = time.time()
        after: tuple[float, str] | None = None
        while len(found) < limit:
            runs = await store.list_runs(status=RunStatus.RUNNING.value, limit=page, after=after)
            for run in runs:
                why = _orphaned(run, now, idle_after)
                if why is None:
                    continue
                # The agent to publish it for (``run.owner`` is the worker that held it).
                carrier = group[0] if len(group) == 1 else await _agent_of(store, run.run_id, group)
                if carrier is not None and carrier.name:
                    found.append(Orphan(carrier.name, run.run_id, run.events, why))
            if len(runs) < page:
                break
            after = (runs[-1].updated_at, runs[-1].run_id)
    return found[:limit]


async def _agent_of(store: TranscriptStore, run_id: str, agents: Sequence[Agent]) -> Agent | None:
    """The one agent of ``agents`` that can carry ``run_id`` on (:meth:`Agent.owns`: it has
    the run's scope), else ``None`` (none or several: logged, the run is left alone)."""
    events = await store.load(run_id)
    first = events[0] if events else None
    if not isinstance(first, RunStarted):
        return None
    fits = [a for a in agents if a.owns(first)]
    if len(fits) != 1:
        log.warning(
            "agentcore.sweep run=%s: %s of the agents sharing its store have its scope %s; "
            "left alone",
            run_id,
            "none" if not fits else f"{len(fits)} ({', '.join(str(a.name) for a in fits)})",
            first.scope,
        )
        return None
    return fits[0]


async def sweep(
    agents: Iterable[Agent],
    queue: CeleryQueue,
    *,
    idle_after: float = 120.0,
    limit: int = 10_000,
) -> list[Orphan]:
    """Publish one shift on each run :func:`find_orphans` finds; return them.

    The plain function behind the ``agentcore.sweep`` task (which publishes from a pool
    thread rather than the event loop). Running it twice at once, or while a run's message
    is still queued, costs a delivery, never a duplicate step.
    """
    orphans = await find_orphans(agents, idle_after=idle_after, limit=limit)
    for orphan in orphans:
        queue.publish(orphan.agent, orphan.run_id, seq=orphan.seq)
    return orphans


class _Loop:
    """One asyncio event loop per process, run by a daemon thread started on first use
    (again in a forked child: a loop thread does not survive a fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="agentcore-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:  # Any: a coroutine's send/throw types
        """Run ``coro`` on the loop and wait for it (from any thread but the loop's)."""
        return asyncio.run_coroutine_threadsafe(coro, self.get()).result()

    def stop(self, last: Coroutine[Any, Any, None]) -> None:  # Any: as in run()
        """Run ``last`` (closing stores), then stop the loop and its thread."""
        with self._lock:
            loop, thread, self._loop = self._loop, self._thread, None
        if loop is None or thread is None or self._pid != os.getpid():
            last.close()
            return
        try:
            asyncio.run_coroutine_threadsafe(last, loop).result(timeout=30)
        except Exception:  # a store that fails to close must not keep the worker from exiting
            log.exception("agentcore: closing the stores failed")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()


_DEPRECATED = (
    "{} is deprecated: use {} (a worker's shift on a run; 'turn' is kept for a user's turn "
    "in a conversation)."
)


def _shift_bounds(
    shift_steps: int, shift_seconds: float, turn_steps: int | None, turn_seconds: float | None
) -> tuple[int, float]:
    """A shift's bounds, given by their names or by the deprecated ``turn_*`` ones (which
    win when given, with a ``DeprecationWarning`` pointing at the caller's caller)."""
    if turn_steps is not None:
        warnings.warn(_DEPRECATED.format("turn_steps=", "shift_steps="), DeprecationWarning, 3)
        shift_steps = turn_steps
    if turn_seconds is not None:
        warnings.warn(_DEPRECATED.format("turn_seconds=", "shift_seconds="), DeprecationWarning, 3)
        shift_seconds = turn_seconds
    return shift_steps, shift_seconds


class Registry:
    """The agents a worker process advances, by name, and its event loop.

    Made by :func:`install`; ``register`` adds an agent later.

    Args:
        app: the worker's Celery app (re-publishing uses it when an agent has no
            :class:`CeleryQueue` of its own).
        shift_steps: one shift's bound in steps (``Agent.advance``'s ``max_steps``): a
            shift is how long a worker advances a run before publishing it again.
        shift_seconds: one shift's bound in seconds (``Agent.advance``'s ``max_seconds``).
        idle_after: see :func:`find_orphans`.
        turn_steps: deprecated name of ``shift_steps`` (a ``DeprecationWarning``).
        turn_seconds: deprecated name of ``shift_seconds`` (a ``DeprecationWarning``).
    """

    def __init__(
        self,
        app: Celery,
        *,
        shift_steps: int = 5,
        shift_seconds: float = 30.0,
        idle_after: float = 120.0,
        turn_steps: int | None = None,
        turn_seconds: float | None = None,
    ) -> None:
        shift_steps, shift_seconds = _shift_bounds(
            shift_steps, shift_seconds, turn_steps, turn_seconds
        )
        if shift_steps < 1 or shift_seconds <= 0:
            raise ConfigurationError(
                f"A shift needs shift_steps >= 1 and shift_seconds > 0, got {shift_steps!r} and "
                f"{shift_seconds!r}."
            )
        self.app = app
        self.shift_steps = shift_steps
        self.shift_seconds = shift_seconds
        self.idle_after = idle_after
        self.queue = CeleryQueue(app)
        self._agents: dict[str, Agent] = {}
        self._loop = _Loop()
        self.closing = False
        """Set when the worker begins a warm shutdown: messages still delivered then go
        back to the queue instead of starting a shift."""

    def register(self, agent: Agent) -> Agent:
        """Advance ``agent``'s runs in this worker (it needs a ``name``, unique here)."""
        if not agent.name:
            raise ConfigurationError("A worker's agent needs a name= that messages carry.")
        if agent.name in self._agents and self._agents[agent.name] is not agent:
            raise ConfigurationError(f"Two agents are registered as {agent.name!r}.")
        self._agents[agent.name] = agent
        return agent

    @property
    def turn_steps(self) -> int:
        """Deprecated: :attr:`shift_steps`."""
        warnings.warn(_DEPRECATED.format("turn_steps", "shift_steps"), DeprecationWarning, 2)
        return self.shift_steps

    @property
    def turn_seconds(self) -> float:
        """Deprecated: :attr:`shift_seconds`."""
        warnings.warn(_DEPRECATED.format("turn_seconds", "shift_seconds"), DeprecationWarning, 2)
        return self.shift_seconds

    @property
    def agents(self) -> dict[str, Agent]:
        """The registered agents by name."""
        return dict(self._agents)

    def _queue_of(self, agent: Agent) -> CeleryQueue:
        return agent.queue if isinstance(agent.queue, CeleryQueue) else self.queue

    def advance(self, name: str, run_id: str, seq: int | None = None) -> str:
        """Carry out one ``agentcore.advance`` message (from a pool thread): one shift on
        the process's loop, then publish the next one if the run is still running.

        Returns:
            What happened: the run's status after the shift, or ``busy``, ``stale``,
            ``not_found``, ``lease_lost``, ``unknown_agent``.

        Raises:
            StoreError: the store failed (the task retries).
        """
        agent = self._agents.get(name)
        if agent is None:
            log.error(
                "agentcore.advance run=%s: no agent named %r in this worker (it has: %s); "
                "dropped, a worker that has it will sweep the run",
                run_id,
                name,
                ", ".join(sorted(self._agents)) or "none",
            )
            return "unknown_agent"
        outcome, next_seq = self._loop.run(self._shift(agent, run_id, seq))
        if outcome == RunStatus.RUNNING.value:
            self._queue_of(agent).publish(name, run_id, seq=next_seq)
        return outcome

    async def _shift(self, agent: Agent, run_id: str, seq: int | None) -> tuple[str, int | None]:
        store = agent.store
        try:
            if seq is not None and await store.load(run_id, after=seq - 1):
                return "stale", None
            result = await agent.advance(
                run_id, max_steps=self.shift_steps, max_seconds=self.shift_seconds
            )
        except RunBusyError as exc:
            log.info("agentcore.advance run=%s: busy: %s", run_id, exc)
            return "busy", None
        except RunNotFoundError:
            log.warning("agentcore.advance run=%s: no such run; dropped", run_id)
            return "not_found", None
        except LeaseLostError:
            return "lease_lost", None
        if result.status is not RunStatus.RUNNING:
            return result.status.value, None
        # The seq the shift reached, for the next message (read after the lease was released:
        # a later one only makes that message stale sooner).
        tail = await store.load(run_id, after=(seq or 0) - 1)
        return result.status.value, (tail[-1].seq + 1 if tail else seq)

    def sweep(self) -> list[Orphan]:
        """Carry out one ``agentcore.sweep`` (from a pool thread): find the orphans on the
        loop, publish them from here."""
        orphans = self._loop.run(find_orphans(self._agents.values(), idle_after=self.idle_after))
        for orphan in orphans:
            self._queue_of(self._agents[orphan.agent]).publish(
                orphan.agent, orphan.run_id, seq=orphan.seq
            )
            log.info("agentcore.sweep run=%s published (%s)", orphan.run_id, orphan.why)
        return orphans

    def close(self) -> None:
        """Close the agents' stores on the loop and stop it (at worker shutdown)."""

        async def close_stores() -> None:
            seen: set[int] = set()
            for agent in self._agents.values():
                store = agent.store
                if id(store) not in seen:
                    seen.add(id(store))
                    with contextlib.suppress(StoreError):
                        await store.close()

        self._loop.stop(close_stores())


def install(
    app: Celery,
    agents: Iterable[Agent] = (),
    *,
    shift_steps: int = 5,
    shift_seconds: float = 30.0,
    sweep_every: float | None = 60.0,
    idle_after: float = 120.0,
    max_retries: int = 5,
    tune_gc: bool = False,
    turn_steps: int | None = None,
    turn_seconds: float | None = None,
) -> Registry:
    """Register ``agents`` and the ``agentcore.advance`` and ``agentcore.sweep`` tasks in
    ``app`` (the worker's app; the web process needs only a :class:`CeleryQueue`).

    Args:
        app: the Celery app.
        agents: the agents this worker advances, each with a ``name``.
        shift_steps: one shift's bound: at most this many steps (checked between steps)
            before the run is published again.
        shift_seconds: the same bound in seconds. Keep a shift well under the broker's
            consumer timeout and the time a warm shutdown may take.
        sweep_every: seconds between sweeps in the app's beat schedule (``celery -A
            service beat``, one per deployment; ``None``: no schedule).
        idle_after: see :func:`find_orphans`.
        max_retries: retries (with backoff) of a shift that failed with a store error.
        tune_gc: call :func:`agentcore.tune_gc` when the worker starts (Celery's
            ``worker_init``, in the worker's main process after the app is loaded: before
            the prefork pool forks, so its children inherit it; the same process with
            ``--pool threads``). A worker advancing hundreds of runs spends much of its CPU
            in the garbage collector otherwise (docs/scale.md). Process-wide: leave it off
            where the worker process runs other work that relies on the defaults.
        turn_steps: deprecated name of ``shift_steps`` (a ``DeprecationWarning``).
        turn_seconds: deprecated name of ``shift_seconds`` (a ``DeprecationWarning``).

    Returns:
        The worker's :class:`Registry`.
    """
    shift_steps, shift_seconds = _shift_bounds(shift_steps, shift_seconds, turn_steps, turn_seconds)
    registry = Registry(
        app, shift_steps=shift_steps, shift_seconds=shift_seconds, idle_after=idle_after
    )
    for agent in agents:
        registry.register(agent)

    def advance(
        self: Any,  # Any: the bound celery Task, which ships no type information
        agent: str,
        run_id: str,
        seq: int | None = None,
    ) -> str:
        if registry.closing:  # shutting down: leave the shift to another worker
            log.info("agentcore.advance run=%s agent=%s outcome=requeued", run_id, agent)
            raise Reject("the worker is shutting down", requeue=True)
        outcome = registry.advance(agent, run_id, seq)
        info: dict[str, object] = getattr(self.request, "delivery_info", None) or {}
        log.info(
            "agentcore.advance run=%s agent=%s outcome=%s redelivered=%s",
            run_id,
            agent,
            outcome,
            bool(info.get("redelivered")),
        )
        return outcome

    def sweep_task() -> int:
        return len(registry.sweep())

    task = app.task  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]  # celery ships no type information
    task(
        name=ADVANCE_TASK,
        bind=True,
        acks_late=True,
        reject_on_worker_lost=True,
        autoretry_for=(StoreError,),
        retry_backoff=True,
        retry_backoff_max=60,
        max_retries=max_retries,
    )(advance)
    task(name=SWEEP_TASK, ignore_result=True)(sweep_task)
    if sweep_every is not None:
        schedule: dict[str, object] = {"task": SWEEP_TASK, "schedule": sweep_every}
        app.conf.beat_schedule = {**(app.conf.beat_schedule or {}), SWEEP_TASK: schedule}  # pyright: ignore[reportUnknownMemberType]  # celery ships no type information

    def on_shutting_down(**_: object) -> None:
        registry.closing = True

    def on_shutdown(**_: object) -> None:
        registry.close()

    if tune_gc:
        tuned: list[int] = []  # the young generation's threshold before

        def on_worker_init(**_: object) -> None:
            from agentcore import tune_gc as tune

            tuned.append(tune()[0])

        def on_worker_ready(**_: object) -> None:  # logging is set up by now
            log.info(
                "agentcore.tune_gc threshold=%d before=%s frozen=%d",
                gc.get_threshold()[0],
                tuned[0] if tuned else "?",
                gc.get_freeze_count(),
            )

        signals.worker_init.connect(on_worker_init, weak=False)  # pyright: ignore[reportUnknownMemberType]  # celery ships no type information
        signals.worker_ready.connect(on_worker_ready, weak=False)  # pyright: ignore[reportUnknownMemberType]  # celery ships no type information
    signals.worker_shutting_down.connect(on_shutting_down, weak=False)  # pyright: ignore[reportUnknownMemberType]  # celery ships no type information
    signals.worker_shutdown.connect(on_shutdown, weak=False)  # pyright: ignore[reportUnknownMemberType]  # celery ships no type information
    return registry
