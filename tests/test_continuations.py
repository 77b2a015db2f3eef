"""Every continuation checks what it is about to run (issue 9, part 2), through the public API.

confirm and resolve check the tool manifest like resume; a timed-out non-idempotent call is
a lost call; cancel while a tool runs records the tool's outcome, then the cancellation;
approvals can expire; run ids are validated everywhere a caller gives one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

import pytest

from agentcore import Agent, Budget, Policy, RunStatus, Tool, ToolContext, check_transcript, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import (
    ApprovalExpiredError,
    ConfigurationError,
    LimitExceededError,
    ToolManifestChangedError,
)
from agentcore.events import (
    Confirmation,
    Event,
    Resolution,
    RunFinished,
    RunStarted,
    ToolFinished,
)
from agentcore.stores import MemoryStore

NO_PLAN = Policy(plan_before_writes=False)


def of(events: Sequence[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def script(tool_name: str, args: dict[str, Any]) -> ScriptedModel:
    """Call ``tool_name`` once, then finish with what it returned (or that it failed);
    decided from the conversation, so any agent can continue the run."""

    def next_action(messages: Sequence[Message]) -> dict[str, Any]:
        for m in messages:
            if m.role == "user" and f"{tool_name} returned" in m.content:
                return {"type": "finish", "thought": "done", "answer": "done"}
            if m.role == "user" and f"{tool_name} failed" in m.content:
                return {"type": "finish", "thought": "failed", "answer": "not done"}
            if m.role == "user" and "Denied by" in m.content:
                return {"type": "finish", "thought": "denied", "answer": "denied"}
        return {"type": "tool", "thought": "go", "tool": tool_name, "args": args}

    return ScriptedModel(next_action)


# --------------------------------------------------------------------------- tool manifest


def make_refund(
    calls: list[int],
    *,
    doc: str = "Refund an order.",
    effect: Literal["read", "write", "destructive"] = "destructive",
    idempotent: bool | None = None,
    cents: bool = False,
) -> Tool:
    if cents:

        def refund_cents(amount: int, currency: str = "EUR") -> dict[str, int]:
            calls.append(amount)
            return {"refunded": amount}

        fn: Any = refund_cents
    else:

        def refund_plain(amount: int) -> dict[str, int]:
            calls.append(amount)
            return {"refunded": amount}

        fn = refund_plain
    fn.__doc__ = doc
    return tool(effect=effect, idempotent=idempotent, name="refund")(fn)


async def paused_refund(store: MemoryStore, calls: list[int]) -> Agent:
    agent = Agent(
        tools=[make_refund(calls)],
        model=script("refund", {"amount": 5}),
        store=store,
        policy=NO_PLAN,
    )
    result = await agent.run("refund 5", run_id="r1")
    assert result.status is RunStatus.AWAITING_CONFIRMATION
    return agent


async def test_run_started_records_each_tools_full_definition() -> None:
    store = MemoryStore()
    calls: list[int] = []
    agent = await paused_refund(store, calls)
    (started,) = of(await agent.transcript("r1"), RunStarted)
    entry = started.tools["refund"]
    spec = agent.tools["refund"].spec
    assert entry == {
        "hash": spec.manifest_hash,
        "description": "Refund an order.",
        "schema": spec.args_schema,
        "effect": "destructive",
        "idempotent": False,
        "bindings": {},
    }
    assert "amount" in str(entry["schema"])


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"doc": "Refund an order, in cents."}, "refund (description changed)"),
        ({"cents": True}, "refund (argument schema changed)"),
        ({"effect": "write"}, "refund (effect changed from destructive to write)"),
        ({"idempotent": True}, "refund (idempotency changed from non-idempotent to idempotent)"),
    ],
)
async def test_confirm_refuses_a_changed_tool_naming_what_changed(
    change: dict[str, Any], words: str
) -> None:
    store = MemoryStore()
    calls: list[int] = []
    agent = await paused_refund(store, calls)
    pending = (await agent.result("r1")).pending
    assert pending is not None
    before = await agent.transcript("r1")
    changed = Agent(
        tools=[make_refund(calls, **change)],
        model=script("refund", {"amount": 5}),
        store=store,
        policy=NO_PLAN,
    )
    with pytest.raises(ToolManifestChangedError) as info:
        await changed.confirm(
            "r1", approve=True, by="alice", step=pending.step, args_hash=pending.args_hash
        )
    assert words in str(info.value)
    assert "accept_tool_changes=True" in str(info.value)
    assert await changed.transcript("r1") == before  # nothing recorded
    assert calls == []  # nothing ran

    done = await changed.confirm(
        "r1",
        approve=True,
        by="alice",
        step=pending.step,
        args_hash=pending.args_hash,
        accept_tool_changes=True,
    )
    assert done.status is RunStatus.COMPLETED
    assert calls == [5]
    (conf,) = of(await changed.transcript("r1"), Confirmation)
    assert conf.accepted_tool_changes == [words]


async def test_confirm_refuses_a_tool_that_is_gone() -> None:
    store = MemoryStore()
    calls: list[int] = []
    await paused_refund(store, calls)

    @tool(effect="read")
    def other() -> str:
        """Something else."""
        return "x"

    gone = Agent(tools=[other], model=script("refund", {}), store=store, policy=NO_PLAN)
    with pytest.raises(ToolManifestChangedError, match=r"refund \(gone"):
        await gone.confirm("r1", approve=True, by="alice")
    # Accepting the change cannot run a tool that does not exist; denying still works.
    with pytest.raises(ConfigurationError, match="no tool 'refund'"):
        await gone.confirm("r1", approve=True, by="alice", accept_tool_changes=True)
    denied = await gone.confirm(
        "r1", approve=False, by="alice", reason="no", accept_tool_changes=True
    )
    assert denied.status is RunStatus.COMPLETED
    assert calls == []


async def test_resume_refuses_a_pending_call_of_a_tool_that_is_gone() -> None:
    store = MemoryStore()

    @tool(effect="read")
    def lookup(order_id: str) -> str:
        """Look an order up.

        Args:
            order_id: the order.
        """
        return "found"

    @tool(effect="read")
    def other() -> str:
        """Something else."""
        return "x"

    async def stop_after_proposal(messages: Sequence[Message]) -> dict[str, Any]:
        return {"type": "tool", "thought": "go", "tool": "lookup", "args": {"order_id": "A"}}

    first = Agent(tools=[lookup], model=ScriptedModel(stop_after_proposal), store=store)
    # A proposed, decided call whose worker died before the tool ran.
    result = await first.run("look", run_id="r9", budget=Budget(max_steps=2))
    assert result.status is RunStatus.BUDGET_EXHAUSTED
    events = await store.load("r9")
    decided = next(e for e in events if e.type == "decision")
    await store.truncate("r9", after=decided.seq)  # as if the worker died right here
    gone = Agent(tools=[other], model=script("other", {}), store=store)
    with pytest.raises(ToolManifestChangedError, match="no longer a tool"):
        await gone.resume("r9", accept_tool_changes=True)
    assert (await store.load("r9"))[-1].type == "decision"  # nothing recorded


class Payments:
    """A non-idempotent payment whose first call dies mid-call (a crashed process)."""

    def __init__(self) -> None:
        self.calls = 0

    def tool(self, doc: str = "Charge the customer.") -> Tool:
        async def pay(amount: int, ctx: ToolContext) -> dict[str, int]:
            self.calls += 1
            if self.calls == 1:
                raise asyncio.CancelledError  # the process "dies" inside the tool
            return {"charged": amount}

        pay.__doc__ = doc
        return tool(effect="write", idempotent=False)(pay)


async def test_resolve_refuses_a_changed_tool_unless_accepted() -> None:
    store = MemoryStore()
    pay = Payments()
    agent = Agent(
        tools=[pay.tool()], model=script("pay", {"amount": 5}), store=store, policy=NO_PLAN
    )
    with pytest.raises(asyncio.CancelledError):
        await agent.run("pay 5", run_id="r1")
    assert (await agent.resume("r1")).status is RunStatus.NEEDS_ATTENTION
    changed = Agent(
        tools=[pay.tool("Charge the customer, in cents.")],
        model=script("pay", {"amount": 5}),
        store=store,
        policy=NO_PLAN,
    )
    before = await changed.transcript("r1")
    with pytest.raises(ToolManifestChangedError, match=r"pay \(description changed\)"):
        await changed.resolve("r1", by="ops", rerun=True)
    assert await changed.transcript("r1") == before
    assert pay.calls == 1
    done = await changed.resolve("r1", by="ops", rerun=True, accept_tool_changes=True)
    assert done.status is RunStatus.COMPLETED
    assert pay.calls == 2  # the person said it did not happen: run once
    (res,) = of(await changed.transcript("r1"), Resolution)
    assert res.accepted_tool_changes == ["pay (description changed)"]


async def test_an_old_transcript_without_schemas_is_compared_by_hash() -> None:
    store = MemoryStore()
    calls: list[int] = []
    agent = await paused_refund(store, calls)
    events = await agent.transcript("r1")
    first = events[0]
    assert isinstance(first, RunStarted)
    # What agentcore 0.1.0 recorded: hash, effect and idempotency only.
    old_tools = {
        n: {k: v for k, v in t.items() if k in ("hash", "effect", "idempotent")}
        for n, t in first.tools.items()
    }
    old_store = MemoryStore()
    await old_store.append("r1", 0, [first.model_copy(update={"tools": old_tools}), *events[1:]])

    same = Agent(
        tools=[make_refund(calls)], model=script("refund", {}), store=old_store, policy=NO_PLAN
    )
    changed = Agent(
        tools=[make_refund(calls, doc="Refund, in cents.")],
        model=script("refund", {}),
        store=old_store,
        policy=NO_PLAN,
    )
    with pytest.raises(
        ToolManifestChangedError, match=r"refund \(description or argument schema changed\)"
    ):
        await changed.confirm("r1", approve=True, by="alice")
    assert (await same.confirm("r1", approve=True, by="alice")).status is RunStatus.COMPLETED
    assert calls == [5]


# --------------------------------------------------------------------------- approval window


async def test_an_approval_after_the_ttl_is_refused_and_the_run_keeps_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    store = MemoryStore()
    agent = Agent(
        tools=[make_refund(calls)],
        model=script("refund", {"amount": 5}),
        store=store,
        policy=Policy(plan_before_writes=False, approval_ttl=60),
    )
    paused = await agent.run("refund 5", run_id="r1")
    pending = paused.pending
    assert pending is not None
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    with pytest.raises(ApprovalExpiredError, match=r"expire after 60s"):
        await agent.confirm(
            "r1", approve=True, by="alice", step=pending.step, args_hash=pending.args_hash
        )
    assert (await agent.result("r1")).status is RunStatus.AWAITING_CONFIRMATION
    assert calls == []
    denied = await agent.confirm("r1", approve=False, by="alice", reason="too late")
    assert denied.status is RunStatus.COMPLETED
    assert denied.answer == "denied"
    assert calls == []


async def test_an_approval_within_the_ttl_runs() -> None:
    calls: list[int] = []
    agent = Agent(
        tools=[make_refund(calls)],
        model=script("refund", {"amount": 5}),
        store=MemoryStore(),
        policy=Policy(plan_before_writes=False, approval_ttl=60),
    )
    await agent.run("refund 5", run_id="r1")
    assert (await agent.confirm("r1", approve=True, by="alice")).status is RunStatus.COMPLETED
    assert calls == [5]


def test_approval_ttl_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="approval_ttl"):
        Policy(approval_ttl=0)


# --------------------------------------------------------------------------- timeouts


class SlowPayments:
    """A sync, non-idempotent payment that blocks past its timeout; counts its executions.

    The first ``blocking`` calls block their thread until :meth:`release` (the timeout
    fires first); later calls return at once. A finished payment is recorded under its
    idempotency key, where ``reconcile`` can find it.
    """

    TIMEOUT_S = 0.05

    def __init__(self, blocking: int = 1) -> None:
        self.blocking = blocking
        self.calls = 0
        self.done: dict[str, dict[str, int]] = {}
        self.go = threading.Event()
        self.landed = threading.Event()
        self._lock = threading.Lock()

    def tool(self, *, reconcile: bool = False, idempotent: bool = False) -> Tool:
        def pay(amount: int, ctx: ToolContext) -> dict[str, int]:
            """Charge the customer."""
            with self._lock:
                self.calls += 1
                blocks = self.calls <= self.blocking
            if blocks:
                assert self.go.wait(5)
            self.done[ctx.idempotency_key] = {"charged": amount}
            self.landed.set()
            return {"charged": amount}

        return tool(
            effect="write",
            idempotent=idempotent,
            timeout=self.TIMEOUT_S,
            reconcile=self.done.get if reconcile else None,
        )(pay)

    async def release(self) -> None:
        """Let the blocked call finish, and wait until it has."""
        self.go.set()
        assert await asyncio.to_thread(self.landed.wait, 5)


def pay_agent(payments: SlowPayments, store: MemoryStore, **kw: bool) -> Agent:
    return Agent(
        tools=[payments.tool(**kw)],
        model=script("pay", {"amount": 5}),
        store=store,
        policy=NO_PLAN,
    )


async def test_a_timed_out_non_idempotent_call_is_lost_not_failed() -> None:
    payments = SlowPayments()
    store = MemoryStore()
    agent = pay_agent(payments, store)
    result = await agent.run("pay 5", run_id="r1")
    assert result.status is RunStatus.NEEDS_ATTENTION
    assert result.reason is not None
    for needle in (
        "'pay'",
        "timed out after 0.05s",
        "amount=5",
        "idempotency key r1:1",
        "outcome is unknown",
        "agentcore resolve r1 --result JSON | --rerun | --fail --by NAME",
    ):
        assert needle in result.reason
    events = await agent.transcript("r1")
    assert of(events, ToolFinished) == []  # the model is not told it failed
    assert [e.type for e in events][-2:] == ["tool_started", "run_finished"]
    assert check_transcript(events) == []

    # No path runs it a second time: not a resume while it runs, nor one after it ended.
    assert (await agent.resume("r1")).status is RunStatus.NEEDS_ATTENTION
    await payments.release()
    assert (await agent.resume("r1")).status is RunStatus.NEEDS_ATTENTION
    assert payments.calls == 1

    done = await agent.resolve("r1", by="ops", result={"charged": 5}, reason="seen in ledger")
    assert done.status is RunStatus.COMPLETED
    assert done.answer == "done"
    assert payments.calls == 1
    assert check_transcript(await agent.transcript("r1")) == []


async def test_a_timed_out_call_with_reconcile_is_adopted_once_it_lands_never_rerun() -> None:
    payments = SlowPayments()
    store = MemoryStore()
    agent = pay_agent(payments, store, reconcile=True)
    result = await agent.run("pay 5", run_id="r1")
    # The thread is still running: reconcile finds nothing yet, and that must not rerun it.
    assert result.status is RunStatus.NEEDS_ATTENTION
    assert result.reason is not None
    assert "reconcile(key) found no record of it" in result.reason
    assert (await agent.resume("r1")).status is RunStatus.NEEDS_ATTENTION
    assert payments.calls == 1

    await payments.release()
    done = await agent.resume("r1")  # now reconcile finds the payment
    assert done.status is RunStatus.COMPLETED
    assert payments.calls == 1
    (finished,) = of(await agent.transcript("r1"), ToolFinished)
    assert finished.ok
    assert finished.result == {"charged": 5}


async def test_a_timed_out_call_found_by_reconcile_at_once_continues() -> None:
    payments = SlowPayments()
    store = MemoryStore()

    def reconcile(key: str) -> dict[str, int] | None:
        payments.go.set()  # the payment lands while reconcile looks
        assert payments.landed.wait(5)
        return payments.done.get(key)

    agent = Agent(
        tools=[
            tool(effect="write", timeout=SlowPayments.TIMEOUT_S, reconcile=reconcile)(
                payments.tool().fn
            )
        ],
        model=script("pay", {"amount": 5}),
        store=store,
        policy=NO_PLAN,
    )
    result = await agent.run("pay 5", run_id="r1")
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "done"  # the model saw the payment, not a timeout
    (finished,) = of(await agent.transcript("r1"), ToolFinished)
    assert finished.ok
    assert finished.result == {"charged": 5}
    assert payments.calls == 1


async def test_only_a_person_reruns_a_timed_out_call() -> None:
    payments = SlowPayments()
    store = MemoryStore()
    agent = pay_agent(payments, store, reconcile=True)
    assert (await agent.run("pay 5", run_id="r1")).status is RunStatus.NEEDS_ATTENTION
    await payments.release()
    payments.done.clear()  # say the payment provider rejected it after all
    assert (await agent.resume("r1")).status is RunStatus.NEEDS_ATTENTION  # reconcile: None
    assert payments.calls == 1
    done = await agent.resolve("r1", by="ops", rerun=True, reason="not in the ledger")
    assert done.status is RunStatus.COMPLETED
    assert payments.calls == 2  # the second execution is the person's decision


async def test_an_idempotent_tools_timeout_stays_an_error_observation() -> None:
    payments = SlowPayments()
    store = MemoryStore()
    agent = pay_agent(payments, store, idempotent=True)
    result = await agent.run("pay 5", run_id="r1")
    assert result.status is RunStatus.COMPLETED
    assert result.answer == "not done"  # the model saw the failure
    (finished,) = of(await agent.transcript("r1"), ToolFinished)
    assert not finished.ok
    assert finished.error == "timed out after 0.05s"
    await payments.release()


# --------------------------------------------------------------------------- cancel


class Gate:
    """An async, non-idempotent tool that blocks until the test opens the gate."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.open = asyncio.Event()
        self.calls = 0

    def tool(self) -> Tool:
        async def ship(order_id: str) -> dict[str, str]:
            """Ship an order."""
            self.calls += 1
            self.entered.set()
            await self.open.wait()
            return {"shipped": order_id}

        return tool(effect="write")(ship)


