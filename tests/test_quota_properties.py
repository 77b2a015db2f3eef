"""A stateful test of quotas across runs (hypothesis): tenants, customers, windows and people.

One agent over one store (a MemoryStore; the same machine on a SQLite file), three quotas
on one ``refund`` tool, and a clock the machine moves across hours, days and a year's end:

- ``refunds``: the sum of ``amount`` per tenant, customer and UTC day, at most 100,
  ``over="refuse"``;
- ``hourly``: 3 calls per tenant and UTC hour, ``over="confirm"``;
- ``upstream``: 8 calls for all tenants together, for all time, ``over="attention"``.

Each run, for a (tenant, customer), has a scripted model that asks for one refund of a drawn
amount (0, fractions such as 0.1 and 0.2 whose float sum is not exact, sub-millionths,
amounts over the limit), then finishes. The refund tool fails for a set of amounts the
machine draws. Rules: start a run, approve or deny a waiting run (bound to its step and
``args_hash``), resume a run stopped as ``needs_attention``, compensate a completed run
(``Policy(compensate_completed=True)``, which undoes its refund), move the clock. An outside
ledger holds the refunds that ran and were not undone.

Each rule checks what it expects from the counters as they stood before it: a refund over
the customer's day is refused naming ``refunds`` (refuse is the strictest); else one over
``upstream`` stops the run for the operator; else one over ``hourly`` waits for a person;
else it runs (or fails, and is given back). An approval lifts only ``hourly``.

After every rule:

- every counter the store keeps equals the sum of the charges in all transcripts for its key
  (decisions, approvals, model calls, reservations; releases negative), in whole millionths,
  and every key charged is a counter: nothing leaked, nothing counted twice;
- each ``refunds`` counter equals the ledger's sum for its (tenant, customer, day);
- no counter passes its limit but by charges an approval lifted (``lifted_by``);
- a charge is kept for its run's tenant (its counter names that tenant, and the customer
  the run is bound to), a shared one for no tenant; the store lists each counter under the
  tenant its key names;
- every decision that found a quota over its limit names each such quota in its reason.
"""

from __future__ import annotations

import asyncio
import calendar
import re
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agentcore import Agent, Compensation, Policy, Quota, RunResult, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.contracts import ToolAction, canonical_json
from agentcore.errors import QuotaExceededError
from agentcore.events import (
    ActionProposed,
    Confirmation,
    Decision,
    Event,
    ModelCalled,
    QuotaReleased,
    QuotaReserved,
)
from agentcore.quotas import counter_parts
from agentcore.stores import MemoryStore

T = TypeVar("T")

UNITS = 1_000_000  # a counter holds whole millionths


def units(amount: float) -> int:
    return round(amount * UNITS)


REFUNDS = Quota("refunds", limit=100, count="sum:amount", tools=("refund",), per=("customer_id",))
HOURLY = Quota("hourly", limit=1, tools=("refund",), window="hour", over="confirm")
UPSTREAM = Quota(
    "upstream", limit=5, tools=("refund",), shared=True, window="all", over="attention"
)
QUOTAS = (REFUNDS, HOURLY, UPSTREAM)
LIMITS = {q.name: q.limit for q in QUOTAS}

TENANTS = ("acme", "globex")
CUSTOMERS = ("C1", "C2")  # both tenants have a C1: two counters
AMOUNTS = (0.0, 0.1, 0.2, 0.3, 0.0000004, 1.0, 33.3, 50.0, 66.7, 99.9, 100.0, 100.1, 250.0)
START = float(calendar.timegm((2026, 12, 31, 22, 30, 0)))  # an hour and a half to new year
TASK = re.compile(r"refund (R-\d+) of (\S+) EUR")


def amounts() -> st.SearchStrategy[float]:
    return st.sampled_from(AMOUNTS) | st.integers(0, 1200).map(lambda n: n / 10)


def day_of(now: float) -> str:
    return time.strftime("day:%Y-%m-%d", time.gmtime(now))


def refunds_key(tenant: str, customer: str, day: str) -> str:
    """The ``refunds`` counter of a tenant's customer on a day."""
    return canonical_json(["refunds", [["tenant", tenant], ["customer_id", customer]], day])


