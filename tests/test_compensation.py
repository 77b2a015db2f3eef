"""Compensation (issue 22, part 3), through the public API: a stopped run's committed
effects are undone newest first, each at most once; what is in doubt is reconciled or put
to a person first; a failing undo stops for a person; a policy can compensate by itself.
Real processes killed at every point of a compensation: tests/faults/test_compensation.py.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from test_cli import cli

from agentcore import (
    Agent,
    CommittedCall,
    Compensation,
    Policy,
    RunStatus,
    ToolContext,
    check_transcript,
    tool,
)
from agentcore.adapters import ScriptedModel
from agentcore.errors import RunError, ToolDefinitionError, ToolOutcomeUnknownError
from agentcore.events import CompensationFinished, CompensationStarted, Event, RunFinished
from agentcore.stores import MemoryStore, SQLiteStore

NO_PLAN = Policy(plan_before_writes=False)


def of(events: Sequence[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


class Bank:
    """A system outside agentcore: what happened, in order, by key."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.fail_undo: set[str] = set()
        self.seen: list[CommittedCall] = []
        self.keys: list[str | None] = []

    def make_agent(
        self, *, policy: Policy = NO_PLAN, plan: list[dict[str, Any]], finish: bool = True
    ) -> Agent:
        bank = self

        def refund(call: CommittedCall) -> dict[str, Any]:
            ctx = ToolContext.current()
            bank.keys.append(ctx.idempotency_key if ctx else None)
            if call.args["to"] in bank.fail_undo:
                raise RuntimeError(f"bank refused the refund to {call.args['to']}")
            bank.seen.append(call)
            bank.log.append(f"refund {call.args['to']} {call.args['amount']}")
            return {"refunded": call.result["id"]}

        @tool(effect="write", compensate=refund)
        def pay(to: str, amount: int) -> dict[str, Any]:
            """Pay someone."""
            bank.log.append(f"pay {to} {amount}")
            return {"id": f"tx-{to}"}

        @tool(effect="write")
        def note(text: str) -> str:
            """Write a note (cannot be undone)."""
            bank.log.append(f"note {text}")
            return "noted"

        @tool(effect="write", compensate=lambda call: bank.log.append("undo flaky"))
        def flaky(n: int) -> str:
            """Fails."""
            raise ValueError("no")

        @tool(effect="destructive")
        def close(account: str) -> str:
            """Close an account."""
            bank.log.append(f"close {account}")
            return "closed"

        @tool(effect="write", compensate=lambda call: bank.log.append("undo lost"))
        def lost(n: int) -> str:
            """Its outcome is lost."""
            bank.log.append("lost happened")
            raise ToolOutcomeUnknownError("connection dropped after the request was sent")

        steps = [*plan, {"type": "finish", "thought": "d", "answer": "done"}] if finish else plan
        return Agent(
            tools=[pay, note, flaky, close, lost],
            model=ScriptedModel(steps),
            store=MemoryStore(),
            policy=policy,
        )


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool", "thought": name, "tool": name, "args": args}


PAYS = [call("pay", to="a", amount=1), call("pay", to="b", amount=2)]


