"""Quotas across runs (``Agent(quotas=...)``), through the public API with scripted models.

A call a quota counts is charged in the append that records its decision; over the limit
it is refused, put to a person or stopped for the operator; failures and undos give the
charge back. Clock-driven windows use an injected clock. Store-level atomicity (every store,
racing processes) is in tests/stores; process kills in tests/faults.
"""

from __future__ import annotations

import asyncio
import calendar
import math
from collections.abc import Sequence
from typing import Any

import pytest

from agentcore import Agent, Budget, Compensation, Policy, Quota, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import ConfigurationError
from agentcore.events import Decision, ModelCalled, QuotaReleased, QuotaReserved
from agentcore.stores import MemoryStore

DAY = 86_400.0
NOON = float(calendar.timegm((2026, 12, 4, 12, 0, 0)))  # 2026-12-04 12:00 UTC
NO_PLAN = Policy(plan_before_writes=False)


class Clock:
    """A clock a test moves."""

    def __init__(self, now: float = NOON) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def refunder(amounts: Sequence[float | str], done_text: str = "done") -> ScriptedModel:
    """Asks for one refund per amount, moving on after each outcome (ran, failed, refused),
    then finishes."""

    def step(messages: Sequence[Message]) -> dict[str, Any]:
        seen = sum(
            m.role == "user"
            and m.call_id is not None
            and any(
                w in m.content for w in ("refund returned", "refund failed", "Refused", "Denied")
            )
            for m in messages
        )
        if seen < len(amounts):
            args = {"order_id": f"O-{seen}", "amount": amounts[seen]}
            return {"type": "tool", "thought": "refund", "tool": "refund", "args": args}
        return {"type": "finish", "thought": "t", "answer": done_text}

    return ScriptedModel(step)


def shop(
    amounts: Sequence[float | str],
    quotas: Sequence[Quota],
    *,
    store: Any = None,
    clock: Clock | None = None,
    paid: list[float] | None = None,
    fail_on: float | None = None,
    **kw: Any,
) -> tuple[Agent, list[float]]:
    paid = [] if paid is None else paid

    def undo(call: Any) -> None:
        paid.remove(call.args["amount"])

    @tool(effect="write", compensate=Compensation(undo))
    def refund(order_id: str, amount: float) -> str:
        """Refund an order.

        Args:
            order_id: the order.
            amount: EUR.
        """
        if amount == fail_on:
            raise RuntimeError("the bank is down")
        paid.append(amount)
        return "refunded"

    kw.setdefault("policy", NO_PLAN)
    agent = Agent(
        tools=[refund],
        model=refunder(amounts),
        store=store or MemoryStore(),
        quotas=quotas,
        clock=clock or Clock(),
        **kw,
    )
    return agent, paid


PER_CUSTOMER = Quota(
    "refunds", limit=500, count="sum:amount", tools=("refund",), per=("customer_id",)
)


async def decisions(agent: Agent, run_id: str) -> list[Decision]:
    return [e for e in await agent.transcript(run_id) if isinstance(e, Decision)]


# -- declaring a quota: hostile values refused at construction ---------------------------------


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"limit": -1}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": math.nan}, "limit"),
        ({"limit": math.inf}, "limit"),
        ({"limit": 1e30}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": "500"}, "limit"),
        ({"name": ""}, "name"),
        ({"name": " refunds"}, "space"),
        ({"name": "re\u202efunds"}, "control"),
        ({"name": "x" * 101}, "name"),
        ({"count": "sum:"}, "count"),
        ({"count": "sum:a-b"}, "count"),
        ({"count": "bytes"}, "count"),
        ({"window": "week"}, "window"),
        ({"over": "ignore"}, "over"),
        ({"per": "tenant"}, "tuple"),
        ({"per": ("tenant", "tenant")}, "repeats"),
        ({"per": ("cust\x00omer",)}, "control"),
        ({"tools": ("refund",), "count": "tokens"}, "do not apply"),
    ],
)
def test_a_bad_quota_is_refused_when_declared(kwargs: dict[str, Any], says: str) -> None:
    args: dict[str, Any] = {"name": "refunds", "limit": 500} | kwargs
    with pytest.raises(ConfigurationError, match=says):
        Quota(**args)