class Clock:
    """The agent's clock, which the machine moves."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class Order:
    tenant: str
    customer: str
    amount: float


@dataclass(frozen=True)
class Refund:
    tenant: str
    customer: str
    day: str
    amount: float


def model() -> ScriptedModel:
    """Asks for the refund its task names, then finishes once it hears how it went."""

    def step(messages: Sequence[Message]) -> dict[str, Any]:  # Any: a JSON action
        if any(m.role == "user" and m.call_id is not None for m in messages):
            return {"type": "finish", "thought": "told", "answer": "done"}
        task = next(found for m in messages if (found := TASK.search(m.content)))
        args = {"order_id": task[1], "amount": float(task[2])}
        return {"type": "tool", "thought": "refund", "tool": "refund", "args": args}

    return ScriptedModel(step)


def charges_of(events: Sequence[Event]) -> list[Any]:  # Any: Charge
    return [
        c
        for e in events
        if isinstance(e, Decision | Confirmation | ModelCalled | QuotaReleased | QuotaReserved)
        for c in e.charges
    ]


class Quotas(RuleBasedStateMachine):
    """Runs of one agent with three quotas over one store, checked after each rule."""

    on_sqlite: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = Clock()
        self.tmp: Path | None = None
        self.failing: frozenset[float] = frozenset()
        self.orders: dict[str, Order] = {}
        self.status: dict[str, RunStatus] = {}
        self.pending: dict[str, Any] = {}  # run id -> PendingCall
        self.ledger: dict[str, Refund] = {}  # order id -> a refund that ran, not undone
        self.transcripts: dict[str, list[Event]] = {}
        self.seen: list[str] = []  # what the rules did, for a failing example's report

    @initialize(failing=st.frozensets(st.sampled_from(AMOUNTS), max_size=3))
    def setup(self, failing: frozenset[float]) -> None:
        self.failing = failing
        ledger, clock = self.ledger, self.clock

        def undo(call: Any) -> None:  # Any: the call undone
            del ledger[call.args["order_id"]]

        @tool(effect="write", compensate=Compensation(undo))
        def refund(order_id: str, amount: float) -> str:
            """Refund an order.

            Args:
                order_id: the order.
                amount: EUR.
            """
            if amount in failing:
                raise RuntimeError("the bank is down")
            order = self.orders[order_id]
            assert order_id not in ledger, f"{order_id} refunded twice"
            ledger[order_id] = Refund(order.tenant, order.customer, day_of(clock.now), amount)
            return f"refunded {amount}"

        store: Any = MemoryStore()  # Any: either store
        if self.on_sqlite:
            self.tmp = Path(tempfile.mkdtemp(prefix="quota-props-"))
            store = f"sqlite:///{self.tmp / 'runs.db'}"
        self.agent = Agent(
            tools=[refund],
            model=model(),
            store=store,
            policy=Policy(plan_before_writes=False, compensate_completed=True),
            quotas=QUOTAS,
            clock=clock,
        )
        self.store: Any = self.agent.store  # Any: the store's quota methods

    # -- plumbing ---------------------------------------------------------------------------

    def _do(self, what: Awaitable[T]) -> T:
        return self.loop.run_until_complete(what)

    def _events(self, run_id: str) -> list[Event]:
        """The run's transcript (read again once a rule touched the run)."""
        if run_id not in self.transcripts:
            self.transcripts[run_id] = self._do(self.agent.transcript(run_id))
        return self.transcripts[run_id]

    def _touch(self, run_id: str) -> None:
        self.transcripts.pop(run_id, None)

    def _used(self, key: str) -> int:
        return units(self._do(self.store.quota_usage([key])).get(key, 0.0))

    def _keys(self, order: Order) -> dict[str, str]:
        """The counters a call of ``order`` charges now, by quota."""
        hour = time.strftime("hour:%Y-%m-%dT%H", time.gmtime(self.clock.now))
        return {
            "refunds": refunds_key(order.tenant, order.customer, day_of(self.clock.now)),
            "hourly": canonical_json(["hourly", [["tenant", order.tenant]], hour]),
            "upstream": canonical_json(["upstream", [], "all"]),
        }

    def _over(self, order: Order, lifted: frozenset[str] = frozenset()) -> set[str]:
        """The quotas a call of ``order`` would pass if decided now (not those in
        ``lifted``): what the counter holds plus the amount, over the limit (to 1e-9: an
        amount under a millionth, which the counter holds as 0, is over a full counter)."""
        adds = {"refunds": order.amount, "hourly": 1.0, "upstream": 1.0}
        return {
            name
            for name, key in self._keys(order).items()
            if name not in lifted and self._used(key) / UNITS + adds[name] > LIMITS[name] + 1e-9
        }

    def _refused_by_store(self, order: Order, lifted: frozenset[str]) -> set[str]:
        """The quotas whose counters the store would not let an approval of ``order``'s
        call pass now (in whole millionths), but those the approval lifts."""
        adds = {"refunds": units(order.amount), "hourly": UNITS, "upstream": UNITS}
        return {
            name
            for name, key in self._keys(order).items()
            if name not in lifted
            and adds[name] > 0
            and self._used(key) + adds[name] > units(LIMITS[name])
        }

    def _last_decision(self, run_id: str) -> Decision:
        """The last decision about the run's refund (not its finish)."""
        events = self._events(run_id)
        calls = {
            e.call_id
            for e in events
            if isinstance(e, ActionProposed) and isinstance(e.action, ToolAction)
        }
        return [e for e in events if isinstance(e, Decision) and e.call_id in calls][-1]

    def _settled(self, run_id: str, result: RunResult[Any], over: set[str]) -> None:
        """Check ``result`` of deciding ``run_id``'s refund with ``over`` the quotas it
        would pass (read before), and note its status."""
        self._touch(run_id)
        order = self.orders[run_id]
        self.seen.append(f"{run_id}: {result.status.value}, over {sorted(over)}")
        self.status[run_id] = result.status
        self.pending.pop(run_id, None)
        if "refunds" in over:  # refuse is the strictest: the model is told, and finishes
            assert result.status is RunStatus.COMPLETED, result.reason
            d = self._last_decision(run_id)
            assert d.verdict == "deny" and "refunds" in d.over_quota and not d.charges
            assert run_id not in self.ledger
        elif "upstream" in over:
            assert result.status is RunStatus.NEEDS_ATTENTION, result.reason
            assert "quota 'upstream'" in (result.reason or "")
            assert run_id not in self.ledger
        elif "hourly" in over:
            assert result.status is RunStatus.AWAITING_CONFIRMATION, result.reason
            assert "quota 'hourly'" in (result.reason or "")
            assert result.pending is not None
            assert (result.pending.args or {}).get("order_id") == run_id
            self.pending[run_id] = result.pending
            assert run_id not in self.ledger
        else:
            assert result.status is RunStatus.COMPLETED, result.reason
            assert (run_id in self.ledger) is (order.amount not in self.failing)

    def _some(self, status: RunStatus) -> bool:
        return status in self.status.values()

    def _pick(self, n: int, status: RunStatus) -> str:
        found = [run_id for run_id, s in self.status.items() if s is status]
        return found[n % len(found)]

    # -- rules ------------------------------------------------------------------------------

    @rule(tenant=st.sampled_from(TENANTS), customer=st.sampled_from(CUSTOMERS), amount=amounts())
    def start(self, tenant: str, customer: str, amount: float) -> None:
        run_id = f"R-{len(self.orders):03d}"
        order = self.orders[run_id] = Order(tenant, customer, amount)
        over = self._over(order)
        result = self._do(
            self.agent.run(
                f"refund {run_id} of {amount!r} EUR",
                run_id=run_id,
                tenant=tenant,
                metadata={"customer_id": customer},
            )
        )
        self._settled(run_id, result, over)

    @precondition(lambda self: self._some(RunStatus.AWAITING_CONFIRMATION))
    @rule(n=st.integers(0, 9), approve=st.booleans(), by=st.sampled_from(("ann", "bob")))
    def confirm(self, n: int, approve: bool, by: str) -> None:
        run_id = self._pick(n, RunStatus.AWAITING_CONFIRMATION)
        p = self.pending[run_id]
        lifted = frozenset(self._last_decision(run_id).over_quota)
        assert lifted == {"hourly"}
        over = self._refused_by_store(self.orders[run_id], lifted) if approve else set[str]()
        before = len(self._events(run_id))
        answer = self.agent.confirm(
            run_id, approve=approve, by=by, step=p.step, args_hash=p.args_hash
        )
        if over:  # a quota not lifted is passed now: the store refuses the approval
            self.seen.append(f"{run_id}: approval refused, over {sorted(over)}")
            with pytest.raises(QuotaExceededError) as refused:
                self._do(answer)
            self._touch(run_id)
            assert refused.value.quota in over
            assert len(self._events(run_id)) == before  # nothing was written
            return
        result = self._do(answer)
        self._touch(run_id)
        self.seen.append(f"{run_id}: {'approved' if approve else 'denied'} by {by}")
        self.status[run_id] = result.status
        self.pending.pop(run_id)
        assert result.status is RunStatus.COMPLETED, result.reason
        ran = approve and self.orders[run_id].amount not in self.failing
        assert (run_id in self.ledger) is ran
        if approve:
            [approval] = [e for e in self._events(run_id) if isinstance(e, Confirmation)]
            assert [(c.quota, c.lifted_by) for c in approval.charges] == [
                ("refunds", None),
                ("hourly", by),
                ("upstream", None),
            ]

    @precondition(lambda self: self._some(RunStatus.NEEDS_ATTENTION))
    @rule(n=st.integers(0, 9))
    def resume(self, n: int) -> None:
        run_id = self._pick(n, RunStatus.NEEDS_ATTENTION)
        over = self._over(self.orders[run_id])
        self.seen.append(f"{run_id}: resumed")
        self._settled(run_id, self._do(self.agent.resume(run_id, by="ops")), over)

    @precondition(lambda self: self._some(RunStatus.COMPLETED))
    @rule(n=st.integers(0, 9))
    def compensate(self, n: int) -> None:
        run_id = self._pick(n, RunStatus.COMPLETED)
        result = self._do(self.agent.compensate(run_id, by="ops"))
        self._touch(run_id)
        self.seen.append(f"{run_id}: compensated")
        assert result.status is RunStatus.CANCELLED, result.reason
        self.status[run_id] = result.status
        assert run_id not in self.ledger

    @rule(step=st.sampled_from(("minute", "half hour", "hour", "to the hour", "day", "week")))
    def advance(self, step: str) -> None:
        now = self.clock.now
        match step:
            case "minute":
                now += 60
            case "half hour":
                now += 1800
            case "hour":
                now += 3600
            case "to the hour":  # exactly on the next hour: a new window
                now = (now // 3600 + 1) * 3600
            case "day":
                now += 86400
            case _:
                now += 7 * 86400
        self.clock.now = now
        self.seen.append(f"clock {time.strftime('%Y-%m-%dT%H:%M', time.gmtime(now))}")

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def counters_are_the_charges_and_the_ledger(self) -> None:
        if not hasattr(self, "agent"):
            return
        charged: dict[str, int] = defaultdict(int)
        lifted: dict[str, int] = defaultdict(int)
        for run_id, order in self.orders.items():
            events = self._events(run_id)
            for c in charges_of(events):
                charged[c.key] += units(c.amount)
                if c.lifted_by is not None and c.amount > 0:
                    lifted[c.key] += units(c.amount)
                parts = counter_parts(c.key)
                assert parts is not None, c.key
                per = dict(parts[0])
                if c.quota == "upstream":
                    assert c.tenant is None and "tenant" not in per, c
                else:
                    assert c.tenant == order.tenant == per["tenant"], (run_id, c)
                if c.quota == "refunds":
                    assert per["customer_id"] == order.customer, (run_id, c)
            for d in events:
                if isinstance(d, Decision) and d.over_quota:
                    for name in d.over_quota:
                        assert f"quota {name!r}" in (d.reason or ""), d
                if isinstance(d, Decision) and "over its quota" in (d.reason or ""):
                    assert d.over_quota, d
        rows = self._do(self.store.list_quota_usage())
        stored = {r.key: units(r.used) for r in rows}
        assert stored == dict(charged), (stored, dict(charged))
        for r in rows:
            parts = counter_parts(r.key)
            assert parts is not None
            assert r.tenant == dict(parts[0]).get("tenant"), r
            assert units(r.used) <= units(LIMITS[r.quota]) + lifted[r.key], (r, self.seen)
        ledger: dict[str, int] = defaultdict(int)
        for refund in self.ledger.values():
            ledger[refunds_key(refund.tenant, refund.customer, refund.day)] += units(refund.amount)
        by_refunds = {k: v for k, v in stored.items() if k.startswith('["refunds"') and v}
        assert by_refunds == {k: v for k, v in ledger.items() if v}, self.seen

    def teardown(self) -> None:
        try:
            if hasattr(self, "agent"):
                self._do(self.agent.close())
        finally:
            self.loop.close()
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)


