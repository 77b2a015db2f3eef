"""The CLI without surprises, as a newcomer meets it: real processes, real SQLite files.

The demo is offline unless a model is named; a scripted run continues where its transcript
stands in another process; printed commands run as printed; Ctrl-C stops at a safe point;
output for pipes is plain and whole; listings create nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY")

AGENTS = textwrap.dedent(
    '''
    import asyncio, os, pathlib
    from agentcore import Agent, Policy, tool
    from agentcore.adapters import ScriptedModel

    LOG = pathlib.Path("effects.log")

    @tool(effect="write", idempotent=False)
    def add_note(order_id: str, note: str) -> str:
        """Add a note to an order."""
        with LOG.open("a") as fh:
            fh.write(f"note {order_id} {note}\\n")
        return "noted"

    @tool(effect="destructive")
    def close_order(order_id: str) -> str:
        """Close an order for good."""
        with LOG.open("a") as fh:
            fh.write(f"close {order_id}\\n")
        return "closed"

    @tool(effect="read")
    async def slow(seconds: float) -> str:
        """Wait, then answer."""
        pathlib.Path("started").write_text("yes")
        await asyncio.sleep(seconds)
        pathlib.Path("finished").write_text("yes")
        return "slept"

    SCRIPT = [
        {"type": "tool", "thought": "note", "tool": "add_note",
         "args": {"order_id": "A1", "note": "hello"}},
        {"type": "tool", "thought": "close", "tool": "close_order", "args": {"order_id": "A1"}},
        {"type": "finish", "thought": "done", "answer": "A1 noted and closed"},
    ]

    def scripted(model=None, store=None):
        return Agent(tools=[add_note, close_order], model=model or ScriptedModel(SCRIPT),
                     store=store, policy=Policy(plan_before_writes=False))

    def sleepy(model=None, store=None):
        seconds = float(os.environ.get("SLEEP", "2"))
        script = [
            {"type": "tool", "thought": "wait", "tool": "slow", "args": {"seconds": seconds}},
            {"type": "finish", "thought": "done", "answer": "rested"},
        ]
        return Agent(tools=[slow], model=model or ScriptedModel(script), store=store,
                     lease_s=1.0)

    @tool(effect="read")
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return "shipped"

    def looping(model=None, store=None):
        step = {"type": "tool", "thought": "again", "tool": "lookup", "args": {"order_id": "A1"}}
        return Agent(tools=[lookup], model=model or ScriptedModel(lambda messages: step),
                     store=store)

    def broken_factory(model=None, store=None):
        raise RuntimeError("no database password")
    '''
)


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (*PROVIDER_KEYS, "AGENTCORE_MODEL")}
    env |= {"AGENTCORE_STORE": f"sqlite:///{tmp / 'runs.db'}", "USER": "alice", **extra}
    return env


def cli(tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentcore.cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=env_for(tmp, **extra),
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def shell(tmp: Path, command: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """A printed command, pasted into a shell as it is (``agentcore`` is this interpreter's)."""
    bin_dir = str(Path(sys.executable).parent)
    env = env_for(tmp, **extra)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def line_after(stdout: str, label: str) -> str:
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith(label)]
    return line.removeprefix(label)


def exported(tmp: Path, run_id: str, *args: str) -> list[dict[str, object]]:
    res = cli(tmp, "export", run_id, *args)
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def only_run_id(tmp: Path, *args: str) -> str:
    res = cli(tmp, "runs", "--json", *args)
    assert res.returncode == 0, res.stderr
    (run,) = [json.loads(line) for line in res.stdout.splitlines()]
    return str(run["run_id"])


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    (tmp_path / "myagents.py").write_text(AGENTS)
    return tmp_path


# --------------------------------------------------------------------------- the demo


def test_a_key_in_the_environment_never_switches_the_demo(tmp_path: Path) -> None:
    res = cli(tmp_path, "demo", OPENAI_API_KEY="sk-not-a-real-key")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "model: scripted" in res.stdout
    assert "--model openai/gpt-4.1-mini" in res.stdout  # how to switch, said once
    assert "awaiting_confirmation" in res.stdout


