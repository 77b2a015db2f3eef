"""The Agent facade: its twins show their methods' parameters to ``inspect`` and ``help()``;
every method that takes a person's name checks it the same way (``resume`` too); a setting
changed after construction, and a ``configured()`` clone, keep or leave the open store as
they should."""

from __future__ import annotations

import inspect
import pydoc

import pytest
from conftest import Toolbox

from agentcore import (
    Agent,
    Budget,
    Policy,
    RunIdentity,
    RunResult,
    RunStatus,
    ToolContext,
    tool,
)
from agentcore.adapters import ScriptedModel
from agentcore.errors import ConfigurationError, LimitExceededError
from agentcore.events import RunResumed
from agentcore.testing import call, finish

NO_PLAN = Policy(plan_before_writes=False)

RUN = [
    "task",
    "scope",
    "budget",
    "run_id",
    "metadata",
    "tenant",
    "history",
    "conversation_budget",
]
REPLY = ["run_id", "message", "key", "budget", "wait_s"]
RESUME = ["run_id", "budget", "by", "accept_tool_changes"]
CONFIRM = ["run_id", "approve", "by", "reason", "args", "step", "args_hash", "accept_tool_changes"]
TWINS = [
    ("run_sync", "run", RUN),
    ("resume_sync", "resume", RESUME),
    ("confirm_sync", "confirm", CONFIRM),
    ("stream", "run", RUN),
    ("stream_resume", "resume", RESUME),
    ("stream_confirm", "confirm", CONFIRM),
    ("reply_sync", "reply", REPLY),
    ("stream_reply", "reply", REPLY),
]


@pytest.mark.parametrize(("twin", "method", "names"), TWINS, ids=[t[0] for t in TWINS])
def test_a_twin_shows_its_methods_parameters(
    twin: str, method: str, names: list[str], tools: Toolbox
) -> None:
    agent = Agent(tools=tools.all, model=ScriptedModel([]), store="memory://")
    wrapped = inspect.signature(getattr(agent, method))
    shown = inspect.signature(getattr(agent, twin))
    assert list(shown.parameters) == names
    assert list(shown.parameters.values()) == list(wrapped.parameters.values())  # kinds, defaults
    returns = "AsyncIterator[StreamEvent]" if twin.startswith("stream") else "RunResult[OutputT]"
    assert shown.return_annotation == returns
    on_the_class = inspect.signature(getattr(Agent, twin))  # Agent.run_sync(agent, ...)
    assert list(on_the_class.parameters) == ["self", *names]


def test_help_shows_a_twins_parameters_and_text(tools: Toolbox) -> None:
    agent = Agent(tools=tools.all, model=ScriptedModel([]), store="memory://")
    for shown in (agent.confirm_sync, Agent.confirm_sync):
        text = pydoc.plain(pydoc.render_doc(shown))
        assert "confirm_sync(" in text
        assert "approve: 'bool', by: 'str'" in text
        assert "args_hash: 'str | None' = None" in text
        assert ":meth:`confirm` for code without an event loop." in text
    text = pydoc.plain(pydoc.render_doc(agent.stream_resume))
    assert "stream_resume(run_id: 'str', *, budget:" in text


