"""An undo is an effect: the approval rules and ``Policy.authorize`` of the call it undoes
apply to it, through ``Agent.compensate``, the CLI and the console; a completed run is
undone only under ``Policy(compensate_completed=True)``."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from console.test_pages import csrf_of
from test_cli import cli, printed_command, with_name

from agentcore import Agent, CommittedCall, PendingCall, Policy, RunStatus, check_transcript, tool
from agentcore.adapters import ScriptedModel
from agentcore.console import create_app
from agentcore.errors import (
    AlreadyApprovedError,
    NotAuthorizedError,
    RunError,
    ToolOutcomeUnknownError,
)
from agentcore.events import Approval, CompensationStarted
from agentcore.stores import MemoryStore


class Ledger:
    """The payment provider: what happened, in order."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.asked: list[tuple[str, str, str | None]] = []

    def agent(self, policy: Policy, store: MemoryStore | None = None) -> Agent:
        ledger = self

        def unrefund(call: CommittedCall) -> str:
            ledger.log.append(f"unrefund {call.args['order']}")
            return "reversed"

        @tool(effect="write", compensate=unrefund)
        def refund(order: str) -> str:
            """Refund an order."""
            ledger.log.append(f"refund {order}")
            return "refunded"

        return Agent(
            tools=[refund],
            model=ScriptedModel(
                [
                    {"type": "tool", "thought": "r", "tool": "refund", "args": {"order": "A1"}},
                    {"type": "finish", "thought": "d", "answer": "refunded A1"},
                ]
            ),
            store=store or MemoryStore(),
            policy=policy,
        )

    def authorize(self, by: str, pending: PendingCall) -> bool:
        self.asked.append((by, pending.kind, pending.tool))
        return by != "eve"


TWO = {"tool:refund": 2}


async def cancelled_after_refund(ledger: Ledger, policy: Policy) -> Agent:
    """A run whose refund two people approved and which ran, then was cancelled while a
    second step waits: its refund is committed and the run stopped."""

    def unrefund(call: CommittedCall) -> str:
        ledger.log.append(f"unrefund {call.args['order']}")
        return "reversed"

    @tool(effect="write", compensate=unrefund)
    def refund(order: str) -> str:
        """Refund an order."""
        ledger.log.append(f"refund {order}")
        return "refunded"

    @tool(effect="destructive")
    def close(order: str) -> str:
        """Close an order."""
        ledger.log.append(f"close {order}")
        return "closed"

    agent = Agent(
        tools=[refund, close],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "r", "tool": "refund", "args": {"order": "A1"}},
                {"type": "tool", "thought": "c", "tool": "close", "args": {"order": "A1"}},
            ]
        ),
        store=MemoryStore(),
        policy=policy,
    )
    await agent.run("refund A1, then close it", run_id="r1")
    for person in ("alice", "bob"):  # as many as the refund needs
        p = (await agent.result("r1")).pending
        if p is not None and p.tool == "refund":
            await agent.confirm("r1", approve=True, by=person, step=p.step, args_hash=p.args_hash)
    waiting = await agent.result("r1")
    assert waiting.pending is not None and waiting.pending.tool == "close"
    await agent.cancel("r1", by="ops")
    assert ledger.log == ["refund A1"]
    return agent


async def test_an_undo_of_a_call_two_people_approved_needs_two_people() -> None:
    ledger = Ledger()
    policy = Policy(plan_before_writes=False, approvals=TWO, authorize=ledger.authorize)
    agent = await cancelled_after_refund(ledger, policy)

    first = await agent.compensate("r1", by="alice")
    assert ledger.log == ["refund A1"]  # one person is not enough
    assert first.status is RunStatus.NEEDS_ATTENTION
    assert "needs the approval of 2 different people (1 so far: alice)" in (first.reason or "")
    assert "agentcore compensate r1 --by NAME" in (first.reason or "")
    # the same person again, however spelt, is still one person: refused, nothing recorded
    n = len(await agent.transcript("r1"))
    fullwidth = "\uff41\uff4c\uff49\uff43\uff45"  # NFKC makes it "alice"
    for again in ("alice", " alice ", "Alice", fullwidth):
        with pytest.raises(AlreadyApprovedError, match="approved the undo of refund"):
            await agent.compensate("r1", by=again)
    assert len(await agent.transcript("r1")) == n
    # a run a person began to undo never advances again
    with pytest.raises(RunError, match="being compensated"):
        await agent.resume("r1", by="alice")

    done = await agent.compensate("r1", by="bob")
    assert done.status is RunStatus.CANCELLED
    assert ledger.log == ["refund A1", "unrefund A1"]
    events = await agent.transcript("r1")
    undo_approvals = [e for e in events if isinstance(e, Approval) and e.call_id.endswith(":undo")]
    assert [(a.by, a.call_id) for a in undo_approvals] == [("alice", "c1:undo")]
    assert [e.by for e in events if isinstance(e, CompensationStarted)] == ["bob"]
    assert ("alice", "undo", "refund") in ledger.asked and ("bob", "undo", "refund") in ledger.asked
    assert check_transcript(events) == []


