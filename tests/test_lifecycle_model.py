"""A stateful, model-based test of the run lifecycle over a real store.

Hypothesis drives runs of one agent through its public API: start a run whose scripted model
proposes actions drawn by hypothesis (a plan, a read, non-idempotent writes with and without
``reconcile``, a destructive tool, a tool two people approve, a tool that times out, a batch
of reads, a mail with an attacker's account and a transfer to it, a sub-agent that charges,
pays out, wipes or reads the mail, the typed ``finish``), resume it from another agent object
on the same store (another worker), confirm or deny it as people whose names are spelt
several ways, resolve lost calls (rerun, result, fail), compensate (settling undos in doubt),
cancel, expire approvals (the clock jumps past ``approval_ttl``) and let timed-out threads
finish; any operation may die at one of agentcore's crash points in the driver (a
:class:`SimulatedKill` raised where ``AGENTCORE_CRASH_AT`` would SIGKILL), and the dead worker
is replaced by a fresh one, its threads dying with it. The tools write to an outside ledger
(``_lifecycle_support.Ledger``) that agentcore never writes. Rules pick runs by their last
status (confirm a waiting run, resolve one in ``needs_attention``, compensate a stopped one).

After every rule the invariants hold:

- at most one effect per idempotency key (an undo's included), plus one per person's
  ``rerun`` of that call (the ``resolution`` events of the transcript) or ``not_done`` of
  that undo; never two executions of one key at once;
- no destructive or two-person effect without its approvals, counting people by identity
  (NFKC, whitespace stripped, casefolded); no undo of a two-person call at one person's word;
- no transfer to an account only untrusted text named (read by the run or quoted by its
  sub-agent) without a person;
- a completed run's typed output is the answer it finished with, and an agent with another
  output type does not read it;
- every transcript (the sub-agents' too) passes ``check_transcript`` and its store's
  ``verify_chain``;
- the status read back agrees with the store's listing and the transcript's last
  ``run_finished``; a completed run never moves again, a cancelled one only through its
  compensation (stopped for a person, then cancelled again).

SQLite always; PostgreSQL too when its test database answers. Under ``CI=true`` the
examples are derandomized and capped (about two minutes for both stores on two cores);
``AGENTCORE_MODEL_EXAMPLES=<n>`` runs ``n`` random examples of 30 steps (longer runs,
locally); ``AGENTCORE_MODEL_STATS=<path>`` writes what the examples did (kills, refusals,
statuses, effects per key) as JSON.

Violations of rules that are open defects go in :data:`OPEN_DEFECTS`: the model leaves them
unchecked (it would stop at the first one every time), and each gets an explicit regression
test below, marked ``xfail(strict=True)`` until its fix lands. The regressions below are the
examples the model found, replayed step by step.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from _lifecycle_support import (
    CHILD_STEPS,
    CRASH_POINTS,
    KILLING_OS,
    MAILED_ACCOUNT,
    PEOPLE,
    STEPS,
    TWO_PEOPLE,
    Clock,
    Invoice,
    Ledger,
    Process,
    Receipt,
    SimulatedKill,
    Toolset,
    child_scripted,
    identity,
    scripted,
    task_for,
)
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from stores.conftest import postgres_dsn

import agentcore._faults as faults
from agentcore import Agent, Budget, Policy, RunResult, RunStatus, check_transcript
from agentcore.errors import AgentcoreError, OutputTypeChangedError
from agentcore.events import (
    Approval,
    CompensationFinished,
    CompensationStarted,
    Confirmation,
    Event,
    Resolution,
    RunFinished,
    ToolFinished,
    ToolStarted,
)
from agentcore.stores import TranscriptStore

__all__ = ["postgres_dsn"]  # the store tests' fixture: skips (fails under CI=true) without it

T = TypeVar("T")

SEEN: Counter[str] = Counter()
"""What the examples did (kills, refusals, statuses, effects per key): written as JSON to
``$AGENTCORE_MODEL_STATS`` when that is set, for a report."""


def event(what: str) -> None:
    """Count ``what`` in :data:`SEEN`."""
    SEEN[what] += 1


OPEN_DEFECTS: dict[str, str] = {}
"""Invariants the model does not check yet, by name, with the open defect that breaks them."""

CLOSED = (RunStatus.COMPLETED, RunStatus.CANCELLED)
OPEN = frozenset(RunStatus) - {RunStatus.COMPLETED, RunStatus.CANCELLED}
WAITING = frozenset({RunStatus.AWAITING_CONFIRMATION})
ATTENTION = frozenset({RunStatus.NEEDS_ATTENTION})
STOPPED = frozenset(RunStatus) - {
    RunStatus.RUNNING,
    RunStatus.AWAITING_CONFIRMATION,
    RunStatus.COMPLETED,  # undone only under Policy(compensate_completed=...): a test below
}
POLICY = Policy(
    plan_before_writes=False,
    approvals={"tool:payout": TWO_PEOPLE},
    max_batch=3,
    approval_ttl=600.0,
    approval_expiry="deny",
)
BUDGET = Budget(max_steps=12)
DELEGATIONS = tuple(f"delegate_{step}" for step in CHILD_STEPS)
MAX_RUNS = 4  # per example: the other rules get the steps
NEEDS = {"wipe": 1, "payout": TWO_PEOPLE}  # people a call of the tool needs


def _examples() -> tuple[int, int]:
    """(max_examples, stateful_step_count) for this environment."""
    wanted = os.environ.get("AGENTCORE_MODEL_EXAMPLES")
    if wanted:
        return int(wanted), 30
    if os.environ.get("CI", "").lower() == "true":
        return 80, 25  # about 2 minutes for both stores on two cores
    return 25, 20


class LifecycleModel(RuleBasedStateMachine):
    """Runs of one agent over one store, driven by rules, checked after each."""

    pg_dsn: ClassVar[str | None] = None
    """PostgreSQL's DSN: every worker's store is a PostgresStore on one fresh schema."""
    checked: ClassVar[frozenset[str]] = frozenset()
    """Entries of :data:`OPEN_DEFECTS` to check all the same (the regression tests)."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.ledger = Ledger()
        self.toolset = Toolset(self.ledger)
        self.scripts: dict[str, list[str]] = {}  # by run id, in the order they started
        self.status: dict[str, RunStatus] = {}  # as last read back
        self.totals: dict[str, int] = {}
        self.closed: dict[str, RunStatus] = {}  # runs seen completed or cancelled
        self.settled: dict[str, int] = {}  # undo key -> a person said "not done"
        self.asked_undo: dict[str, set[str]] = {}  # run -> identities that compensated
        self.log: list[str] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="lifecycle-"))
        self.pg_schema: str | None = None
        self.url = f"sqlite:///{self.tmp / 'runs.db'}"
        self.stores: list[TranscriptStore] = []
        self.processes: dict[Agent[Any], Process] = {}  # Any: either output type
        self.children: list[Agent[str]] = []  # the sub-agents' agents (they open stores too)
        self.workers: list[Agent[Invoice]] = []
        self.clock = Clock(time.time)
        self._real_time = time.time
        self._real_os = faults.os
        time.time = self.clock
        faults.os = KILLING_OS  # pyright: ignore[reportAttributeAccessIssue]  # a crash raises
        self.workers = [self._worker(), self._worker()]

    # -- plumbing -------------------------------------------------------------------------------

    def _worker(self, output: type[Any] = Invoice) -> Agent[Any]:  # Any: the output type
        """A fresh agent object (another worker) on the same store, with its own connection."""
        store: str | TranscriptStore = self.url
        dsn = self.pg_dsn
        if dsn:
            from agentcore.stores import PostgresStore

            if self.pg_schema is None:
                self.pg_schema = f"agentcore_t_{secrets.token_hex(6)}"
            store = PostgresStore(dsn, schema=self.pg_schema)
            self.stores.append(store)
        process = Process()
        child = Agent(
            tools=self.toolset.tools,
            model=child_scripted(),
            store=store,
            policy=Policy(plan_before_writes=False),
            deps=process.deps,
        )
        self.children.append(child)
        delegate = child.as_tool(
            "delegate", "Hand one part of the work to a helper.", scope=list(CHILD_STEPS)
        )
        agent = Agent(
            tools=[*self.toolset.tools, delegate],
            model=scripted(self.scripts, self.totals),
            store=store,
            policy=POLICY,
            output=output,
            deps=process.deps,
        )
        self.processes[agent] = process
        return agent

    def _do(
        self, worker: int, what: Callable[[Agent[Invoice]], Awaitable[T]], crash: str
    ) -> T | None:
        """Run one operation on a worker with ``crash`` armed; ``None`` when it died (the
        worker is then replaced by a fresh one, as a new process would be)."""
        agent = self.workers[worker]
        event(f"called {what.__qualname__.split('.')[1]}")
        faults.arm(crash)
        try:
            return self.loop.run_until_complete(what(agent))
        except SimulatedKill:
            event(f"killed at {crash}")
            self.log.append(f"worker {worker} died at {crash}")
            self.processes[agent].dead.set()
            self.loop.run_until_complete(self._close(agent))
            self.workers[worker] = self._worker()
            return None
        finally:
            faults.arm("")

    async def _close(self, agent: Agent[Any]) -> None:  # Any: any output type
        await agent.close()
        store = agent.store
        if store in self.stores:
            await store.close()

    def some(self, statuses: frozenset[RunStatus]) -> bool:
        """Whether a run's last known status is one of ``statuses``."""
        return any(status in statuses for status in self.status.values())

    def pick(self, n: int, statuses: frozenset[RunStatus]) -> str:
        """The ``n``-th (modulo) run, in start order, whose last known status is in
        ``statuses``."""
        found = [run_id for run_id, status in self.status.items() if status in statuses]
        return found[n % len(found)]

    def other_runs(self) -> set[str]:
        """Runs with an effect that the model did not start: the sub-agents' runs."""
        runs = {key.removesuffix(":undo").rpartition(":")[0] for key in self.ledger.effect_keys()}
        return runs - self.scripts.keys()

    def open_defect(self, name: str) -> bool:
        """Whether the invariant ``name`` is left unchecked (an open defect breaks it)."""
        return name in OPEN_DEFECTS and name not in self.checked

    def _events(self, run_id: str) -> list[Event]:
        return self.loop.run_until_complete(self.workers[0].transcript(run_id))

    # -- rules ------------------------------------------------------------------------------

    @precondition(lambda self: len(self.scripts) < MAX_RUNS)
    @rule(
        script=st.lists(
            st.sampled_from((*STEPS, "charge", "payout", "wipe", "transfer", *DELEGATIONS)),
            min_size=1,
            max_size=5,
        ),
        total=st.integers(0, 999),
        worker=st.integers(0, 1),
        crash=st.sampled_from(("", *CRASH_POINTS[:4])),
    )
    def start(self, script: list[str], total: int, worker: int, crash: str) -> None:
        run_id = f"run-{len(self.scripts):03d}"  # none is a prefix of another (list_runs)
        self.scripts[run_id] = script
        self.totals[run_id] = total
        self._do(
            worker,
            lambda a: a.run(task_for(run_id), run_id=run_id, budget=BUDGET),
            crash,
        )

    @precondition(lambda self: self.some(OPEN))
    @rule(
        run=st.integers(0, 7),
        worker=st.integers(0, 1),
        by=st.none() | st.sampled_from(PEOPLE),
        crash=st.sampled_from(("", *CRASH_POINTS[:4])),
    )
    def resume(self, run: int, worker: int, by: str | None, crash: str) -> None:
        run_id = self.pick(run, OPEN)
        if run_id in self.asked_undo and self.open_defect("resume_after_compensation"):
            return
        self._attempt(worker, lambda a: a.resume(run_id, by=by), crash)

    @precondition(lambda self: self.some(WAITING))
    @rule(
        run=st.integers(0, 7),
        worker=st.integers(0, 1),
        approve=st.booleans(),
        people=st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=3),
        crash=st.sampled_from(("", *CRASH_POINTS[1:4])),
    )
    def confirm(self, run: int, worker: int, approve: bool, people: list[str], crash: str) -> None:
        """One person after another answers the call the run waits on (a two-person rule
        needs two); the crash is armed for each answer."""
        run_id = self.pick(run, WAITING)
        for by in people:
            if not self._attempt(
                worker, lambda a, by=by: a.confirm(run_id, approve=approve, by=by), crash
            ):
                return

    @precondition(lambda self: self.some(ATTENTION))
    @rule(
        run=st.integers(0, 7),
        worker=st.integers(0, 1),
        decision=st.sampled_from(("rerun", "result", "fail")),
        by=st.sampled_from(PEOPLE),
        crash=st.sampled_from(("", *CRASH_POINTS[1:4])),
    )
    def resolve(self, run: int, worker: int, decision: str, by: str, crash: str) -> None:
        run_id = self.pick(run, ATTENTION)

        async def go(a: Agent[Invoice]) -> RunResult[Invoice]:
            if decision == "rerun":
                return await a.resolve(run_id, by=by, rerun=True)
            if decision == "fail":
                return await a.resolve(run_id, by=by, fail=True)
            return await a.resolve(run_id, by=by, result={"settled": "by a person"})

        self._attempt(worker, go, crash)

    @precondition(lambda self: self.some(STOPPED))
    @rule(
        run=st.integers(0, 7),
        worker=st.integers(0, 1),
        by=st.sampled_from(PEOPLE),
        word=st.none() | st.sampled_from(("done", "not_done")),
        crash=st.sampled_from(("", *CRASH_POINTS[4:])),
    )
    def compensate(
        self,
        run: int,
        worker: int,
        by: str,
        word: Literal["done", "not_done"] | None,
        crash: str,
    ) -> None:
        run_id = self.pick(run, STOPPED)
        settle: dict[str, Literal["done", "not_done"]] = {}
        if word is not None:
            events = self._events(run_id)
            finished = {e.call_id for e in events if isinstance(e, CompensationFinished)}
            open_undos = [
                e
                for e in events
                if isinstance(e, CompensationStarted) and e.call_id not in finished
            ]
            settle = {e.call_id: word for e in open_undos}
        self.asked_undo.setdefault(run_id, set()).add(identity(by))

        async def go(a: Agent[Invoice]) -> RunResult[Invoice]:
            result = await a.compensate(run_id, by=by, settle=settle)
            event(f"compensated: {result.status.value}: {(result.reason or '')[:70]}")
            return result

        done = self._attempt(worker, go, crash)
        if done and word == "not_done":
            for call_id in settle:
                key = f"{run_id}:{call_id.removeprefix('c')}:undo"
                self.settled[key] = self.settled.get(key, 0) + 1

    @precondition(lambda self: self.some(OPEN))
    @rule(run=st.integers(0, 7), by=st.sampled_from(PEOPLE))
    def cancel(self, run: int, by: str) -> None:
        run_id = self.pick(run, OPEN)
        self._attempt(0, lambda a: a.cancel(run_id, by=by), "")

    @precondition(lambda self: self.some(WAITING))
    @rule(worker=st.integers(0, 1))
    def expire(self, worker: int) -> None:
        """The approval window of every waiting call passes; expiry denies them."""
        assert POLICY.approval_ttl is not None
        self.clock.offset += POLICY.approval_ttl + 1.0
        self._attempt(worker, lambda a: a.expire_approvals(), "")

    @rule()
    def let_timed_out_calls_finish(self) -> None:
        self.toolset.settle_threads()

    def _attempt(
        self, worker: int, what: Callable[[Agent[Invoice]], Awaitable[T]], crash: str
    ) -> bool:
        """One operation; a refusal (wrong state, busy, mismatch) is an answer too.
        Returns whether it went through (neither refused nor killed)."""
        try:
            return self._do(worker, what, crash) is not None
        except AgentcoreError as exc:
            event(f"refused: {type(exc).__name__}: {str(exc)[:90]}")
            self.log.append(f"refused: {type(exc).__name__}: {exc}"[:300])
            return False

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def effects_at_most_once(self) -> None:
        reruns: dict[str, int] = {}
        for run_id in self.scripts.keys() | self.other_runs():
            for ev in self._events(run_id):
                if isinstance(ev, Resolution) and ev.decision == "rerun":
                    key = f"{run_id}:{ev.step}"
                    reruns[key] = reruns.get(key, 0) + 1
        for key in self.ledger.effect_keys():
            tool = next(t for t, k in self.ledger.effects if k == key)
            if tool in ("lookup", "read_mail"):
                continue  # idempotent: at-least-once is its promise
            allowed = 1 + (
                self.settled.get(key, 0) if key.endswith(":undo") else reruns.get(key, 0)
            )
            assert self.ledger.count(key) <= allowed, (
                f"{tool} with key {key} took effect {self.ledger.count(key)} times; "
                f"allowed {allowed} (1 + people's reruns)"
            )
        if not self.open_defect("one_execution_at_once"):
            assert not self.ledger.overlaps, (
                f"two executions of one call at once: {self.ledger.overlaps}"
            )

    @invariant()
    def approvals_before_effects(self) -> None:
        for tool, key in self.ledger.effects:
            if tool not in NEEDS:
                continue
            run_id, _, step = key.rpartition(":")
            people: set[str] = set()
            for ev in self._events(run_id):
                if isinstance(ev, Approval) and ev.call_id == f"c{step}":
                    people.add(identity(ev.by))
                if isinstance(ev, Confirmation) and ev.call_id == f"c{step}" and ev.approved:
                    people.add(identity(ev.by))
                    people.update(identity(p) for p in ev.approvers)
            if self.open_defect("approvals_by_identity"):
                continue
            assert len(people) >= NEEDS[tool], (
                f"{tool} ({key}) took effect approved by {sorted(people)}; it needs "
                f"{NEEDS[tool]} distinct people"
            )
        for tool, key in self.ledger.effects:
            if tool == "undo:payout" and not self.open_defect("undo_approvals"):
                run_id = key.removesuffix(":undo").rpartition(":")[0]
                asked = self.asked_undo.get(run_id, set())
                assert len(asked) >= TWO_PEOPLE, (
                    f"the payout of {key} was undone at the word of {sorted(asked)}; the payout "
                    f"itself needs {TWO_PEOPLE} people"
                )

    @invariant()
    def no_write_from_untrusted_text_without_a_person(self) -> None:
        """A transfer to the account only a mail named (read by the run itself, or by its
        sub-agent whose answer quotes it) waits for a person before it takes effect."""
        if self.open_defect("untrusted_through_subagent"):
            return
        for tool, key in self.ledger.effects:
            if tool != "transfer":
                continue
            run_id, _, step = key.rpartition(":")
            events = self._events(run_id)
            start = next(e for e in events if isinstance(e, ToolStarted) and e.step == int(step))
            seen = any(  # what the mail said, read here or quoted by the sub-agent
                isinstance(e, ToolFinished)
                and e.tool in ("read_mail", "delegate")
                and MAILED_ACCOUNT in json.dumps(e.result)
                for e in events[: start.seq]
            )
            people = [
                e
                for e in events[: start.seq]
                if isinstance(e, Confirmation | Approval) and e.call_id == f"c{step}"
            ]
            assert not seen or people, (
                f"transfer {key} paid the account only untrusted text named, and no person "
                "approved it"
            )

    @invariant()
    def runs_read_back_consistent(self) -> None:
        for run_id in self.other_runs():  # a sub-agent's run: sound, and its chain intact
            problems = check_transcript(self._events(run_id))
            assert problems == [], (run_id, problems)
            report = self.loop.run_until_complete(self.workers[0].store.verify_chain(run_id))  # pyright: ignore[reportAttributeAccessIssue]
            assert report.intact, report
        for run_id in self.scripts:
            events = self._events(run_id)
            problems = check_transcript(events)
            if self.open_defect("empty_compensation_transcript"):
                problems = [p for p in problems if "(run_finished): follows the final" not in p]
            assert problems == [], problems
            agent = self.workers[0]
            report = self.loop.run_until_complete(agent.store.verify_chain(run_id))  # pyright: ignore[reportAttributeAccessIssue]
            assert report.intact, report
            result = self.loop.run_until_complete(agent.result(run_id))
            listed = self.loop.run_until_complete(agent.store.list_runs(search=run_id, limit=5))
            rows = [r for r in listed if r.run_id == run_id]
            assert rows and rows[0].status == result.status.value, (rows, result.status)
            finished = [e for e in events if isinstance(e, RunFinished)]
            if (
                result.status is not RunStatus.RUNNING
                and result.status is not RunStatus.AWAITING_CONFIRMATION
            ):
                assert finished and finished[-1].status == result.status.value, (
                    result.status,
                    [e.type for e in events],
                )
            if result.status is RunStatus.AWAITING_CONFIRMATION:
                assert result.pending is not None, result
            elif result.pending is not None:  # the call waits in a sub-agent's run
                assert result.status is RunStatus.NEEDS_ATTENTION, result
                assert result.pending.run_id not in (None, run_id), result.pending
            was = self.closed.get(run_id)
            if was is RunStatus.COMPLETED and not self.open_defect("completed_stays_completed"):
                assert result.status is was, f"{run_id} was completed, now {result.status.value}"
            if was is RunStatus.CANCELLED and result.status is not was:
                # Only its compensation moves a cancelled run (stopped for a person, or done).
                assert run_id in self.asked_undo, (
                    f"{run_id} was cancelled, now {result.status.value}"
                )
                assert result.status is RunStatus.NEEDS_ATTENTION, (
                    f"{run_id} was cancelled, now {result.status.value}: a compensation "
                    "stops for a person or ends the run cancelled"
                )
            event(f"status seen: {result.status.value}")
            # A parent whose sub-agent's call waits for people is answered like a waiting run.
            waits = result.pending is not None
            self.status[run_id] = RunStatus.AWAITING_CONFIRMATION if waits else result.status
            if result.status in CLOSED:
                self.closed.setdefault(run_id, result.status)
            if result.status is RunStatus.COMPLETED:
                assert result.output == Invoice(total=self.totals[run_id]), result.output
                if not self.open_defect("typed_output_pinned"):
                    other = self._worker(Receipt)
                    try:
                        read = self.loop.run_until_complete(other.result(run_id))
                    except OutputTypeChangedError:
                        read = None
                    finally:
                        self.loop.run_until_complete(self._close(other))
                    assert read is None, (
                        f"an agent with output=Receipt read the Invoice run {run_id} as "
                        f"{read.output!r}"
                    )

    def teardown(self) -> None:
        for tool, key in set(self.ledger.effects):
            event(f"{tool} keys with {self.ledger.count(key)} effect(s)")
        stats = os.environ.get("AGENTCORE_MODEL_STATS")
        if stats:
            Path(stats).write_text(json.dumps(dict(SEEN.most_common()), indent=1))
        try:
            self.toolset.settle_threads()
            for agent in [*self.workers, *self.children]:
                self.loop.run_until_complete(self._close(agent))
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()
            time.time = self._real_time
            faults.os = self._real_os
            faults.arm("")
            shutil.rmtree(self.tmp, ignore_errors=True)
            if self.pg_schema is not None:
                from stores.conftest import drop_schema

                assert self.pg_dsn is not None
                drop_schema(self.pg_dsn, self.pg_schema)