async def _paused(tools: Toolbox) -> tuple[Agent, RunResult[str]]:
    """An agent whose run waits for a person to approve deleting order A1."""
    model = ScriptedModel([call("delete_order", order_id="A1"), finish("deleted")])
    agent = Agent(tools=tools.all, model=model, store="memory://", policy=NO_PLAN)
    paused = await agent.run("Delete A1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    return agent, paused


ASKS = {
    "confirm": {"approve": True},
    "resolve": {"fail": True},
    "cancel": {},
    "compensate": {},
    "resume": {},
}


@pytest.mark.parametrize("blank", ["", " \u200b\u2060 "], ids=["empty", "invisible"])
@pytest.mark.parametrize("method", list(ASKS))
async def test_every_method_taking_a_person_refuses_a_blank_name(
    method: str, blank: str, tools: Toolbox
) -> None:
    agent, paused = await _paused(tools)
    before = await agent.transcript(paused.run_id)
    with pytest.raises(ConfigurationError, match=rf"{method}\(\) needs by=<a person's name>"):
        await getattr(agent, method)(paused.run_id, by=blank, **ASKS[method])
    assert await agent.transcript(paused.run_id) == before  # nothing recorded
    assert tools.count("delete_order") == 0
    assert (await agent.result(paused.run_id)).status is RunStatus.AWAITING_CONFIRMATION


@pytest.mark.parametrize("method", list(ASKS))
async def test_every_method_taking_a_person_refuses_a_name_it_cannot_record(
    method: str, tools: Toolbox
) -> None:
    agent, paused = await _paused(tools)
    before = await agent.transcript(paused.run_id)
    with pytest.raises(LimitExceededError, match=rf"{method}\(\)'s by cannot be recorded"):
        await getattr(agent, method)(paused.run_id, by="al\ud800ice", **ASKS[method])
    assert await agent.transcript(paused.run_id) == before


async def test_resume_records_the_persons_name_as_every_answer_does(tools: Toolbox) -> None:
    model = ScriptedModel(["not an action", "nor this", finish("shipped")])
    agent = Agent(tools=tools.all, model=model, store="memory://", policy=NO_PLAN)
    stopped = await agent.run("Where is A1?", budget=Budget(max_tokens=100))
    assert stopped.status is RunStatus.BUDGET_EXHAUSTED
    done = await agent.resume(stopped.run_id, budget=Budget(max_steps=5), by=" \uff41lice\u200b ")
    assert done.status is RunStatus.COMPLETED
    resumed = [e for e in await agent.transcript(done.run_id) if isinstance(e, RunResumed)]
    assert [e.by for e in resumed] == ["alice"]


async def test_a_setting_changed_later_applies_and_keeps_the_open_store(tools: Toolbox) -> None:
    agent = Agent(tools=tools.all, model=ScriptedModel([finish("first")]), store="memory://")
    first = await agent.run("One")
    agent.route = (ScriptedModel([finish("second")]),)
    second = await agent.run("Two")
    assert (first.answer, second.answer) == ("first", "second")
    listed = {s.run_id for s in await agent.store.list_runs()}
    assert listed == {first.run_id, second.run_id}  # one memory store, not a reopened one


async def test_a_clone_shares_the_store_unless_given_another(tools: Toolbox) -> None:
    agent = Agent(tools=tools.all, model=ScriptedModel([finish("mine")]), store="memory://")
    mine = await agent.run("One")
    same_store = agent.configured(model=ScriptedModel([finish("clone's")]))
    assert (await same_store.result(mine.run_id)).answer == "mine"
    elsewhere = agent.configured(model=ScriptedModel([finish("two")]), store="memory://")
    assert await elsewhere.store.list_runs() == []
    assert (await elsewhere.run("Two")).answer == "two"
    assert {s.run_id for s in await agent.store.list_runs()} == {mine.run_id}


async def test_deps_are_built_once_per_run_and_advance() -> None:
    """The session is built once per agent; what ``deps`` builds is kept for one advance."""
    built: list[str] = []

    def deps(identity: RunIdentity) -> str:
        built.append(identity.run_id)
        return "pool"

    @tool(effect="read")
    def look(order_id: str, ctx: ToolContext[str]) -> str:
        """Look an order up."""
        return f"{order_id} via {ctx.deps}"

    @tool(effect="destructive")
    def drop(order_id: str, ctx: ToolContext[str]) -> str:
        """Delete an order."""
        return f"dropped {order_id} via {ctx.deps}"

    script = [call("look", order_id="A1"), call("look", order_id="A2"), call("drop", order_id="A1")]
    model = ScriptedModel([*script, finish("done"), call("look", order_id="B1"), finish("ok")])
    agent = Agent(tools=[look, drop], model=model, store="memory://", policy=NO_PLAN, deps=deps)
    paused = await agent.run("Drop A1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    assert built == [paused.run_id]  # two calls, one advance
    done = await agent.confirm(paused.run_id, approve=True, by="alice")
    assert done.status is RunStatus.COMPLETED
    assert built == [paused.run_id] * 2  # the confirmation's advance builds them again
    other = await agent.run("Look B1")
    assert built == [paused.run_id] * 2 + [other.run_id]