async def test_cancel_while_a_tool_runs_records_its_outcome_then_the_cancellation() -> None:
    gate = Gate()
    store = MemoryStore()
    model = script("ship", {"order_id": "A1"})
    agent = Agent(tools=[gate.tool()], model=model, store=store, policy=NO_PLAN)
    runner = asyncio.create_task(agent.run("ship A1", run_id="r1"))
    await asyncio.wait_for(gate.entered.wait(), 5)

    requested = await agent.cancel("r1", by="ops", reason="customer called")
    assert requested.status is RunStatus.RUNNING  # requested, not cancelled yet
    request = await store.cancel_request("r1")
    assert request is not None
    assert (request.by, request.reason) == ("ops", "customer called")

    gate.open.set()
    result = await asyncio.wait_for(runner, 5)
    assert result.status is RunStatus.CANCELLED
    assert result.reason == "cancelled by ops: customer called"
    events = await agent.transcript("r1")
    assert [e.type for e in events][-3:] == ["tool_started", "tool_finished", "run_finished"]
    (finished,) = of(events, ToolFinished)
    assert finished.ok
    assert finished.result == {"shipped": "A1"}
    assert len(model.requests) == 1  # the model was not asked again
    assert gate.calls == 1
    assert check_transcript(events) == []
    assert await agent.resume("r1") == result  # final


