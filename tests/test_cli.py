"""The CLI as a user runs it: real processes, a real SQLite file, exit codes and messages."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

AGENT_MODULE = textwrap.dedent(
    '''
    from agentcore import Agent, tool
    from agentcore.adapters import ScriptedModel

    @tool(effect="read")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def make(model=None, store=None):
        script = [
            {"type": "tool", "thought": "add", "tool": "add", "args": {"a": 2, "b": 3}},
            {"type": "finish", "thought": "done", "answer": "5"},
        ]
        return Agent(tools=[add], model=model or ScriptedModel(script), store=store)

    def looping(model=None, store=None):
        step = {"type": "tool", "thought": "again", "tool": "add", "args": {"a": 1, "b": 1}}
        return Agent(tools=[add], model=ScriptedModel(lambda messages: step), store=store)
    '''
)


PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY")


def cli(tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in (*PROVIDER_KEYS, "AGENTCORE_MODEL")}
    env |= {"AGENTCORE_STORE": f"sqlite:///{tmp / 'runs.db'}", "COLUMNS": "200", **extra}
    return subprocess.run(
        [sys.executable, "-m", "agentcore.cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=env,
        timeout=60,
        check=False,
    )


def run_id_of(tmp: Path) -> str:
    with sqlite3.connect(tmp / "runs.db") as conn:
        rows = conn.execute("SELECT run_id FROM runs ORDER BY updated_at DESC").fetchall()
    conn.close()
    return str(rows[0][0])


def test_demo_pauses_then_confirm_in_another_process_completes(tmp_path: Path) -> None:
    demo = cli(tmp_path, "demo")
    assert demo.returncode == 0, demo.stderr  # the pause is the demo's expected end
    assert "scripted" in demo.stdout and "not a language model" in demo.stdout
    assert "needs_plan" in demo.stdout and "awaiting_confirmation" in demo.stdout
    run_id = run_id_of(tmp_path)
    assert f"agentcore confirm {run_id} --approve --by <your-name>" in demo.stdout

    done = cli(tmp_path, "confirm", run_id, "--approve", "--by", "alice")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed" in done.stdout and "closed account C-17" in done.stdout

    again = cli(tmp_path, "confirm", run_id, "--approve", "--by", "alice")
    assert again.returncode == 1
    assert "not awaiting confirmation" in again.stderr
    assert "Traceback" not in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


def test_demo_deny_reason_reaches_the_model(tmp_path: Path) -> None:
    assert cli(tmp_path, "demo").returncode == 0
    run_id = run_id_of(tmp_path)
    res = cli(tmp_path, "confirm", run_id, "--deny", "--by", "bob", "--reason", "keep it open")
    assert res.returncode == 0, res.stderr
    assert "not closed (denied)" in res.stdout
    lines = cli(tmp_path, "export", run_id).stdout.splitlines()
    events = [json.loads(line) for line in lines]
    conf = [e for e in events if e["type"] == "confirmation"]
    assert (
        conf == [conf[0]] and conf[0]["approved"] is False and conf[0]["reason"] == "keep it open"
    )
    assert not any(e["type"] == "tool_started" and e["tool"] == "close_account" for e in events)


def test_run_show_export_runs(tmp_path: Path) -> None:
    (tmp_path / "myagents.py").write_text(AGENT_MODULE)
    res = cli(tmp_path, "run", "myagents:make", "add two and three")
    assert res.returncode == 0, res.stderr
    assert "answer: 5" in res.stdout
    run_id = run_id_of(tmp_path)

    exported = [json.loads(line) for line in cli(tmp_path, "export", run_id).stdout.splitlines()]
    assert [e["seq"] for e in exported] == list(range(len(exported)))
    assert (
        exported[0]["type"] == "run_started" and exported[0]["metadata"]["agent"] == "myagents:make"
    )
    assert exported[-1]["type"] == "run_finished" and exported[-1]["status"] == "completed"
    started = next(e for e in exported if e["type"] == "tool_started")
    assert started["args"] == {"a": 2, "b": 3}

    table = cli(tmp_path, "show", run_id)
    assert table.returncode == 0 and "[c1]" in table.stdout and "add" in table.stdout

    listed = cli(tmp_path, "runs", "--status", "completed")
    assert run_id in listed.stdout
    assert run_id not in cli(tmp_path, "runs", "--status", "failed").stdout
    assert cli(tmp_path, "runs", "--status", "nonsense").returncode == 2


def test_budget_exhausted_exit_code_and_resume_with_bigger_budget(tmp_path: Path) -> None:
    (tmp_path / "myagents.py").write_text(AGENT_MODULE)
    res = cli(tmp_path, "run", "myagents:looping", "loop", "--max-steps", "3")
    assert res.returncode == 4, res.stdout + res.stderr
    assert "budget_exhausted" in res.stdout and "allows only finish" in res.stdout
    run_id = run_id_of(tmp_path)
    # Resume finds the agent recorded in the transcript; the last step may only finish, and
    # this model never finishes, so it stops on the new budget again.
    again = cli(tmp_path, "resume", run_id, "--max-steps", "5")
    assert again.returncode == 4, again.stdout + again.stderr
    assert "usage: 4 steps" in again.stdout


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["show", "no-such-run"], 1, "No run 'no-such-run'"),
        (["confirm", "no-such-run", "--approve", "--by", "x"], 1, "No run 'no-such-run'"),
        (["confirm", "r", "--by", "x"], 2, "--approve or --deny"),
        (["confirm", "r", "--approve", "--by", "x", "--args", "{bad"], 2, "not valid JSON"),
        (["run", "nomodule:thing", "task"], 2, "Cannot import"),
        (["run", "no_colon", "task"], 2, "must look like"),
    ],
)
def test_errors_are_one_clear_line(tmp_path: Path, args: list[str], code: int, needle: str) -> None:
    res = cli(tmp_path, *args)
    assert res.returncode == code, res.stdout + res.stderr
    assert needle in res.stderr
    assert "Traceback" not in res.stderr


def test_corrupt_store_file_is_reported_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    db.write_bytes(b"this is not a database" * 100)
    before = db.read_bytes()
    res = cli(tmp_path, "runs")
    assert res.returncode == 1
    assert "Traceback" not in res.stderr and str(db) in res.stderr
    assert db.read_bytes() == before


def test_contract_lint(tmp_path: Path) -> None:
    ok = cli(tmp_path, "contract", "lint")
    assert ok.returncode == 0 and "worked examples valid" in ok.stdout
    broken = AGENT_MODULE + textwrap.dedent(
        """
        from agentcore.contracts import WorkedExample, ExampleTurn

        def drifted(model=None, store=None):
            ex = WorkedExample(
                title="old add",
                task="add",
                turns=[ExampleTurn(action={"type": "tool", "thought": "t", "tool": "add",
                                           "args": {"x": 1}})],
            )
            return Agent(tools=[add], model=ScriptedModel([]), store=store, examples=[ex])
        """
    )
    (tmp_path / "myagents.py").write_text(broken)
    bad = cli(tmp_path, "contract", "lint", "--agent", "myagents:drifted")
    assert bad.returncode == 1
    assert "old add" in bad.stderr


def test_demo_picks_a_configured_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentcore.demo import build_agent, configured_model

    for key in (*PROVIDER_KEYS, "AGENTCORE_MODEL"):
        monkeypatch.delenv(key, raising=False)
    assert configured_model() is None
    assert build_agent(store="memory://").route[0].name.startswith("scripted")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert configured_model() == "anthropic/claude-sonnet-4-5"
    monkeypatch.setenv("AGENTCORE_MODEL", "deepseek/deepseek-chat")
    assert build_agent(store="memory://").route[0].name == "deepseek/deepseek-chat"


def test_demo_with_an_unknown_provider_is_a_usage_error(tmp_path: Path) -> None:
    res = cli(tmp_path, "demo", "--model", "nosuch/model")
    assert res.returncode == 2
    assert "Unknown model 'nosuch/model'" in res.stderr
