"""A person's rerun against the other at-most-once mechanisms, with real processes.

Each case crosses ``resolve(rerun=True)`` (or the guard rule that decides a rerun without a
person) with a failure beside it: a crash inside the rerun, a worker stopped (SIGSTOP) past
its lease, a sync tool's thread that outlives its timeout. The ledger, which the framework
does not write, counts the side effects per idempotency key; the promise is at most one per
key plus one per person's rerun, and never two at once.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from agentcore import check_transcript
from agentcore.events import Resolution, RunFinished, ToolFinished

from ._fleet import Fleet, wait, wait_until, with_cont
from ._support import KILLED

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def sound(fleet: Fleet) -> None:
    events = fleet.events()
    assert check_transcript(events) == [], check_transcript(events)


def effects(fleet: Fleet) -> int:
    """Side effects of the run's one tool step."""
    return fleet.effects().count()[fleet.key(1)]


def reruns(fleet: Fleet) -> int:
    return sum(1 for ev in fleet.events() if isinstance(ev, Resolution) and ev.decision == "rerun")


def stopped_for_attention(fleet: Fleet) -> bool:
    return any(
        isinstance(ev, RunFinished) and ev.status == "needs_attention" for ev in fleet.events()
    )


def test_a_rerun_is_used_up_by_the_execution_it_authorises(fleet: Fleet) -> None:
    """A tool without reconcile, killed after it returned; a person's rerun, killed at the
    same point; then a plain resume: the rerun authorised one execution, which happened,
    so the call is lost again and goes to a person, not run a third time. A second
    person's rerun runs it once more."""
    fleet.kind, fleet.steps = "non_idempotent", 1
    fleet.start()
    assert fleet.run("resume", crash="after_tool_return").returncode == KILLED
    assert effects(fleet) == 1
    # "advance" waits out a killed worker's lease (PostgreSQL keeps it until it expires)
    out = fleet.run("advance")
    assert out.status == "needs_attention", out
    assert fleet.run("resolve-rerun", crash="after_tool_return").returncode == KILLED
    assert effects(fleet) == 2  # the first call, and the one rerun
    out = fleet.run("advance")
    assert out.status == "needs_attention", out
    assert effects(fleet) == 2, "a resume ran the call again on a rerun already used"
    assert "--rerun" in str(out.result and out.result["reason"])
    out = fleet.run("resolve-rerun")
    assert out.status == "completed", out
    assert effects(fleet) == 1 + reruns(fleet) == 3
    sound(fleet)


@pytest.mark.parametrize("then", ["continued", "killed"])
def test_a_stalled_holder_blocks_a_rerun_and_reconcile_settles_it(fleet: Fleet, then: str) -> None:
    """Worker A is stopped inside the reconcilable tool, before its effect, past its
    lease. B takes over, waits for A's guard and gives up (needs_attention, saying the
    guard is held). A person's rerun is refused while the guard is held, and nothing of it
    is recorded. Then the guard becomes free:

    - continued: A makes the effect (its own record is fenced); a plain resume asks
      ``reconcile``, which finds it: adopted, one effect;
    - killed: A dies before the effect; the held guard was the only reason the run
      stopped and no person answered, so a plain resume reconciles (nothing found) and
      runs the call once: one effect.
    """
    fleet.kind, fleet.steps, fleet.lease_s = "reconcile", 1, 1.5
    fleet.start()
    hold = fleet.hold("a", "tool", 1)
    a = fleet.popen("advance", HOLD=hold.spec)
    hold.wait_entered(a)
    os.kill(a.pid, signal.SIGSTOP)
    time.sleep(fleet.lease_s + 0.3)
    out = fleet.run("resume", LOST_CALL_WAIT_S="1")
    assert out.status == "needs_attention", out
    assert "still holds the call's guard" in str(out.result and out.result["reason"]), out
    refused = fleet.run("resolve-rerun")
    assert refused.returncode == 1 and refused.result is not None, refused
    assert refused.result["error"] == "CallStillRunningError", refused
    assert "guard" in refused.result["message"], refused
    assert reruns(fleet) == 0
    assert effects(fleet) == 0
    if then == "continued":
        hold.release()
        with_cont(a)
        wait(a)
        assert effects(fleet) == 1
    else:
        a.kill()
        a.communicate(timeout=30)
        assert effects(fleet) == 0
    out = fleet.run("resume")
    assert out.status == "completed", out
    assert effects(fleet) == 1
    finished = [ev for ev in fleet.events() if isinstance(ev, ToolFinished)]
    reconciled = isinstance(finished[-1].result, dict) and finished[-1].result.get("reconciled")
    assert bool(reconciled) == (then == "continued"), finished[-1]
    sound(fleet)


@pytest.mark.parametrize("kind", ["non_idempotent", "reconcile"])
def test_a_timed_out_sync_calls_thread_blocks_a_rerun_until_it_returns(
    fleet: Fleet, kind: str
) -> None:
    """A sync tool passes its timeout (0.5 s) and keeps running in its thread (5 s) before
    its effect: the run stops as needs_attention at once, but a person's rerun from
    another process is refused while that thread runs. Once it has returned, the rerun
    is accepted: the tool without reconcile runs once more (the person said so); the one
    with reconcile has its effect found and adopted."""
    fleet.kind, fleet.steps = kind, 1
    slow = {"SYNC_SLEEP_S": "5", "TOOL_TIMEOUT_S": "0.5"}
    assert fleet.run("start", **slow).status == "running"
    a = fleet.popen("resume", **slow)
    wait_until("the call timed out", lambda: stopped_for_attention(fleet))
    refused = fleet.run("resolve-rerun", **slow)
    assert a.poll() is None, "the slow call's process ended before the rerun was tried"
    assert refused.returncode == 1 and refused.result is not None, refused
    assert refused.result["error"] == "CallStillRunningError", refused
    assert reruns(fleet) == 0
    out_a = wait(a)
    assert out_a.status == "needs_attention", out_a
    assert effects(fleet) == 1  # the timed-out call made its effect after all
    out = fleet.run("resolve-rerun", SYNC_SLEEP_S="0", TOOL_TIMEOUT_S="0.5")
    assert out.status == "completed", out
    assert effects(fleet) == (2 if kind == "non_idempotent" else 1)
    assert effects(fleet) <= 1 + reruns(fleet)
    sound(fleet)