async def test_cancel_with_no_live_process_records_a_started_calls_unknown_outcome() -> None:
    pay = Payments()
    store = MemoryStore()
    agent = Agent(
        tools=[pay.tool()], model=script("pay", {"amount": 5}), store=store, policy=NO_PLAN
    )
    with pytest.raises(asyncio.CancelledError):
        await agent.run("pay 5", run_id="r1")  # the process "dies" inside the tool
    result = await agent.cancel("r1", by="ops", reason="duplicate order")
    assert result.status is RunStatus.CANCELLED
    assert result.reason is not None
    assert result.reason.startswith("cancelled by ops: duplicate order; the call pay(amount=5)")
    assert "outcome is unknown (idempotency key r1:1)" in result.reason
    events = await agent.transcript("r1")
    assert [e.type for e in events][-3:] == ["tool_started", "tool_finished", "run_finished"]
    (finished,) = of(events, ToolFinished)
    assert not finished.ok
    assert finished.error is not None
    assert finished.error.startswith("outcome unknown: the run was cancelled by ops")
    assert "idempotency key r1:1" in finished.error
    assert check_transcript(events) == []
    assert pay.calls == 1
    assert await store.cancel_request("r1") is None  # cancelled at once, nothing requested


async def test_cancel_a_timed_out_lost_call() -> None:
    payments = SlowPayments()
    agent = pay_agent(payments, MemoryStore())
    assert (await agent.run("pay 5", run_id="r1")).status is RunStatus.NEEDS_ATTENTION
    result = await agent.cancel("r1", by="ops")
    assert result.status is RunStatus.CANCELLED
    events = await agent.transcript("r1")
    assert check_transcript(events) == []
    await payments.release()
    assert payments.calls == 1


