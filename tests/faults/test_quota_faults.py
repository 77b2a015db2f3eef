"""Quotas attacked with real processes (issue 40, section 3): ten workers racing for the last
10 EUR of a customer's day, SIGKILL at every durability boundary of a charged call, and a
clock crossing midnight mid-run.

The workers (``quota_worker.py``) refund 1 EUR a call under
``Quota("refunds", limit=10, count="sum:amount", per=("customer_id",))``; every real refund
is a line in a ledger file outside agentcore (``pay``/``undo``). Checked afterwards, always
three ways: the ledger (what really happened), the store's counter, and the transcripts'
charges (what decisions and approvals charged, minus what ``quota_released`` gave back).
"""

from __future__ import annotations

import asyncio
import calendar
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentcore import check_transcript
from agentcore.events import (
    Confirmation,
    Decision,
    Event,
    QuotaReleased,
    Resolution,
    ToolFinished,
    ToolStarted,
)
from agentcore.stores import PostgresStore, SQLiteStore
from agentcore.stores._quota import QuotaUsage
from faults._support import KILLED, TIMEOUT_S, Outcome, wait

pytestmark = pytest.mark.subprocess

WORKER = Path(__file__).with_name("quota_worker.py")
LEASE_S = 1.0  # the workers' lease (quota_worker.py's default)
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@dataclass
class Shop:
    """Refund workers over one store (SQLite file or PostgreSQL schema) and one ledger."""

    tmp: Path
    backend: str
    dsn: str = ""
    schema: str = ""
    procs: list[subprocess.Popen[str]] = field(default_factory=list[subprocess.Popen[str]])

    @property
    def ledger(self) -> Path:
        return self.tmp / "ledger.txt"

    @property
    def store_url(self) -> str:
        return self.dsn if self.backend == "postgres" else f"sqlite:///{self.tmp / 'runs.db'}"

    def popen(
        self, cmd: str, run_id: str, *, kind: str, crash: str | None = None, **extra: str
    ) -> subprocess.Popen[str]:
        """Start a worker (``QUOTA_*`` settings as keyword arguments: ``ASKS="3"``)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCORE_", "QUOTA_"))}
        env |= {
            "QUOTA_STORE": self.store_url,
            "QUOTA_SCHEMA": self.schema,
            "QUOTA_RUN_ID": run_id,
            "QUOTA_LEDGER": str(self.ledger),
            "QUOTA_KIND": kind,
        }
        env |= {f"QUOTA_{k}": v for k, v in extra.items()}
        if crash is not None:
            env["AGENTCORE_CRASH_AT"] = crash
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), cmd],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.tmp,
            env=env,
        )
        self.procs.append(proc)
        return proc

    def run(
        self, cmd: str, run_id: str, *, kind: str, crash: str | None = None, **extra: str
    ) -> Outcome:
        return wait(self.popen(cmd, run_id, kind=kind, crash=crash, **extra))

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=TIMEOUT_S)

    def _store(self) -> PostgresStore | SQLiteStore:
        if self.backend == "postgres":
            return PostgresStore(self.dsn, schema=self.schema)
        return SQLiteStore(self.tmp / "runs.db")

    def events(self, run_id: str) -> list[Event]:
        async def go() -> list[Event]:
            store = self._store()
            try:
                return await store.load(run_id)
            finally:
                await store.close()

        return asyncio.run(go())

    def usage(self) -> list[QuotaUsage]:
        """The store's counters of the refunds quota (creating the store's tables if needed;
        each test has a store of its own)."""

        async def go() -> list[QuotaUsage]:
            store = self._store()
            try:
                return await store.list_quota_usage(quota="refunds")
            finally:
                await store.close()

        return asyncio.run(go())

    def counter(self) -> float:
        """What the counters hold together (one counter unless a window changed)."""
        return sum(row.used for row in self.usage())

    def entries(self) -> list[list[str]]:
        """The ledger: ``[pay|undo, key, amount, pid, now]`` for every real effect."""
        if not self.ledger.exists():
            return []
        return [line.split() for line in self.ledger.read_text().splitlines() if line]

    def refunded(self) -> float:
        """What was really refunded: payments minus their reversals."""
        sign = {"pay": 1.0, "undo": -1.0}
        return sum(sign[e[0]] * float(e[2]) for e in self.entries())


@pytest.fixture(params=BACKENDS)
def shop(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shop]:
    """Refund workers on SQLite (one file) and on PostgreSQL (a schema of its own)."""
    if request.param == "postgres":
        dsn = str(request.getfixturevalue("postgres_dsn"))
        made = Shop(tmp_path, "postgres", dsn, str(request.getfixturevalue("pg_schema")))
    else:
        made = Shop(tmp_path, "sqlite")
    made.usage()  # the store's tables exist before the workers race to create them
    try:
        yield made
    finally:
        made.stop_all()


@pytest.fixture
def sqlite_shop(tmp_path: Path) -> Iterator[Shop]:
    made = Shop(tmp_path, "sqlite")
    made.usage()
    try:
        yield made
    finally:
        made.stop_all()


def charged(events: list[Event]) -> float:
    """What a transcript charged its quotas: decisions' and approvals' charges, minus what
    ``quota_released`` gave back (its charges are negative)."""
    return sum(
        c.amount
        for ev in events
        if isinstance(ev, Decision | Confirmation | QuotaReleased)
        for c in ev.charges
    )


def charged_decisions(events: list[Event]) -> list[Decision]:
    """The decisions that charged a call (appended once each, whatever the kills)."""
    return [ev for ev in events if isinstance(ev, Decision) and ev.charges]


def refund_decisions(events: list[Event]) -> list[Decision]:
    """The decisions on refunds: charged (ran) or refused."""
    return [
        ev for ev in events if isinstance(ev, Decision) and (ev.charges or ev.verdict == "deny")
    ]


# -- 1. ten processes racing for the last 10 EUR of the day -----------------------------------

WORKERS = 10
ASKS = 3  # each worker asks three times: 30 asks for 10 EUR


@pytest.mark.slow
def test_ten_processes_racing_for_the_last_10_eur_spend_exactly_10(shop: Shop) -> None:
    barrier = shop.tmp / "barrier"
    barrier.mkdir()
    runs = [f"race-{i}" for i in range(WORKERS)]
    procs = [
        shop.popen(
            "start", r, kind="non_idempotent", ASKS=str(ASKS), BARRIER=f"{barrier}:{WORKERS}"
        )
        for r in runs
    ]
    outcomes = [wait(p) for p in procs]
    for out in outcomes:
        assert out.returncode == 0, out
        assert out.status == "completed", out

    transcripts = {r: shop.events(r) for r in runs}
    tried = {r: refund_decisions(evs) for r, evs in transcripts.items()}
    assert all(len(ds) == ASKS for ds in tried.values()), tried  # every process asked 3 times
    decided = [d for ds in tried.values() for d in ds]
    ran = [d for d in decided if d.verdict == "execute"]
    refused = [d for d in decided if d.verdict == "deny"]
    assert len(ran) + len(refused) == len(decided) == WORKERS * ASKS
    counter = shop.counter()
    print(  # the figures the docs quote (pytest -s)
        f"\nquota race on {shop.backend}: {WORKERS} processes, {len(decided)} calls tried, "
        f"{len(ran)} ran, {len(refused)} refused, counter {counter:g}, ledger "
        f"{shop.refunded():g} EUR, paid by {len({e[3] for e in shop.entries()})} processes"
    )
    # What ran never passes the limit; since the asks outnumber it, exactly the limit ran.
    assert shop.refunded() == 10.0
    assert len(shop.entries()) == 10 == len(ran)
    assert len({e[1] for e in shop.entries()}) == 10  # ten distinct calls
    assert counter == 10.0 == sum(charged(evs) for evs in transcripts.values())
    for d in ran:
        assert [(c.quota, c.amount, c.limit) for c in d.charges] == [("refunds", 1.0, 10.0)]
    for d in refused:
        assert d.over_quota == ["refunds"] and d.charges == []
        why = d.reason or ""
        assert "quota 'refunds' (per " in why and "customer_id=C1" in why, why
        assert ", day " in why and "10 of 10 used, and this call adds 1" in why, why
    for evs in transcripts.values():
        assert check_transcript(evs) == []


# -- 2. SIGKILL at every durability boundary of a charged call --------------------------------
#
# A one-refund run's appends (SQLite numbers them for in_append_transaction:<n>): 1
# run_started; 2 model_called + action_proposed; 3 the decision with its charge (committed
# alone: the store may refuse it); 4 tool_started; 5 a non-idempotent tool's tool_finished
# (with its quota_released when it failed); 6 the finish. Each case names where the process
# dies, what is stored then, what the counter holds then, and how the run is settled.


@dataclass(frozen=True)
class Kill:
    kind: str
    point: str
    stored: tuple[str, ...]  # the transcript's last event types when the process died
    at_kill: float  # the counter (= the transcript's charges) when it died
    settle: tuple[tuple[str, str], ...]  # (command, status it ends in), in a fresh process each
    ran: float  # what was refunded once the run settled (the counter then)
    rule: str


_ASKED = "nothing of the call is stored: resume asks again, decides, charges and runs it once"
KILLS: dict[str, Kill] = {
    "model-answered": Kill(
        "non_idempotent",
        "after_model_response",
        ("run_started",),
        0,
        (("resume", "completed"),),
        1,
        _ASKED,
    ),
    "in-decision-append": Kill(
        "non_idempotent",
        "in_append_transaction:3",
        ("model_called", "action_proposed"),
        0,
        (("resume", "completed"),),
        1,
        "the decision's append is rolled back with its charge: " + _ASKED,
    ),
    "decision-appended": Kill(
        "non_idempotent",
        "in_append_transaction:4",
        ("action_proposed", "decision"),
        1,
        (("resume", "completed"),),
        1,
        "the charged decision is durable, tool_started is not: resume starts the decided call "
        "without deciding (or charging) it again",
    ),
    "intent-idempotent": Kill(
        "idempotent",
        "after_intent_commit",
        ("decision", "tool_started"),
        1,
        (("resume", "completed"),),
        1,
        "started, idempotent: run again with the same key, charged once",
    ),
    "intent-lost-fail": Kill(
        "non_idempotent",
        "after_intent_commit",
        ("decision", "tool_started"),
        1,
        (("resume", "needs_attention"), ("resolve-fail", "completed")),
        0,
        "started, non-idempotent: its outcome is unknown, so it keeps its charge until a "
        "person settles it as failed (it did not run): given back",
    ),
    "intent-lost-rerun": Kill(
        "non_idempotent",
        "after_intent_commit",
        ("decision", "tool_started"),
        1,
        (("resume", "needs_attention"), ("resolve-rerun", "completed")),
        1,
        "started, non-idempotent, its charge kept while its outcome is unknown; a person says "
        "it did not happen and it runs once: still the one charge of its decision",
    ),
    "effect-idempotent": Kill(
        "idempotent",
        "after_tool_return",
        ("decision", "tool_started"),
        1,
        (("resume", "completed"),),
        1,
        "the effect happened, idempotent: run again with the same key (the payment system "
        "deduplicates it), charged once",
    ),
    "effect-lost-result": Kill(
        "non_idempotent",
        "after_tool_return",
        ("decision", "tool_started"),
        1,
        (("resume", "needs_attention"), ("resolve-result", "completed")),
        1,
        "the effect happened, non-idempotent: the charge is kept while the outcome is "
        "unknown, and kept when a person says it happened",
    ),
    "finished": Kill(
        "non_idempotent",
        "after_model_response:2",
        ("tool_started", "tool_finished"),
        1,
        (("resume", "completed"),),
        1,
        "tool_finished is durable: the call ran and keeps its charge",
    ),
    "failing-in-append": Kill(
        "failing",
        "in_append_transaction:5",
        ("decision", "tool_started"),
        1,
        (("resume", "needs_attention"), ("resolve-rerun", "completed")),
        0,
        "tool_finished (failed) and quota_released are one append: killed inside it, neither "
        "is stored, the outcome is unknown and the charge kept; a person has it run again, it "
        "fails again, and its tool_finished gives the charge back",
    ),
    "failing-appended": Kill(
        "failing",
        "in_append_transaction:6",
        ("tool_started", "tool_finished", "quota_released"),
        0,
        (("resume", "completed"),),
        0,
        "tool_finished (failed) and quota_released were appended together: given back",
    ),
}


# The crash points but in_append_transaction are the loop's, the same on every store: the
# lost-call cases run on PostgreSQL too (each waits out the dead worker's lease there).
ON_POSTGRES = ("intent-lost-fail", "effect-lost-result", "finished")


def _kill_params() -> list[object]:
    params: list[object] = []
    for name, kill in KILLS.items():
        params.append(pytest.param("sqlite", kill, id=f"sqlite-{name}"))
        if name in ON_POSTGRES:
            marks = [pytest.mark.postgres]
            params.append(pytest.param("postgres", kill, id=f"postgres-{name}", marks=marks))
    return params


def _settled_consistently(shop: Shop, run_id: str, rule: str) -> list[Event]:
    """The transcript, after checking the counter equals its charges."""
    events = shop.events(run_id)
    assert check_transcript(events) == [], rule
    assert shop.counter() == charged(events), f"counter vs transcript: {rule}"
    assert len(charged_decisions(events)) <= 1, f"a call charged twice: {rule}"
    return events


@pytest.mark.parametrize(("shop", "kill"), _kill_params(), indirect=["shop"])
def test_a_kill_at_any_boundary_never_leaks_nor_double_counts(shop: Shop, kill: Kill) -> None:
    run_id = "kill-run"
    died = shop.run("start", run_id, kind=kill.kind, crash=kill.point)
    assert died.returncode == KILLED, died
    events = _settled_consistently(shop, run_id, kill.rule)
    assert tuple(ev.type for ev in events[-len(kill.stored) :]) == kill.stored, [
        ev.type for ev in events
    ]
    assert shop.counter() == kill.at_kill, kill.rule
    if shop.backend == "postgres":
        time.sleep(LEASE_S + 0.2)  # the dead worker's lease runs out (SQLite sees it die)

    for cmd, status in kill.settle:
        out = shop.run(cmd, run_id, kind=kill.kind)
        assert out.returncode == 0 and out.status == status, out
        events = _settled_consistently(shop, run_id, kill.rule)
        if status == "needs_attention":  # the lost call keeps its charge: it may have run
            assert shop.counter() == 1.0, kill.rule
            assert not any(isinstance(ev, QuotaReleased) for ev in events)

    # Settled: the counter is what really ran, and the call was decided (charged) once.
    assert shop.counter() == shop.refunded() == kill.ran, kill.rule
    assert len(charged_decisions(events)) == 1, kill.rule
    released = [ev for ev in events if isinstance(ev, QuotaReleased)]
    assert len(released) == (kill.ran == 0), kill.rule
    for ev in released:  # appended with the event that says why, right before it
        why = events[ev.seq - 1]
        assert isinstance(why, ToolFinished | Resolution), why
        if isinstance(why, ToolFinished):
            assert not why.ok and ev.reason == "refund failed"
        else:
            assert why.decision == "fail" and ev.reason == "alice settled it as failed"
    if kill.kind == "idempotent":  # run again after a kill, always with the same key
        keys = {ev.idempotency_key for ev in events if isinstance(ev, ToolStarted)}
        assert keys == {f"{run_id}:1"}

    if kill.ran:  # a committed effect: compensation gives the charge back
        undone = shop.run("compensate", run_id, kind=kill.kind)
        assert undone.returncode == 0 and undone.status == "cancelled", undone
        events = _settled_consistently(shop, run_id, kill.rule)
        assert shop.counter() == shop.refunded() == 0.0, kill.rule
        [back] = [ev for ev in events if isinstance(ev, QuotaReleased)]
        assert back.reason == "refund was undone" and [c.amount for c in back.charges] == [-1.0]


# -- 3. the clock crosses midnight mid-run ----------------------------------------------------

DAY_1 = calendar.timegm((2026, 12, 4, 0, 0, 0))  # 2026-12-04 00:00 UTC
MIDNIGHT = DAY_1 + 86_400  # 2026-12-05 00:00 UTC


def _window(decision: Decision) -> str:
    [charge] = decision.charges
    return str(json.loads(charge.key)[2])


@pytest.mark.parametrize("how", ["one-process", "killed-and-resumed"])
def test_a_clock_crossing_midnight_mid_run_charges_the_next_day(
    sqlite_shop: Shop, how: str
) -> None:
    """2 EUR a day, five asks: two run before midnight and the third is refused; the clock
    moves past midnight while the worker waits for its model (or dies there, and a fresh
    process resumes); the next two charge the new day and the fifth is refused."""
    shop, run_id = sqlite_shop, "clock-run"
    clock = shop.tmp / "now"
    clock.write_text(str(MIDNIGHT - 60))  # 23:59 on day 1
    hold = shop.tmp / "hold"
    hold.mkdir()
    settings = {"ASKS": "5", "LIMIT": "2", "CLOCK_FILE": str(clock)}
    proc = shop.popen("start", run_id, kind="non_idempotent", HOLD=f"{hold}:3", **settings)
    deadline = time.monotonic() + TIMEOUT_S
    while not (hold / "entered").exists():
        assert proc.poll() is None, wait(proc)
        assert time.monotonic() < deadline, "the worker never reached its third outcome"
        time.sleep(0.01)
    before = refund_decisions(shop.events(run_id))
    clock.write_text(str(MIDNIGHT + 60))  # 00:01 on day 2
    if how == "one-process":
        (hold / "release").touch()
        done = wait(proc)
    else:
        proc.kill()
        assert wait(proc).returncode == KILLED
        done = shop.run("resume", run_id, kind="non_idempotent", **settings)
    assert done.returncode == 0 and done.status == "completed", done

    events = shop.events(run_id)
    assert check_transcript(events) == []
    decided = refund_decisions(events)
    assert [d.verdict for d in decided] == ["execute", "execute", "deny", "execute", "execute"]
    assert [d.verdict for d in before] == ["execute", "execute", "deny"][: len(before)]
    ran = [d for d in decided if d.verdict == "execute"]
    assert [_window(d) for d in ran] == ["day:2026-12-04"] * 2 + ["day:2026-12-05"] * 2
    assert "2 of 2 used" in (decided[2].reason or "") and "day 2026-12-04" in (
        decided[2].reason or ""
    )
    # The effects happened on the clock's day their charge names, and the counters agree.
    pays = {e[1]: int(e[4]) for e in shop.entries() if e[0] == "pay"}
    assert len(pays) == 4
    for d in ran:
        day = time.strftime("day:%Y-%m-%d", time.gmtime(pays[f"{run_id}:{d.step}"]))
        assert day == _window(d)
    rows = sorted((r.window_end, r.used) for r in shop.usage())
    assert rows == [(float(MIDNIGHT), 2.0), (float(MIDNIGHT + 86_400), 2.0)]
    assert shop.counter() == charged(events) == shop.refunded() == 4.0
