"""Compensation under real process kills (issue 22, part 3).

A worker pays twice (``pay`` at steps 1 and 2) and waits on a destructive call; the run is
cancelled, and a worker compensating it SIGKILLs itself at a point of the first undo
(``before_compensation_intent``, ``after_compensation_intent``: the intent is durable and
the undo has not run, ``after_compensation_effect``: the undo happened and its outcome is
not recorded). A fresh process compensates again (with a person's word when the undo's
outcome cannot be found out). Counted from a ledger agentcore does not write: each payment
is undone exactly once, and the transcript verifies.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentcore import check_transcript
from agentcore.events import CompensationFinished, Event, RunFinished
from agentcore.stores import SQLiteStore
from faults._support import KILLED, TIMEOUT_S

pytestmark = pytest.mark.subprocess

WORKER = Path(__file__).with_name("compensation_worker.py")

# (point, kind) -> the person's word the second process needs (None: it finishes alone)
CASES: dict[tuple[str, str], str | None] = {
    ("before_compensation_intent", "reconcile"): None,
    ("before_compensation_intent", "plain"): None,
    ("after_compensation_intent", "reconcile"): None,  # guard free, reconcile: not done
    ("after_compensation_intent", "idempotent"): None,  # run again, same key
    ("after_compensation_intent", "plain"): "c2=not_done",  # a person: it did not happen
    ("after_compensation_effect", "reconcile"): None,  # reconcile finds it: adopted
    ("after_compensation_effect", "idempotent"): None,  # run again: deduplicated by key
    ("after_compensation_effect", "plain"): "c2=done",  # a person: it happened
}


def _argv(tmp: Path, store: str, schema: str, cmd: str, kind: str, *extra: str) -> list[str]:
    return [sys.executable, str(WORKER), cmd, store, schema, str(tmp / "ledger.txt"), kind, *extra]


def _env(
    crash: str = "", hold: Path | None = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCORE_", "UNDO_"))}
    env.update(extra or {})
    if crash:
        env["AGENTCORE_CRASH_AT"] = crash
    if hold is not None:
        env["COMPENSATION_HOLD"] = str(hold)
    return env


def _worker(
    tmp: Path,
    store: str,
    schema: str,
    cmd: str,
    kind: str,
    *extra: str,
    crash: str = "",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _argv(tmp, store, schema, cmd, kind, *extra),
        capture_output=True,
        text=True,
        env=_env(crash, extra=env),
        timeout=TIMEOUT_S,
        check=False,
    )


def _compensated_once(tmp: Path, store: str, schema: str, point: str, kind: str) -> list[str]:
    """Run the case; the ledger at the end."""
    started = _worker(tmp, store, schema, "start", kind)
    assert started.stdout.startswith("awaiting_confirmation"), started.stdout + started.stderr
    assert _worker(tmp, store, schema, "cancel", kind).stdout.startswith("cancelled")
    killed = _worker(tmp, store, schema, "compensate", kind, crash=point)
    assert killed.returncode == KILLED, killed.stdout + killed.stderr
    word = CASES[(point, kind)]
    again = _worker(tmp, store, schema, "compensate", kind)
    if word is not None:
        assert again.stdout.startswith("needs_attention"), again.stdout + again.stderr
        assert "--done c2 | --not-done c2" in again.stdout or "--done c2" in again.stdout
        again = _worker(tmp, store, schema, "compensate", kind, word)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.startswith("cancelled"), again.stdout
    assert "undid pay at step 2, pay at step 1" in again.stdout
    return (tmp / "ledger.txt").read_text().splitlines()


@pytest.mark.parametrize(("point", "kind"), list(CASES))
async def test_each_payment_is_undone_exactly_once_after_a_kill_sqlite(
    point: str, kind: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    ledger = _compensated_once(tmp_path, str(db), "-", point, kind)
    assert sorted(ledger) == sorted(
        ["pay comp-run:1", "pay comp-run:2", "undo comp-run:2:undo", "undo comp-run:1:undo"]
    ), ledger
    events = await _events(str(db))
    assert check_transcript(events) == []
    outcomes = [(e.call_id, e.outcome) for e in events if isinstance(e, CompensationFinished)]
    assert outcomes == [("c2", "undone"), ("c1", "undone")]


@pytest.mark.parametrize("point", ["after_compensation_intent", "after_compensation_effect"])
def test_each_payment_is_undone_exactly_once_after_a_kill_postgres(
    point: str, tmp_path: Path, postgres_dsn: str, pg_schema: str
) -> None:
    ledger = _compensated_once(tmp_path, postgres_dsn, pg_schema, point, "reconcile")
    assert sorted(ledger) == sorted(
        ["pay comp-run:1", "pay comp-run:2", "undo comp-run:2:undo", "undo comp-run:1:undo"]
    ), ledger


@pytest.mark.parametrize("then", ["continued", "killed"])
def test_a_stalled_compensator_never_undoes_a_payment_twice(then: str, tmp_path: Path) -> None:
    """Worker A compensates and is SIGSTOPped inside the first undo (a reconcilable
    refund), before the refund, past its 2 s lease. Worker B compensates the run: the
    refund's ``reconcile`` finds nothing yet, but A may still make it, so B does not run it
    again: it stops as ``needs_attention`` because A still holds the undo's guard.

    - continued: A refunds, finds its lease taken and records nothing; the next compensate
      finds the refund through ``reconcile`` and adopts it;
    - killed: A dies stopped (the guard dies with it); the next compensate runs the refund.

    Either way, counted in the ledger agentcore does not write: one refund per payment.
    """
    db = str(tmp_path / "runs.db")
    assert _worker(tmp_path, db, "-", "start", "reconcile").stdout.startswith(
        "awaiting_confirmation"
    )
    assert _worker(tmp_path, db, "-", "cancel", "reconcile").stdout.startswith("cancelled")
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "hold").write_text("")
    a = subprocess.Popen(
        _argv(tmp_path, db, "-", "compensate", "reconcile"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(hold=hold),
    )
    try:
        give_up = time.monotonic() + TIMEOUT_S
        while not (hold / "entered").exists():
            assert a.poll() is None, a.communicate()
            assert time.monotonic() < give_up, "A never reached the refund"
            time.sleep(0.02)
        os.kill(a.pid, signal.SIGSTOP)
        time.sleep(2.0 + 0.5)  # A's lease (2 s, no renewal while stopped) expires
        b = _worker(tmp_path, db, "-", "compensate", "reconcile")
        assert b.stdout.startswith("needs_attention"), b.stdout + b.stderr
        assert "still holds its guard" in b.stdout, b.stdout
        ledger = tmp_path / "ledger.txt"
        assert not [line for line in ledger.read_text().splitlines() if "undo" in line]
        if then == "continued":
            (hold / "hold").unlink()
            os.kill(a.pid, signal.SIGCONT)
            a_out, a_err = a.communicate(timeout=TIMEOUT_S)
            assert "undo comp-run:2:undo" in ledger.read_text(), a_out + a_err
        else:
            a.kill()
            a.communicate(timeout=TIMEOUT_S)
            assert a.returncode == KILLED
            (hold / "hold").unlink()
    finally:
        if a.poll() is None:
            os.kill(a.pid, signal.SIGCONT)
            a.kill()
            a.communicate(timeout=TIMEOUT_S)
    again = _worker(tmp_path, db, "-", "compensate", "reconcile")
    assert again.stdout.startswith("cancelled"), again.stdout + again.stderr
    assert sorted(ledger.read_text().splitlines()) == sorted(
        ["pay comp-run:1", "pay comp-run:2", "undo comp-run:2:undo", "undo comp-run:1:undo"]
    )
    events = asyncio.run(_events(db))
    assert check_transcript(events) == []
    outcomes = [(e.call_id, e.outcome) for e in events if isinstance(e, CompensationFinished)]
    assert outcomes == [("c2", "undone"), ("c1", "undone")]


@pytest.mark.parametrize("kind", ["plain", "reconcile"])
def test_a_timed_out_undos_thread_blocks_a_persons_rerun_until_it_returns(
    kind: str, tmp_path: Path
) -> None:
    """Worker A's first undo (a sync refund) passes its 0.5 s timeout and keeps running in
    its thread (4 s) before it refunds: the compensation stops as needs_attention at once
    (its outcome is unknown, not failed), and a person's ``--not-done`` (run it again)
    from another process is refused while that thread runs, nothing recorded. Once it has
    returned: the plain undo runs once more (the person said so); the one with
    ``reconcile`` has its refund found and adopted by a plain compensate."""
    db = str(tmp_path / "runs.db")
    ledger = tmp_path / "ledger.txt"
    assert _worker(tmp_path, db, "-", "start", kind).stdout.startswith("awaiting_confirmation")
    assert _worker(tmp_path, db, "-", "cancel", kind).stdout.startswith("cancelled")
    slow = {"UNDO_SLEEP_S": "4", "UNDO_TIMEOUT_S": "0.5"}
    a = subprocess.Popen(
        _argv(tmp_path, db, "-", "compensate", kind),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(extra=slow),
    )
    try:
        give_up = time.monotonic() + TIMEOUT_S
        while not _stopped(db):
            assert a.poll() is None, a.communicate()
            assert time.monotonic() < give_up, "A's undo never timed out"
            time.sleep(0.05)
        before = len(asyncio.run(_events(db)))
        refused = _worker(tmp_path, db, "-", "compensate", kind, "c2=not_done", env=slow)
        assert a.poll() is None, "A's undo thread returned before the rerun was tried"
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert refused.stdout.startswith("error: CallStillRunningError"), refused.stdout
        assert "the undo's guard" in refused.stdout, refused.stdout
        assert len(asyncio.run(_events(db))) == before  # nothing recorded
        assert not [line for line in ledger.read_text().splitlines() if "undo" in line]
        a_out, a_err = a.communicate(timeout=TIMEOUT_S)
    finally:
        if a.poll() is None:
            a.kill()
            a.communicate(timeout=TIMEOUT_S)
    assert a_out.startswith("needs_attention"), a_out + a_err
    assert "timed out after 0.5s; its outcome is unknown" in a_out, a_out
    assert "undo comp-run:2:undo" in ledger.read_text()  # the thread refunded after all
    if kind == "plain":
        again = _worker(tmp_path, db, "-", "compensate", kind, "c2=not_done")
    else:
        again = _worker(tmp_path, db, "-", "compensate", kind)
    assert again.stdout.startswith("cancelled"), again.stdout + again.stderr
    refunds = [line for line in ledger.read_text().splitlines() if line.startswith("undo")]
    twice = ["undo comp-run:2:undo"] if kind == "plain" else []  # one rerun, a person's
    assert sorted(refunds) == sorted(["undo comp-run:2:undo", *twice, "undo comp-run:1:undo"])
    events = asyncio.run(_events(db))
    assert check_transcript(events) == []


def _stopped(db: str) -> bool:
    """Whether the run's last event stops it as needs_attention."""
    events = asyncio.run(_events(db))
    last = events[-1] if events else None
    return isinstance(last, RunFinished) and last.status == "needs_attention"


async def _events(db: str) -> list[Event]:
    store = SQLiteStore(db)
    try:
        return await store.load("comp-run")
    finally:
        await store.close()