def test_two_quotas_with_one_name_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="unique"):
        shop([], [Quota("q", 1), Quota("q", 2)])


async def test_a_run_without_the_value_a_quota_is_kept_per_does_not_start() -> None:
    agent, _ = shop([10], [PER_CUSTOMER])
    with pytest.raises(ConfigurationError, match="customer_id"):
        await agent.run("refund")


async def test_a_store_without_counters_is_refused() -> None:
    class Plain:  # a transcript store of one's own that keeps no quota counters
        def __getattr__(self, name: str) -> Any:
            if "quota" in name:
                raise AttributeError(name)
            return getattr(self._inner, name)

        def __init__(self) -> None:
            self._inner = MemoryStore()

    agent, _ = shop([10], [PER_CUSTOMER], store=Plain())
    with pytest.raises(ConfigurationError, match="keeps no quota counters"):
        await agent.run("refund", metadata={"customer_id": "C1"})


# -- enforcing -----------------------------------------------------------------------------------


async def test_a_sum_quota_refuses_the_call_that_would_pass_it_and_gives_back_failures() -> None:
    store = MemoryStore()
    agent, paid = shop([200, 250, 13, 100, 40], [PER_CUSTOMER], store=store, fail_on=13)
    done = await agent.run("refund the orders", metadata={"customer_id": "C1"}, tenant="acme")
    assert done.status is RunStatus.COMPLETED
    assert paid == [200, 250, 40]  # 13 failed (given back), 100 would pass 500
    ds = [d for d in await decisions(agent, done.run_id) if d.call_id != "c6"]
    assert [(d.verdict, [c.amount for c in d.charges]) for d in ds] == [
        ("execute", [200.0]),
        ("execute", [250.0]),
        ("execute", [13.0]),
        ("deny", []),
        ("execute", [40.0]),
    ]
    assert "quota 'refunds' (per tenant=acme, customer_id=C1, day 2026-12-04): 450 of 500" in (
        ds[3].reason or ""
    )
    back = [e for e in await agent.transcript(done.run_id) if isinstance(e, QuotaReleased)]
    assert [(e.call_id, [c.amount for c in e.charges]) for e in back] == [("c3", [-13.0])]
    [row] = await store.list_quota_usage(tenant="acme")
    assert row.used == 490 and row.quota == "refunds"


async def test_splitting_a_refund_into_small_ones_cannot_pass_the_daily_sum() -> None:
    store = MemoryStore()
    quotas = [PER_CUSTOMER, Quota("one-refund", 60, count="sum:amount", per=(), window="all")]
    # the per-call rule is a separate matter: the model splits 600 into 10 x 60
    agent, paid = shop([60] * 10, [PER_CUSTOMER], store=store)
    await agent.run("refund 600 in small parts", metadata={"customer_id": "C1"})
    assert sum(paid) == 480 and len(paid) == 8  # the ninth would pass 500
    assert quotas[1].limit == 60


async def test_customers_and_tenants_are_counted_apart() -> None:
    store = MemoryStore()
    per_tenant = Quota("refunds", limit=100, count="sum:amount")  # per=("tenant",)
    a, paid_a = shop([100, 1], [per_tenant], store=store)
    b, paid_b = shop([100, 1], [per_tenant], store=store)
    await a.run("refund", tenant="acme")
    await b.run("refund", tenant="globex")
    assert paid_a == [100] and paid_b == [100]  # one tenant's use never unlocks another's
    rows = await store.list_quota_usage()
    assert sorted((r.tenant, r.used) for r in rows) == [("acme", 100.0), ("globex", 100.0)]
    # a customer id that looks like another key does not collide with it
    c, paid_c = shop([500, 1], [PER_CUSTOMER], store=store)
    await c.run("refund", metadata={"customer_id": 'C1"],["tenant","acme'})
    d, paid_d = shop([500], [PER_CUSTOMER], store=store)
    await d.run("refund", metadata={"customer_id": "C1"})
    assert paid_c == [500] and paid_d == [500]