async def test_authorize_is_asked_about_an_undo_and_a_refusal_records_nothing() -> None:
    ledger = Ledger()
    policy = Policy(plan_before_writes=False, approvals=TWO, authorize=ledger.authorize)
    agent = await cancelled_after_refund(ledger, policy)
    n = len(await agent.transcript("r1"))
    with pytest.raises(NotAuthorizedError, match="'eve' may not undo refund at step 1"):
        await agent.compensate("r1", by="eve")
    assert len(await agent.transcript("r1")) == n and ledger.log == ["refund A1"]
    assert ledger.asked[-1] == ("eve", "undo", "refund")


async def test_an_undo_needing_no_approvals_still_asks_authorize() -> None:
    ledger = Ledger()
    policy = Policy(plan_before_writes=False, authorize=ledger.authorize)
    agent = await cancelled_after_refund(ledger, policy)
    with pytest.raises(NotAuthorizedError):
        await agent.compensate("r1", by="eve")
    done = await agent.compensate("r1", by="alice")  # one person suffices
    assert done.status is RunStatus.CANCELLED and ledger.log[-1] == "unrefund A1"


async def test_the_policy_compensates_nothing_that_needs_people() -> None:
    ledger = Ledger()
    policy = Policy(plan_before_writes=False, approvals=TWO, compensate_on=("cancelled",))
    agent = await cancelled_after_refund(ledger, policy)
    result = await agent.result("r1")
    assert ledger.log == ["refund A1"]  # compensate_on is no person
    assert result.status is RunStatus.NEEDS_ATTENTION
    assert "needs the approval of 2 different people (none so far)" in (result.reason or "")
    await agent.compensate("r1", by="alice")
    done = await agent.compensate("r1", by="bob")
    assert done.status is RunStatus.CANCELLED and ledger.log == ["refund A1", "unrefund A1"]


async def test_a_completed_run_is_undone_only_when_the_policy_says_so() -> None:
    ledger = Ledger()
    agent = ledger.agent(Policy(plan_before_writes=False))
    done = await agent.run("refund A1", run_id="r1")
    assert done.status is RunStatus.COMPLETED and done.output == "refunded A1"
    n = len(await agent.transcript("r1"))
    with pytest.raises(RunError, match=r"Policy\(compensate_completed=True\)"):
        await agent.compensate("r1", by="alice")
    kept = await agent.result("r1")
    assert kept.status is RunStatus.COMPLETED and kept.output == "refunded A1"
    assert len(await agent.transcript("r1")) == n and ledger.log == ["refund A1"]
    allowed = ledger.agent(Policy(plan_before_writes=False, compensate_completed=True), agent.store)  # type: ignore[arg-type]
    undone = await allowed.compensate("r1", by="alice")
    assert undone.status is RunStatus.CANCELLED and ledger.log == ["refund A1", "unrefund A1"]


def test_compensate_completed_must_be_a_bool() -> None:
    with pytest.raises(Exception, match="compensate_completed must be True or False"):
        Policy(compensate_completed="yes")  # type: ignore[arg-type]


CLI_AGENT = textwrap.dedent(
    """
    from pathlib import Path

    from agentcore import Agent, Policy, tool
    from agentcore.adapters import ScriptedModel

    LEDGER = Path(__file__).with_name("ledger.txt")


    def note(line):
        with LEDGER.open("a") as fh:
            fh.write(line + "\\n")


    @tool(effect="write", compensate=lambda call: note("unrefund " + call.args["order"]))
    def refund(order: str) -> str:
        \"\"\"Refund an order.\"\"\"
        note("refund " + order)
        return "refunded"


    @tool(effect="destructive")
    def close(order: str) -> str:
        \"\"\"Close an order.\"\"\"
        note("close " + order)
        return "closed"


    def make(model=None, store=None):
        return Agent(
            tools=[refund, close],
            model=ScriptedModel([
                {"type": "tool", "thought": "r", "tool": "refund", "args": {"order": "A1"}},
                {"type": "tool", "thought": "c", "tool": "close", "args": {"order": "A1"}},
            ]),
            store=store,
            policy=Policy(plan_before_writes=False, approvals={"tool:refund": 2}),
        )
    """
)