async def test_a_cancelled_runs_effects_are_undone_newest_first_once() -> None:
    bank = Bank()
    agent = bank.make_agent(plan=[*PAYS, call("flaky", n=1), call("close", account="x")])
    paused = await agent.run("pay and close", run_id="r1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    with pytest.raises(RunError, match="cancel it first"):
        await agent.compensate("r1", by="ops")
    await agent.cancel("r1", by="ops", reason="wrong customer")
    done = await agent.compensate("r1", by="ops")
    assert done.status is RunStatus.CANCELLED
    assert bank.log == ["pay a 1", "pay b 2", "refund b 2", "refund a 1"]
    assert done.reason == "compensated by ops: undid pay at step 2, pay at step 1"
    # what the undo was given: the call as it ran, and its own key
    assert [c.result for c in bank.seen] == [{"id": "tx-b"}, {"id": "tx-a"}]
    assert bank.keys == ["r1:2:undo", "r1:1:undo"]
    events = await agent.transcript("r1")
    assert [e.by for e in of(events, CompensationStarted)] == ["ops", "ops"]
    assert [e.outcome for e in of(events, CompensationFinished)] == ["undone", "undone"]
    assert of(events, CompensationFinished)[0].result == {"refunded": "tx-b"}
    assert check_transcript(events) == []
    # again: nothing more happens or is recorded
    n = len(events)
    again = await agent.compensate("r1", by="ops")
    assert again.status is RunStatus.CANCELLED and len(await agent.transcript("r1")) == n
    assert bank.log.count("refund a 1") == 1
    assert (await agent.resume("r1", by="ops")).status is RunStatus.CANCELLED  # closed
    assert len(await agent.transcript("r1")) == n


async def test_what_cannot_be_undone_is_named_and_failed_calls_are_left_alone() -> None:
    bank = Bank()
    agent = bank.make_agent(
        plan=[call("pay", to="a", amount=1), call("note", text="hi"), call("flaky", n=1)],
        policy=Policy(plan_before_writes=False, compensate_completed=True),
    )
    result = await agent.run("go", run_id="r1")
    assert result.status is RunStatus.COMPLETED  # a finished run can be undone, when allowed
    done = await agent.compensate("r1", by="ops")
    assert "could not undo (no compensate): note at step 2" in (done.reason or "")
    assert "undo flaky" not in bank.log and "refund a 1" in bank.log


async def test_a_failing_undo_stops_for_a_person_and_a_second_call_goes_on() -> None:
    bank = Bank()
    bank.fail_undo.add("b")
    agent = bank.make_agent(plan=[*PAYS, call("close", account="x")])
    await agent.run("go", run_id="r1")
    await agent.cancel("r1", by="ops")
    stopped = await agent.compensate("r1", by="ops")
    assert stopped.status is RunStatus.NEEDS_ATTENTION
    assert "undo of pay at step 2 failed: RuntimeError: bank refused" in (stopped.reason or "")
    assert bank.log == ["pay a 1", "pay b 2"]  # nothing older undone meanwhile
    with pytest.raises(RunError, match="being compensated"):
        await agent.resume("r1", by="ops")
    bank.fail_undo.clear()
    done = await agent.compensate("r1", by="ops")
    assert done.status is RunStatus.CANCELLED
    assert bank.log[-2:] == ["refund b 2", "refund a 1"]
    events = await agent.transcript("r1")
    outcomes = [e.outcome for e in of(events, CompensationFinished)]
    assert outcomes == ["failed", "undone", "undone"]
    assert check_transcript(events) == []


async def test_a_call_in_doubt_is_settled_by_a_person_before_anything_older() -> None:
    bank = Bank()
    agent = bank.make_agent(plan=[call("pay", to="a", amount=1), call("lost", n=1)])
    stuck = await agent.run("go", run_id="r1")
    assert stuck.status is RunStatus.NEEDS_ATTENTION  # the lost call, no reconcile
    await agent.cancel("r1", by="ops")
    stopped = await agent.compensate("r1", by="ops")
    assert stopped.status is RunStatus.NEEDS_ATTENTION
    assert "may or may not have happened" in (stopped.reason or "")
    assert "--done c2 | --not-done c2" in (stopped.reason or "")
    assert "refund a 1" not in bank.log  # nothing older before it is settled
    with pytest.raises(RunError, match="nothing is in doubt about c1"):
        await agent.compensate("r1", by="ops", settle={"c1": "done"})
    done = await agent.compensate("r1", by="ops", settle={"c2": "done"})
    assert done.status is RunStatus.CANCELLED
    assert bank.log[-2:] == ["undo lost", "refund a 1"]


async def test_a_compensation_stopped_before_any_undo_never_advances_again() -> None:
    bank = Bank()
    agent = bank.make_agent(plan=[call("lost", n=1)])
    assert (await agent.run("go", run_id="r1")).status is RunStatus.NEEDS_ATTENTION
    await agent.cancel("r1", by="ops")
    stopped = await agent.compensate("r1", by="ops")  # stops on the call in doubt at once
    assert stopped.status is RunStatus.NEEDS_ATTENTION
    n = len(await agent.transcript("r1"))
    for go_on in (agent.resume("r1"), agent.resume("r1", by="ops")):
        with pytest.raises(RunError, match="being compensated"):
            await go_on
    with pytest.raises(RunError, match="being compensated"):
        await agent.resolve("r1", by="ops", rerun=True)
    assert len(await agent.transcript("r1")) == n and bank.log == ["lost happened"]
    assert check_transcript(await agent.transcript("r1")) == []


async def test_compensating_a_cancelled_run_with_nothing_to_undo_keeps_it_sound() -> None:
    bank = Bank()
    agent = bank.make_agent(plan=[call("close", account="x")])
    await agent.run("close x", run_id="r1")  # waits for a person
    await agent.cancel("r1", by="ops")
    done = await agent.compensate("r1", by="ops")
    assert done.status is RunStatus.CANCELLED
    assert done.reason == "compensated by ops: nothing needed undoing"
    assert check_transcript(await agent.transcript("r1")) == []


async def test_a_person_can_say_a_call_in_doubt_never_happened() -> None:
    bank = Bank()
    agent = bank.make_agent(plan=[call("pay", to="a", amount=1), call("lost", n=1)])
    await agent.run("go", run_id="r1")
    await agent.cancel("r1", by="ops")
    done = await agent.compensate("r1", by="ann", settle={"c2": "not_done"})
    assert done.status is RunStatus.CANCELLED and "undo lost" not in bank.log
    finished = of(await agent.transcript("r1"), CompensationFinished)
    assert (finished[0].outcome, finished[0].reason) == (
        "not_needed",
        "ann says the call did not happen",
    )


async def test_reconcile_settles_a_call_in_doubt_by_itself() -> None:
    ledger: list[str] = []
    visible: list[str] = []  # what the payment system shows so far (it lags)

    def reconcile(key: str) -> dict[str, str] | None:
        return {"id": "tx-9"} if f"paid {key}" in visible else None

    @tool(effect="write", reconcile=reconcile, compensate=lambda c: ledger.append("refunded"))
    def pay(ctx: ToolContext, amount: int) -> str:
        """Pay."""
        ledger.append(f"paid {ctx.idempotency_key}")
        raise ToolOutcomeUnknownError("the answer never came")

    agent = Agent(
        tools=[pay],
        model=ScriptedModel([call("pay", amount=5)]),
        store=MemoryStore(),
        policy=NO_PLAN,
    )
    stuck = await agent.run("go", run_id="r1")
    assert stuck.status is RunStatus.NEEDS_ATTENTION  # reconcile could not see it yet
    await agent.cancel("r1", by="ops")
    visible.extend(ledger)  # now it shows
    done = await agent.compensate("r1", by="ops")
    assert done.status is RunStatus.CANCELLED
    assert ledger == ["paid r1:1", "refunded"]


@pytest.mark.parametrize("ending", ["cancelled", "failed"])
async def test_the_policy_compensates_by_itself_on_the_endings_it_names(ending: str) -> None:
    bank = Bank()
    policy = Policy(plan_before_writes=False, compensate_on=(ending,))
    plan = [*PAYS, call("close", account="x")] if ending == "cancelled" else PAYS
    agent = bank.make_agent(plan=plan, policy=policy, finish=ending == "cancelled")
    if ending == "cancelled":
        await agent.run("go", run_id="r1")
        result = await agent.cancel("r1", by="ops")
    else:  # the script runs out after the two payments: the run fails
        result = await agent.run("go", run_id="r1")
    assert result.status is RunStatus.CANCELLED
    assert bank.log[-2:] == ["refund b 2", "refund a 1"]
    assert {e.by for e in of(await agent.transcript("r1"), CompensationStarted)} == {"policy"}
    assert (result.reason or "").startswith("compensated by policy")


async def test_a_run_that_ended_otherwise_is_left_alone_by_the_policy() -> None:
    bank = Bank()
    policy = Policy(plan_before_writes=False, compensate_on=("failed",))
    agent = bank.make_agent(plan=[*PAYS], policy=policy)
    result = await agent.run("go")
    assert result.status is RunStatus.COMPLETED
    assert not any(line.startswith("refund") for line in bank.log)
    events = await agent.transcript(result.run_id)
    assert of(events, CompensationStarted) == [] and len(of(events, RunFinished)) == 1


async def test_an_async_undo_and_a_compensation_object() -> None:
    undone: list[str] = []

    async def undo(call: CommittedCall) -> str:
        undone.append(call.idempotency_key)
        return "ok"

    @tool(effect="write", compensate=Compensation(undo, idempotent=True))
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    agent = Agent(
        tools=[pay],
        model=ScriptedModel([call("pay", amount=1)]),
        store=MemoryStore(),
        policy=NO_PLAN,
    )
    result = await agent.run("go", run_id="r1")  # the script runs out: failed
    assert result.status is RunStatus.FAILED
    assert (await agent.compensate("r1", by="ops")).status is RunStatus.CANCELLED
    assert undone == ["r1:1"]


def test_bad_declarations_and_arguments_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="a read has none"):

        @tool(effect="read", compensate=lambda c: None)
        def look() -> str:
            """Look."""
            return ""

    with pytest.raises(ToolDefinitionError, match="function or a Compensation"):

        @tool(effect="write", compensate="undo")  # type: ignore[arg-type]
        def write() -> str:
            """Write."""
            return ""

    with pytest.raises(Exception, match="compensate_on"):
        Policy(compensate_on=("completed",))