def test_confirming_a_scripted_demo_run_stays_on_the_scripted_model(tmp_path: Path) -> None:
    paused = cli(tmp_path, "demo")
    assert paused.returncode == 0, paused.stderr
    approve = line_after(paused.stdout, "approve: ")
    # A model configured afterwards (with a key that would fail) must not take the run over.
    done = shell(tmp_path, approve, AGENTCORE_MODEL="openai/gpt-4.1-mini", OPENAI_API_KEY="sk-bad")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "closed account C-17" in done.stdout
    run_id = only_run_id(tmp_path)
    models = {e["model"] for e in exported(tmp_path, run_id) if e["type"] == "model_called"}
    assert models == {"scripted/support-demo"}


# --------------------------------------------------------------------------- scripted lists


def test_a_scripted_list_continues_where_the_transcript_stands_in_another_process(
    agents: Path,
) -> None:
    first = cli(agents, "run", "myagents:scripted", "note and close A1")
    assert first.returncode == 3, first.stdout + first.stderr  # awaiting confirmation
    done = shell(agents, line_after(first.stdout, "approve: "))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "A1 noted and closed" in done.stdout
    # the note was written once: the confirming process did not replay step 1
    assert (agents / "effects.log").read_text().splitlines() == ["note A1 hello", "close A1"]
    run_id = only_run_id(agents)
    tools = [e["tool"] for e in exported(agents, run_id) if e["type"] == "tool_started"]
    assert tools == ["add_note", "close_order"]


# --------------------------------------------------------------------------- printed commands


def test_printed_commands_run_as_printed_with_the_store_they_need(agents: Path) -> None:
    other = f"sqlite:///{agents / 'elsewhere' / 'other.db'}"
    first = cli(agents, "run", "myagents:scripted", "note and close A1", "--store", other)
    assert first.returncode == 3, first.stdout + first.stderr
    approve = line_after(first.stdout, "approve: ")
    deny = line_after(first.stdout, "deny:    ")
    assert "<" not in approve and "<" not in deny  # no placeholder the shell cannot parse
    assert f"--store {other}" in approve
    done = shell(agents, approve)  # $AGENTCORE_STORE points elsewhere: --store must be there
    assert done.returncode == 0, done.stdout + done.stderr
    assert "A1 noted and closed" in done.stdout
    confirmations = [
        e
        for e in exported(agents, only_run_id(agents, "--store", other), "--store", other)
        if e["type"] == "confirmation"
    ]
    assert [c["by"] for c in confirmations] == ["alice"]  # $USER: the login name