def _settings() -> settings:
    examples, steps = _examples()
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=os.environ.get("CI", "").lower() == "true",
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        print_blob=True,
        database=None,
    )


def test_lifecycle_on_sqlite() -> None:
    run_state_machine_as_test(LifecycleModel, settings=_settings())


def test_lifecycle_on_postgres(postgres_dsn: str) -> None:
    class OnPostgres(LifecycleModel):
        pg_dsn = postgres_dsn

    run_state_machine_as_test(OnPostgres, settings=_settings())


# -- what the model found: each minimal example, replayed ----------------------------------------


def replay(checked: str, *steps: Callable[[LifecycleModel], object]) -> None:
    """Play one example the model found, step by step, checking every invariant after each,
    ``checked`` (an open defect's) included."""

    class Strict(LifecycleModel):
        pass

    Strict.checked = frozenset({checked})
    state = Strict()
    try:
        for step in steps:
            step(state)
            state.effects_at_most_once()
            state.approvals_before_effects()
            state.no_write_from_untrusted_text_without_a_person()
            state.runs_read_back_consistent()
    finally:
        state.teardown()


def test_a_completed_run_is_not_read_as_another_output_type() -> None:
    replay(
        "typed_output_pinned",
        lambda state: state.start(crash="", script=["plan"], total=0, worker=0),
    )


