"""An approvals rule that names no tool or label of the agent is refused when the agent is
made, with the name it most likely meant: a mistyped rule never applies, so the call it was
meant for would run without its approvals (fail open).
"""

from __future__ import annotations

from typing import Any

import pytest

from agentcore import Agent, Policy, RunStatus, tool
from agentcore.adapters import ScriptedModel
from agentcore.errors import ConfigurationError
from agentcore.stores import MemoryStore


@tool(effect="write", labels=["payments"])
def pay(to: str, amount: int) -> str:
    """Pay someone."""
    return f"paid {amount} to {to}"


@tool(effect="read")
def lookup(order: str) -> str:
    """Look an order up."""
    return order


@tool(effect="destructive", labels=["danger"])
def close_account(account: str) -> str:
    """Close an account."""
    return account


def agent(*tools: Any, rules: dict[str, int], store: Any = None) -> Agent:  # Any: tools
    return Agent(
        tools=list(tools),
        model=ScriptedModel([]),
        store=store or MemoryStore(),
        policy=Policy(approvals=rules, plan_before_writes=False),
    )


@pytest.mark.parametrize(
    ("rule", "meant"),
    [
        ("tool:Pay", "tool:pay"),
        ("tool:pay ", "tool:pay"),
        ("tool: pay", "tool:pay"),
        ("tool:PAY", "tool:pay"),
        ("tool:pya", "tool:pay"),
        ("label:Payments", "label:payments"),
        ("label:payment", "label:payments"),
    ],
)
def test_a_mistyped_rule_is_refused_naming_what_it_meant(rule: str, meant: str) -> None:
    with pytest.raises(ConfigurationError, match="would never apply") as caught:
        agent(pay, lookup, rules={rule: 2})
    assert f"did you mean '{meant}'" in str(caught.value)
    assert repr(rule) in str(caught.value)


def test_a_rule_naming_nothing_close_lists_what_there_is() -> None:
    with pytest.raises(ConfigurationError, match=r"its tools: lookup, pay\)") as caught:
        agent(pay, lookup, rules={"tool:refund_everything": 2})
    assert "did you mean" not in str(caught.value)


def test_every_bad_rule_is_named_at_once() -> None:
    with pytest.raises(ConfigurationError) as caught:
        agent(pay, rules={"tool:Pay": 2, "label:Payments": 2, "tool:pay": 1})
    assert "'tool:Pay'" in str(caught.value) and "'label:Payments'" in str(caught.value)
    assert "'tool:pay' names" not in str(caught.value)


def test_exact_rules_plans_and_effects_are_accepted() -> None:
    made = agent(
        pay,
        close_account,
        rules={"tool:pay": 2, "label:payments": 1, "label:danger": 3, "effect:write": 1, "plan": 2},
    )
    assert made.policy.approvals["tool:pay"] == 2


def test_a_rule_may_name_a_sub_agents_tool_at_any_depth() -> None:
    store = MemoryStore()
    grandchild = agent(close_account, lookup, rules={}, store=store).as_tool(
        "closer", "Close accounts."
    )
    child = agent(pay, grandchild, rules={}, store=store).as_tool("billing", "Do billing.")
    parent = agent(
        lookup,
        child,
        rules={"tool:pay": 2, "tool:close_account": 2, "label:danger": 2, "tool:billing": 1},
        store=store,
    )
    assert set(parent.policy.approvals) == {
        "tool:pay",
        "tool:close_account",
        "label:danger",
        "tool:billing",
    }
    with pytest.raises(ConfigurationError, match="did you mean 'tool:close_account'"):
        agent(lookup, child, rules={"tool:Close_Account": 2}, store=store)


def test_a_sub_agents_tool_outside_its_scope_is_not_a_target() -> None:
    store = MemoryStore()
    reader = agent(pay, lookup, rules={}, store=store).as_tool("reader", "Read.", scope=["lookup"])
    with pytest.raises(ConfigurationError, match="'tool:pay' names no tool"):
        agent(reader, rules={"tool:pay": 2}, store=store)


async def test_a_correct_rule_holds_the_call_for_its_people() -> None:
    ran: list[str] = []

    @tool(effect="write")
    def transfer(to: str) -> str:
        """Transfer money."""
        ran.append(to)
        return "sent"

    made = Agent(
        tools=[transfer],
        model=ScriptedModel(
            [{"type": "tool", "thought": "send", "tool": "transfer", "args": {"to": "acme"}}]
        ),
        store=MemoryStore(),
        policy=Policy(approvals={"tool:transfer": 2}, plan_before_writes=False),
    )
    result = await made.run("send it")
    assert result.status is RunStatus.AWAITING_CONFIRMATION and ran == []
    assert result.pending is not None and result.pending.approvals_needed == 2