async def test_bad_settle_words_and_an_empty_by_are_refused() -> None:
    from agentcore.errors import ConfigurationError

    agent = Bank().make_agent(plan=[])
    with pytest.raises(ConfigurationError, match="by="):
        await agent.compensate("r1", by=" ")
    with pytest.raises(ConfigurationError, match="'done' or 'not_done'"):
        await agent.compensate("r1", by="ops", settle={"c1": "yes"})  # type: ignore[dict-item]


async def test_a_stopped_compensation_survives_a_restart_from_a_snapshot(tmp_path: Path) -> None:
    bank = Bank()
    bank.fail_undo.add("b")
    path = tmp_path / "runs.db"

    def agent_on_disk() -> Agent:
        agent = bank.make_agent(plan=[*PAYS, call("close", account="x")])
        agent = Agent(
            tools=list(agent.tools.values()),
            model=ScriptedModel([*PAYS, call("close", account="x")]),
            store=SQLiteStore(path),
            policy=NO_PLAN,
        )
        agent.snapshot_every = 1
        return agent

    first = agent_on_disk()
    await first.run("go", run_id="r1")
    await first.cancel("r1", by="ops")
    assert (await first.compensate("r1", by="ops")).status is RunStatus.NEEDS_ATTENTION
    await first.close()
    bank.fail_undo.clear()
    second = agent_on_disk()
    with pytest.raises(RunError, match="being compensated"):
        await second.resume("r1", by="ops")
    assert (await second.compensate("r1", by="ops")).status is RunStatus.CANCELLED
    assert bank.log[-2:] == ["refund b 2", "refund a 1"]
    await second.close()


