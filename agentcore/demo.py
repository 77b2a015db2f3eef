"""The support-desk demo agent: read, write and destructive tools on a scripted model.

``agentcore demo`` runs it offline unless a model is asked for (``--model`` or
``$AGENTCORE_MODEL``); a provider key in the environment never switches it by itself. The
scripted model decides from the conversation so far (how many actions it already took), so a
run paused in one process continues correctly when another process confirms it; and the CLI
records which model a run started on, so confirming a scripted run never continues it on
another model.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from agentcore.adapters import Message, ModelAdapter, ScriptedModel

from .agent import Agent
from .policy import Policy
from .tools import ToolContext, tool

__all__ = ["DEMO_TASK", "SCRIPTED", "build_agent", "configured_model", "demo_model"]

SCRIPTED = "scripted"
"""The ``model`` that names the demo's scripted model (recorded for runs that use it)."""

DEMO_TASK = (
    "Customer C-17 says order A-1001 arrived broken. Refund it in full, then close their "
    "account as they asked."
)

_CUSTOMERS: dict[str, dict[str, Any]] = {  # Any: demo data, JSON values
    "C-17": {"id": "C-17", "name": "Ana Lima", "email": "ana@example.com", "status": "active"},
}
_ORDERS: dict[str, dict[str, Any]] = {  # Any: demo data, JSON values
    "A-1001": {"id": "A-1001", "customer": "C-17", "total": 42.5, "status": "delivered"},
    "A-0990": {"id": "A-0990", "customer": "C-17", "total": 12.0, "status": "delivered"},
}


@tool(effect="read", labels=["support"])
def get_customer(customer_id: str) -> dict[str, Any]:
    """Look up a customer by id.

    Args:
        customer_id: the customer's id, e.g. "C-17".
    """
    customer = _CUSTOMERS.get(customer_id)
    if customer is None:
        raise LookupError(f"no customer {customer_id!r}")
    return customer


@tool(effect="read", labels=["support"])
def list_orders(customer_id: str) -> list[dict[str, Any]]:
    """List a customer's orders with their totals and status.

    Args:
        customer_id: the customer's id.
    """
    return [o for o in _ORDERS.values() if o["customer"] == customer_id]


@tool(effect="write", labels=["support", "billing"])
def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order (money goes back to the customer's card).

    Args:
        order_id: the order to refund.
        amount: how much to refund, at most the order total.
    """
    order = _ORDERS.get(order_id)
    if order is None:
        raise LookupError(f"no order {order_id!r}")
    if amount > order["total"]:
        raise ValueError(f"refund {amount} exceeds the order total {order['total']}")
    return {"refund_id": f"R-{ctx.idempotency_key[-6:]}", "order_id": order_id, "amount": amount}


@tool(effect="destructive", labels=["support"])
def close_account(customer_id: str, reason: str) -> dict[str, Any]:
    """Close a customer's account for good. Cannot be undone.

    Args:
        customer_id: the customer whose account to close.
        reason: why, for the audit log.
    """
    if customer_id not in _CUSTOMERS:
        raise LookupError(f"no customer {customer_id!r}")
    return {"customer_id": customer_id, "closed": True, "reason": reason}


_SCRIPT: list[dict[str, Any]] = [  # Any: JSON actions
    {
        "type": "tool",
        "thought": "First confirm who the customer is.",
        "tool": "get_customer",
        "args": {"customer_id": "C-17"},
    },
    {
        "type": "tool",
        "thought": "Check the order and its total before refunding.",
        "tool": "list_orders",
        "args": {"customer_id": "C-17"},
    },
    {
        "type": "tool",
        "thought": "Order A-1001 totals 42.50; refund it in full.",
        "tool": "issue_refund",
        "args": {"order_id": "A-1001", "amount": 42.5},
    },
    {
        "type": "plan",
        "thought": "Refunds change things, so plan first: refund, then close the account.",
        "steps": ["Refund A-1001 in full (42.50)", "Close account C-17 as the customer asked"],
    },
    {
        "type": "tool",
        "thought": "The plan is approved; issue the refund.",
        "tool": "issue_refund",
        "args": {"order_id": "A-1001", "amount": 42.5},
    },
    {
        "type": "tool",
        "thought": "Now close the account, as the customer asked.",
        "tool": "close_account",
        "args": {"customer_id": "C-17", "reason": "customer request after a broken delivery"},
    },
    {
        "type": "finish",
        "thought": "Both parts of the request are handled.",
        "answer": "Refunded 42.50 for order A-1001 and closed account C-17.",
    },
]


def _next_action(messages: Sequence[Message]) -> dict[str, Any]:  # Any: JSON action
    taken = sum(1 for m in messages if m.role == "assistant")
    if any("Denied by" in m.content for m in messages if m.role == "user"):
        return {
            "type": "finish",
            "thought": "The account closure was denied; report what was done.",
            "answer": "Refunded 42.50 for order A-1001. The account was not closed (denied).",
        }
    return _SCRIPT[min(taken, len(_SCRIPT) - 1)]


def demo_model() -> ModelAdapter:
    """The demo's scripted model (deterministic, offline)."""
    delay = float(os.environ.get("AGENTCORE_DEMO_DELAY", "0.01"))
    return ScriptedModel(_next_action, name="scripted/support-demo", stream_delay_s=delay)


def configured_model() -> str | None:
    """``$AGENTCORE_MODEL`` when set. Provider keys are not looked at: the demo is offline
    unless a model is named."""
    return os.environ.get("AGENTCORE_MODEL") or None


def build_agent(model: str | ModelAdapter | None = None, store: str | None = None) -> Agent:
    """The support-desk agent: scripted unless a real model is named.

    Args:
        model: a ``"provider/model"`` route entry, an adapter object, or :data:`SCRIPTED`;
            default ``$AGENTCORE_MODEL``, else the scripted model.
        store: a store URL; default ``$AGENTCORE_STORE`` or ``sqlite:///agentcore.db``.
    """
    chosen = model or configured_model()
    return Agent(
        tools=[get_customer, list_orders, issue_refund, close_account],
        model=demo_model() if chosen in (None, SCRIPTED) else chosen,
        store=store,
        policy=Policy(plan_before_writes=True),
        instructions="You are a support agent for an online shop. Be precise about amounts.",
    )