def test_printed_commands_work_without_user_or_logname(agents: Path) -> None:
    """In a container or CI, $USER and $LOGNAME are often unset: the printed approve
    command still works, and records the process's account name; an empty --by is a
    usage error that speaks of the flag."""
    import pwd

    first = cli(agents, "run", "myagents:scripted", "note and close A1")
    assert first.returncode == 3, first.stdout + first.stderr
    approve = line_after(first.stdout, "approve: ")
    assert "--by" not in approve and "$USER" not in approve
    blank = shell(agents, approve + " --by ''")
    assert blank.returncode == 2, blank.stdout + blank.stderr
    assert "--by" in blank.stderr and "by=" not in blank.stderr
    bare = {k: v for k, v in env_for(agents).items() if k not in ("USER", "LOGNAME")}
    done = subprocess.run(
        ["bash", "-c", approve],
        capture_output=True,
        text=True,
        cwd=agents,
        env=bare | {"PATH": str(Path(sys.executable).parent) + os.pathsep + bare["PATH"]},
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    confirmations = [
        e for e in exported(agents, only_run_id(agents)) if e["type"] == "confirmation"
    ]
    assert [c["by"] for c in confirmations] == [pwd.getpwuid(os.geteuid()).pw_name]


def test_a_budget_stop_prints_a_resume_command_that_works(agents: Path) -> None:
    other = f"sqlite:///{agents / 'other.db'}"
    first = cli(agents, "run", "myagents:looping", "loop", "--max-steps", "2", "--store", other)
    assert first.returncode == 4, first.stdout + first.stderr
    resume = line_after(first.stdout, "resume with a larger budget: ")
    assert f"--store {other}" in resume and "--max-steps 11" in resume
    again = shell(agents, resume)
    assert again.returncode == 4, again.stdout + again.stderr  # it loops on, 11 steps in all
    assert "usage: 10 steps" in again.stdout  # the last step may only finish: it never does


# --------------------------------------------------------------------------- Ctrl-C


def _start_sleepy(tmp: Path, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentcore.cli", "run", "myagents:sleepy", "rest"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp,
        env=env_for(tmp, SLEEP=str(seconds)),
        stdin=subprocess.DEVNULL,
    )


def _wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def test_ctrl_c_lets_the_tool_finish_records_it_and_prints_the_resume_command(
    agents: Path,
) -> None:
    proc = _start_sleepy(agents, 1.5)
    _wait_for(agents / "started")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    assert (agents / "finished").exists()  # the tool was let finish
    assert "Traceback" not in stderr
    run_id = only_run_id(agents)
    assert f"interrupted  run {run_id}" in stdout
    events = exported(agents, run_id)
    assert [e["type"] for e in events][-1] == "tool_finished"  # recorded, nothing after it
    resumed = shell(agents, line_after(stdout, "resume: "))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "rested" in resumed.stdout
    assert [e["tool"] for e in exported(agents, run_id) if e["type"] == "tool_started"] == [
        "slow"
    ]  # the finished call was not run again


def test_a_second_ctrl_c_exits_at_once_and_the_run_stays_resumable(agents: Path) -> None:
    proc = _start_sleepy(agents, 30)
    _wait_for(agents / "started")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=20)
    assert time.monotonic() - started < 5  # not the 30 s of the tool
    assert proc.returncode == 130, stdout + stderr
    assert not (agents / "finished").exists()
    run_id = only_run_id(agents)
    assert run_id in stderr and "agentcore resume" in stderr
    time.sleep(1.2)  # the agent's 1 s lease expires
    resumed = cli(agents, "resume", run_id, SLEEP="0")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr


# --------------------------------------------------------------------------- options, output


