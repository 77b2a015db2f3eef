"""Crash the worker at each named crash point, resume in a fresh process, check the promise.

Every case: a worker process SIGKILLs itself at a crash point (``AGENTCORE_CRASH_AT``); a
fresh process resumes the run; the ledger file counts the real side effects. Asserted: the
final status, the exact ledger count (with the rule it comes from), the integrity of the
transcript, and that every event durable before the kill is still there, unchanged.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentcore import RunStatus, check_transcript
from agentcore.events import ModelCalled, Resolution, ToolFinished, ToolStarted
from agentcore.testing import crash_test
from faults._support import (
    KILLED,
    RUN_ID,
    TIMEOUT_S,
    WORKER,
    Case,
    assert_store_consistent,
    dumped,
    model_calls,
    of_type,
    resumes,
    wait,
)
from faults.worker import ANSWER, ENTRY, build_agent, ledger_lines

pytestmark = pytest.mark.subprocess

KEY = f"{RUN_ID}:1"  # the idempotency key of step 1: run_id:step


@dataclass(frozen=True)
class Expect:
    """What the resume rules promise for one crash point and tool kind."""

    after_kill: int  # ledger lines when the worker died
    status: str  # status after the first fresh resume
    settle: str | None  # the worker command a person uses to settle needs_attention
    final: int  # ledger lines at the end
    rule: str  # the rule (issue 3 / docs/guarantees.md) the numbers come from
    lost_asks: int = 0  # model answers given before the kill but never recorded


_ASKED_AGAIN = (
    "the model's answer was never recorded (no action proposed): resume asks again and the "
    "tool runs once"
)
_ROLLED_BACK = (
    "the kill hit the intent commit's transaction: nothing of the batch is stored, so the "
    "transcript holds no action; resume asks again and the tool runs once"
)
EXPECTED: dict[tuple[str, str], Expect] = {
    # -- after_model_response: nothing of the answer is recorded -------------------------
    **{
        ("after_model_response", kind): Expect(0, "completed", None, 1, _ASKED_AGAIN, lost_asks=1)
        for kind in ("idempotent", "non_idempotent", "reconcile")
    },
    # -- after_intent_commit: tool_started is durable, the tool has not run --------------
    ("after_intent_commit", "idempotent"): Expect(
        0,
        "completed",
        None,
        1,
        "tool_started without tool_finished, idempotent: run again with the same key "
        "(it never ran before the kill, so once in all)",
    ),
    ("after_intent_commit", "reconcile"): Expect(
        0,
        "completed",
        None,
        1,
        "non-idempotent with reconcile: reconcile(key) finds nothing, so it runs once",
    ),
    ("after_intent_commit", "non_idempotent"): Expect(
        0,
        "needs_attention",
        "resolve-rerun",
        1,
        "non-idempotent without reconcile: never re-run blindly, stop as needs_attention; "
        "a person checks (nothing happened) and resolves --rerun: it runs once",
    ),
    # -- after_tool_return: the side effect happened, its result is not recorded ---------
    ("after_tool_return", "idempotent"): Expect(
        1,
        "completed",
        None,
        2,
        "tool_started without tool_finished, idempotent: run again with the same key; the "
        "one case where a side effect repeats (at-least-once, like Temporal/DBOS)",
    ),
    ("after_tool_return", "reconcile"): Expect(
        1,
        "completed",
        None,
        1,
        "non-idempotent with reconcile: reconcile(key) finds the call, its result is adopted",
    ),
    ("after_tool_return", "non_idempotent"): Expect(
        1,
        "needs_attention",
        "resolve-result",
        1,
        "non-idempotent without reconcile: stop as needs_attention; a person checks (it "
        "happened) and resolves --result: it is not run again",
    ),
    # -- in_append_transaction:2: inside the intent commit (append 1 is run_started) -----
    **{
        ("in_append_transaction:2", kind): Expect(
            0, "completed", None, 1, _ROLLED_BACK, lost_asks=1
        )
        for kind in ("idempotent", "non_idempotent", "reconcile")
    },
    # -- in_append_transaction:3: inside the first commit after the tool ran -------------
    ("in_append_transaction:3", "idempotent"): Expect(
        1,
        "completed",
        None,
        2,
        "an idempotent result waits for the next batch (run_finished here); that commit is "
        "lost, so tool_started has no tool_finished: run again with the same key; the "
        "finish answer in that batch is lost too, so the model is asked again",
        lost_asks=1,
    ),
    ("in_append_transaction:3", "reconcile"): Expect(
        1,
        "completed",
        None,
        1,
        "a non-idempotent result is committed alone right after the tool; that commit is "
        "lost: reconcile(key) finds the call and its result is adopted",
    ),
    ("in_append_transaction:3", "non_idempotent"): Expect(
        1,
        "needs_attention",
        "resolve-result",
        1,
        "the tool_finished commit is lost: needs_attention, settled by a person with --result",
    ),
}
_ANSWER_LOST = {"after_model_response", "in_append_transaction:2"}


def _resume_in_process(case: Case) -> str:
    """Resume once more through an agent in this process; returns the status."""

    async def go() -> str:
        agent = build_agent(str(case.db), str(case.ledger), case.kind)
        try:
            return (await agent.resume(RUN_ID)).status.value
        finally:
            await agent.close()

    return asyncio.run(go())


@pytest.mark.parametrize(("point", "kind"), list(EXPECTED), ids=[f"{p}-{k}" for p, k in EXPECTED])
def test_crash_then_resume_in_a_fresh_process(tmp_path: Path, point: str, kind: str) -> None:
    case = Case(tmp_path, kind)
    expect = EXPECTED[point, kind]

    died = case.run("start", crash=point)
    assert died.returncode == KILLED, died
    assert died.result is None
    assert case.ledger_lines() == [KEY] * expect.after_kill, expect.rule
    assert_store_consistent(case.db, RUN_ID)
    before = case.events()
    assert check_transcript(before) == []
    if point in _ANSWER_LOST:
        # Nothing of step 1 is stored: for in_append_transaction no partial batch either.
        assert [ev.type for ev in before] == ["run_started"]
    else:
        # The intent is durable; the tool's outcome is not.
        assert before[-1].type == "tool_started", [ev.type for ev in before]
        assert not of_type(before, ToolFinished)
    asks_before = case.model_asks()

    resumed = case.run("resume")
    assert resumed.returncode == 0, resumed
    assert resumed.status == expect.status, resumed
    final = resumed
    if expect.settle is not None:
        assert resumed.result is not None
        assert KEY in str(resumed.result["reason"])  # names the call and its key
        assert case.ledger_lines() == [KEY] * expect.after_kill  # stopping ran nothing
        final = case.run(expect.settle)
        assert final.returncode == 0, final
    assert final.status == "completed", final
    assert final.result is not None and final.result["answer"] == ANSWER
    assert case.ledger_lines() == [KEY] * expect.final, expect.rule

    after = case.events()
    assert dumped(after)[: len(before)] == dumped(before), "an event durable before the kill"
    assert check_transcript(after) == []
    assert_store_consistent(case.db, RUN_ID)
    assert [ev.recovery for ev in resumes(after)] == [True]
    started = of_type(after, ToolStarted)
    assert {ev.idempotency_key for ev in started if isinstance(ev, ToolStarted)} == {KEY}
    if expect.settle is not None:
        assert len(of_type(after, Resolution)) == 1

    # The model: asked again only when its answer was lost; recorded calls all counted.
    calls = model_calls(after)
    assert len(calls) == 2  # step 1 (the tool) and step 2 (finish) are recorded once each
    assert asks_before - len(model_calls(before)) == expect.lost_asks
    assert case.model_asks() == len(calls) + expect.lost_asks
    usage = final.result["usage"]
    assert usage["model_calls"] == len(calls)
    assert usage["input_tokens"] == sum(c.input_tokens for c in calls)
    assert usage["output_tokens"] == sum(c.output_tokens for c in calls)

    # Resuming a finished run returns its result and changes nothing.
    assert _resume_in_process(case) == "completed"
    assert case.ledger_lines() == [KEY] * expect.final
    assert dumped(case.events()) == dumped(after)


_KIT_POINTS = {"after_intent": "after_intent_commit", "after_effect": "after_tool_return"}


@pytest.mark.parametrize("kind", ["idempotent", "reconcile", "non_idempotent"])
def test_the_public_crash_kit_sees_what_the_table_promises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """agentcore.testing.crash_test over the same tools agrees with EXPECTED: the status after
    the first fresh resume, and the effects by then."""
    ledger = tmp_path / "kit-ledger.txt"
    monkeypatch.setenv("FAULT_LEDGER", str(ledger))
    report = crash_test(
        f"faults.worker:{kind}_tool",
        {"entry": ENTRY},
        effects=lambda: len(ledger_lines(ledger)),
        boundaries=list(_KIT_POINTS),
    )
    for result in report:
        expect = EXPECTED[_KIT_POINTS[result.boundary], kind]
        effects = expect.final if expect.settle is None else expect.after_kill
        assert result.killed, report
        assert result.effects_at_kill == expect.after_kill, report
        assert result.effects == effects, f"{expect.rule}\n{report}"
        assert result.status is RunStatus(expect.status), report
        assert result.transcript_problems == (), report
    if kind == "idempotent":
        # The worker's tool appends on every run: idempotent by declaration only, so the
        # kit shows its repeat after the effect (the at-least-once row of the table).
        with pytest.raises(AssertionError, match="2 times"):
            report.assert_at_most_once()
    else:
        report.assert_at_most_once()


def test_recorded_invalid_reply_then_crash_asks_again_and_counts_both(tmp_path: Path) -> None:
    """model_called recorded, no action: resume asks again; both calls count in the budget."""
    case = Case(tmp_path, "idempotent", env={"FAULT_INVALID_FIRST": "1"})
    # The invalid reply is recorded and made durable before the re-ask; the re-ask's
    # answer is lost.
    died = case.run("start", crash="after_model_response:2")
    assert died.returncode == KILLED, died
    before = case.events()
    assert [ev.type for ev in before] == ["run_started", "model_called"]
    assert isinstance(before[1], ModelCalled) and before[1].outcome == "invalid"

    resumed = case.run("resume")
    assert resumed.returncode == 0, resumed
    assert resumed.status == "completed"
    assert case.ledger_lines() == [KEY]
    after = case.events()
    assert dumped(after)[:2] == dumped(before)
    assert check_transcript(after) == []
    calls = model_calls(after)
    assert [c.outcome for c in calls] == ["invalid", "ok", "ok"]
    assert case.model_asks() == 4  # the lost answer was asked for again
    assert resumed.result is not None
    usage = resumed.result["usage"]
    assert usage["model_calls"] == 3
    assert usage["input_tokens"] == sum(c.input_tokens for c in calls) == 150
    assert usage["output_tokens"] == sum(c.output_tokens for c in calls)


# -- approvals survive crashes ----------------------------------------------------------------

APPROVALS = {
    ("destructive", "after_intent_commit"): (0, "needs_attention", "resolve-rerun", 1),
    ("destructive", "after_tool_return"): (1, "needs_attention", "resolve-result", 1),
    # Idempotent destructive tool: after the intent commit it never ran, so the re-run is
    # its only run; after it returned, the re-run with the same key is the one repeat the
    # rules allow for an idempotent tool.
    ("destructive_idempotent", "after_intent_commit"): (0, "completed", None, 1),
    ("destructive_idempotent", "after_tool_return"): (1, "completed", None, 2),
}


@pytest.mark.parametrize(("kind", "point"), list(APPROVALS), ids=[f"{k}-{p}" for k, p in APPROVALS])
def test_approved_call_survives_a_crash_of_the_confirming_process(
    tmp_path: Path, kind: str, point: str
) -> None:
    after_kill, status, settle, final = APPROVALS[kind, point]
    case = Case(tmp_path, kind)
    # Even armed, the starting process never reaches the crash point: it pauses before the
    # tool and exits, holding nothing.
    paused = case.run("start", crash=point)
    assert paused.returncode == 0, paused
    assert paused.status == "awaiting_confirmation"
    assert paused.result is not None and paused.result["pending"]["tool"] == "record_entry"
    assert case.ledger_lines() == []

    died = case.run("confirm", crash=point)
    assert died.returncode == KILLED, died
    assert case.ledger_lines() == [KEY] * after_kill
    before = case.events()
    assert check_transcript(before) == []

    # The approval is recorded: a second confirmation is refused, nothing runs.
    again = case.run("confirm")
    assert again.returncode == 1, again
    assert again.result is not None and again.result["error"] == "NotAwaitingConfirmationError"
    assert case.ledger_lines() == [KEY] * after_kill

    resumed = case.run("resume")
    assert resumed.returncode == 0, resumed
    assert resumed.status == status, resumed
    done = case.run(settle) if settle else resumed
    assert done.returncode == 0, done
    assert done.status == "completed"
    assert case.ledger_lines() == [KEY] * final
    after = case.events()
    assert dumped(after)[: len(before)] == dumped(before)
    assert check_transcript(after) == []
    assert_store_consistent(case.db, RUN_ID)


# -- two processes resume the same crashed run ------------------------------------------------


@pytest.mark.parametrize("kind", ["reconcile", "idempotent", "non_idempotent"])
def test_two_processes_resume_the_same_crashed_run_at_once(tmp_path: Path, kind: str) -> None:
    case = Case(tmp_path, kind)
    died = case.run("start", crash="after_intent_commit")
    assert died.returncode == KILLED, died
    before = case.events()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    extra = {"FAULT_BARRIER": f"{barrier}:2"}
    procs = [case.popen("resume", extra=extra) for _ in range(2)]
    outcomes = [wait(p) for p in procs]
    for out in outcomes:
        assert out.returncode == 0, out  # the loser stops cleanly too

    after = case.events()
    assert len(resumes(after)) == 1, "exactly one resume wins the conditional append"
    assert dumped(after)[: len(before)] == dumped(before)
    assert check_transcript(after) == []
    assert_store_consistent(case.db, RUN_ID)
    statuses = [out.status for out in outcomes]
    # The winner runs the call: reconcile finds nothing / the idempotent re-run (the tool
    # never ran before the kill), or a non-idempotent call without reconcile stops as
    # needs_attention. The loser reports the store's status when it lost (the winner may
    # still be running then).
    winner = "needs_attention" if kind == "non_idempotent" else "completed"
    assert winner in statuses, statuses
    statuses.remove(winner)
    assert statuses[0] in (winner, "running"), statuses
    assert case.ledger_lines() == ([] if kind == "non_idempotent" else [KEY])


def test_resume_while_another_resume_is_inside_the_tool_does_not_run_it_again(
    tmp_path: Path,
) -> None:
    """Two resumes of one run in two processes never execute a step twice (issue 3).

    Process A resumes the crashed run and is inside the non-idempotent tool (before its side
    effect) when process B resumes the same run. The rule: exactly one resume wins, the step
    runs once.
    """
    case = Case(tmp_path, "reconcile")
    died = case.run("start", crash="after_intent_commit")
    assert died.returncode == KILLED, died
    hold = tmp_path / "hold"
    hold.mkdir()
    first = case.popen("resume", extra={"FAULT_TOOL_HOLD": str(hold)})
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not (hold / "entered").exists():
            assert first.poll() is None, wait(first)
            assert time.monotonic() < deadline, "the first resume never reached the tool"
            time.sleep(0.01)
        second = case.run("resume")
    finally:
        (hold / "release").touch()
        first_out = wait(first)
    assert first_out.returncode == 0, first_out
    assert second.returncode == 0, second
    after = case.events()
    assert check_transcript(after) == []
    assert case.ledger_lines() == [KEY], (
        f"the step ran {len(case.ledger_lines())} times; resumes recorded: "
        f"{len(resumes(after))}; first: {first_out.status}, second: {second.status}"
    )
    assert len(resumes(after)) == 1


# -- dead-lettering ---------------------------------------------------------------------------


def test_a_run_that_kills_every_resume_is_dead_lettered_then_resumed_by_hand(
    tmp_path: Path,
) -> None:
    case = Case(tmp_path, "idempotent", env={"FAULT_DEAD_LETTER_AFTER": "2"})
    crash = "after_intent_commit"
    assert case.run("start", crash=crash).returncode == KILLED
    # Policy.dead_letter_after=2: two recovery resumes die at the same point...
    for _ in range(2):
        died = case.run("resume", crash=crash)
        assert died.returncode == KILLED, died
    # ...and the third recovery stops the run instead of dying again.
    stopped = case.run("resume", crash=crash)
    assert stopped.returncode == 0, stopped
    assert stopped.status == "failed"
    assert stopped.result is not None
    assert "dead-lettered" in str(stopped.result["reason"])
    assert f"agentcore resume {RUN_ID} --by" in str(stopped.result["reason"])
    assert case.ledger_lines() == []  # every process died before the side effect
    before = case.events()
    assert check_transcript(before) == []
    assert [ev.recovery for ev in resumes(before)] == [True, True]

    # A person resumes it by hand through the CLI, without the crash: it completes.
    env = case.environ(None)
    env |= {
        "PYTHONPATH": os.pathsep.join([str(WORKER.parent), env.get("PYTHONPATH", "")]),
        "FAULT_LEDGER": str(case.ledger),
        "FAULT_TOOL_KIND": case.kind,
    }
    cli = subprocess.run(
        [
            *(sys.executable, "-m", "agentcore.cli", "resume", RUN_ID, "--by", "alice"),
            *("--agent", "worker:cli_agent", "--store", f"sqlite:///{case.db}"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert RunStatus.COMPLETED.value in cli.stdout
    assert case.ledger_lines() == [KEY]  # the idempotent re-run is its only run
    after = case.events()
    assert dumped(after)[: len(before)] == dumped(before)
    assert check_transcript(after) == []
    hand = resumes(after)[-1]
    assert hand.by == "alice" and not hand.recovery
