"""Contract v2 (the default since issue 37) beside v1: what changes on the wire, and that a
run begun under v1 keeps v1 when an upgrade changes the default."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Toolbox, make_toolbox

from agentcore import Agent, RunStatus
from agentcore.adapters import ScriptedModel
from agentcore.contracts import compile_action_schema, load_contract
from agentcore.contracts._dialects import compile_wire_schema
from agentcore.contracts._document import contract_for_run
from agentcore.testing import call, finish, plan


def test_v2_is_the_default_and_v1_still_loads() -> None:
    assert load_contract().version == "2"
    assert load_contract("1").version == "1"
    assert load_contract().hash != load_contract("1").hash


def test_generic_form_under_signatures_carries_each_tools_argument_schema(
    tools: Toolbox,
) -> None:
    """The generic form's ``args_json`` is a string: with tools shown as signatures, the
    descriptions and enums would reach the model nowhere, so the wire schema's prompt
    carries each tool's argument schema (and only then)."""
    specs = [tools.lookup.spec, tools.update_note.spec]
    v2 = compile_action_schema(specs, tool_args="signature")
    generic = v2.with_form("generic")
    assert generic.tool_args == "signature"
    for dialect in ("openai_strict", "anthropic", "gemini", "json_prompt"):
        prompt = compile_wire_schema(generic, dialect).prompt or ""
        for spec in specs:
            line = next(x for x in prompt.splitlines() if x.startswith(f"- {spec.name}: "))
            params = json.loads(line.removeprefix(f"- {spec.name}: "))
            assert set(params["properties"]) == set(spec.args_schema["properties"])
        # the typed form holds the arguments itself: no such prompt
        typed = compile_wire_schema(v2, dialect).prompt or ""
        assert "args_json" not in typed
    # v1 shows whole schemas in the text: its generic form adds nothing
    v1 = compile_action_schema(specs).with_form("generic")
    assert compile_wire_schema(v1, "openai_strict").prompt is None


def test_contract_for_run_rebuilds_the_recorded_built_in_version() -> None:
    v1, v2 = load_contract("1"), load_contract("2")
    recorded = {"version": "1", "hash": v1.hash}
    assert contract_for_run(v2, recorded) is v1
    assert contract_for_run(v2, {"version": "2", "hash": v2.hash}) is v2
    # the agent's own examples come along, and the hash says it is the same document
    extra = v2.examples[:1]
    mine_then, mine_now = v1.with_examples(extra), v2.with_examples(extra)
    pinned = contract_for_run(mine_now, {"version": "1", "hash": mine_then.hash})
    assert pinned.hash == mine_then.hash
    # a document that cannot be rebuilt (the operator's own, a changed file): the agent's
    assert contract_for_run(v2, {"version": "1", "hash": "0" * 16}) is v2
    assert contract_for_run(v2, {"version": "mine", "hash": "x"}) is v2
    assert contract_for_run(v2, {}) is v2


async def test_a_run_started_under_v1_resumes_under_v1_after_an_upgrade(tmp_path: Path) -> None:
    """Agent code upgraded between a run's pause and its confirmation (the default went from
    v1 to v2): the model is shown the system text the run began with, byte for byte."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    tools = make_toolbox()
    before = ScriptedModel([plan("delete"), call("delete_order", order_id="A1"), finish("gone")])
    old = Agent(model=before, tools=tools.all, store=store, contract="1")
    try:
        paused = await old.run("Delete A1")
    finally:
        await old.close()
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    after = ScriptedModel([plan("delete"), call("delete_order", order_id="A1"), finish("gone")])
    new = Agent(model=after, tools=tools.all, store=store)  # the default: v2
    try:
        done = await new.confirm(paused.run_id, approve=True, by="alice")
        fresh = await new.run("Delete A1 again")  # a new run takes the new default
    finally:
        await new.close()
    assert done.status is RunStatus.COMPLETED
    assert after.requests[0].system == before.requests[0].system
    assert "args schema" in after.requests[0].system
    assert "args schema" not in after.requests[-1].system
    assert fresh.run_id != done.run_id