async def test_a_bad_amount_is_refused_and_charges_nothing() -> None:
    store = MemoryStore()
    agent, paid = shop([-50, 20], [PER_CUSTOMER], store=store)
    done = await agent.run("refund", metadata={"customer_id": "C1"})
    assert paid == [20]
    ds = await decisions(agent, done.run_id)
    assert ds[0].verdict == "deny" and "must be a number >= 0" in (ds[0].reason or "")
    [row] = await store.list_quota_usage()
    assert row.used == 20


async def test_the_window_is_the_clock_s_utc_day() -> None:
    clock, store = Clock(NOON), MemoryStore()
    agent, paid = shop([300, 300], [PER_CUSTOMER], store=store, clock=clock)
    first = await agent.run("refund", metadata={"customer_id": "C1"})
    assert paid == [300]  # the second would pass 500 today
    clock.now = NOON + 12 * 3600 + 1  # one second past midnight: a new window
    again, paid2 = shop([300], [PER_CUSTOMER], store=store, clock=clock)
    await again.run("refund", metadata={"customer_id": "C1"})
    assert paid2 == [300]
    rows = {r.key: r for r in await store.list_quota_usage()}
    assert sorted(r.used for r in rows.values()) == [300.0, 300.0]
    assert sorted(r.window_end for r in rows.values() if r.window_end) == [
        NOON + 12 * 3600,
        NOON + 36 * 3600,
    ]
    assert await store.prune_quota_usage(NOON + 12 * 3600) == 1
    assert first.status is RunStatus.COMPLETED


async def test_over_confirm_puts_it_to_a_person_whose_approval_lifts_it_once() -> None:
    store = MemoryStore()
    quota = Quota("refunds", limit=100, count="sum:amount", over="confirm")
    agent, paid = shop([80, 50, 30], [quota], store=store)
    waiting = await agent.run("refund", tenant="acme")
    assert waiting.status is RunStatus.AWAITING_CONFIRMATION and paid == [80]
    assert waiting.pending is not None and waiting.pending.args["amount"] == 50
    assert "80 of 100 used, and this call adds 50" in (waiting.reason or "")
    p = waiting.pending
    again = await agent.confirm(
        waiting.run_id, approve=True, by="ann", step=p.step, args_hash=p.args_hash
    )
    assert paid == [80, 50]  # lifted for that call only: the next one asks again
    assert again.status is RunStatus.AWAITING_CONFIRMATION and again.pending is not None
    events = await agent.transcript(waiting.run_id)
    lifted = [c for e in events if e.type == "confirmation" for c in e.charges]
    assert [(c.amount, c.limit, c.lifted_by) for c in lifted] == [(50.0, None, "ann")]
    denied = await agent.confirm(waiting.run_id, approve=False, by="ann", reason="enough")
    assert denied.status is RunStatus.COMPLETED and paid == [80, 50]
    [row] = await store.list_quota_usage()
    assert row.used == 130


async def test_over_attention_stops_for_the_operator_and_a_later_window_resumes() -> None:
    clock, store = Clock(NOON), MemoryStore()
    quota = Quota("refunds", limit=100, count="sum:amount", over="attention")
    agent, paid = shop([80, 50], [quota], store=store, clock=clock)
    stopped = await agent.run("refund", tenant="acme")
    assert stopped.status is RunStatus.NEEDS_ATTENTION and paid == [80]
    assert "quota 'refunds'" in (stopped.reason or "")
    clock.now += DAY
    done = await agent.resume(stopped.run_id, by="ops")
    assert done.status is RunStatus.COMPLETED and paid == [80, 50]


