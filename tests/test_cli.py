"""The CLI as a user runs it: real processes, a real SQLite file, exit codes and messages."""

from __future__ import annotations

import json
import os
import pty
import shlex
import sqlite3
import subprocess
import sys
import textwrap
import time
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
        stdin=subprocess.DEVNULL,  # not a terminal: confirm never prompts
        timeout=60,
        check=False,
    )


def printed_command(stdout: str, label: str) -> list[str]:
    """The command printed after ``label`` (``approve: `` or ``deny:    ``), split."""
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith(label)]
    return shlex.split(line.removeprefix(label))


def with_name(command: list[str], name: str) -> list[str]:
    """A printed ``agentcore ...`` command as CLI arguments, run by the person ``name``
    (a printed command names nobody: the CLI records the login name, or ``--by``)."""
    assert command[0] == "agentcore"
    assert "--by" not in command
    return [*command[1:], "--by", name]


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
    # Why it waits is said once, with the waiting call, not again as the run's reason.
    why = "tool 'close_account' is destructive: a person must approve it"
    assert demo.stdout.count(why) == 2  # the step's decision, then the pending call's "why:"
    assert f"  why: {why}" in demo.stdout and f"reason: {why}" not in demo.stdout
    run_id = run_id_of(tmp_path)
    # The printed approval is bound to the call shown: its step and args hash.
    approve = printed_command(demo.stdout, "approve: ")
    assert approve[:4] == ["agentcore", "confirm", run_id, "--approve"]
    assert "--step" in approve and "--args-hash" in approve

    done = cli(tmp_path, *with_name(approve, "alice"))
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


def test_demo_model_is_named_never_picked_from_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentcore.demo import build_agent, configured_model

    for key in (*PROVIDER_KEYS, "AGENTCORE_MODEL"):
        monkeypatch.delenv(key, raising=False)
    assert configured_model() is None
    assert build_agent(store="memory://").route[0].name.startswith("scripted")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert configured_model() is None  # a key alone never switches the demo
    assert build_agent(store="memory://").route[0].name.startswith("scripted")
    monkeypatch.setenv("AGENTCORE_MODEL", "deepseek/deepseek-chat")
    assert build_agent(store="memory://").route[0].name == "deepseek/deepseek-chat"


def test_demo_with_an_unknown_provider_is_a_usage_error(tmp_path: Path) -> None:
    res = cli(tmp_path, "demo", "--model", "nosuch/model")
    assert res.returncode == 2
    assert "Unknown model 'nosuch/model'" in res.stderr


# --------------------------------------------------------------------------- bound approvals


def events_of(tmp: Path, run_id: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in cli(tmp, "export", run_id).stdout.splitlines()]


def test_an_unbound_approval_without_a_terminal_is_refused_with_the_bound_command(
    tmp_path: Path,
) -> None:
    assert cli(tmp_path, "demo").returncode == 0
    run_id = run_id_of(tmp_path)
    before = events_of(tmp_path, run_id)
    res = cli(tmp_path, "confirm", run_id, "--approve", "--by", "alice")
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"run {run_id} is waiting on step" in res.stdout
    assert "close_account(" in res.stdout and "args hash" in res.stdout
    assert "why: tool 'close_account' is destructive" in res.stdout  # why it waits
    bound = with_name(printed_command(cli(tmp_path, "show", run_id).stdout, "approve: "), "alice")
    assert " ".join(["agentcore", *bound]) in res.stderr.replace("\n", "")
    assert "Traceback" not in res.stderr
    assert events_of(tmp_path, run_id) == before  # nothing recorded


def test_show_of_a_waiting_run_prints_the_bound_commands(tmp_path: Path) -> None:
    assert cli(tmp_path, "demo").returncode == 0
    run_id = run_id_of(tmp_path)
    shown = cli(tmp_path, "show", run_id)
    assert shown.returncode == 0
    for label, verb in (("approve: ", "--approve"), ("deny:    ", "--deny")):
        command = printed_command(shown.stdout, label)
        assert command[:4] == ["agentcore", "confirm", run_id, verb]
        assert command[command.index("--step") + 1].isdigit()
    denied = cli(tmp_path, *with_name(printed_command(shown.stdout, "deny:    "), "bob"))
    assert denied.returncode == 0, denied.stdout + denied.stderr
    assert "approve: " not in cli(tmp_path, "show", run_id).stdout  # nothing waits any more


