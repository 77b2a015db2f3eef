"""A worker's session with one run: the lease, the state as loaded, and the driver.

A session loads a run (from its latest usable snapshot and the events after it, else from
the whole transcript), takes its lease, folds in what others appended meanwhile, records a
command's events and advances the run through a :class:`~._loop.Driver`, the one writer
of the transcript: every batch it flushes carries the lease, so a worker that lost the run
writes nothing, and reports the run as the store has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentcore.contracts.errors import (
    ConfigurationError,
    LeaseLostError,
    RunBusyError,
    RunNotFoundError,
    SeqConflictError,
    StoreError,
)

from .._observability import get_logger, log_events
from .._ownership import Ownership
from .._snapshot import UNUSABLE, restore
from .._state import PendingCall, RunResult, RunState
from .._status import CLOSED_STATUSES
from ..approvals import ApprovalRequest, Occasion, notify
from ..events import Event
from ..policy import Budget, Policy
from ..stores import SnapshotStore, TranscriptStore
from ..stores._codec import printable
from ..streaming import SINK
from . import _commands as commands
from ._compensation import Settle, compensate, compensation_needed
from ._loop import Driver, History, RunSetup, Shift

__all__ = ["NewRun", "Session"]


@dataclass(frozen=True, slots=True)
class NewRun:
    """What ``Agent.run`` and ``Agent.submit`` are asked to start (their arguments, not yet
    checked: :meth:`Session.start` checks them)."""

    task: str
    scope: Sequence[str] | None
    budget: Budget | None
    run_id: str | None
    metadata: Mapping[str, Any] | None  # Any: JSON values recorded as given
    tenant: str | None
    history: Sequence[Mapping[str, Any]] | None = None  # Any: chat messages as given
    conversation_budget: Budget | None = None


@dataclass(frozen=True, slots=True)
class Session:
    """What one agent needs to load, own and advance its runs.

    Attributes:
        setup: the agent's tools, contract, route and store, as the driver needs them.
        owner: this worker's name in the leases it takes.
        lease_s: how long a lease lasts without renewal.
        policy: the agent's policy (its ``on_pending`` is told when a call starts or keeps
            waiting for people).
        name: the agent's name (for its traces), if any.
    """

    setup: RunSetup
    owner: str
    lease_s: float
    policy: Policy
    name: str | None = None

    @property
    def store(self) -> TranscriptStore:
        """The agent's transcript store."""
        return self.setup.store

    def _driver(self, state: RunState, history: History, own: Ownership) -> Driver:
        """A driver for one advance of the run: the session (built once per agent) lends it
        the agent's setup, with what ``deps`` builds kept for this advance only."""
        return Driver(replace(self.setup, deps_built={}), state, history, own)

    @contextlib.asynccontextmanager
    async def owned(self, run_id: str) -> AsyncGenerator[Ownership]:
        """Hold the run's lease, renewed in the background, released on the way out.

        Raises:
            RunBusyError: another worker holds it.
            RunNotFoundError: no such run.
        """
        own = await Ownership.acquire(self.store, run_id, owner=self.owner, ttl_s=self.lease_s)
        async with own:
            yield own

    async def exists(self, run_id: str) -> bool:
        """Whether the store has the run (reads none of its events)."""
        try:
            await self.store.load(run_id, after=2**62)
        except RunNotFoundError:
            return False
        return True

    async def begin(self, run_id: str, events: Sequence[Event]) -> None:
        """Append a new run's first events (no one owns a run before it exists); a stream
        in progress sees them too. Every later event goes through a driver, under the
        run's lease.

        Raises:
            SeqConflictError: the run was started concurrently by someone else.
        """
        await self.store.append(run_id, events[0].seq, events)
        log_events(run_id, events)
        sink = SINK.get()
        if sink is not None:
            for ev in events:
                sink(ev)

    async def start(self, new: NewRun) -> tuple[RunState, History] | RunResult:
        """Check a new run's arguments and record its ``run_started`` (what the task quotes
        of a listed secret redacted); its state and history. The existing run's result when
        ``new.run_id`` is taken, or the run was started concurrently by someone else.

        Raises:
            ConfigurationError: an empty task, a bad scope (``None``: every tool), a
                parameter bound to the run missing from ``tenant``/``metadata``.
            LimitExceededError: an invalid ``run_id`` or ``tenant``.
        """
        tools, run_id = self.setup.tools, new.run_id
        in_scope = commands.scope_names(tools, new.scope)
        for name in in_scope:  # a parameter bound to the run must be there before it starts
            tools[name].bound_args(new.tenant, new.metadata or {})
        for quota in self.setup.quotas:  # so must a value a quota is kept per
            counts = quota.counts_requests or any(quota.counts(tools[n]) for n in in_scope)
            missing = [k for k in quota.bound_keys() if k not in (new.metadata or {})]
            if counts and missing:
                raise ConfigurationError(
                    f"quota {quota.name!r} is kept per {', '.join(map(repr, missing))}: start "
                    f"the run with metadata={{{missing[0]!r}: ...}} (the value bound to the run)"
                )
        output = self.setup.output
        started = commands.start(
            new.task,
            tools={n: tools[n].spec for n in in_scope},
            budget=new.budget or Budget(),
            run_id=uuid.uuid4().hex if run_id is None else run_id,
            metadata=new.metadata,
            tenant=new.tenant,
            policy=self.policy,
            contract=self.setup.contract,
            route=(self.setup.route, self.setup.plan_route),
            output_hash=None if output is None else output.hash,
            history=new.history,
            conversation_budget=new.conversation_budget,
        )
        if run_id is not None and await self.exists(run_id):
            return await self.current(run_id)
        if self.setup.redactor is not None:
            started = self.setup.redactor.event(started)
        state = RunState(started.run_id)
        state.apply(started)
        try:
            await self.begin(started.run_id, [started])
        except SeqConflictError:
            return await self.current(started.run_id)
        return state, History([started])

    async def current(self, run_id: str) -> RunResult:
        """The run's current result, as the store has it."""
        state, _ = await self.load(run_id)
        return state.result()

    async def load(self, run_id: str) -> tuple[RunState, History]:
        """The run's state and the events a driver needs: from its latest usable snapshot
        and the events after it, else from the whole transcript."""
        loaded = await self._from_snapshot(run_id)
        if loaded is not None:
            return loaded
        events = await self.store.load(run_id)
        state = RunState(run_id)
        for ev in events:
            state.apply(ev)
        return state, History(events)

    async def _from_snapshot(self, run_id: str) -> tuple[RunState, History] | None:
        """``None`` when the run has no snapshot this code can use; a snapshot that does
        not fit is logged and ignored (the next one replaces it), never trusted."""
        store = self.store
        if not isinstance(store, SnapshotStore):
            return None
        try:
            snaps = await store.load_snapshot(run_id)
        except StoreError as exc:  # e.g. a read-only store of an older schema
            get_logger().warning("snapshot_ignored", run_id=run_id, error=str(exc))
            return None
        if not snaps:
            return None
        last = snaps[-1]
        try:
            state, renderer = restore(run_id, snaps)
        except UNUSABLE as exc:
            get_logger().warning(
                "snapshot_ignored", run_id=run_id, seq=last.seq, error=printable(str(exc))[:300]
            )
            return None
        # The store hands back consecutive events from last.seq + 1, where the state ends.
        events = await store.load(run_id, after=last.seq)
        for ev in events:
            state.apply(ev)
        return state, History(events, base=last.seq + 1, renderer=renderer)

    async def catch_up(self, state: RunState, history: History) -> None:
        """Fold in what was appended since ``state`` was loaded (reads only the new
        events: a resume of a long run decodes its transcript once, not twice)."""
        for ev in await self.store.load(state.run_id, after=state.next_seq - 1):
            state.apply(ev)
            history.events.append(ev)

    async def execute(
        self,
        run_id: str,
        command: Callable[[RunState], Sequence[Event]],
        *,
        advance: bool,
        wait_s: float = 0.0,
        check: Callable[[RunState], Awaitable[None]] | None = None,
    ) -> RunResult:
        """Carry out ``command`` on the run: take its lease, load it, record the events
        ``command`` returns for its state (none: nothing to record) and, with ``advance``,
        advance it. (Not ``apply``: that is :meth:`RunState.apply`, which folds one event.)

        Args:
            wait_s: how long to keep trying for a lease another worker holds (a person's
                answer arriving while another person's is recorded waits its turn).
            check: awaited with the loaded state, under the lease, after ``command``
                accepted it and before anything is recorded; raises to refuse.

        Raises:
            RunBusyError: another worker holds the run (for longer than ``wait_s``).
            RunNotFoundError: no such run.
            Whatever ``command`` or ``check`` raises (nothing is recorded then).
        """

        async def run(own: Ownership) -> RunResult:
            state, history = await self.load(run_id)
            events = command(state)
            if check is not None:
                await check(state)
            return await self.drive(own, state, history, events, advance=advance)

        return await self.with_lease(run_id, run, wait_s=wait_s)

    async def with_lease(
        self,
        run_id: str,
        body: Callable[[Ownership], Awaitable[RunResult]],
        *,
        wait_s: float = 0.0,
    ) -> RunResult:
        """``body(own)`` while holding the run's lease, trying for up to ``wait_s`` while
        another worker holds it.

        Raises:
            RunBusyError: another worker holds the run (for longer than ``wait_s``).
            RunNotFoundError: no such run.
        """
        give_up, pause = time.monotonic() + wait_s, 0.02
        while True:
            try:
                own = await Ownership.acquire(
                    self.store, run_id, owner=self.owner, ttl_s=self.lease_s
                )
                break
            except RunBusyError:
                left = give_up - time.monotonic()
                if left <= 0:
                    raise
                # jitter (not crypto); the last try falls at give_up, not a pause before it
                await asyncio.sleep(min(pause * (0.5 + random.random()), left))
                pause = min(pause * 2, 0.5)
        async with own:
            return await body(own)

    async def drive(
        self,
        own: Ownership,
        state: RunState,
        history: History,
        first: Sequence[Event] = (),
        *,
        shift: Shift | None = None,
        advance: bool = True,
    ) -> RunResult:
        """Record ``first`` (a command's events) durably, then, with ``advance``, advance
        the run (for one ``shift`` when given) until it completes, stops or waits.

        A worker that finds another advanced or took over the run (nothing of its own after
        its last durable batch was written) reports the run as the store has it.
        """
        waiting = _waiting_call(state)
        driver = self._driver(state, history, own)
        try:
            with driver.obs.advance(first, self.name):  # one span per advance, when traced
                for ev in first:  # numbered as recorded: an event may bring another after
                    # it (a quota given back), which the command could not number for
                    at = state.next_seq
                    driver.record(ev if ev.seq == at else ev.model_copy(update={"seq": at}))
                await driver.flush()  # a person's decision is durable on its own
                if advance:
                    await driver.drive(shift)
                await self._compensate_by_policy(driver)
        except (SeqConflictError, LeaseLostError) as exc:
            driver.log.info("lost_the_run", error=str(exc))
            state, _ = await self.load(state.run_id)
            waiting = _waiting_call(state)  # what this worker recorded, if anything, is not news
        occasion = _news(waiting, _waiting_call(state))
        result = state.result()
        if occasion is not None and result.pending is not None:
            request = ApprovalRequest(state.run_id, occasion, result.pending)
            await notify(self.policy.on_pending, request)
        return result

    async def compensate(
        self, run_id: str, *, by: str, settle: Mapping[str, Settle], wait_s: float = 0.0
    ) -> RunResult:
        """Undo the run's committed effects (see :mod:`._compensation`), under its lease.

        Raises:
            RunBusyError: another worker holds the run.
            RunNotFoundError: no such run.
            RunError: the run is running or waiting for a person; ``settle`` names a call
                with nothing in doubt.
        """

        async def undo(own: Ownership) -> RunResult:
            state, history = await self.load(run_id)
            events = await self.store.load(run_id)  # every call, before any snapshot too
            driver = self._driver(state, history, own)
            try:
                await compensate(driver, events, by=by, settle=settle, policy=self.policy)
            except (SeqConflictError, LeaseLostError) as exc:
                driver.log.info("lost_the_run", error=str(exc))
                state, _ = await self.load(run_id)
            return state.result()

        return await self.with_lease(run_id, undo, wait_s=wait_s)

    async def cancel(self, run_id: str, *, by: str, reason: str | None) -> RunResult:
        """Cancel the run now under its lease; when another process advances it, record a
        request that process honours at its next safe point (see ``Agent.cancel``)."""
        state, _ = await self.load(run_id)
        if state.status in CLOSED_STATUSES:
            return state.result()

        def cancelled(state: RunState) -> list[Event]:
            return [] if state.status in CLOSED_STATUSES else commands.cancel(state, by, reason)

        with contextlib.suppress(RunBusyError):
            return await self.execute(run_id, cancelled, advance=False)
        await self.store.request_cancel(run_id, by=by, reason=reason)
        # The process advancing it may have let go since: then no one would read the request.
        with contextlib.suppress(RunBusyError):
            return await self.execute(run_id, cancelled, advance=False)
        return await self.current(run_id)

    async def expire_approvals(self, now: float, *, limit: int, advance: bool) -> list[RunResult]:
        """Apply ``Policy.approval_expiry`` to the waiting calls of this agent's runs whose
        window has passed (see ``Agent.expire_approvals``); the runs it changed."""
        changed = list[RunResult]()
        for row in await self.store.list_runs(status="awaiting_confirmation", limit=limit):
            recorded = list[Event]()

            def expire(state: RunState, into: list[Event] = recorded) -> list[Event]:
                if not set(state.scope) <= set(self.setup.tools):  # another agent's run
                    return []
                into.extend(commands.expire(state, now))
                return into

            with contextlib.suppress(RunBusyError):
                result = await self.execute(row.run_id, expire, advance=advance)
                if recorded:
                    changed.append(result)
        return changed

    async def _compensate_by_policy(self, driver: Driver) -> None:
        """``Policy.compensate_on``: undo at once what a run that just ended that way did."""
        state = driver.state
        if state.compensating or state.status.value not in state.policy.compensate_on:
            return
        events = await self.store.load(state.run_id)
        if compensation_needed(events, self.setup.tools):
            await compensate(
                driver, events, by="policy", settle={}, policy=self.policy, person=False
            )


_WaitingCall = tuple[PendingCall, int] | None
"""The call a run waits on and how many times its window was escalated (``None``: no
call waits)."""


def _waiting_call(state: RunState) -> _WaitingCall:
    """The call the run waits on and how many times its window was escalated."""
    pending = state.pending()
    if pending is None or state.call is None:
        return None
    expiry = state.call.expiry
    return pending, expiry.escalations if expiry is not None else 0


def _news(before: _WaitingCall, after: _WaitingCall) -> Occasion | None:
    """What changed about the waiting call that people should hear of, if anything."""
    if after is None:
        return None
    if before is None or before[0].call_id != after[0].call_id:
        return "waiting"
    if after[1] > before[1]:
        return "escalated"
    if len(after[0].approvals) > len(before[0].approvals):
        return "approved"
    return None
