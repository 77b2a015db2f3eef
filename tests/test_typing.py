"""What a user's type checker knows: pyright (strict) accepts the files under
``tests/typing/``, whose ``assert_type`` calls state the types agentcore's public API gives
(``Agent(output=Invoice)`` is an ``Agent[Invoice]``, its results' ``output`` an
``Invoice | None``; ``run_sync``, ``confirm_sync`` and ``stream`` take their methods'
parameters). What ``inspect`` and ``help()`` show of the twins: tests/test_facade.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
TYPING = Path(__file__).parent / "typing"


def pyright() -> str:
    found = Path(sys.executable).parent / "pyright"
    if found.exists():
        return str(found)
    on_path = shutil.which("pyright")
    if on_path is None:
        pytest.skip("pyright is not installed (a dev dependency)")
    return on_path


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("path", sorted(TYPING.glob("*.py")), ids=lambda p: p.name)
def test_pyright_strict_accepts_the_typed_api(path: Path) -> None:
    done = subprocess.run(
        [pyright(), "--outputjson", "--pythonpath", sys.executable, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = json.loads(done.stdout)
    assert report["summary"]["filesAnalyzed"] == 1, report["summary"]
    problems = [
        f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}"
        for d in report["generalDiagnostics"]
        if d["severity"] in ("error", "warning")
    ]
    assert not problems, "\n".join(problems)
