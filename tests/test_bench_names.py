"""A benchmark figure is the case it names: an unknown case name is refused, never timed as
another case (bench/bench_steps.py ``--only``, bench/compare_revisions.py ``--cases``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

BENCH = Path(__file__).resolve().parent.parent / "bench"
OLDER = "9c1a250"
"""A revision whose bench_steps.py has ``memory`` (the async tool) and no ``memory_sync``."""


def _bench(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=BENCH.parent,
    )


def _has(revision: str) -> bool:
    found = subprocess.run(
        ["git", "cat-file", "-e", f"{revision}^{{commit}}"],
        cwd=BENCH.parent,
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


@pytest.mark.parametrize("case", ["memory:10", "memory_asink:10", "sqlite:10"])
def test_bench_steps_refuses_a_case_it_does_not_have(case: str) -> None:
    out = _bench("bench_steps.py", "--only", case, "--reps", "1")
    assert out.returncode == 2
    assert f"no case {case.partition(':')[0]!r}" in out.stderr
    assert "memory_async" in out.stderr  # the valid names, to pick from
    assert "ms/step" not in out.stdout


def test_bench_steps_refuses_a_step_count_that_is_not_one() -> None:
    out = _bench("bench_steps.py", "--only", "memory_async:many", "--reps", "1")
    assert out.returncode == 2
    assert "N must be a positive number of steps" in out.stderr


def test_bench_steps_times_a_case_it_has_under_its_own_name() -> None:
    out = _bench("bench_steps.py", "--only", "memory_async:10", "--reps", "1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("memory_async N=10: ")


@pytest.mark.skipif(not _has(OLDER), reason=f"{OLDER} is not in this clone's history")
def test_comparing_with_a_revision_that_lacks_a_case_stops_before_timing_anything() -> None:
    out = _bench("compare_revisions.py", "--base", OLDER, "--cases", "memory_sync:10")
    assert out.returncode != 0
    assert f"base {OLDER}'s bench_steps.py has no case 'memory_sync'" in out.stderr
    assert "us/step" not in out.stdout


@pytest.mark.skipif(not _has(OLDER), reason=f"{OLDER} is not in this clone's history")
def test_comparing_times_a_renamed_case_under_the_older_revisions_name_and_says_so() -> None:
    out = _bench(
        "compare_revisions.py", "--base", OLDER, "--cases", "memory_async:10", "--rounds", "1"
    )
    assert out.returncode == 0, out.stderr
    assert f"base {OLDER}: memory_async:10 is its memory:10" in out.stderr
    assert "| memory_async:10 |" in out.stdout
