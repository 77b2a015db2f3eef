"""Approvals by several people, against generated sequences of answers (hypothesis).

Whatever order people answer in, with repeats, denials and edits: a call runs once, after
exactly N distinct approvals and no denial; a person counts once; a denial by anyone ends
it; nothing runs while approvals are missing. Invalid rules are refused when the policy is
made, and a valid one is recorded and read back unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_approvals import PAY, make_agent

from agentcore import Policy, RunStatus
from agentcore.errors import AlreadyApprovedError, ConfigurationError

PEOPLE = st.sampled_from(["alice", "bob", "carol", "dave", "erin"])
ANSWER = st.tuples(PEOPLE, st.booleans())  # (who, approves)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(needed=st.integers(1, 4), answers=st.lists(ANSWER, min_size=1, max_size=8))
async def test_a_call_runs_after_exactly_n_distinct_approvals_and_no_denial(
    needed: int, answers: list[tuple[str, bool]]
) -> None:
    ledger: list[dict[str, Any]] = []
    agent = make_agent(ledger, approvals={"tool:pay": needed})
    first = await agent.run("pay acme", run_id="r")
    assert first.status is RunStatus.AWAITING_CONFIRMATION
    approvers: list[str] = []
    settled: str | None = None  # "ran" or "denied"
    for who, approves in answers:
        pending = (await agent.result("r")).pending
        if settled is not None:
            assert pending is None
            break
        assert pending is not None
        if approves and who in approvers:
            try:
                await agent.confirm(
                    "r", approve=True, by=who, step=pending.step, args_hash=pending.args_hash
                )
            except AlreadyApprovedError:
                continue
            raise AssertionError(f"{who} was counted twice")
        result = await agent.confirm(
            "r", approve=approves, by=who, step=pending.step, args_hash=pending.args_hash
        )
        if not approves:
            settled = "denied"
            assert result.status is RunStatus.COMPLETED, result
            continue
        approvers.append(who)
        if len(approvers) == needed:
            settled = "ran"
            assert result.status is RunStatus.COMPLETED, result
        else:
            assert result.status is RunStatus.AWAITING_CONFIRMATION
            assert result.pending is not None
            assert list(result.pending.approvals) == approvers
        assert ledger == ([PAY] if settled == "ran" else []), (approvers, ledger)
    assert ledger == ([PAY] if settled == "ran" else [])


RULE_KEY = st.one_of(
    st.builds(
        lambda k, v: f"{k}:{v}",
        st.sampled_from(["tool", "label", "effect", "x", ""]),
        st.text(max_size=12),
    ),
    st.sampled_from(["plan", "tool:", "effect:read", "effect:write", "effect:destructive"]),
    st.text(max_size=20),
)
COUNT = st.one_of(
    st.integers(-3, 6), st.floats(allow_nan=True), st.text(max_size=3), st.booleans(), st.none()
)


@settings(max_examples=300, deadline=None)
@given(rules=st.dictionaries(RULE_KEY, COUNT, max_size=4))
def test_approval_rules_are_refused_or_recorded_and_read_back(rules: dict[str, Any]) -> None:
    def valid(key: str, count: Any) -> bool:  # Any: whatever was generated
        kind, _, name = key.partition(":")
        if type(count) is not int or count < 1:
            return False
        if kind == "effect":
            return name in ("read", "write", "destructive")
        return key == "plan" or (kind in ("tool", "label") and bool(name))

    if not all(valid(k, c) for k, c in rules.items()):
        with pytest.raises(ConfigurationError, match="approvals"):
            Policy(approvals=rules)
        return
    policy = Policy(approvals=rules)
    assert Policy.from_json(policy.to_json()) == policy
    assert policy.approvals_needed(list(rules)) == max(rules.values(), default=0)