SETTINGS = settings(
    max_examples=100,
    stateful_step_count=20,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_quotas_on_a_memory_store() -> None:
    run_state_machine_as_test(Quotas, settings=SETTINGS)


def test_quotas_on_sqlite() -> None:
    class OnSqlite(Quotas):
        on_sqlite = True

    run_state_machine_as_test(OnSqlite, settings=SETTINGS)


# -- sequences the machine reaches rarely, replayed step by step ---------------------------------


def replay(failing: frozenset[float], *steps: tuple[str, dict[str, Any]]) -> Quotas:
    """A fresh machine that ran ``steps`` (rule name, arguments), its invariants checked
    after each; torn down by the caller."""
    machine = Quotas()
    machine.setup(failing=failing)
    for name, kwargs in steps:
        getattr(machine, name)(**kwargs)
        machine.counters_are_the_charges_and_the_ledger()
    return machine


def test_an_approval_that_would_pass_a_quota_it_does_not_lift_is_refused_by_the_store() -> None:
    """Waiting on ``hourly``, the call's customer spends the day's 100 meanwhile: the
    approval would pass ``refunds`` (not lifted), so nothing is written and the run waits."""
    m = replay(
        frozenset(),
        ("start", {"tenant": "acme", "customer": "C1", "amount": 60.0}),
        ("start", {"tenant": "acme", "customer": "C1", "amount": 10.0}),  # waits: hourly
        ("advance", {"step": "hour"}),  # 23:30, the same day
        ("start", {"tenant": "acme", "customer": "C1", "amount": 40.0}),  # 100 of 100
        ("confirm", {"n": 0, "approve": True, "by": "ann"}),  # refused: refunds
        ("confirm", {"n": 0, "approve": False, "by": "ann"}),
    )
    try:
        assert "R-001: approval refused, over ['refunds']" in m.seen
        assert m.status["R-001"] is RunStatus.COMPLETED and "R-001" not in m.ledger
    finally:
        m.teardown()


def test_an_approval_lifts_the_hour_it_is_given_in_and_an_undo_gives_it_back() -> None:
    """Asked at 22:30, approved past midnight: charged to the new hour and day (the
    approval's clock), lifted there; the undo gives back those very counters."""
    m = replay(
        frozenset({0.1}),
        ("start", {"tenant": "globex", "customer": "C2", "amount": 0.2}),
        ("start", {"tenant": "globex", "customer": "C2", "amount": 0.1}),  # waits
        ("start", {"tenant": "globex", "customer": "C2", "amount": 0.3}),  # waits
        ("advance", {"step": "to the hour"}),  # 23:00
        ("advance", {"step": "to the hour"}),  # 00:00, a new year
        ("confirm", {"n": 0, "approve": True, "by": "bob"}),  # 0.1 fails: given back
        ("confirm", {"n": 0, "approve": True, "by": "ann"}),  # 0.3 runs on 2027-01-01
        ("compensate", {"n": 2}),
        ("compensate", {"n": 0}),
    )
    try:
        assert m.ledger == {}
        rows = m._do(m.store.list_quota_usage())
        assert {r.key for r in rows if r.used} == set()
        assert any('"hour:2027-01-01T00"' in r.key for r in rows)
    finally:
        m.teardown()


def test_an_amount_under_a_millionth_is_refused_at_a_full_counter() -> None:
    """The counter would hold it as 0 millionths; the decision adds up the real amount and
    refuses it at 100 of 100, naming the quota (conservative: nothing leaks)."""
    m = replay(
        frozenset(),
        ("start", {"tenant": "acme", "customer": "C1", "amount": 100.0}),
        ("advance", {"step": "hour"}),
        ("start", {"tenant": "acme", "customer": "C1", "amount": 0.0000004}),
    )
    try:
        assert m.seen[-1] == "R-001: completed, over ['refunds']"
    finally:
        m.teardown()
