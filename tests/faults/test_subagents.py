"""A parent killed in the middle of its sub-agent's run, resumed by a fresh process: one
child run, each effect once; and a parent resumed while another worker runs its child.

The parent's one tool is a child agent that pays once (not idempotent, reconcilable from a
ledger agentcore does not write). The process SIGKILLs itself when the child's payment is
durable as an intent but not made, when the payment was made but not recorded, and when
the child completed but the parent did not record it. A fresh process resumes the parent.
Run on SQLite, and on PostgreSQL where the fixture has a server.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faults._support import KILLED, TIMEOUT_S

pytestmark = pytest.mark.subprocess

WORKER = Path(__file__).with_name("subagent_worker.py")


def _env(crash: str, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCORE_", "SUBAGENT_"))}
    if crash:
        env["AGENTCORE_CRASH_AT"] = crash
    return {**env, **extra}


def _argv(tmp: Path, cmd: str, store: str) -> list[str]:
    return [sys.executable, str(WORKER), cmd, store, str(tmp / "ledger.txt")]


def _worker(
    tmp: Path, cmd: str, crash: str = "", *, store: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _argv(tmp, cmd, store or str(tmp / "runs.db")),
        capture_output=True,
        text=True,
        env=_env(crash, env or {}),
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.mark.parametrize(
    "crash",
    [
        "after_intent_commit:2",  # the parent's call, then the child's payment: not made
        "after_tool_return:1",  # the child's payment made, not recorded
        "after_tool_return:2",  # the child completed, the parent did not record it
    ],
)
def test_a_parent_killed_mid_child_resumes_into_one_child_and_one_payment(
    crash: str, tmp_path: Path
) -> None:
    killed = _worker(tmp_path, "start", crash)
    assert killed.returncode == KILLED, killed.stdout + killed.stderr
    resumed = _worker(tmp_path, "resume")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith("completed all paid"), resumed.stdout
    assert (tmp_path / "ledger.txt").read_text().splitlines() == ["p1:1/payer:1"]
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        runs = sorted(r[0] for r in conn.execute("SELECT run_id FROM runs"))
    conn.close()
    assert runs == ["p1", "p1:1/payer"]


def _busy_child_case(tmp: Path, store: str, env: dict[str, str]) -> tuple[str, list[str], str]:
    """The parent killed once its child's payment is durable as an intent; one worker
    resumes the child (a slow payment) while another resumes the parent. The parent's
    resume's output, the ledger and the store's runs."""
    mark = tmp / "paying"
    killed = _worker(tmp, "start", "after_intent_commit:2", store=store, env=env)
    assert killed.returncode == KILLED, killed.stdout + killed.stderr
    slow = {**env, "SUBAGENT_PAY_S": "3", "SUBAGENT_MARK": str(mark)}
    with subprocess.Popen(
        _argv(tmp, "resume-child", store),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env("", slow),
    ) as busy:
        until = time.monotonic() + TIMEOUT_S
        while not mark.exists():  # the child's worker is making the payment now
            assert busy.poll() is None and time.monotonic() < until, busy.communicate()
            time.sleep(0.05)
        parent = _worker(tmp, "resume", store=store, env=env)
        out, err = busy.communicate(timeout=TIMEOUT_S)
    assert busy.returncode == 0 and out.startswith("completed paid 5"), out + err
    assert parent.returncode == 0, parent.stderr
    runs = _worker(tmp, "runs", store=store, env=env).stdout.split()
    return parent.stdout, (tmp / "ledger.txt").read_text().splitlines(), " ".join(runs)


def test_a_child_another_worker_is_running_is_waited_for_not_failed(tmp_path: Path) -> None:
    """A busy child is a call in progress: the resumed parent waits for it and adopts its
    answer; its model never reads a failure that would make it start a second child."""
    out, ledger, runs = _busy_child_case(tmp_path, str(tmp_path / "runs.db"), {})
    assert out.startswith("completed all paid"), out
    assert ledger == ["p1:1/payer:1"]
    assert runs == "p1 p1:1/payer"


def test_a_child_another_worker_is_running_is_waited_for_postgres(
    tmp_path: Path, postgres_dsn: str, pg_schema: str
) -> None:
    env = {"SUBAGENT_SCHEMA": pg_schema, "SUBAGENT_PARENT_LEASE": "1", "SUBAGENT_CHILD_LEASE": "6"}
    out, ledger, runs = _busy_child_case(tmp_path, postgres_dsn, env)
    assert out.startswith("completed all paid"), out
    assert ledger == ["p1:1/payer:1"]
    assert runs == "p1 p1:1/payer"