def test_a_stale_binding_is_refused(tmp_path: Path) -> None:
    assert cli(tmp_path, "demo").returncode == 0
    run_id = run_id_of(tmp_path)
    approve = printed_command(cli(tmp_path, "show", run_id).stdout, "approve: ")
    stale = with_name(approve, "alice")
    stale[stale.index("--args-hash") + 1] = "0000000000000000"
    res = cli(tmp_path, *stale)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "changed since it was shown" in res.stderr
    step_moved = with_name(approve, "alice")
    step_moved[step_moved.index("--step") + 1] = "1"
    res = cli(tmp_path, *step_moved)
    assert res.returncode == 1 and "not step 1" in res.stderr
    assert not any(e["type"] == "confirmation" for e in events_of(tmp_path, run_id))


@pytest.mark.parametrize(("answer", "code"), [("y", 0), ("n", 1)])
def test_an_unbound_approval_on_a_terminal_asks_and_binds(
    tmp_path: Path, answer: str, code: int
) -> None:
    assert cli(tmp_path, "demo").returncode == 0
    run_id = run_id_of(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in (*PROVIDER_KEYS, "AGENTCORE_MODEL")}
    env |= {"AGENTCORE_STORE": f"sqlite:///{tmp_path / 'runs.db'}", "COLUMNS": "200"}
    leader, follower = pty.openpty()  # stdin is a terminal
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentcore.cli", "confirm", run_id, "--approve", "--by", "al"],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=env,
        )
        os.write(leader, f"{answer}\n".encode())
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == code, stdout + stderr
    assert "close_account(" in stdout and "Approve exactly this call?" in stdout
    confirmations = [e for e in events_of(tmp_path, run_id) if e["type"] == "confirmation"]
    if answer == "y":
        assert "completed" in stdout
        assert len(confirmations) == 1 and confirmations[0]["by"] == "al"
    else:
        assert "nothing recorded" in stderr
        assert confirmations == []


# --------------------------------------------------------------------------- run ids


@pytest.mark.parametrize(
    ("run_id", "needle"),
    [
        ("", "empty"),
        ("r" * 201, "201 characters"),
        ("a\tb", "control character"),
        ("a\udcffb", "surrogate"),  # argv bytes that are not UTF-8
    ],
)
def test_a_bad_run_id_is_a_usage_error(tmp_path: Path, run_id: str, needle: str) -> None:
    res = cli(tmp_path, "show", run_id)
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["export", "{}"],
        ["check", "{}"],
        ["confirm", "{}", "--approve", "--by", "x"],
        ["resume", "{}"],
        ["resolve", "{}", "--fail", "--by", "x"],
        ["cancel", "{}", "--by", "x"],
        ["repair", "{}", "--truncate-after", "0"],
        ["run", "myagents:make", "add", "--run-id", "{}"],
    ],
    ids=lambda c: c[0],
)
def test_every_command_checks_its_run_id(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "myagents.py").write_text(AGENT_MODULE)
    res = cli(tmp_path, *("a\x1bb" if part == "{}" else part for part in command))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "control character" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "runs.db").exists()  # refused before any store was opened


# --------------------------------------------------------------------------- cancel

GATED_MODULE = textwrap.dedent(
    '''
    import time
    from pathlib import Path

    from agentcore import Agent, Policy, tool
    from agentcore.adapters import ScriptedModel

    @tool(effect="write")
    def ship(order_id: str) -> dict:
        """Ship an order (waits until the test lets it finish)."""
        Path("started").write_text(order_id)
        for _ in range(1200):
            if Path("go").exists():
                return {"shipped": order_id}
            time.sleep(0.05)
        raise TimeoutError("the test never let the tool finish")

    def make(model=None, store=None):
        script = [
            {"type": "tool", "thought": "ship", "tool": "ship", "args": {"order_id": "A1"}},
            {"type": "finish", "thought": "done", "answer": "shipped"},
        ]
        return Agent(
            tools=[ship],
            model=model or ScriptedModel(script),
            store=store,
            policy=Policy(plan_before_writes=False),
        )
    '''
)