async def test_a_paused_run_honours_a_cancel_request_on_its_next_continuation() -> None:
    calls: list[int] = []
    store = MemoryStore()
    agent = await paused_refund(store, calls)
    await store.request_cancel("r1", by="ops", reason="requested earlier")
    result = await agent.confirm("r1", approve=True, by="alice")
    assert result.status is RunStatus.CANCELLED
    assert result.reason == "cancelled by ops: requested earlier"
    assert calls == []  # the approved call was not started after the request


async def test_check_reports_a_final_run_finished_after_a_started_tool_without_outcome() -> None:
    pay = Payments()
    store = MemoryStore()
    agent = Agent(
        tools=[pay.tool()], model=script("pay", {"amount": 5}), store=store, policy=NO_PLAN
    )
    with pytest.raises(asyncio.CancelledError):
        await agent.run("pay 5", run_id="r1")
    events = await agent.transcript("r1")
    # What agentcore 0.1.0's cancel wrote: the started call's outcome silently dropped.
    dropped = RunFinished(
        run_id="r1", seq=len(events), at=time.time(), status="cancelled", reason="cancelled"
    )
    problems = check_transcript([*events, dropped])
    assert len(problems) == 1
    assert "pay started at seq" in problems[0]
    assert "has no tool_finished" in problems[0]
    assert problems[0].startswith(f"seq {len(events)} (run_finished)")


