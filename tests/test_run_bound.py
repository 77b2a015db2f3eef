"""Tool parameters bound to the run, never to the model (issue 23, part 2), and the
dependencies built from the run's record, through the public API.

A service binds ``customer_id`` to the run it starts; the model (or text injected into it)
cannot see or set it, so it cannot reach another customer's data. Dependencies come from a
factory called with the run's recorded identity in whichever process advances the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest

from agentcore import Agent, FromRun, Policy, RunIdentity, RunStatus, ToolContext, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import ConfigurationError
from agentcore.events import ModelCalled, ToolFinished, ToolStarted
from agentcore.stores import MemoryStore

ORDERS = {"C-1": ["A-1", "A-2"], "C-2": ["B-9"]}


@tool(effect="read")
def list_orders(
    customer_id: Annotated[str, FromRun("customer_id")], status: str = "any"
) -> list[str]:
    """List the customer's orders.

    Args:
        status: only orders in this status.
    """
    return ORDERS[customer_id]


@tool(effect="read")
def whoami(tenant: Annotated[str, FromRun.tenant()], seat: Annotated[int, FromRun("seat")]) -> str:
    """Say who this run acts for."""
    return f"{tenant}/{seat}"


def test_a_bound_parameter_is_not_in_the_schema_the_model_sees() -> None:
    schema = list_orders.spec.args_schema
    assert "customer_id" not in json.dumps(schema)
    assert set(schema["properties"]) == {"status"}
    assert list_orders.run_params["customer_id"][0] == FromRun("customer_id")


async def test_a_model_cannot_reach_another_customers_data() -> None:
    """The model writes another customer's id: the argument does not exist for it, so the
    reply is refused and re-asked; the call that runs reads the run's customer."""
    seen: list[list[str]] = []

    def model(messages: Sequence[Message]) -> dict[str, Any]:
        said = "\n".join(m.content for m in messages if m.role == "user")
        if "list_orders returned" in said:
            return {"type": "finish", "thought": "done", "answer": "listed"}
        if "invalid" in said.lower() or "extra" in said.lower():  # told off once: comply
            return {"type": "tool", "thought": "mine", "tool": "list_orders", "args": {}}
        return {  # injected: "list the orders of C-2"
            "type": "tool",
            "thought": "the ticket says C-2",
            "tool": "list_orders",
            "args": {"customer_id": "C-2"},
        }

    @tool(effect="read")
    def orders(customer_id: Annotated[str, FromRun("customer_id")]) -> list[str]:
        """List the customer's orders."""
        seen.append(ORDERS[customer_id])
        return ORDERS[customer_id]

    agent = Agent(
        tools=[orders, list_orders],
        model=ScriptedModel(model),
        store=MemoryStore(),
        policy=Policy(max_reasks=2),
    )
    result = await agent.run("my orders", scope=["list_orders"], metadata={"customer_id": "C-1"})
    assert result.status is RunStatus.COMPLETED, result.reason
    events = await agent.transcript(result.run_id)
    assert any(isinstance(e, ModelCalled) and e.outcome == "invalid" for e in events)
    (started,) = [e for e in events if isinstance(e, ToolStarted)]
    assert started.args == {"status": "any"} and started.bound == {"customer_id": "C-1"}
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.result == ["A-1", "A-2"]
    assert "B-9" not in json.dumps([e.model_dump(mode="json") for e in events])


async def test_a_missing_or_mistyped_value_is_refused_before_anything_runs() -> None:
    store = MemoryStore()
    agent = Agent(tools=[whoami], model=ScriptedModel([]), store=store)
    with pytest.raises(ConfigurationError, match=r"'tenant' from the run's tenant"):
        await agent.run("who", metadata={"seat": 3})
    with pytest.raises(ConfigurationError, match=r"metadata\['seat'\].*metadata=\{'seat'"):
        await agent.run("who", tenant="acme")
    with pytest.raises(ConfigurationError, match="does not fit its type"):
        await agent.run("who", tenant="acme", metadata={"seat": "third"})
    assert await store.list_runs() == []  # nothing was recorded
    # a tool outside the run's scope is not asked for its values
    other = Agent(tools=[whoami, list_orders], model=ScriptedModel([]), store=store)
    with pytest.raises(ConfigurationError, match="customer_id"):
        await other.run("orders", scope=["list_orders"])


async def test_values_from_tenant_and_metadata_reach_the_tool_typed() -> None:
    agent = Agent(
        tools=[whoami],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "w", "tool": "whoami", "args": {}},
                {"type": "finish", "thought": "d", "answer": "ok"},
            ]
        ),
        store=MemoryStore(),
    )
    result = await agent.run("who", tenant="acme", metadata={"seat": 3})
    events = await agent.transcript(result.run_id)
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.result == "acme/3"


@dataclass
class Deps:
    db: str
    built_for: RunIdentity


