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
import os
import subprocess
import sys
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
)
from agentcore.stores import PostgresStore, SQLiteStore
from agentcore.stores._quota import QuotaUsage
from faults._support import TIMEOUT_S, Outcome, wait

pytestmark = pytest.mark.subprocess

WORKER = Path(__file__).with_name("quota_worker.py")
TENANT = "acme"
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
        """The store's counters of the tenant (creating the store's tables if needed)."""

        async def go() -> list[QuotaUsage]:
            store = self._store()
            try:
                return await store.list_quota_usage(tenant=TENANT)
            finally:
                await store.close()

        return asyncio.run(go())

    def counter(self) -> float:
        """What the tenant's counters hold together (one counter unless a window changed)."""
        return sum(row.used for row in self.usage())

    def entries(self) -> list[list[str]]:
        """The ledger: ``[pay|undo, key, amount, pid]`` for every real effect."""
        if not self.ledger.exists():
            return []
        return [line.split() for line in self.ledger.read_text().splitlines() if line]

    def refunded(self) -> float:
        """What was really refunded: payments minus their reversals."""
        sign = {"pay": 1.0, "undo": -1.0}
        return sum(sign[what] * float(amount) for what, _, amount, _ in self.entries())


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
    assert len({key for _, key, _, _ in shop.entries()}) == 10  # ten distinct calls
    assert counter == 10.0 == sum(charged(evs) for evs in transcripts.values())
    for d in ran:
        assert [(c.quota, c.amount, c.limit) for c in d.charges] == [("refunds", 1.0, 10.0)]
    for d in refused:
        assert d.over_quota == ["refunds"] and d.charges == []
        assert "quota 'refunds' (per customer_id=C1, day " in (d.reason or ""), d.reason
        assert "10 of 10 used, and this call adds 1" in (d.reason or ""), d.reason
    for evs in transcripts.values():
        assert check_transcript(evs) == []