def test_version_and_verbose_after_the_command(agents: Path) -> None:
    from agentcore import __version__

    version = cli(agents, "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"agentcore {__version__}"
    verbose = cli(agents, "runs", "-v")
    assert verbose.returncode == 0, verbose.stderr
    late = cli(agents, "run", "myagents:looping", "x", "-v", "--max-steps", "2")
    assert late.returncode == 4, late.stderr  # -v after the command is the global flag
    assert "run_finished" in late.stderr  # and it logs: one line per transcript event


def test_runs_and_show_json_have_stable_fields(agents: Path) -> None:
    assert cli(agents, "run", "myagents:scripted", "note").returncode == 3
    runs = cli(agents, "runs", "--json")
    (row,) = [json.loads(line) for line in runs.stdout.splitlines()]
    assert list(row) == [
        "run_id",
        "status",
        "task",
        "created_at",
        "updated_at",
        "events",
        "tenant",
    ]
    assert row["status"] == "awaiting_confirmation" and row["task"] == "note"
    shown = cli(agents, "show", str(row["run_id"]), "--json")
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    assert events[0]["type"] == "run_started" and events[0]["seq"] == 0
    assert all({"run_id", "seq", "type", "at"} <= set(e) for e in events)


def test_output_to_a_pipe_is_plain_and_whole(agents: Path) -> None:
    task = "note " + "with a very long task text that no terminal table would show whole " * 4
    res = cli(agents, "run", "myagents:scripted", task.strip())
    assert res.returncode == 3
    approve = line_after(res.stdout, "approve: ")  # one line, not wrapped at 80 columns
    assert approve.startswith("agentcore confirm ") and "--args-hash" in approve
    listed = cli(agents, "runs")
    header, row = listed.stdout.splitlines()
    assert header.split("\t") == ["run id", "status", "events", "updated", "task"]
    assert row.split("\t")[-1] == task.strip()
    assert "\x1b[" not in listed.stdout + res.stdout  # no colour codes
    shown = cli(agents, "show", row.split("\t")[0])
    assert any(line.split("\t")[2] == "run_started" for line in shown.stdout.splitlines()[1:])


def test_bad_targets_are_one_line_errors_without_a_traceback(agents: Path) -> None:
    (agents / "raising.py").write_text("raise RuntimeError('config missing')\n")
    cases = {
        "raising:agent": "config missing",
        "myagents:broken_factory": "no database password",
        "myagents:nothing": "no attribute",
        "nosuchmodule:agent": "Cannot import",
    }
    for target, message in cases.items():
        res = cli(agents, "run", target, "task")
        assert res.returncode == 2, (target, res.stderr)
        assert "Traceback" not in res.stderr, res.stderr
        assert message in res.stderr


def test_help_text_keeps_its_brackets(tmp_path: Path) -> None:
    res = cli(tmp_path, "demo", "--help", COLUMNS="300")
    assert res.returncode == 0
    assert "(extra [local])" in res.stdout


def test_contract_lint_accepts_the_name_it_prints(tmp_path: Path) -> None:
    plain = cli(tmp_path, "contract", "lint")
    assert plain.returncode == 0, plain.stderr
    name = plain.stdout.split()[1]  # "contract v1 (hash): ..."
    assert name.startswith("v")
    named = cli(tmp_path, "contract", "lint", "--version", name)
    assert named.returncode == 0, named.stderr
    assert named.stdout == plain.stdout


# --------------------------------------------------------------------------- listings


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_listing_commands_create_nothing(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'data' / 'none.db'}"
    before = _files(tmp_path)
    assert cli(tmp_path, "runs", "--store", store).returncode == 0
    assert cli(tmp_path, "runs", "--json", "--store", store).stdout == ""
    assert cli(tmp_path, "stats", "--store", store).returncode == 0
    for command in ("show", "export", "check"):
        res = cli(tmp_path, command, "abc123", "--store", store)
        assert res.returncode == 1 and "No run" in res.stderr, (command, res.stderr)
    assert _files(tmp_path) == before  # no file, no directory, no lock directory


def test_a_read_only_store_can_be_listed_and_shown_and_is_left_as_it_was(
    agents: Path,
) -> None:
    assert cli(agents, "run", "myagents:scripted", "note").returncode == 3
    run_id = only_run_id(agents)
    data = agents / "ro"
    data.mkdir()
    (agents / "runs.db").rename(data / "runs.db")
    for leftover in agents.glob("runs.db*"):  # the lock directory of the paused run
        leftover.rename(data / leftover.name)
    store = f"sqlite:///{data / 'runs.db'}"
    (data / "runs.db").chmod(0o444)
    data.chmod(0o555)
    try:
        before = {p.name: p.read_bytes() for p in data.iterdir() if p.is_file()}
        listed = cli(agents, "runs", "--store", store)
        assert listed.returncode == 0 and run_id in listed.stdout, listed.stderr
        shown = cli(agents, "show", run_id, "--store", store)
        assert shown.returncode == 0 and "run_started" in shown.stdout, shown.stderr
        assert cli(agents, "stats", "--store", store).returncode == 0
        after = {p.name: p.read_bytes() for p in data.iterdir() if p.is_file()}
        assert after == before
    finally:
        data.chmod(0o755)


def test_a_finished_runs_lock_file_is_removed(agents: Path) -> None:
    first = cli(agents, "run", "myagents:scripted", "note and close A1")
    assert shell(agents, line_after(first.stdout, "approve: ")).returncode == 0
    locks = agents / "runs.db.locks"
    assert not locks.exists() or list(locks.iterdir()) == []


def test_a_missing_provider_key_is_reported_once_with_the_command_that_resumes(
    tmp_path: Path,
) -> None:
    """The demo on a real model without its key fails at its first step: the error appears
    once (the run's reason, not also as a log line), followed by the resume command for
    when the key is set, which runs as printed."""
    res = cli(tmp_path, "demo", "--model", "openai/gpt-4.1-mini")
    assert res.returncode == 6, res.stdout + res.stderr
    assert (res.stdout + res.stderr).count("no API key") == 1, res.stdout + res.stderr
    assert "model_called" not in res.stderr
    resume = line_after(res.stdout, "set the key, then resume: ")
    assert resume.endswith("--by alice"), resume
    again = shell(tmp_path, resume)
    assert again.returncode == 6, again.stdout + again.stderr  # still no key: fails the same
    assert "2 model calls" in again.stdout  # it resumed the run and asked the model again
