"""The README's quick start runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.mark.subprocess
def test_quick_start_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    quick = blocks[0]
    assert "asyncio.run(main())" in quick
    res = subprocess.run(
        [sys.executable, "-c", quick],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "awaiting_confirmation"
    assert "cancel_order" in lines[1]
    assert lines[2] == "completed Order A-1 is cancelled."
    assert lines[-1].endswith("run_finished")
    assert (tmp_path / "runs.db").exists()