async def test_an_undo_gives_the_charge_back() -> None:
    store = MemoryStore()
    agent, paid = shop([300], [PER_CUSTOMER], store=store)
    done = await agent.run("refund", metadata={"customer_id": "C1"})
    assert (await store.list_quota_usage())[0].used == 300
    policy = Policy(plan_before_writes=False, compensate_completed=True)
    undoer, _ = shop([], [PER_CUSTOMER], store=store, paid=paid, policy=policy)
    undone = await undoer.compensate(done.run_id, by="ops")
    assert undone.status is RunStatus.CANCELLED and paid == []
    assert (await store.list_quota_usage())[0].used == 0


async def test_two_runs_racing_for_the_last_units_cannot_both_spend_them() -> None:
    store = MemoryStore()
    quota = Quota("refunds", limit=100, count="sum:amount")
    paid: list[float] = []
    agents = [shop([60], [quota], store=store, paid=paid)[0] for _ in range(4)]
    results = await asyncio.gather(*(a.run("refund", tenant="acme") for a in agents))
    assert paid == [60] and all(r.status is RunStatus.COMPLETED for r in results)
    verdicts = [d.verdict for r in results for d in await decisions(agents[0], r.run_id)]
    assert verdicts.count("deny") == 3
    assert (await store.list_quota_usage())[0].used == 60


async def test_a_calls_quota_per_tool_and_hour() -> None:
    sent: list[str] = []

    @tool(effect="write", labels=("email",))
    def send_email(to: str) -> str:
        """Send.

        Args:
            to: recipient.
        """
        sent.append(to)
        return "sent"

    def model(messages: Sequence[Message]) -> dict[str, Any]:
        n = sum(m.call_id is not None and m.role == "user" for m in messages)
        if n < 4:
            return {"type": "tool", "thought": "t", "tool": "send_email", "args": {"to": f"u{n}"}}
        return {"type": "finish", "thought": "t", "answer": "ok"}

    clock = Clock(NOON)
    quota = Quota("emails", 2, tools=("label:email",), per=("tenant", "tool"), window="hour")
    agent = Agent(
        tools=[send_email],
        model=ScriptedModel(model),
        store=MemoryStore(),
        policy=NO_PLAN,
        quotas=[quota],
        clock=clock,
    )
    await agent.run("email everyone", tenant="acme")
    assert sent == ["u0", "u1"]
    [row] = await agent.store.list_quota_usage()  # type: ignore[attr-defined]
    assert '"tool","send_email"' in row.key and "hour:2026-12-04T12" in row.key


async def test_a_token_quota_stops_a_request_that_would_pass_it() -> None:
    store = MemoryStore()
    quota = Quota("tokens", 6_000, count="tokens")

    @tool(effect="read")
    def look(q: str) -> str:
        """Look.

        Args:
            q: what.
        """
        return "x"

    script = [
        {"type": "tool", "thought": "t", "tool": "look", "args": {"q": str(i)}} for i in range(5)
    ]
    agent = Agent(
        tools=[look],
        model=ScriptedModel(script, input_tokens=1_000),
        store=store,
        policy=NO_PLAN,
        quotas=[quota],
        clock=Clock(),
    )
    stopped = await agent.run("look a lot", tenant="acme", budget=Budget(max_steps=20))
    assert stopped.status is RunStatus.BUDGET_EXHAUSTED
    assert "quota 'tokens'" in (stopped.reason or "") and "not sent" in (stopped.reason or "")
    events = await agent.transcript(stopped.run_id)
    calls = [e for e in events if isinstance(e, ModelCalled)]
    reserved = [e for e in events if isinstance(e, QuotaReserved)]
    # each request reserved its estimate (chars/3 + a 4,096-token reply) before it was sent,
    # and its model_called settled it: the counter holds what the requests used
    assert len(reserved) == len(calls) >= 1
    assert all(r.charges[0].amount > 4_096 for r in reserved)
    charged = sum(c.amount for e in (*reserved, *calls) for c in e.charges)
    [row] = await store.list_quota_usage()
    assert row.used == charged == sum(e.input_tokens + e.output_tokens for e in calls)
    # the request held back would have passed it (its estimate is at least the last one's)
    assert row.used + reserved[-1].charges[0].amount > 6_000