def run_then_cancel(tmp_path: Path, module: str, source: str, run_id: str, mark: str) -> str:
    """``agentcore run MODULE:make`` in a process of its own; once it writes ``mark``,
    ``agentcore cancel`` from another process, then let it go on (the file ``go``).
    Returns its output; it must end cancelled (exit code 7)."""
    (tmp_path / f"{module}.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in (*PROVIDER_KEYS, "AGENTCORE_MODEL")}
    env |= {"AGENTCORE_STORE": f"sqlite:///{tmp_path / 'runs.db'}", "COLUMNS": "200"}
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentcore.cli",
            "run",
            f"{module}:make",
            "ship",
            "--run-id",
            run_id,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / mark).exists():
            assert runner.poll() is None, runner.communicate()
            assert time.monotonic() < deadline, f"the run never wrote {mark}"
            time.sleep(0.05)
        requested = cli(tmp_path, "cancel", run_id, "--by", "ops", "--reason", "customer called")
        assert requested.returncode == 0, requested.stdout + requested.stderr
        assert "cancel requested" in requested.stdout
        (tmp_path / "go").write_text("")
        stdout, stderr = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
    assert runner.returncode == 7, stdout + stderr  # cancelled
    return stdout


def test_cancel_from_another_process_while_a_tool_runs(tmp_path: Path) -> None:
    stdout = run_then_cancel(tmp_path, "gated", GATED_MODULE, "g1", "started")
    assert "cancelled by ops: customer called" in stdout
    events = events_of(tmp_path, "g1")
    assert [e["type"] for e in events][-3:] == ["tool_started", "tool_finished", "run_finished"]
    assert events[-2]["ok"] is True and events[-2]["result"] == {"shipped": "A1"}
    assert events[-1]["status"] == "cancelled"
    assert not any(e["type"] == "model_called" and e["step"] == 2 for e in events)
    assert cli(tmp_path, "check", "g1").returncode == 0


SLOW_MODEL_MODULE = textwrap.dedent(
    '''
    import asyncio
    from pathlib import Path

    from agentcore import Agent, Policy, tool
    from agentcore.adapters import ScriptedModel

    @tool(effect="write")
    def ship(order_id: str) -> dict:
        """Ship an order."""
        Path("shipped").write_text(order_id)
        return {"shipped": order_id}

    SHIP = {"type": "tool", "thought": "ship", "tool": "ship", "args": {"order_id": "A1"}}

    async def answer(messages):
        Path("asking").write_text("")
        for _ in range(1200):
            if Path("go").exists():
                return SHIP
            await asyncio.sleep(0.05)
        raise TimeoutError("the test never let the model answer")

    def make(model=None, store=None):
        return Agent(
            tools=[ship],
            model=model or ScriptedModel([answer]),
            store=store,
            policy=Policy(plan_before_writes=False),
        )
    '''
)


def test_cancel_from_another_process_while_the_model_answers(tmp_path: Path) -> None:
    """The request is read by the commit of the call's intent: the tool never runs, and
    the transcript says the call did not run before it says the run was cancelled."""
    stdout = run_then_cancel(tmp_path, "slow", SLOW_MODEL_MODULE, "s1", "asking")
    assert "cancelled by ops: customer called" in stdout
    assert not (tmp_path / "shipped").exists()  # the tool never ran
    events = events_of(tmp_path, "s1")
    assert [e["type"] for e in events][-3:] == ["tool_started", "tool_finished", "run_finished"]
    assert events[-2]["ok"] is False
    assert events[-2]["error"] == "not run: the run was cancelled by ops before the call started"
    assert events[-1]["status"] == "cancelled"
    assert events[-1]["reason"] == "cancelled by ops: customer called"
    assert cli(tmp_path, "check", "s1").returncode == 0


def test_cancel_a_waiting_run_now_and_a_completed_one_not(tmp_path: Path) -> None:
    assert cli(tmp_path, "demo").returncode == 0
    run_id = run_id_of(tmp_path)
    res = cli(tmp_path, "cancel", run_id, "--by", "ops")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cancelled" in res.stdout and "cancelled by ops" in res.stdout
    assert cli(tmp_path, "cancel", run_id, "--by", "ops").returncode == 0  # already cancelled
    (tmp_path / "myagents.py").write_text(AGENT_MODULE)
    assert cli(tmp_path, "run", "myagents:make", "add", "--run-id", "done").returncode == 0
    res = cli(tmp_path, "cancel", "done", "--by", "ops")
    assert res.returncode == 1
    assert "completed; nothing to cancel" in res.stderr