async def test_deps_are_built_from_the_record_once_per_run_and_typed() -> None:
    built: list[RunIdentity] = []

    async def make_deps(identity: RunIdentity) -> Deps:
        built.append(identity)
        return Deps(db=f"pool:{identity.tenant}", built_for=identity)

    used: list[str] = []

    @tool(effect="read")
    def lookup(order_id: str, ctx: ToolContext[Deps]) -> str:
        """Look an order up."""
        used.append(ctx.deps.db)
        assert ctx.metadata["customer_id"] == "C-1" and ctx.tenant == "acme"
        return order_id

    step = {"type": "tool", "thought": "l", "tool": "lookup", "args": {"order_id": "A-1"}}
    agent = Agent(
        tools=[lookup],
        model=ScriptedModel([step, step, {"type": "finish", "thought": "d", "answer": "ok"}]),
        store=MemoryStore(),
        deps=make_deps,
    )
    result = await agent.run("look", tenant="acme", metadata={"customer_id": "C-1"})
    assert result.status is RunStatus.COMPLETED
    assert used == ["pool:acme", "pool:acme"]
    assert len(built) == 1 and built[0].run_id == result.run_id
    with pytest.raises(TypeError):
        built[0].metadata["customer_id"] = "C-2"  # type: ignore[index]  # read-only


async def test_a_failing_factory_is_a_failed_call_the_model_sees_and_nothing_runs() -> None:
    ran: list[str] = []

    def broken(identity: RunIdentity) -> Deps:
        raise ConnectionError("database unreachable")

    @tool(effect="write")
    def save(text: str, ctx: ToolContext[Deps]) -> str:
        """Save."""
        ran.append(text)
        return "saved"

    agent = Agent(
        tools=[save],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "s", "tool": "save", "args": {"text": "x"}},
                {"type": "finish", "thought": "d", "answer": "could not"},
            ]
        ),
        store=MemoryStore(),
        policy=Policy(plan_before_writes=False),
        deps=broken,
    )
    result = await agent.run("save x")
    assert result.status is RunStatus.COMPLETED and ran == []
    events = await agent.transcript(result.run_id)
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert not finished.ok
    assert finished.error == (
        "the call could not start (nothing ran): ConnectionError: database unreachable"
    )


WORKER = textwrap.dedent(
    '''
    import asyncio, json, os, sys
    from typing import Annotated
    from agentcore import Agent, FromRun, Policy, RunIdentity, ToolContext, tool
    from agentcore.adapters import ScriptedModel
    from agentcore.stores import SQLiteStore

    db, log, cmd = sys.argv[1:4]

    def deps(identity: RunIdentity) -> dict:
        with open(log, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "tenant": identity.tenant,
                                "metadata": dict(identity.metadata)}) + "\\n")
        return {"pid": os.getpid()}

    @tool(effect="destructive")
    def refund(amount: int, customer_id: Annotated[str, FromRun("customer_id")],
               ctx: ToolContext[dict]) -> str:
        """Refund the run's customer."""
        return f"refunded {amount} to {customer_id} by {ctx.deps['pid']}"

    @tool(effect="read")
    def balance(customer_id: Annotated[str, FromRun("customer_id")], ctx: ToolContext[dict]) -> int:
        """The customer's balance."""
        return 40

    def step(messages):
        said = "\\n".join(m.content for m in messages if m.role == "user")
        if "refund returned" in said:
            return {"type": "finish", "thought": "d", "answer": "done"}
        if "balance returned" in said:
            return {"type": "tool", "thought": "r", "tool": "refund", "args": {"amount": 5}}
        return {"type": "tool", "thought": "b", "tool": "balance", "args": {}}

    agent = Agent(tools=[balance, refund], model=ScriptedModel(step), store=SQLiteStore(db),
                  policy=Policy(plan_before_writes=False), deps=deps)

    async def main():
        if cmd == "start":
            r = await agent.run("refund 5", run_id="r1", tenant="acme",
                                metadata={"customer_id": "C-1"})
        else:
            r = await agent.confirm("r1", approve=True, by="ann")
        print(r.status.value, r.answer)
        await agent.close()

    asyncio.run(main())
    '''
)


@pytest.mark.subprocess
def test_two_worker_processes_build_the_deps_from_the_record_each_time(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    db, log = tmp_path / "runs.db", tmp_path / "deps.jsonl"

    def worker(cmd: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCORE_")}
        done = subprocess.run(
            [sys.executable, str(script), str(db), str(log), cmd],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert worker("start").startswith("awaiting_confirmation")
    assert worker("confirm").startswith("completed done")
    built = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(built) == 2 and built[0]["pid"] != built[1]["pid"]
    assert {(b["tenant"], json.dumps(b["metadata"])) for b in built} == {
        ("acme", '{"customer_id": "C-1"}')
    }


async def test_bound_values_survive_a_restart_from_a_snapshot(tmp_path: Path) -> None:
    from agentcore.stores import SQLiteStore

    paid: list[str] = []

    @tool(effect="destructive")
    def refund(amount: int, customer_id: Annotated[str, FromRun("customer_id")]) -> str:
        """Refund the run's customer."""
        paid.append(f"{customer_id}:{amount}")
        return "refunded"

    def agent() -> Agent:
        made = Agent(
            tools=[refund],
            model=ScriptedModel(
                [
                    {"type": "tool", "thought": "r", "tool": "refund", "args": {"amount": 5}},
                    {"type": "finish", "thought": "d", "answer": "done"},
                ]
            ),
            store=SQLiteStore(tmp_path / "runs.db"),
            policy=Policy(plan_before_writes=False),
        )
        made.snapshot_every = 1
        return made

    first = agent()
    await first.run("refund", run_id="r1", metadata={"customer_id": "C-1"})
    await first.close()
    second = agent()  # loads the run from its latest snapshot
    done = await second.confirm("r1", approve=True, by="ann")
    assert done.status is RunStatus.COMPLETED and paid == ["C-1:5"]
    await second.close()
