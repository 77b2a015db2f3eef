"""The public testing kit: its documented example runs, and it loads no test runner."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

import agentcore.testing


def test_the_documented_example_runs() -> None:
    result = doctest.testmod(agentcore.testing)
    assert result.attempted and not result.failed


def test_the_kit_loads_no_test_runner(tmp_path: Path) -> None:
    code = "import sys, agentcore, agentcore.testing; print('pytest' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "False"
