"""The README's Python blocks run as printed, each on its own.

A block that needs something the tests do not have (a provider key, scorecards, the
``[local]`` extra) says so in its first line, ``# needs ...``, keeps those calls under
``if __name__ == "__main__":``, and is only imported here: it builds its objects, and no
request leaves the process. Every other block runs as a script, with no provider key in the
environment (a provider call would fail with AuthenticationError before any request).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY")


def _block_id(block: str) -> str:
    first = next(line for line in block.splitlines() if line.strip())
    return re.sub(r"\W+", "_", first)[:40]


@pytest.mark.subprocess
@pytest.mark.parametrize("block", BLOCKS, ids=[_block_id(b) for b in BLOCKS])
def test_every_python_block_runs_as_printed(block: str, tmp_path: Path) -> None:
    path = tmp_path / "block.py"
    path.write_text(block)
    env = {k: v for k, v in os.environ.items() if k not in (*PROVIDER_KEYS, "AGENTCORE_MODEL")}
    env["AGENTCORE_STORE"] = f"sqlite:///{tmp_path / 'default.db'}"
    if block.startswith("# needs "):
        assert 'if __name__ == "__main__":' in block, "a marked block keeps its calls in main"
        command = [sys.executable, "-c", f"import runpy; runpy.run_path({str(path)!r})"]
    else:
        command = [sys.executable, str(path)]
    res = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert res.returncode == 0, f"{block}\n{res.stdout}\n{res.stderr}"


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