def test_compensating_a_completed_run_leaves_it_completed() -> None:
    replay(
        "completed_stays_completed",
        lambda state: state.start(crash="", script=["charge"], total=7, worker=0),
        lambda state: state._attempt(  # pyright: ignore[reportPrivateUsage]
            1, lambda a: a.compensate("run-000", by="alice"), ""
        ),
    )


def test_compensating_a_cancelled_run_with_nothing_to_undo_keeps_a_sound_transcript() -> None:
    replay(
        "empty_compensation_transcript",
        lambda state: state.start(crash="after_model_response", script=["plan"], total=0, worker=0),
        lambda state: state.cancel(by="alice", run=0),
        lambda state: state.compensate(by="alice", crash="", run=0, word=None, worker=0),
    )


def test_a_cancelled_run_stopped_in_its_compensation_never_advances_again() -> None:
    replay(
        "resume_after_compensation",
        lambda state: state.start(crash="", script=["slow_charge"], total=0, worker=0),
        lambda state: state.cancel(by="alice", run=0),
        lambda state: state.compensate(by="alice", crash="", run=0, word=None, worker=0),
        lambda state: state.resume(by=None, crash="", run=0, worker=0),
    )


def test_a_rerun_after_a_kill_runs_the_timed_out_call_once() -> None:
    """A timed-out call's thread dies with its process; the person's rerun is the one
    execution (the model's simulated kill must not leave the thread running)."""
    replay(
        "",
        lambda state: state.start(
            crash="after_tool_return", script=["slow_charge"], total=0, worker=0
        ),
        lambda state: state.resume(by=None, crash="", run=0, worker=1),
        lambda state: state.resolve(by="alice", crash="", decision="rerun", run=0, worker=0),
        lambda state: state.let_timed_out_calls_finish(),
    )