async def test_cancel_needs_a_name() -> None:
    calls: list[int] = []
    agent = await paused_refund(MemoryStore(), calls)
    with pytest.raises(ConfigurationError, match="by="):
        await agent.cancel("r1", by=" ")


# --------------------------------------------------------------------------- run ids

BAD_RUN_IDS = pytest.mark.parametrize(
    ("run_id", "words"),
    [
        ("", "empty"),
        ("r" * 201, "201 characters"),
        ("a\nb", "control character"),
        ("a\udcffb", "surrogate"),
    ],
)


@BAD_RUN_IDS
async def test_a_bad_run_id_never_starts_a_run(run_id: str, words: str) -> None:
    store = MemoryStore()
    agent = Agent(tools=[make_refund([])], model=script("refund", {}), store=store)
    with pytest.raises(LimitExceededError, match=words):
        await agent.run("refund 5", run_id=run_id)
    assert await store.list_runs() == []


@BAD_RUN_IDS
async def test_every_method_that_takes_a_run_id_checks_it(run_id: str, words: str) -> None:
    agent = Agent(tools=[make_refund([])], model=script("refund", {}), store=MemoryStore())
    calls = [
        agent.result(run_id),
        agent.resume(run_id),
        agent.confirm(run_id, approve=True, by="alice"),
        agent.resolve(run_id, by="ops", fail=True),
        agent.cancel(run_id, by="ops"),
        agent.transcript(run_id),
    ]
    for call in calls:
        with pytest.raises(LimitExceededError, match=words):
            await call
    assert issubclass(LimitExceededError, ConfigurationError)
