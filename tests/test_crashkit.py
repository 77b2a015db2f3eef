"""The crash kit as a user runs it: their own tools, a real SIGKILL, effects they count.

The tools below are a user's: each appends to its own ledger file (named by the test through
``CRASHKIT_LEDGER_DIR``), one line per real effect; the test counts the lines. Each boundary
costs two child processes, so each test runs only the boundaries its point needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentcore import Compensation, RunStatus, ToolContext, tool
from agentcore.errors import ConfigurationError
from agentcore.testing import crash_test

pytestmark = pytest.mark.subprocess

HERE = "test_crashkit"


def _ledger(name: str) -> Path:
    return Path(os.environ["CRASHKIT_LEDGER_DIR"], f"{name}.txt")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _append(path: Path, key: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(key + "\n")
        fh.flush()
        os.fsync(fh.fileno())


@tool(effect="write", idempotent=True)
def upsert_note(text: str, ctx: ToolContext) -> dict[str, str]:
    """Save a note under the call's key (an upsert: the same key twice is one note).

    Args:
        text: the note.
    """
    path = _ledger("upsert_note")
    if ctx.idempotency_key not in _lines(path):
        _append(path, ctx.idempotency_key)
    return {"saved": text}


def _refund_done(key: str) -> dict[str, str] | None:
    return {"refunded": key} if key in _lines(_ledger("refund")) else None


@tool(effect="write", idempotent=False, reconcile=_refund_done)
def refund(order_id: str, ctx: ToolContext) -> dict[str, str]:
    """Refund an order (not idempotent; the ledger tells whether a call happened).

    Args:
        order_id: the order to refund.
    """
    _append(_ledger("refund"), ctx.idempotency_key)
    return {"refunded": order_id}


@tool(effect="write", idempotent=False)
def send_email(to: str, ctx: ToolContext) -> dict[str, str]:
    """Send an email (not idempotent, and nothing can tell whether it was sent).

    Args:
        to: the recipient.
    """
    _append(_ledger("send_email"), ctx.idempotency_key)
    return {"sent": to}


@tool(effect="write", idempotent=True)
def add_line(text: str, ctx: ToolContext) -> dict[str, str]:
    """Append a line. Wrongly declared idempotent: a second call appends a second line.

    Args:
        text: the line.
    """
    _append(_ledger("add_line"), ctx.idempotency_key)
    return {"added": text}


def _deleted(key: str) -> dict[str, str] | None:
    return {"deleted": key} if key in _lines(_ledger("delete_account")) else None


@tool(effect="destructive", idempotent=False, reconcile=_deleted)
def delete_account(account: str, ctx: ToolContext) -> dict[str, str]:
    """Delete an account (a person approves it first).

    Args:
        account: the account to delete.
    """
    _append(_ledger("delete_account"), ctx.idempotency_key)
    return {"deleted": account}


Counter = Callable[[str], Callable[[], int]]


@pytest.fixture
def ledgers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Counter:
    """``counter(name)``: how many lines the tool ``name`` has written to its ledger."""
    monkeypatch.setenv("CRASHKIT_LEDGER_DIR", str(tmp_path))
    return lambda name: lambda: len(_lines(tmp_path / f"{name}.txt"))


def test_an_idempotent_tool_is_at_most_once_at_every_boundary(ledgers: Counter) -> None:
    report = crash_test(f"{HERE}:upsert_note", {"text": "hi"}, effects=ledgers("upsert_note"))
    report.assert_at_most_once()
    assert [r.boundary for r in report] == ["before_intent", "after_intent", "after_effect"]
    assert all(r.killed and r.status is RunStatus.COMPLETED for r in report)
    assert [(r.effects_at_kill, r.effects) for r in report] == [(0, 1), (0, 1), (1, 1)]
    # Where the kill fell: nothing of the call recorded; the intent durable, no outcome.
    assert report["before_intent"].recorded_at_kill == ("run_started",)
    assert report["after_intent"].recorded_at_kill[-1] == "tool_started"
    assert report["after_effect"].recorded_at_kill[-1] == "tool_started"


def test_a_reconcilable_tool_runs_once_through_a_kill_on_either_side_of_its_effect(
    ledgers: Counter,
) -> None:
    report = crash_test(
        f"{HERE}:refund",
        {"order_id": "A-1"},
        effects=ledgers("refund"),
        boundaries=["after_intent", "after_effect"],
    )
    report.assert_at_most_once()
    assert [(r.effects_at_kill, r.effects, r.status) for r in report] == [
        (0, 1, RunStatus.COMPLETED),  # reconcile found nothing: run once
        (1, 1, RunStatus.COMPLETED),  # reconcile found the call: its result adopted
    ]


def test_a_tool_nothing_can_check_stops_for_a_person_instead_of_running_twice(
    ledgers: Counter,
) -> None:
    report = crash_test(
        f"{HERE}:send_email",
        {"to": "ann@example.com"},
        effects=ledgers("send_email"),
        boundaries=["after_intent", "after_effect"],
    )
    report.assert_at_most_once()
    assert [(r.effects, r.status) for r in report] == [
        (0, RunStatus.NEEDS_ATTENTION),
        (1, RunStatus.NEEDS_ATTENTION),
    ]
    assert all(r.reason and f"{r.run_id}:1" in r.reason for r in report)  # names the call


def test_a_tool_wrongly_declared_idempotent_shows_its_double_effect(ledgers: Counter) -> None:
    report = crash_test(
        f"{HERE}:add_line", {"text": "x"}, effects=ledgers("add_line"), boundaries=["after_effect"]
    )
    result = report["after_effect"]
    assert (result.killed, result.effects, result.status) == (True, 2, RunStatus.COMPLETED)
    assert not result.ok
    with pytest.raises(AssertionError, match="effect made 2 times, not once"):
        report.assert_at_most_once()


def test_an_approval_made_durable_before_the_kill_runs_the_call_once_without_asking_again(
    ledgers: Counter,
) -> None:
    report = crash_test(
        f"{HERE}:delete_account",
        {"account": "bob"},
        effects=ledgers("delete_account"),
        boundaries=["approval"],
    )
    report.assert_at_most_once()
    result = report["approval"]
    assert result.recorded_at_kill[-1] == "confirmation"  # approved; no intent yet
    assert (result.effects, result.status, result.approvals_on_resume) == (
        1,
        RunStatus.COMPLETED,
        0,
    )


def test_what_cannot_be_tested_is_refused_before_any_process_starts(ledgers: Counter) -> None:
    with pytest.raises(ConfigurationError, match="'module:attribute'"):
        crash_test("upsert_note", {}, effects=ledgers("x"))
    with pytest.raises(ConfigurationError, match="not a tool"):
        crash_test(f"{HERE}:_lines", {}, effects=ledgers("x"))
    with pytest.raises(ConfigurationError, match="effect='write', not 'destructive'"):
        crash_test(f"{HERE}:refund", {}, effects=ledgers("x"), boundaries=["approval"])


def _charged_back(key: str) -> dict[str, str] | None:
    return {"charged_back": key} if key in _lines(_ledger("charge_undo")) else None


def _charge_back(call: Any) -> dict[str, str]:  # Any: agentcore.CommittedCall
    ctx = ToolContext.current()
    assert ctx is not None and ctx.idempotency_key == f"{call.idempotency_key}:undo"
    _append(_ledger("charge_undo"), ctx.idempotency_key)
    return {"charged_back": call.args["card"]}


def _charge_back_twice(call: Any) -> dict[str, str]:  # Any: agentcore.CommittedCall
    """Wrongly declared idempotent: a second undo charges back again."""
    ctx = ToolContext.current()
    assert ctx is not None
    _append(_ledger("charge_undo"), ctx.idempotency_key)
    return {"charged_back": call.args["card"]}


@tool(
    effect="write",
    reconcile=_refund_done,
    compensate=Compensation(_charge_back, reconcile=_charged_back),
)
def charge(card: str, ctx: ToolContext) -> dict[str, str]:
    """Charge a card; its undo charges it back (reconcilable from the ledger).

    Args:
        card: the card.
    """
    _append(_ledger("refund"), ctx.idempotency_key)
    return {"charged": card}


@tool(effect="write", compensate=Compensation(_charge_back_twice, idempotent=True))
def charge_badly(card: str, ctx: ToolContext) -> dict[str, str]:
    """Charge a card; its undo is wrongly declared idempotent.

    Args:
        card: the card.
    """
    _append(_ledger("refund"), ctx.idempotency_key)
    return {"charged": card}


def test_an_undo_is_made_once_through_a_kill_at_each_point_of_a_compensation(
    ledgers: Counter,
) -> None:
    report = crash_test(
        f"{HERE}:charge",
        {"card": "4242"},
        effects=ledgers("refund"),
        undone=ledgers("charge_undo"),
        boundaries=["undo_before_intent", "undo_after_intent", "undo_after_effect"],
    )
    report.assert_at_most_once()
    assert [(r.undos_at_kill, r.undos, r.status) for r in report] == [
        (0, 1, RunStatus.CANCELLED),
        (0, 1, RunStatus.CANCELLED),  # guard free, reconcile found nothing: undone once
        (1, 1, RunStatus.CANCELLED),  # reconcile found the undo: adopted
    ]
    assert report["undo_after_intent"].recorded_at_kill[-1] == "compensation_started"
    assert "undo_after_effect" in str(report)


def test_the_kit_catches_an_undo_wrongly_declared_idempotent(ledgers: Counter) -> None:
    report = crash_test(
        f"{HERE}:charge_badly",
        {"card": "4242"},
        effects=ledgers("refund"),
        undone=ledgers("charge_undo"),
        boundaries=["undo_after_effect"],
    )
    assert not report["undo_after_effect"].ok
    assert "undone 2 times" in str(report)
    with pytest.raises(AssertionError, match="not at-most-once"):
        report.assert_at_most_once()


def test_undo_boundaries_need_a_compensation_and_a_counter(ledgers: Counter) -> None:
    with pytest.raises(ConfigurationError, match="compensate= and undone="):
        crash_test(
            f"{HERE}:refund",
            {"order_id": "A-1"},
            effects=ledgers("refund"),
            boundaries=["undo_after_effect"],
        )


def test_the_kit_run_twice_against_one_ledger_gives_every_call_a_key_of_its_own(
    ledgers: Counter,
) -> None:
    # A provider's ledger outlives a test session: ``refund`` reconciles by idempotency key,
    # as a payment provider does, so a key reused by a second invocation would find the first
    # invocation's refund and adopt it (the run completed with no effect of its own).
    reports = [
        crash_test(
            f"{HERE}:refund",
            {"order_id": "A-1"},
            effects=ledgers("refund"),
            boundaries=["after_intent", "after_effect"],
        )
        for _ in range(2)
    ]
    for report in reports:
        report.assert_at_most_once()
    run_ids = [r.run_id for report in reports for r in report]
    keys = _lines(_ledger("refund"))
    assert len(set(run_ids)) == 4
    assert sorted(keys) == sorted(f"{run_id}:1" for run_id in run_ids)
