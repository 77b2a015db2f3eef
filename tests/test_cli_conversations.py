"""Conversations from the command line: ``agentcore reply`` in a process of its own after
``agentcore run`` (a real SQLite file between them), its exit codes and refusals, and the
turns ``agentcore show`` prints."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from test_cli import cli, printed_command

pytestmark = pytest.mark.subprocess

CHAT = textwrap.dedent(
    '''
    from agentcore import Agent, Policy, tool
    from agentcore.adapters import ScriptedModel


    @tool(effect="read")
    def get_order(order_id: str) -> dict[str, str]:
        """Look up one order."""
        return {"id": order_id, "status": "shipped"}


    @tool(effect="destructive")
    def close(order_id: str) -> str:
        """Close an order."""
        return "closed"


    def asking(model=None, store=None):
        """Asks which order, looks up the one the user names, then thanks the user."""

        def step(messages):
            said = [m.content for m in messages if m.role == "user" and "Step " not in m.content]
            if "get_order returned" in said[-1]:
                return {"type": "finish", "thought": "t", "answer": "C-3 shipped."}
            if said[-1] == "User: Thanks":
                return {"type": "finish", "thought": "t", "answer": "You're welcome."}
            if said[-1] == "User: C-3":
                args = {"order_id": "C-3"}
                return {"type": "tool", "thought": "t", "tool": "get_order", "args": args}
            return {"type": "ask", "thought": "t", "question": "Which order?"}

        return Agent(
            tools=[get_order], model=ScriptedModel(step), store=store, policy=Policy(ask=True)
        )


    def closing(model=None, store=None):
        step = {"type": "tool", "thought": "t", "tool": "close", "args": {"order_id": "A1"}}
        return Agent(
            tools=[close],
            model=ScriptedModel(lambda messages: step),
            store=store,
            policy=Policy(plan_before_writes=False),
        )
    '''
)


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "chat.py").write_text(CHAT)
    return tmp_path


def events_of(tmp: Path, run_id: str) -> list[dict[str, object]]:
    exported = cli(tmp, "export", run_id)
    assert exported.returncode == 0, exported.stderr
    return [json.loads(line) for line in exported.stdout.splitlines()]


def test_a_question_in_one_process_answered_by_reply_in_another(tmp: Path) -> None:
    asked = cli(tmp, "run", "chat:asking", "Where is my order?", "--run-id", "c1")
    assert asked.returncode == 11, asked.stdout + asked.stderr
    assert "awaiting_input  run c1" in asked.stdout
    assert "question: Which order?" in asked.stdout
    assert "reason:" not in asked.stdout  # the question is said once, as the question
    command = printed_command(asked.stdout, "reply: ")
    assert command == ["agentcore", "reply", "c1", "your answer"]

    answered = cli(tmp, *command[1:3], "C-3", "--key", "req-1")
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert "completed  run c1  turn 2" in answered.stdout
    assert "answer: C-3 shipped." in answered.stdout
    assert "get_order" in answered.stdout  # the turn followed live

    again = cli(tmp, "reply", "c1", "C-3", "--key", "req-1")  # a retried request
    assert again.returncode == 1, again.stdout + again.stderr
    assert again.stderr.count("\n") == 1 and "Traceback" not in again.stderr
    assert "already has the message with key 'req-1' (it began turn 2)" in again.stderr
    said = [e["text"] for e in events_of(tmp, "c1") if e["type"] == "user_message"]
    assert said == ["C-3"]  # not appended twice

    shown = cli(tmp, "show", "c1")
    assert shown.returncode == 0, shown.stderr
    assert "turn 2, the user: C-3" in shown.stdout  # the transcript's own line
    rows = shown.stdout.split("turn\tstatus\tmessage\thow it ended\n")[1].splitlines()
    assert rows == [
        "turn 1\tawaiting_input\tWhere is my order?\tquestion: Which order?",
        "turn 2\tcompleted\tC-3\tanswer: C-3 shipped.",
    ]
    assert "reply: " not in shown.stdout  # nothing asked now


def test_reply_json_and_show_turns_json(tmp: Path) -> None:
    assert cli(tmp, "run", "chat:asking", "Where is my order?", "--run-id", "c1").returncode == 11
    shown = cli(tmp, "show", "c1")  # waiting: show prints the question and the command
    assert "question: Which order?" in shown.stdout
    assert printed_command(shown.stdout, "reply: ") == ["agentcore", "reply", "c1", "your answer"]
    assert cli(tmp, "reply", "c1", "C-3").returncode == 0
    done = cli(tmp, "reply", "c1", "Thanks", "--json", "--max-steps", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)  # the whole of stdout: nothing else is printed
    assert outcome["status"] == "completed" and outcome["answer"] == "You're welcome."
    assert outcome["question"] is None and outcome["usage"]["steps"] == 4
    assert [(t["turn"], t["status"], t["message"]) for t in outcome["turns"]] == [
        (1, "awaiting_input", "Where is my order?"),
        (2, "completed", "C-3"),
        (3, "completed", "Thanks"),
    ]
    assert outcome["turns"][0]["question"] == "Which order?"
    (third,) = [e for e in events_of(tmp, "c1") if e["type"] == "user_message" and e["turn"] == 3]
    assert third["budget"]["max_steps"] == 2  # --max-steps is this turn's budget
    listed = cli(tmp, "show", "c1", "--turns", "--json")
    assert [json.loads(line) for line in listed.stdout.splitlines()] == outcome["turns"]
    plain = cli(tmp, "show", "c1", "--turns")
    assert plain.stdout.splitlines()[-1] == "turn 3\tcompleted\tThanks\tanswer: You're welcome."


def test_a_cancelled_run_refuses_a_reply(tmp: Path) -> None:
    assert cli(tmp, "run", "chat:asking", "Where is my order?", "--run-id", "c1").returncode == 11
    assert cli(tmp, "cancel", "c1", "--by", "ops", "--reason", "spam").returncode == 0
    refused = cli(tmp, "reply", "c1", "C-3")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Run c1 was closed by a person (cancelled" in refused.stderr
    assert "it takes no more messages" in refused.stderr and "Traceback" not in refused.stderr
    assert not [e for e in events_of(tmp, "c1") if e["type"] == "user_message"]


def test_a_run_waiting_for_an_approver_refuses_a_reply_saying_what_to_do(tmp: Path) -> None:
    waiting = cli(tmp, "run", "chat:closing", "close A1", "--run-id", "w1")
    assert waiting.returncode == 3, waiting.stdout + waiting.stderr
    refused = cli(tmp, "reply", "w1", "hurry up")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Run w1 is awaiting_confirmation" in refused.stderr
    assert "confirm or deny the waiting call first" in refused.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["reply", "c1", "   "], "the message is empty"),
        (["reply", "c1", "hi", "--key", ""], "--key is empty"),
        (["reply", "c1", "hi", "--key", "a\x1bb"], "control character"),
        (["reply", "", "hi"], "the run id is empty"),
        (["reply", "c1", "hi", "--max-steps", "0"], "--max-steps"),
    ],
)
def test_a_bad_reply_is_a_usage_error_before_any_store_is_opened(
    tmp: Path, args: list[str], needle: str
) -> None:
    refused = cli(tmp, *args)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert needle in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp / "runs.db").exists()


def test_a_reply_to_no_run_says_so(tmp: Path) -> None:
    assert cli(tmp, "run", "chat:asking", "Where is my order?", "--run-id", "c1").returncode == 11
    missing = cli(tmp, "reply", "nope", "hi", "--agent", "chat:asking")
    assert missing.returncode == 1, missing.stdout + missing.stderr
    assert "nope" in missing.stderr and "Traceback" not in missing.stderr
