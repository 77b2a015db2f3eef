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

import subprocess
import sys
from pathlib import Path

import pytest

from agentcore import check_transcript
from agentcore.events import CompensationFinished
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


def _worker(
    tmp: Path, store: str, schema: str, cmd: str, kind: str, *extra: str, crash: str = ""
) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCORE_")}
    if crash:
        env["AGENTCORE_CRASH_AT"] = crash
    return subprocess.run(
        [sys.executable, str(WORKER), cmd, store, schema, str(tmp / "ledger.txt"), kind, *extra],
        capture_output=True,
        text=True,
        env=env,
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
    store = SQLiteStore(db)
    try:
        events = await store.load("comp-run")
        assert check_transcript(events) == []
        outcomes = [(e.call_id, e.outcome) for e in events if isinstance(e, CompensationFinished)]
        assert outcomes == [("c2", "undone"), ("c1", "undone")]
    finally:
        await store.close()


@pytest.mark.parametrize("point", ["after_compensation_intent", "after_compensation_effect"])
def test_each_payment_is_undone_exactly_once_after_a_kill_postgres(
    point: str, tmp_path: Path, postgres_dsn: str, pg_schema: str
) -> None:
    ledger = _compensated_once(tmp_path, postgres_dsn, pg_schema, point, "reconcile")
    assert sorted(ledger) == sorted(
        ["pay comp-run:1", "pay comp-run:2", "undo comp-run:2:undo", "undo comp-run:1:undo"]
    ), ledger
