"""Several worker processes on one run, over SQLite and PostgreSQL (issue 10).

Real processes (``fleet_worker.py``) advance one run through ``Agent.resume`` /
``Agent.advance`` while the test stops, kills or signals them, or kills their database
connections. Afterwards the ledger (one fsynced line per real side effect, with its
idempotency key and the worker's pid) and the stored transcript say what happened: every
step ran once (or, for an idempotent tool, again with the same key), no worker wrote after
it lost the run, and the transcript passes ``check_transcript``.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from agentcore import check_transcript
from agentcore.events import RunResumed, ToolFinished

from ._fleet import Fleet, tool_starts, wait, wait_until, with_cont

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def all_keys(fleet: Fleet, *steps: int) -> Counter[str]:
    return Counter(fleet.key(step) for step in steps)


def sound(fleet: Fleet) -> None:
    events = fleet.events()
    assert check_transcript(events) == [], check_transcript(events)


# -- two workers at once ------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ["advance", "resume"])
def test_workers_racing_on_one_run_execute_each_step_once(fleet: Fleet, cmd: str) -> None:
    """Three workers start on the same run at the same moment: each step (model call, tool
    call) is executed by exactly one of them. ``advance`` workers take shifts a step at a
    time, like queue workers; of three ``resume`` calls one does the work, the others find
    the run busy and return at once."""
    fleet.steps = 4
    fleet.start()
    barrier = fleet.tmp / "barrier"
    barrier.mkdir()
    pace = {"MODEL_DELAY_S": "0.02", "SHIFT_PAUSE_S": "0.05"}
    procs = [fleet.popen(cmd, BARRIER=f"{barrier}:3", **pace) for _ in range(3)]
    outcomes = [wait(p) for p in procs]
    for out in outcomes:
        assert out.returncode == 0, out
    effects = fleet.effects()
    assert effects.count() == all_keys(fleet, 1, 2, 3, 4), effects
    events = fleet.events()
    assert check_transcript(events) == []
    assert set(tool_starts(events).values()) == {1}
    statuses = sorted(out.status for out in outcomes)
    if cmd == "advance":
        assert statuses == ["completed"] * 3
        assert sum(int(out.result["shifts"]) for out in outcomes if out.result) >= 5
        doers = {pid for _, pid in effects.entries}
        assert len(doers) >= 2, effects  # they did take shifts (a worker pauses between)
    else:
        assert "completed" in statuses
        assert set(statuses) <= {"completed", "running"}
        doers = {pid for _, pid in effects.entries}
        assert len(doers) == 1, effects  # one resume did every step


# -- a worker stalled past its lease ---------------------------------------------------------


@pytest.mark.parametrize("point", ["model", "tool"])
def test_a_worker_stopped_past_its_lease_is_taken_over_and_fenced(fleet: Fleet, point: str) -> None:
    """Worker A is SIGSTOPped at step 2 (waiting for the model's reply, or inside the
    idempotent tool before its side effect) for longer than its lease; worker B takes the
    run over and finishes it. A, continued, cannot append: it ends cleanly reporting the
    store's status (its driver met LeaseLostError), and calls no tool after that."""
    fleet.lease_s = 1.0
    fleet.start()
    hold = fleet.hold("a", point, 2)
    a = fleet.popen("advance", HOLD=hold.spec)
    hold.wait_entered(a)
    os.kill(a.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    time.sleep(fleet.lease_s + 0.3)  # A's lease expires (by the store's clock)
    b = fleet.run("advance")
    assert b.returncode == 0 and b.status == "completed", b
    assert time.monotonic() - stopped >= fleet.lease_s
    taken = fleet.events()
    hold.release()
    with_cont(a)
    out = wait(a)
    assert out.returncode == 0, out  # no crash, no retry loop
    assert out.status == "completed", out  # the store's status, as A found it
    assert '"lost_the_run"' in out.stderr, out.stderr
    assert "LeaseLostError" not in out.stdout

    after = fleet.events()
    assert after == taken, "A appended after it lost the run"
    assert check_transcript(after) == []
    # One recovery: B's takeover of A's unfinished shift (Lease.taken_over).
    assert [ev.recovery for ev in after if isinstance(ev, RunResumed)] == [True]
    effects = fleet.effects()
    if point == "model":
        # A never started step 2's tool: every step ran once, B ran 2 and 3.
        assert effects.count() == all_keys(fleet, 1, 2, 3)
        assert effects.by(a.pid) == [fleet.key(1)]
    else:
        # A was inside step 2's tool: B re-ran it with the same key (it is idempotent),
        # and A's call, already under way, finished after B's. A called nothing more.
        assert effects.count() == all_keys(fleet, 1, 2, 2, 3)
        assert effects.by(a.pid) == [fleet.key(1), fleet.key(2)]
    assert effects.by(b.result["pid"] if b.result else -1)[-1] == fleet.key(3)


@pytest.mark.parametrize("then", ["continued", "killed", "still_stopped"])
def test_a_stalled_workers_reconcilable_call_is_never_run_twice(fleet: Fleet, then: str) -> None:
    """Worker A is SIGSTOPped inside step 2's non-idempotent tool, before its side effect,
    past its lease; worker B takes the run over. ``reconcile`` finds nothing (the effect
    has not happened yet), but A may still make it: B runs the call again only once no
    process can still be running it (A's call guard is free), and reconciles once more
    first. The ledger, which the framework does not write, counts the side effects.

    - continued: A, continued while B waits, makes the effect and lets go of the guard;
      B adopts it through ``reconcile``: one effect, made by A.
    - killed: A is SIGKILLed while B waits: the guard dies with it, and B runs the call.
    - still_stopped: A stays stopped past ``lost_call_wait_s``: B stops the run as
      ``needs_attention`` saying why, and nobody makes the effect.
    """
    fleet.kind = "reconcile"
    fleet.lease_s = 1.0
    fleet.start()
    hold = fleet.hold("a", "tool", 2)
    a = fleet.popen("advance", HOLD=hold.spec)
    hold.wait_entered(a)
    os.kill(a.pid, signal.SIGSTOP)
    time.sleep(fleet.lease_s + 0.3)  # A's lease expires (by the store's clock)
    wait_s = "6" if then == "still_stopped" else "60"
    b = fleet.popen("advance", LOST_CALL_WAIT_S=wait_s)
    # B has taken the run over and waits on A's guard: it records its takeover first.
    wait_until(
        "B took the run over",
        lambda: any(isinstance(ev, RunResumed) for ev in fleet.events()),
    )
    time.sleep(0.5)
    assert b.poll() is None, wait(b)  # still waiting: it ran nothing
    assert fleet.effects().count() == all_keys(fleet, 1)
    if then == "continued":
        hold.release()
        with_cont(a)
        out = wait(b)
        assert out.returncode == 0 and out.status == "completed", out
        assert fleet.effects().count() == all_keys(fleet, 1, 2, 3)
        assert fleet.effects().by(a.pid) == [fleet.key(1), fleet.key(2)]
        a_out = wait(a)
        assert a_out.returncode == 0 and '"lost_the_run"' in a_out.stderr, a_out
        finished = [ev for ev in fleet.events() if isinstance(ev, ToolFinished)]
        assert finished[1].result == {"key": fleet.key(2), "reconciled": True}
    elif then == "killed":
        a.kill()
        a.communicate(timeout=30)
        out = wait(b)
        assert out.returncode == 0 and out.status == "completed", out
        assert fleet.effects().count() == all_keys(fleet, 1, 2, 3)
        assert fleet.effects().by(a.pid) == [fleet.key(1)]
    else:
        out = wait(b)
        assert out.returncode == 0 and out.status == "needs_attention", out
        assert out.result is not None
        reason = str(out.result["reason"])
        assert "still holds the call's guard" in reason, reason
        assert f"agentcore resolve {fleet.run_id}" in reason, reason
        a.kill()
        a.communicate(timeout=30)
        assert fleet.effects().count() == all_keys(fleet, 1)
    assert tool_starts(fleet.events())[2] == (2 if then == "killed" else 1)
    sound(fleet)


# -- a worker killed inside its tool -----------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "keys"),
    [
        # the idempotent re-run, with the same key as the lost call
        ("idempotent", "completed", (1, 2, 2, 3)),
        # never re-run blindly: a person decides
        ("non_idempotent", "needs_attention", (1, 2)),
        # reconcile finds the key in the ledger: the call is adopted, not repeated
        ("reconcile", "completed", (1, 2, 3)),
    ],
)
def test_a_worker_killed_inside_its_tool_is_taken_over(
    fleet: Fleet, kind: str, status: str, keys: tuple[int, ...]
) -> None:
    """Worker A is SIGKILLed inside step 2's tool, after its side effect and before its
    outcome is recorded; worker B, already waiting for the run, takes it over: at once on
    SQLite (the flock died with A), after A's lease on PostgreSQL (nothing of A's is
    left to notice). The crash-safety rules decide the call's fate."""
    fleet.kind = kind
    fleet.lease_s = 3.0
    fleet.start()
    hold = fleet.hold("a", "tool_after", 2)
    a = fleet.popen("advance", HOLD=hold.spec)
    hold.wait_entered(a)
    b = fleet.popen_waiting("advance")
    a.kill()
    killed_at = time.time()
    a.communicate(timeout=30)
    out = wait(b)
    assert out.returncode == 0, out
    assert out.result is not None and out.status == status, out
    waited = float(out.result["first_shift_at"]) - killed_at
    if fleet.backend == "sqlite":
        assert waited < 1.0, f"SQLite: took {waited:.2f}s to take a dead worker's run"
    else:
        # A renewed at most lease/3 before the kill, so at least 2/3 of the lease was left.
        assert waited >= fleet.lease_s * 2 / 3 - 0.2, f"PostgreSQL: taken after {waited:.2f}s"
        assert waited < fleet.lease_s + 3.0, f"PostgreSQL: taken after {waited:.2f}s"
    assert fleet.effects().count() == all_keys(fleet, *keys)
    events = fleet.events()
    assert check_transcript(events) == []
    assert [ev.recovery for ev in events if isinstance(ev, RunResumed)] == [True]