async def test_charges_survive_snapshots_and_a_resume_gives_back_what_failed() -> None:
    store = MemoryStore()
    agent, paid = shop([100, 13, 100], [PER_CUSTOMER], store=store, fail_on=13, snapshot_every=2)
    done = await agent.run("refund", metadata={"customer_id": "C1"})
    assert paid == [100, 100] and done.status is RunStatus.COMPLETED
    assert (await store.list_quota_usage())[0].used == 200


async def test_a_race_lost_at_the_append_is_decided_as_over_the_limit() -> None:
    class Stale(MemoryStore):
        """Reads counters from before another worker's charge (the race's window)."""

        async def quota_usage(self, keys: Sequence[str]) -> dict[str, float]:
            return dict.fromkeys(keys, 0.0)

    store = Stale()
    quota = Quota("refunds", limit=100, count="sum:amount")
    first, paid = shop([60], [quota], store=store)
    await first.run("refund", tenant="acme")
    second, _ = shop([60], [quota], store=store, paid=paid)
    lost = await second.run("refund", tenant="acme")
    assert paid == [60]  # the append refused the charge: the call never ran
    [d, *_] = await decisions(second, lost.run_id)
    assert d.verdict == "deny" and d.charges == [] and d.over_quota == ["refunds"]
    assert "60 of 100 used, and this call adds 60" in (d.reason or "")
    assert (await store.list_quota_usage())[0].used == 60


def test_a_counter_in_words() -> None:
    from agentcore.quotas import counter_words

    assert counter_words('["refunds",[["customer_id","C1"]],"day:2026-05-28"]') == (
        "per customer_id=C1, day 2026-05-28"
    )
    assert counter_words(
        '["calls",[["tenant","acme"],["tool","refund"]],"hour:2026-05-28T20"]'
    ) == ("per tenant=acme, tool=refund, hour 2026-05-28T20")
    assert counter_words('["ever",[],"all"]') == "per everyone, all"
    assert counter_words("not json") == "not json"
    assert counter_words('["short"]') == '["short"]'


async def test_a_shared_counter_is_every_tenant_s_and_no_tenant_s() -> None:
    store = MemoryStore()
    shared = Quota("upstream", limit=15, count="sum:amount", shared=True)
    a, paid_a = shop([10], [shared], store=store)
    b, paid_b = shop([10, 5], [shared], store=store)
    await a.run("refund", tenant="acme")
    await b.run("refund", tenant="globex")
    assert paid_a == [10] and paid_b == [5]  # one counter for all tenants
    [row] = await store.list_quota_usage()
    assert row.tenant is None and row.used == 15  # listing by tenant shows it as no one's
    assert await store.list_quota_usage(tenant="acme") == []
    with pytest.raises(ConfigurationError, match="shared"):
        Quota("x", 1, shared=True, per=("tenant",))


async def test_one_customer_id_in_two_tenants_is_two_counters() -> None:
    store = MemoryStore()
    a, paid_a = shop([500], [PER_CUSTOMER], store=store)
    b, paid_b = shop([500], [PER_CUSTOMER], store=store)
    await a.run("refund", tenant="acme", metadata={"customer_id": "C1"})
    await b.run("refund", tenant="globex", metadata={"customer_id": "C1"})
    assert paid_a == [500] and paid_b == [500]


