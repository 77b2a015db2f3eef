"""The console's Quotas page and ``/api/quotas``: each tenant's counters with the limits the
console's agents declare."""

from __future__ import annotations

import calendar
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from agentcore import Agent, Policy, Quota, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.console import create_app
from agentcore.stores import MemoryStore

from .conftest import header_user

NOON = float(calendar.timegm((2026, 5, 28, 12, 0, 0)))


@tool(effect="write")
def refund(order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        order_id: the order.
        amount: EUR.
    """
    return f"refunded {order_id}"


def refunding(amounts: Sequence[float]) -> ScriptedModel:
    def step(messages: Sequence[Message]) -> dict[str, Any]:  # Any: JSON
        seen = sum(m.role == "user" and m.call_id is not None for m in messages)
        if seen < len(amounts):
            args = {"order_id": f"O-{seen}", "amount": amounts[seen]}
            return {"type": "tool", "thought": "refund", "tool": "refund", "args": args}
        return {"type": "finish", "thought": "done", "answer": "done"}

    return ScriptedModel(step)


QUOTAS = [
    Quota("refunds", 500, count="sum:amount", tools=("refund",), per=("customer_id",)),
    Quota("calls", 10, window="hour"),
]


def shop(store: MemoryStore, amounts: Sequence[float], clock: float = NOON) -> Agent:
    return Agent(
        tools=[refund],
        model=refunding(amounts),
        store=store,
        policy=Policy(plan_before_writes=False),
        quotas=QUOTAS,
        clock=lambda: clock,
    )


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    store = MemoryStore()
    acme = shop(store, [200, 250])
    done = await acme.run("refund", tenant="acme", metadata={"customer_id": "C1"})
    assert done.status is RunStatus.COMPLETED
    other = await shop(store, [120]).run("refund", tenant="globex", metadata={"customer_id": "C9"})
    assert other.status is RunStatus.COMPLETED
    # the console's agent declares "refunds" only: "calls" shows without a limit
    agent = Agent(tools=[refund], model=refunding([]), store=store, quotas=QUOTAS[:1])
    app = create_app(store, agents=[agent], authenticate=header_user)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=transport, base_url="http://console.test", headers={"X-User": "ada"}
        ) as c,
    ):
        yield c


async def test_the_api_lists_each_tenants_counters_with_the_agents_limits(
    client: httpx.AsyncClient,
) -> None:
    found = (await client.get("/api/quotas")).json()["counters"]
    assert [(r["tenant"], r["quota"], r["counter"], r["used"], r["limit"]) for r in found] == [
        ("acme", "calls", "per tenant=acme, hour 2026-05-28T12", 2.0, None),
        ("acme", "refunds", "per tenant=acme, customer_id=C1, day 2026-05-28", 450.0, 500.0),
        ("globex", "calls", "per tenant=globex, hour 2026-05-28T12", 1.0, None),
        ("globex", "refunds", "per tenant=globex, customer_id=C9, day 2026-05-28", 120.0, 500.0),
    ]
    refunds = found[1]
    assert refunds["share"] == pytest.approx(0.9)
    assert refunds["window_end"] == NOON + 12 * 3600
    assert refunds["key"] == '["refunds",[["tenant","acme"],["customer_id","C1"]],"day:2026-05-28"]'
    only = (await client.get("/api/quotas", params={"tenant": "globex", "quota": "refunds"})).json()
    assert [r["used"] for r in only["counters"]] == [120.0]


async def test_the_quotas_page_groups_counters_by_tenant(client: httpx.AsyncClient) -> None:
    page = await client.get("/quotas")
    assert page.status_code == 200
    html = page.text
    assert '<a href="/quotas">Quotas</a>' in html  # in the navigation of every page
    assert html.index("<h2>tenant acme</h2>") < html.index("<h2>tenant globex</h2>")
    acme = html[html.index("<h2>tenant acme</h2>") : html.index("<h2>tenant globex</h2>")]
    assert "per tenant=acme, customer_id=C1, day 2026-05-28" in acme and "450 <span" in acme
    assert "(90%)" in acme and "500</td>" in acme
    assert "customer_id=C9" not in acme
    # the runs' windows (May 2026, on the injected clock) have closed by the real clock
    assert time.time() > NOON + 86400 and "(closed)" in acme
    filtered = await client.get("/quotas", params={"tenant": "initech"})
    assert "No quota counters match these filters." in filtered.text
    runs = await client.get("/runs")
    assert '<a href="/quotas">Quotas</a>' in runs.text


async def test_the_quotas_view_needs_a_signed_in_user(client: httpx.AsyncClient) -> None:
    anonymous = await client.get("/api/quotas", headers={"X-User": ""})
    assert anonymous.status_code == 401
    page = await client.get("/quotas", headers={"X-User": ""})
    assert page.status_code == 401 and "per customer_id" not in page.text


async def test_a_store_without_quota_counters_is_said_plainly() -> None:
    class NoQuotas(MemoryStore):
        list_quota_usage = None  # type: ignore[assignment]  # a store of one's own, without counters

    app = create_app(NoQuotas(), authenticate=header_user)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://console.test", headers={"X-User": "ada"}
    ) as c:
        api = await c.get("/api/quotas")
        assert api.status_code == 501 and "keeps no quota counters" in api.json()["error"]
        page = await c.get("/quotas")
        assert page.status_code == 501 and "keeps no quota counters" in page.text