def test_check_reports_a_cancelled_run_that_dropped_a_started_call(tmp_path: Path) -> None:
    (tmp_path / "myagents.py").write_text(AGENT_MODULE)
    assert cli(tmp_path, "run", "myagents:make", "add", "--run-id", "d1").returncode == 0
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        # Cut the run after its tool_started and end it as 0.1.0's cancel did.
        (started,) = conn.execute(
            "SELECT seq FROM events WHERE run_id = 'd1' AND type = 'tool_started'"
        ).fetchone()
    conn.close()
    res = cli(tmp_path, "repair", "d1", "--truncate-after", str(started))
    assert res.returncode == 0, res.stderr
    script = (
        "import asyncio, sys, time\n"
        "from agentcore.events import RunFinished\n"
        "from agentcore.stores import open_store\n"
        "async def main():\n"
        "    st = open_store()\n"
        f"    ev = RunFinished(run_id='d1', seq={started + 1}, at=time.time(), "
        "status='cancelled', reason='cancelled by ops')\n"
        f"    await st.append('d1', {started + 1}, [ev])\n"
        "    await st.close()\n"
        "asyncio.run(main())\n"
    )
    env = {**os.environ, "AGENTCORE_STORE": f"sqlite:///{tmp_path / 'runs.db'}"}
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, check=True, timeout=60)
    res = cli(tmp_path, "check", "d1")
    assert res.returncode == 1
    assert "has no tool_finished" in res.stderr


def test_confirm_refuses_a_changed_tool_unless_accepted(tmp_path: Path) -> None:
    module = textwrap.dedent(
        '''
        from agentcore import Agent, Policy, tool
        from agentcore.adapters import ScriptedModel

        @tool(effect="destructive")
        def wipe(disk: str) -> str:
            """Wipe a disk."""
            return "wiped " + disk

        def next_action(messages):
            if any("wipe returned" in m.content for m in messages):
                return {"type": "finish", "thought": "done", "answer": "done"}
            return {"type": "tool", "thought": "wipe", "tool": "wipe", "args": {"disk": "d1"}}

        def make(model=None, store=None):
            return Agent(tools=[wipe], model=model or ScriptedModel(next_action), store=store,
                         policy=Policy(plan_before_writes=False))
        '''
    )
    (tmp_path / "wipers.py").write_text(module)
    paused = cli(tmp_path, "run", "wipers:make", "wipe d1", "--run-id", "w1")
    assert paused.returncode == 3, paused.stdout + paused.stderr
    approve = with_name(printed_command(paused.stdout, "approve: "), "alice")
    (tmp_path / "wipers.py").write_text(module.replace("Wipe a disk.", "Wipe a disk for good."))
    refused = cli(tmp_path, *approve)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "wipe (description changed)" in refused.stderr
    assert "--accept-tool-changes" in refused.stderr
    done = cli(tmp_path, *approve, "--accept-tool-changes")
    assert done.returncode == 0, done.stdout + done.stderr
    (conf,) = [e for e in events_of(tmp_path, "w1") if e["type"] == "confirmation"]
    assert conf["accepted_tool_changes"] == ["wipe (description changed)"]


def test_main_help_is_printed_as_the_app_prints_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``agentcore --help`` and ``agentcore`` alone print a copy of the app's help without
    loading typer, rich and the command modules (start-up time); the copy must be what the
    app itself prints. When this fails, paste the app's help into ``_MAIN_HELP``."""
    import typer.main

    from agentcore import cli

    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        typer.main.get_command(cli.app).main(["--help"], prog_name="agentcore")
    expected = capsys.readouterr().out
    assert "Commands:" in expected
    # In a user's order: running runs first, administration last.
    listed = [ln.split()[0] for ln in expected.split("Commands:")[1].splitlines() if ln.strip()]
    first = ["demo", "run", "reply", "runs", "show", "export", "confirm", "resume", "resolve"]
    assert listed[: len(first)] == first, listed
    assert listed.index("prune") > listed.index("serve") > listed.index("cancel")
    monkeypatch.setattr(sys, "argv", ["agentcore", "--help"])
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert (done.value.code, capsys.readouterr().out) == (0, expected)
    monkeypatch.setattr(sys, "argv", ["agentcore"])
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert (done.value.code, capsys.readouterr().err) == (2, expected)


def test_runs_and_serve_on_a_missing_store_say_so_on_stderr(tmp_path: Path) -> None:
    """A mistyped store path lists nothing, creates nothing, and says why on stderr."""
    missing = f"sqlite:///{tmp_path / 'typo.db'}"
    listed = cli(tmp_path, "runs", "--store", missing)
    assert listed.returncode == 0, listed.stderr
    assert f"no store at {missing}" in listed.stderr
    assert not (tmp_path / "typo.db").exists()
    port = _free_port()
    served = subprocess.Popen(
        [sys.executable, "-m", "agentcore.cli", "serve", "--store", missing, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert served.stdout is not None
        assert "agentcore console" in served.stdout.readline()
    finally:
        served.terminate()
        _, stderr = served.communicate(timeout=30)
    assert f"no store at {missing}" in stderr


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
