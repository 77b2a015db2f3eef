"""Tenants: a run's optional namespace, from ``agent.run(tenant=...)`` to the store's listing
and the command line's filters (issue 10)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentcore import Agent, RunStatus, tool
from agentcore.adapters import ScriptedModel
from agentcore.errors import LimitExceededError
from agentcore.events import RunStarted
from agentcore.limits import MAX_TENANT_CHARS, check_tenant
from agentcore.stores import SQLiteStore
from agentcore.testing import finish


@tool(effect="read")
def noop() -> str:
    """Do nothing."""
    return "ok"


@pytest.mark.parametrize("bad", ["", "a" * (MAX_TENANT_CHARS + 1), "a\nb", "a\x00b", "\ud800"])
def test_bad_tenants_are_refused(bad: str) -> None:
    with pytest.raises(LimitExceededError, match="tenant"):
        check_tenant(bad)


def test_good_tenants_pass() -> None:
    for good in ["acme", "a" * MAX_TENANT_CHARS, "org:42/team-1", "заказчик", "🙂"]:
        check_tenant(good)


async def test_a_run_records_its_tenant_and_the_store_lists_by_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    agent = Agent(
        tools=[noop], model=ScriptedModel([finish(), finish(), finish()]), store=f"sqlite:///{db}"
    )
    try:
        acme = await agent.run("for acme", tenant="acme")
        other = await agent.run("for globex", tenant="globex")
        nobody = await agent.run("for nobody")
        assert {acme.status, other.status, nobody.status} == {RunStatus.COMPLETED}
        first = (await agent.transcript(acme.run_id))[0]
        assert isinstance(first, RunStarted) and first.tenant == "acme"
    finally:
        await agent.close()
    store = SQLiteStore(db)
    try:
        assert [s.run_id for s in await store.list_runs(tenant="acme")] == [acme.run_id]
        listed = {s.run_id: s.tenant for s in await store.list_runs()}
        assert listed == {acme.run_id: "acme", other.run_id: "globex", nobody.run_id: None}
    finally:
        await store.close()


async def test_an_invalid_tenant_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    agent = Agent(tools=[noop], model=ScriptedModel([finish()]), store=f"sqlite:///{db}")
    try:
        with pytest.raises(LimitExceededError, match="tenant"):
            await agent.run("go", tenant="bad\ntenant")
        assert await agent.store.list_runs() == []
    finally:
        await agent.close()


def test_the_cli_lists_and_counts_by_tenant(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentcore.cli import app

    db = tmp_path / "runs.db"

    async def start() -> None:
        agent = Agent(tools=[noop], model=ScriptedModel([finish()] * 3), store=f"sqlite:///{db}")
        try:
            await agent.run("one", run_id="acme-1", tenant="acme")
            await agent.run("two", run_id="acme-2", tenant="acme")
            await agent.run("three", run_id="globex-1", tenant="globex")
        finally:
            await agent.close()

    asyncio.run(start())
    url = f"sqlite:///{db}"
    listed = CliRunner().invoke(app, ["runs", "--tenant", "acme", "--store", url])
    assert listed.exit_code == 0, listed.output
    assert "acme-1" in listed.output and "acme-2" in listed.output
    assert "globex-1" not in listed.output
    counted = CliRunner().invoke(app, ["stats", "--tenant", "globex", "--store", url])
    assert counted.exit_code == 0, counted.output
    [row] = [line for line in counted.output.splitlines() if line.strip().startswith(("│ v", "v"))]
    assert row.replace("│", " ").split()[1] == "1"  # one run of globex
    refused = CliRunner().invoke(app, ["runs", "--tenant", "", "--store", url])
    assert refused.exit_code == 2 and "tenant is empty" in refused.output
