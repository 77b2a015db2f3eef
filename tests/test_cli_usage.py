"""``agentcore usage``: the quota counters of a SQLite file, as a user lists and prunes them."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentcore.cli import app

# Runs of this agent refund 200, 250, then 100 EUR to one customer: the third passes the
# 500 EUR daily quota and is refused. Every call counts in the tenant's hourly "calls" and
# in the all-time "ever".
AGENT_MODULE = textwrap.dedent(
    '''
    from agentcore import Agent, Policy, Quota, tool
    from agentcore.adapters import ScriptedModel

    NOW = [0.0]

    @tool(effect="write")
    def refund(order_id: str, amount: float) -> str:
        """Refund an order.

        Args:
            order_id: the order.
            amount: EUR.
        """
        return "refunded"

    def script(messages):
        seen = sum("refund returned" in m.content or "quota" in m.content for m in messages)
        amounts = [200, 250, 100]
        if seen < len(amounts):
            args = {"order_id": "A-1", "amount": amounts[seen]}
            return {"type": "tool", "thought": "refund", "tool": "refund", "args": args}
        return {"type": "finish", "thought": "done", "answer": "done"}

    QUOTAS = [
        Quota("refunds", 500, count="sum:amount", tools=("refund",), per=("customer_id",)),
        Quota("calls", 10, window="hour"),
        Quota("ever", 1000, window="all", shared=True),
    ]

    def make(model=None, store=None):
        return Agent(
            tools=[refund],
            model=ScriptedModel(script),
            store=store,
            policy=Policy(plan_before_writes=False),
            quotas=QUOTAS,
            clock=lambda: NOW[0],
        )
    '''
)

DAY = 1_780_000_000.0  # 2026-05-28T20:26:40Z


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SQLite store with the counters of two tenants' runs, and ``usage_agent:make``
    importable from the working directory."""
    (tmp_path / "usage_agent.py").write_text(AGENT_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import usage_agent  # pyright: ignore[reportMissingImports]  # written just above

    path = tmp_path / "runs.db"
    usage_agent.NOW[0] = DAY
    agent = usage_agent.make(store=f"sqlite:///{path}")
    first = agent.run_sync("refund C1", metadata={"customer_id": "C1"}, tenant="acme")
    assert first.status == "completed"
    second = agent.run_sync("refund C2", metadata={"customer_id": "C2"}, tenant="globex")
    assert second.status == "completed"
    return path


def cli(db: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args, "--store", f"sqlite:///{db}"])
    return result.exit_code, result.output


def rows(output: str) -> list[list[str]]:
    """The tab-separated rows after the header (stdout is not a terminal)."""
    header, *lines = output.strip().splitlines()
    assert header.split("\t")[:4] == ["tenant", "quota", "counter", "used"]
    return [line.split("\t") for line in lines]


def test_usage_lists_each_counter_in_words_with_its_window(db: Path) -> None:
    code, output = cli(db, "usage", "--tenant", "acme")
    assert code == 0, output
    # (the all-time counter is shared by every tenant: it is no tenant's, so not listed)
    assert rows(output) == [
        ["acme", "calls", "per tenant=acme, hour 2026-05-28T20", "2", "2026-05-28 21:00 UTC"],
        [
            "acme",
            "refunds",
            "per tenant=acme, customer_id=C1, day 2026-05-28",
            "450",
            "2026-05-29 00:00 UTC",
        ],
    ]
    code, output = cli(db, "usage")
    assert code == 0, output
    listed = rows(output)
    assert len(listed) == 5 and {r[0] for r in listed} == {"acme", "globex", "-"}
    # both tenants' runs charged the shared counter: two calls each, one counter
    shared = [r[1:] for r in listed if r[1] == "ever"]
    assert shared == [["ever", "per everyone, all", "4", "never"]]


def test_usage_with_the_agent_adds_each_limit(db: Path) -> None:
    code, output = cli(db, "usage", "--quota", "refunds", "--agent", "usage_agent:make")
    assert code == 0, output
    assert output.splitlines()[0].split("\t") == [
        "tenant",
        "quota",
        "counter",
        "used",
        "limit",
        "window closes",
    ]
    assert [r[:5] for r in rows(output)] == [
        ["acme", "refunds", "per tenant=acme, customer_id=C1, day 2026-05-28", "450", "500"],
        ["globex", "refunds", "per tenant=globex, customer_id=C2, day 2026-05-28", "450", "500"],
    ]


def test_usage_json_lines_have_stable_fields(db: Path) -> None:
    code, output = cli(
        db, "usage", "--json", "--tenant", "globex", "--quota", "refunds", "--agent",
        "usage_agent:make",
    )  # fmt: skip
    assert code == 0, output
    (line,) = [json.loads(x) for x in output.splitlines()]
    assert line == {
        "key": '["refunds",[["tenant","globex"],["customer_id","C2"]],"day:2026-05-28"]',
        "quota": "refunds",
        "tenant": "globex",
        "per": [["tenant", "globex"], ["customer_id", "C2"]],
        "window": "day:2026-05-28",
        "used": 450.0,
        "limit": 500.0,
        "window_end": 1780012800.0,
    }
    code, output = cli(db, "usage", "--json", "--tenant", "globex")
    assert code == 0, output
    assert {json.loads(x)["limit"] for x in output.splitlines()} == {None}  # no --agent


def counters(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        found = {str(row[0]) for row in conn.execute("SELECT quota FROM quota_usage")}
    conn.close()
    return found


def test_usage_prune_deletes_the_counters_of_closed_windows_only(db: Path) -> None:
    # The runs' hour and day (2026-05-28) have closed by now; the all-time counter has none.
    code, output = cli(db, "usage", "--prune", "--dry-run")
    assert code == 0, output
    assert "would prune 4 quota counter(s)" in output
    assert "refunds  per tenant=acme, customer_id=C1, day 2026-05-28  450" in output
    assert counters(db) == {"refunds", "calls", "ever"}  # nothing deleted
    code, output = cli(db, "usage", "--prune")
    assert code == 0, output
    assert "pruned 4 quota counter(s) of closed windows" in output
    assert counters(db) == {"ever"}
    code, output = cli(db, "usage")
    assert [r[1:] for r in rows(output)] == [["ever", "per everyone, all", "4", "never"]]


def test_usage_of_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    code, output = cli(missing, "usage")
    assert code == 0 and "no store at" in output
    code, output = cli(missing, "usage", "--prune")
    assert code == 0 and "nothing to prune" in output
    assert list(tmp_path.iterdir()) == []


def test_usage_without_counters_says_so(db: Path) -> None:
    code, output = cli(db, "usage", "--tenant", "initech")
    assert code == 0
    assert output.strip() == "no quota counters of tenant 'initech'"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tenant", ""], "--tenant is empty"),
        (["--dry-run"], "--dry-run goes with --prune"),
        (["--agent", "usage_agent"], "must look like 'package.module:attr'"),
        (["--agent", "usage_agent:nothing"], "has no attribute 'nothing'"),
    ],
)
def test_usage_errors_are_usage_errors(db: Path, args: list[str], message: str) -> None:
    code, output = cli(db, "usage", *args)
    assert code == 2, output
    assert message in output and "Traceback" not in output