# -- the database connection killed under an append ------------------------------------------


@pytest.mark.postgres
def test_connections_killed_under_an_append_the_worker_reconnects(
    postgres_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    """pg_terminate_backend on every connection of a worker while its write-ahead append
    (``tool_started`` of step 2) waits on the run's row: the worker retries on a new
    connection, the run completes, and no event or side effect is doubled."""
    import psycopg

    fleet = Fleet(tmp_path, "postgres", dsn=postgres_dsn, schema=pg_schema, lease_s=3.0)
    app = f"{pg_schema}_a"
    try:
        fleet.start()
        hold = fleet.hold("a", "model", 2)
        a = fleet.popen("advance", HOLD=hold.spec, APP=app)
        hold.wait_entered(a)
        with psycopg.connect(postgres_dsn, autocommit=True) as sql:
            sql.execute(f'SET search_path TO "{pg_schema}"'.encode())
            with sql.transaction():
                sql.execute(
                    b"SELECT 1 FROM agentcore_runs WHERE run_id = %s FOR UPDATE", (fleet.run_id,)
                )
                hold.release()  # A's next append now waits on the row lock

                def waiting() -> bool:
                    rows = sql.execute(
                        b"""SELECT 1 FROM pg_stat_activity
                        WHERE application_name = %s AND wait_event_type = 'Lock'""",
                        (app,),
                    ).fetchall()
                    return bool(rows)

                wait_until("A's append waits on the run's row", waiting, timeout_s=20)
                killed = sql.execute(
                    b"""SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                    WHERE application_name = %s""",
                    (app,),
                ).fetchall()
                assert killed and all(ok for (ok,) in killed)
        out = wait(a)
        assert out.returncode == 0 and out.status == "completed", out
        assert "store_connection_lost" in out.stderr, out.stderr
        events = fleet.events()
        assert check_transcript(events) == []
        assert tool_starts(events) == Counter({1: 1, 2: 1, 3: 1})
        assert fleet.effects().count() == all_keys(fleet, 1, 2, 3)
    finally:
        fleet.stop_all()


# -- SIGTERM ---------------------------------------------------------------------------------


def test_sigterm_releases_the_run_so_another_worker_takes_it_at_once(fleet: Fleet) -> None:
    """A worker running under ``run_until_signalled`` gets SIGTERM inside step 2's tool
    (before the side effect): it is cancelled, releases its lease and exits 143; the worker
    waiting for the run takes it at once, not after the 30 s lease, and finishes it."""
    fleet.lease_s = 30.0
    fleet.start()
    hold = fleet.hold("a", "tool", 2)
    a = fleet.popen("advance", HOLD=hold.spec)
    hold.wait_entered(a)
    b = fleet.popen_waiting("advance")
    a.send_signal(signal.SIGTERM)
    termed_at = time.time()
    a_out = wait(a)
    assert a_out.returncode == 128 + signal.SIGTERM, a_out
    assert "Traceback" not in a_out.stderr, a_out.stderr
    out = wait(b)
    assert out.returncode == 0 and out.status == "completed", out
    assert out.result is not None
    waited = float(out.result["first_shift_at"]) - termed_at
    assert waited < 5.0, f"taken {waited:.2f}s after SIGTERM: the lease was not released"
    # A was cancelled before its side effect; B re-ran the started call (idempotent).
    effects = fleet.effects()
    assert effects.count() == all_keys(fleet, 1, 2, 3)
    assert effects.by(a.pid) == [fleet.key(1)]
    sound(fleet)
