"""Every command the CLI prints runs as printed: each test runs what was printed (in a
subprocess, as a person pasting it would) and checks it did what it said. And the
answers that print no command say what to do: ``show ""``, ``expire`` on a policy that
can expire nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_cli import cli, printed_command, with_name

pytestmark = pytest.mark.subprocess

SHOP = textwrap.dedent(
    """
    from pathlib import Path

    from agentcore import Agent, Policy, tool
    from agentcore.adapters import ScriptedModel


    @tool(effect="destructive")
    def close(order: str) -> str:
        \"\"\"Close an order.\"\"\"
        Path(__file__).with_name("closed.txt").write_text(order)
        return "closed"


    def closing():
        return ScriptedModel([
            {"type": "tool", "thought": "c", "tool": "close", "args": {"order": "A1"}},
            {"type": "finish", "thought": "d", "answer": "closed A1"},
        ])


    def make(model=None, store=None):
        return Agent(
            tools=[close], model=closing(), store=store, policy=Policy(plan_before_writes=False)
        )


    def family(model=None, store=None):
        child = make(store=store)
        return Agent(
            tools=[child.as_tool("closer", "Close an order.")],
            model=ScriptedModel([
                {"type": "tool", "thought": "a", "tool": "closer", "args": {"task": "close A1"}},
                {"type": "finish", "thought": "d", "answer": "done"},
            ]),
            store=store,
            policy=Policy(plan_before_writes=False),
        )


    @tool(effect="write", compensate=lambda call: note("unrefund " + call.args["order"]))
    def refund(order: str) -> str:
        \"\"\"Refund an order.\"\"\"
        note("refund " + order)
        return "refunded"


    def note(line):
        with Path(__file__).with_name("ledger.txt").open("a") as fh:
            fh.write(line + "\\n")


    def refunds(model=None, store=None):
        return Agent(
            tools=[refund, close],
            model=ScriptedModel([
                {"type": "tool", "thought": "r", "tool": "refund", "args": {"order": "A1"}},
                {"type": "tool", "thought": "c", "tool": "close", "args": {"order": "A1"}},
            ]),
            store=store,
            policy=Policy(plan_before_writes=False, approvals={"tool:refund": 2}),
        )


    def no_ttl(model=None, store=None):
        return make(store=store)


    def asking(model=None, store=None):
        def step(messages):
            said = [m.content for m in messages if m.role == "user" and "Step " not in m.content]
            if said[-1].startswith("User: "):  # the user's reply
                return {"type": "finish", "thought": "t", "answer": "order " + said[-1][6:]}
            return {"type": "ask", "thought": "t", "question": "Which order?"}

        return Agent(tools=[close], model=ScriptedModel(step), store=store, policy=Policy(ask=True))


    def waits(model=None, store=None):
        return Agent(
            tools=[close],
            model=closing(),
            store=store,
            policy=Policy(plan_before_writes=False, approval_ttl=60),
        )
    """
)


def shop(tmp: Path) -> Path:
    (tmp / "shop.py").write_text(SHOP)
    return tmp


def closed(tmp: Path) -> str | None:
    path = tmp / "closed.txt"
    return path.read_text() if path.exists() else None


def start_in_python(tmp: Path, store: str) -> None:
    """A run started by the application (not the CLI): no agent is recorded."""
    code = (
        "import asyncio, shop\n"
        f"r = asyncio.run(shop.make(store={store!r}).run('close A1', run_id='r1'))\n"
        "assert r.status.value == 'awaiting_confirmation', r\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp, check=True, timeout=60)


def test_show_of_a_run_the_application_started_prints_no_placeholder(tmp_path: Path) -> None:
    tmp = shop(tmp_path)
    store = f"sqlite:///{tmp / 'app.db'}"
    start_in_python(tmp, store)
    shown = cli(tmp, "show", "r1", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert "--agent MODULE:ATTR" not in shown.stdout and "approve: " not in shown.stdout
    assert "show it again with --agent naming that agent" in shown.stdout
    named = cli(tmp, "show", "r1", "--store", store, "--agent", "shop:make")
    command = printed_command(named.stdout, "approve: ")
    assert command[-4:] == ["--agent", "shop:make", "--store", store]
    approved = cli(tmp, *with_name(command, "ann"))
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "completed" in approved.stdout and closed(tmp) == "A1"


def test_show_of_a_cli_run_in_another_store_prints_commands_that_run(tmp_path: Path) -> None:
    tmp = shop(tmp_path)
    store = f"sqlite:///{tmp / 'other.db'}"
    started = cli(tmp, "run", "shop:make", "close A1", "--store", store, "--run-id", "r1")
    assert started.returncode == 3, started.stdout + started.stderr
    shown = cli(tmp, "show", "r1", "--store", store)
    command = printed_command(shown.stdout, "approve: ")
    assert "--agent" not in command  # recorded when the run started: not needed
    denied = cli(tmp, *with_name(printed_command(shown.stdout, "deny:    "), "ann"))
    assert denied.returncode == 0, denied.stdout + denied.stderr  # the model then finishes
    assert "denied by ann" in denied.stdout and closed(tmp) is None


def test_a_parent_waiting_on_its_sub_agent_prints_commands_that_run(tmp_path: Path) -> None:
    tmp = shop(tmp_path)
    store = f"sqlite:///{tmp / 'other.db'}"
    started = cli(tmp, "run", "shop:family", "close A1", "--store", store, "--run-id", "p1")
    assert started.returncode == 3, started.stdout + started.stderr  # the sub-agent tool
    delegated = cli(tmp, *with_name(printed_command(started.stdout, "approve: "), "ann"))
    assert delegated.returncode == 5, delegated.stdout + delegated.stderr
    # the child's call waits: the reason printed carries no command that lacks --store
    reason = next(ln for ln in delegated.stdout.splitlines() if ln.startswith("reason: "))
    assert "agentcore confirm" not in reason and "sub-agent run p1:1/closer" in reason
    command = printed_command(delegated.stdout, "approve: ")
    assert command[2] == "p1" and command[-2:] == ["--store", store]
    shown = cli(tmp, "show", "p1", "--store", store)  # show prints the same, from the store
    assert "sub-agent run p1:1/closer waits for a person on the call below" in shown.stdout
    assert printed_command(shown.stdout, "approve: ") == command
    done = cli(tmp, *with_name(command, "ann"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed" in done.stdout and closed(tmp) == "A1"


def test_show_of_an_empty_run_id_says_what_to_give(tmp_path: Path) -> None:
    shown = cli(tmp_path, "show", "")
    assert shown.returncode == 2
    assert "the run id is empty: give a run's id (agentcore runs lists them)" in shown.stderr
    assert "run_id=None" not in shown.stderr
    started = cli(tmp_path, "run", "x:y", "task", "--run-id", "")
    assert started.returncode == 2 and "--run-id is empty: leave it out" in started.stderr


def test_expire_on_a_policy_that_can_expire_nothing_says_why(tmp_path: Path) -> None:
    tmp = shop(tmp_path)
    assert cli(tmp, "run", "shop:make", "close A1").returncode == 3
    silent = cli(tmp, "expire", "--agent", "shop:no_ttl")
    assert silent.returncode == 2, silent.stdout + silent.stderr
    assert "nothing to expire: the policy of shop:no_ttl has no approval_ttl" in silent.stderr
    assert "Policy(approval_ttl=SECONDS" in silent.stderr
    waiting = cli(tmp, "expire", "--agent", "shop:waits")
    assert waiting.returncode == 2 and "approval_expiry='wait'" in waiting.stderr


def test_a_compensation_waiting_for_another_person_prints_their_command(tmp_path: Path) -> None:
    tmp = shop(tmp_path)
    store = f"sqlite:///{tmp / 'other.db'}"
    started = cli(tmp, "run", "shop:refunds", "refund A1", "--store", store, "--run-id", "r1")
    assert started.returncode == 3, started.stdout + started.stderr
    for person in ("alice", "bob"):
        shown = cli(tmp, "show", "r1", "--store", store)
        assert cli(tmp, *with_name(printed_command(shown.stdout, "approve: "), person)).returncode
    assert cli(tmp, "cancel", "r1", "--by", "ops", "--store", store).returncode == 0
    alone = cli(tmp, "compensate", "r1", "--by", "alice", "--store", store)
    assert alone.returncode == 5, alone.stdout + alone.stderr
    command = printed_command(alone.stdout, "continue with: ")
    assert command == ["agentcore", "compensate", "r1", "--store", store]
    done = cli(tmp, *command[1:], USER="bob", LOGNAME="bob")  # as printed, by bob
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp / "ledger.txt").read_text().splitlines() == ["refund A1", "unrefund A1"]


def test_a_question_prints_a_reply_command_that_runs(tmp_path: Path) -> None:
    tmp = shop(tmp_path)
    store = f"sqlite:///{tmp / 'other.db'}"
    asked = cli(tmp, "run", "shop:asking", "close my order", "--store", store, "--run-id", "q 1")
    assert asked.returncode == 11, asked.stdout + asked.stderr
    command = printed_command(asked.stdout, "reply: ")
    assert command == ["agentcore", "reply", "q 1", "your answer", "--store", store]
    shown = cli(tmp, "show", "q 1", "--store", store)  # show prints the same, from the store
    assert printed_command(shown.stdout, "reply: ") == command
    answered = cli(tmp, *command[1:3], "A1", *command[4:])  # the answer in its place
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert "answer: order A1" in answered.stdout


def test_a_question_in_a_run_the_application_started_asks_for_the_agent(tmp_path: Path) -> None:
    tmp = shop(tmp_path)
    store = f"sqlite:///{tmp / 'app.db'}"
    code = (
        "import asyncio, shop\n"
        f"r = asyncio.run(shop.asking(store={store!r}).run('close my order', run_id='q1'))\n"
        "assert r.status.value == 'awaiting_input', r\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp, check=True, timeout=60)
    shown = cli(tmp, "show", "q1", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert "reply: " not in shown.stdout and "for the reply command" in shown.stdout
    named = cli(tmp, "show", "q1", "--store", store, "--agent", "shop:asking")
    command = printed_command(named.stdout, "reply: ")
    assert command[-4:] == ["--agent", "shop:asking", "--store", store]
    answered = cli(tmp, *command[1:3], "B2", *command[4:])
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert "answer: order B2" in answered.stdout
