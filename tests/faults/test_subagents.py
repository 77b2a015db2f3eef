"""A parent killed in the middle of its sub-agent's run, resumed by a fresh process: one
child run, each effect once (issue 23, part 3).

The parent's one tool is a child agent that pays once (not idempotent, reconcilable from a
ledger agentcore does not write). The process SIGKILLs itself when the child's payment is
durable as an intent but not made, when the payment was made but not recorded, and when
the child completed but the parent did not record it. A fresh process resumes the parent.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from faults._support import KILLED, TIMEOUT_S

pytestmark = pytest.mark.subprocess

WORKER = Path(__file__).with_name("subagent_worker.py")


def _worker(tmp: Path, cmd: str, crash: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCORE_")}
    if crash:
        env["AGENTCORE_CRASH_AT"] = crash
    return subprocess.run(
        [sys.executable, str(WORKER), cmd, str(tmp / "runs.db"), str(tmp / "ledger.txt")],
        capture_output=True,
        text=True,
        env=env,
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