@pytest.mark.subprocess
def test_the_cli_undo_of_a_two_person_refund_needs_two_people(tmp_path: Path) -> None:
    (tmp_path / "bank.py").write_text(CLI_AGENT)
    started = cli(tmp_path, "run", "bank:make", "refund A1 then close", "--run-id", "r1")
    assert started.returncode == 3, started.stdout + started.stderr
    for person in ("alice", "bob"):
        shown = cli(tmp_path, "show", "r1")
        approved = cli(tmp_path, *with_name(printed_command(shown.stdout, "approve: "), person))
        assert approved.returncode == 3, approved.stdout + approved.stderr
    assert cli(tmp_path, "cancel", "r1", "--by", "ops").returncode == 0
    alone = cli(tmp_path, "compensate", "r1", "--by", "alice")
    assert alone.returncode == 5, alone.stdout + alone.stderr
    assert "needs the approval of 2 different people (1 so far: alice)" in alone.stdout
    assert "[c1:undo] undo approved by alice" in cli(tmp_path, "show", "r1").stdout
    twice = cli(tmp_path, "compensate", "r1", "--by", "alice")
    assert twice.returncode == 1 and "approved the undo of refund at step 1" in twice.stderr
    assert (tmp_path / "ledger.txt").read_text().split("\n")[:-1] == ["refund A1"]
    done = cli(tmp_path, "compensate", "r1", "--by", "bob")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "ledger.txt").read_text().split("\n")[:-1] == ["refund A1", "unrefund A1"]


async def test_the_console_undo_of_a_two_person_refund_needs_two_people() -> None:
    ledger = Ledger()
    policy = Policy(plan_before_writes=False, approvals=TWO, authorize=ledger.authorize)
    agent = await cancelled_after_refund(ledger, policy)
    store = agent.store
    app = create_app(store, agents=[agent], authenticate=lambda r: r.headers.get("x-user"))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://console.test"
        ) as client,
    ):

        async def undo(user: str) -> httpx.Response:
            page = await client.get("/runs/r1", headers={"X-User": user})
            form: dict[str, Any] = {"csrf": csrf_of(page.text)}
            return await client.post("/runs/r1/compensate", data=form, headers={"X-User": user})

        assert (await undo("eve")).status_code == 403
        assert (await undo("alice")).status_code == 303
        assert ledger.log == ["refund A1"]
        page = await client.get("/runs/r1", headers={"X-User": "Alice"})
        assert "1 so far: alice" in page.text and "its undo approved by alice" in page.text
        assert 'name="compensate" disabled' in page.text
        assert "You approved undoing this run already" in page.text
        theirs = await client.get("/runs/r1", headers={"X-User": "bob"})
        assert 'name="compensate">Compensate</button>' in theirs.text
        again = await undo("alice")
        assert again.status_code == 409 and "already" in again.text
        assert (await undo("bob")).status_code == 303
    assert ledger.log == ["refund A1", "unrefund A1"]


@pytest.mark.parametrize("allowed", [False, True])
async def test_the_console_offers_to_undo_a_completed_run_only_when_allowed(allowed: bool) -> None:
    ledger = Ledger()
    agent = ledger.agent(Policy(plan_before_writes=False, compensate_completed=allowed))
    assert (await agent.run("refund A1", run_id="r1")).status is RunStatus.COMPLETED
    app = create_app(agent.store, agents=[agent], authenticate=lambda r: r.headers.get("x-user"))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://console.test"
        ) as client,
    ):
        page = await client.get("/runs/r1", headers={"X-User": "alice"})
        assert ('name="compensate"' in page.text) is allowed
        assert ("Policy(compensate_completed=True)</code> on the agent does" in page.text) is (
            not allowed
        )


async def test_a_call_in_doubt_is_settled_only_once_its_undo_has_its_people() -> None:
    undone: list[str] = []

    @tool(effect="write", compensate=lambda call: undone.append(call.args["order"]))
    def refund(order: str) -> str:
        """Refund an order; the provider's answer is lost."""
        raise ToolOutcomeUnknownError("connection dropped after the request was sent")

    agent = Agent(
        tools=[refund],
        model=ScriptedModel(
            [{"type": "tool", "thought": "r", "tool": "refund", "args": {"order": "A1"}}]
        ),
        store=MemoryStore(),
        policy=Policy(plan_before_writes=False, approvals=TWO),
    )
    await agent.run("refund A1", run_id="r1")
    for person in ("alice", "bob"):
        p = (await agent.result("r1")).pending
        if p is not None:
            await agent.confirm("r1", approve=True, by=person, step=p.step, args_hash=p.args_hash)
    assert (await agent.result("r1")).status is RunStatus.NEEDS_ATTENTION  # the lost call
    first = await agent.compensate("r1", by="alice")
    assert "(1 so far: alice)" in (first.reason or "") and undone == []
    # alice's word on the call does not stand in for a second person (and is not refused)
    again = await agent.compensate("r1", by="alice", settle={"c1": "done"})
    assert "(1 so far: alice)" in (again.reason or "") and undone == []
    doubt = await agent.compensate("r1", by="bob")
    assert "may or may not have happened" in (doubt.reason or "") and undone == []
    done = await agent.compensate("r1", by="bob", settle={"c1": "done"})
    assert done.status is RunStatus.CANCELLED and undone == ["A1"]
    assert check_transcript(await agent.transcript("r1")) == []
