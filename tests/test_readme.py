"""The Python blocks of the README and of every documentation page (``docs/**/*.md``) run
as printed, each on its own.

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

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL)


# (page, block): every page's blocks, in the order of PAGES
PAGE_BLOCKS = [(page, block) for page in PAGES for block in python_blocks(page)]
BLOCKS = [block for _, block in PAGE_BLOCKS]
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY")


def _block_id(page: Path, block: str) -> str:
    first = next(line for line in block.splitlines() if line.strip())
    return f"{page.relative_to(ROOT)}:" + re.sub(r"\W+", "_", first)[:40]


def test_the_pages_have_python_blocks() -> None:
    """A change to how blocks are found that finds none would pass every test below."""
    pages = {page.relative_to(ROOT).as_posix() for page, _ in PAGE_BLOCKS}
    assert {"README.md", "docs/getting-started.md", "docs/tools.md", "docs/stores.md"} <= pages


def test_the_front_page_is_short_and_links_every_topic() -> None:
    """The README stays a front page (issue 25): under 200 lines, linking each docs page."""
    text = README.read_text()
    assert text.count("\n") < 200
    topics = {p.name for p in (ROOT / "docs").glob("*.md")}
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)", text))
    assert not topics - linked, f"the README links no page for {sorted(topics - linked)}"


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "block", BLOCKS, ids=[_block_id(page, block) for page, block in PAGE_BLOCKS]
)
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
    """The front page's one example is the quick start, and prints what the README says."""
    quick = python_blocks(README)[0]
    assert quick == python_blocks(ROOT / "docs" / "getting-started.md")[0]
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


async def test_the_service_example_answers_client_mistakes_with_404_and_409(
    tmp_path: Path,
) -> None:
    """The "Running at scale" service (docs/scale.md), its agent moved to a memory store
    and a scripted model: an unknown run is 404; approving with a stale step is 409; none is
    a 500."""
    import runpy

    import httpx

    from agentcore.adapters import ScriptedModel
    from agentcore.testing import call, plan

    (block,) = [b for b in BLOCKS if '"""service.py:' in b]
    path = tmp_path / "service.py"
    path.write_text(block)
    ns = runpy.run_path(str(path))
    model = ScriptedModel([plan("Cancel A-1."), call("cancel_order", order_id="A-1")])
    agent = ns["agent"].configured(model=model, store="memory://")
    ns["show"].__globals__["agent"] = agent  # what the handlers call
    transport = httpx.ASGITransport(app=ns["web"])
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
        assert (await client.get("/runs/nope")).status_code == 404
        waiting = await agent.run("Cancel order A-1", metadata={"customer_id": "C-17"})
        assert waiting.status.value == "awaiting_confirmation" and waiting.pending is not None
        assert waiting.pending.args == {"order_id": "A-1"}  # the customer is the run's
        shown = (await client.get(f"/runs/{waiting.run_id}")).json()
        assert shown["pending"]["step"] == waiting.pending.step
        stale = {"by": "alice", "step": waiting.pending.step + 1, "args_hash": "0" * 16}
        refused = await client.post(f"/runs/{waiting.run_id}/confirm", json=stale)
        assert refused.status_code == 409, refused.text
        assert "step" in refused.json()["error"]
        missing = await client.post("/runs/nope/confirm", json=stale)
        assert missing.status_code == 404, missing.text