async def test_a_per_run_quota_counts_every_turn_of_a_conversation() -> None:
    def per_turn(messages: Sequence[Message]) -> dict[str, Any]:
        """A refund of 60 in each turn, then an answer."""
        last = max(
            i
            for i, m in enumerate(messages)
            if m.call_id is None and m.content.startswith(("Task: ", "User: "))
        )
        if any(m.call_id is not None for m in messages[last:]):
            return {"type": "finish", "thought": "t", "answer": "done"}
        args = {"order_id": "O-1", "amount": 60}
        return {"type": "tool", "thought": "t", "tool": "refund", "args": args}

    store = MemoryStore()
    per_conversation = Quota("refunds", limit=100, count="sum:amount", window="run")
    agent, paid = shop([], [per_conversation], store=store)
    agent = Agent(
        tools=list(agent.tools.values()),
        model=ScriptedModel(per_turn),
        store=store,
        policy=NO_PLAN,
        quotas=[per_conversation],
        clock=Clock(),
    )
    first = await agent.run("refund", tenant="acme")
    assert paid == [60]
    again = await agent.reply(first.run_id, "and one more")  # the same conversation's counter
    assert paid == [60] and again.status is RunStatus.COMPLETED
    denied = [d for d in await decisions(agent, first.run_id) if d.verdict == "deny"]
    assert len(denied) == 1 and f"run {first.run_id}" in (denied[0].reason or "")
    other = await agent.run("refund", tenant="acme")  # another conversation: its own counter
    assert paid == [60, 60] and other.status is RunStatus.COMPLETED


async def test_a_parent_s_quota_holds_in_its_sub_agents_runs() -> None:
    store = MemoryStore()
    paid: list[float] = []
    refunds = Quota("refunds", limit=100, count="sum:amount", per=("customer_id",))
    child, _ = shop([60, 60], [], store=store, paid=paid)  # the child declares no quota
    helper = child.as_tool("refunds_desk", "Refund what the task says.")

    def parent_model(messages: Sequence[Message]) -> dict[str, Any]:
        if any(m.call_id is not None and "returned" in m.content for m in messages):
            return {"type": "finish", "thought": "t", "answer": "delegated"}
        args = {"task": "refund O-1 and O-2"}
        return {"type": "tool", "thought": "t", "tool": "refunds_desk", "args": args}

    parent = Agent(
        tools=[helper],
        model=ScriptedModel(parent_model),
        store=store,
        policy=NO_PLAN,
        quotas=[refunds],
        clock=Clock(),
    )
    done = await parent.run("refund", tenant="acme", metadata={"customer_id": "C1"})
    assert done.status is RunStatus.COMPLETED
    assert paid == [60]  # the child's second refund would pass the parent's 100
    [row] = await store.list_quota_usage()
    assert row.used == 60 and '"customer_id","C1"' in row.key


async def test_a_batch_cannot_carry_calls_a_quota_counts() -> None:
    from agentcore.testing import batch, call, finish

    looked: list[str] = []

    @tool(effect="read")
    def geocode(place: str) -> str:
        """Geocode a place (a paid upstream API).

        Args:
            place: where.
        """
        looked.append(place)
        return "0,0"

    store = MemoryStore()
    agent = Agent(
        tools=[geocode],
        model=ScriptedModel(
            [
                batch(call("geocode", place="a"), call("geocode", place="b")),
                call("geocode", place="a"),
                finish("ok"),
            ]
        ),
        store=store,
        policy=Policy(plan_before_writes=False, max_batch=4),
        quotas=[Quota("geocoding", limit=5, tools=("geocode",))],
        clock=Clock(),
    )
    done = await agent.run("where are a and b", tenant="acme")
    assert done.status is RunStatus.COMPLETED and looked == ["a"]  # only the lone call ran
    members = [d for d in await decisions(agent, done.run_id) if "." in d.call_id]
    assert [d.verdict for d in members] == ["deny", "deny"]
    assert "counted by quota 'geocoding'" in (members[0].reason or "")
    [row] = await store.list_quota_usage()
    assert row.used == 1