CLI_AGENT = textwrap.dedent(
    '''
    from pathlib import Path
    from agentcore import Agent, Policy, tool
    from agentcore.adapters import ScriptedModel
    from agentcore.errors import ToolOutcomeUnknownError

    LEDGER = Path(__file__).with_name("ledger.txt")

    def note(line):
        with LEDGER.open("a") as f:
            f.write(line + "\\n")

    @tool(effect="write", compensate=lambda call: note("refund " + call.args["to"]))
    def pay(to: str) -> str:
        """Pay."""
        note("pay " + to)
        return "paid"

    @tool(effect="write", compensate=lambda call: note("undo wire"))
    def wire(to: str) -> str:
        """Wire money; the bank's answer gets lost."""
        note("wire " + to)
        raise ToolOutcomeUnknownError("the bank did not answer")

    def make(model=None, store=None):
        script = [
            {"type": "tool", "thought": "p", "tool": "pay", "args": {"to": "a"}},
            {"type": "tool", "thought": "w", "tool": "wire", "args": {"to": "b"}},
        ]
        return Agent(
            tools=[pay, wire],
            model=model or ScriptedModel(script),
            store=store,
            policy=Policy(plan_before_writes=False),
        )
    '''
)


_cli = cli  # the CLI as a user runs it (tests/test_cli.py)


@pytest.mark.subprocess
def test_the_cli_compensates_with_a_persons_word_on_what_is_in_doubt(tmp_path: Path) -> None:
    (tmp_path / "bankagent.py").write_text(CLI_AGENT)
    started = _cli(tmp_path, "run", "bankagent:make", "pay and wire")
    assert started.returncode == 5, started.stdout + started.stderr  # needs_attention
    run_id = next(w for w in started.stdout.split() if len(w) == 32)
    busy = _cli(tmp_path, "compensate", run_id, "--by", "ops")
    assert busy.returncode == 5 and "--done c2 | --not-done c2" in busy.stdout
    both = _cli(tmp_path, "compensate", run_id, "--by", "ops", "--done", "c2", "--not-done", "c2")
    assert both.returncode == 1 and "both --done and --not-done" in both.stderr
    done = _cli(tmp_path, "compensate", run_id, "--by", "ops", "--done", "c2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cancelled" in done.stdout and "undid wire at step 2, pay at step 1" in done.stdout
    ledger = (tmp_path / "ledger.txt").read_text().splitlines()
    assert ledger == ["pay a", "wire b", "undo wire", "refund a"]
    assert _cli(tmp_path, "check", run_id).returncode == 0  # the transcript is sound
    shown = _cli(tmp_path, "show", run_id)
    assert "wire: undone" in shown.stdout and "undoing pay (by ops)" in shown.stdout
