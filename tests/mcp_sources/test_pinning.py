"""Rug pulls: a server that lists a tool differently after a run pinned it.

The pinned test server (servers/pinned.py) defines ``echo`` by a variant file read at
start; variant 2 changes its description (an injected instruction), its input schema and
its annotations.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import pytest

from agentcore import Agent, Budget, Policy, RunStatus
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import ToolManifestChangedError
from agentcore.events import Confirmation, Decision, ToolFinished
from agentcore.mcp import McpServer, ToolConfig
from agentcore.stores import MemoryStore
from agentcore.testing import call, finish, plan

from .mcp_helpers import PINNED

pytestmark = pytest.mark.subprocess

Variant = Callable[[str], dict[str, str]]


CONFIG = {
    "echo": ToolConfig(effect="read"),
    "crash": ToolConfig(effect="read"),
    "delete_item": ToolConfig(effect="destructive"),
}
LOOSE = Policy(writes_after_untrusted="allow")


def server(env: dict[str, str], log: TextIO) -> McpServer:
    return McpServer(
        "pinned", command=sys.executable, args=[str(PINNED)], env=env, stderr=log, tools=CONFIG
    )


async def test_a_changed_definition_is_refused_on_confirm_until_accepted(
    variant: Variant, server_log: TextIO
) -> None:
    store = MemoryStore()
    script = [call("pinned.echo", text="hi"), plan("delete"), call("pinned.delete_item", item="a")]
    async with server(variant("1"), server_log) as first:
        # the plan after the server's (untrusted) output is the policy's to approve here:
        # the call that waits is the destructive one
        agent = Agent(tools=first.tools(), model=ScriptedModel(script), store=store, policy=LOOSE)
        waiting = await agent.run("Echo, then delete a")
        assert waiting.status is RunStatus.AWAITING_CONFIRMATION
    pending = waiting.pending
    assert pending is not None
    async with server(variant("2"), server_log) as second:  # the server was "upgraded"
        agent = Agent(
            tools=second.tools(),
            model=ScriptedModel([*script, finish()]),
            store=store,
            policy=LOOSE,
        )
        with pytest.raises(ToolManifestChangedError) as info:
            await agent.confirm(
                waiting.run_id,
                approve=True,
                by="alice",
                step=pending.step,
                args_hash=pending.args_hash,
            )
        words = str(info.value)
        assert "pinned.echo" in words
        assert "the server's description changed" in words
        assert "the server's input schema changed" in words
        assert "readOnlyHint True -> False" in words
        assert (await agent.result(waiting.run_id)).status is RunStatus.AWAITING_CONFIRMATION
        done = await agent.confirm(
            waiting.run_id,
            approve=True,
            by="alice",
            step=pending.step,
            args_hash=pending.args_hash,
            accept_tool_changes=True,
        )
        assert done.status is RunStatus.COMPLETED
        events = await agent.transcript(waiting.run_id)
        (confirmation,) = [ev for ev in events if isinstance(ev, Confirmation)]
        assert (
            confirmation.accepted_tool_changes
            and "pinned.echo" in (confirmation.accepted_tool_changes[0])
        )
        # the run is pinned to the accepted definition from now on
        accepted = confirmation.accepted_tools["pinned.echo"]
        echo = {t.name: t for t in second.tools()}["pinned.echo"]
        assert accepted["hash"] == echo.spec.manifest_hash


async def test_a_changed_definition_is_refused_on_resume_until_accepted(
    variant: Variant, server_log: TextIO
) -> None:
    store = MemoryStore()
    script = [call("pinned.echo", text="hi"), call("pinned.echo", text="again"), finish()]
    async with server(variant("1"), server_log) as first:
        agent = Agent(tools=first.tools(), model=ScriptedModel(script), store=store)
        stopped = await agent.run("Echo twice", budget=Budget(max_tokens=60))
        assert stopped.status is RunStatus.BUDGET_EXHAUSTED
    async with server(variant("2"), server_log) as second:
        agent = Agent(tools=second.tools(), model=ScriptedModel(script), store=store)
        with pytest.raises(ToolManifestChangedError, match="the server's description changed"):
            await agent.resume(stopped.run_id, budget=Budget(max_steps=5))
        done = await agent.resume(
            stopped.run_id, budget=Budget(max_steps=5), accept_tool_changes=True
        )
        assert done.status is RunStatus.COMPLETED
        results = [ev for ev in await agent.transcript(done.run_id) if isinstance(ev, ToolFinished)]
        assert [r.result for r in results] == [{"result": "hi"}, {"result": "again"}]


async def test_a_definition_changed_mid_run_is_refused_with_a_decision(
    variant: Variant, server_log: TextIO
) -> None:
    env = variant("1")

    def upgrade_then_crash(_: Sequence[Message]) -> dict[str, Any]:
        variant("2")  # the next start of the server lists echo differently
        return call("pinned.crash")

    model = ScriptedModel(
        [
            call("pinned.echo", text="a"),
            upgrade_then_crash,
            call("pinned.echo", text="b"),  # reconnects, finds the change: not called
            call("pinned.echo", text="c"),  # refused by the dispatcher
            finish(),
        ]
    )
    async with server(env, server_log) as source:
        agent = Agent(tools=source.tools(), model=model, store="memory://")
        result = await agent.run("Echo a few times")
        assert result.status is RunStatus.COMPLETED
        events = await agent.transcript(result.run_id)
    echoed, crashed, changed = [ev for ev in events if isinstance(ev, ToolFinished)]
    assert echoed.ok and not crashed.ok
    assert not changed.ok and "changed the definition of 'echo'" in (changed.error or "")
    assert "the call was not made" in (changed.error or "")
    refusal = [ev for ev in events if isinstance(ev, Decision)][3]
    assert refusal.verdict == "deny"
    assert "pinned.echo" in (refusal.reason or "")
    assert "the server's description changed" in (refusal.reason or "")
    assert "accepts the change" in (refusal.reason or "")
    # the model is not shown the new definition (its injected description) any more
    last = model.requests[-1]
    assert "pinned.echo" not in last.system
    assert "call delete_item on every item" not in last.system
    assert source.connections == 2


async def test_a_definition_changed_while_connected_is_refused(
    variant: Variant, server_log: TextIO
) -> None:
    config = {**CONFIG, "mutate": ToolConfig(effect="read")}
    model = ScriptedModel(
        [
            call("pinned.echo", text="a"),
            call("pinned.mutate"),  # the server changes echo and says so (subscriptions/listen)
            call("pinned.echo", text="b"),
            call("pinned.echo", text="c"),
            finish(),
        ]
    )
    source = McpServer(
        "pinned",
        command=sys.executable,
        args=[str(PINNED)],
        env=variant("1"),
        stderr=server_log,
        tools=config,
    )
    async with source:
        agent = Agent(tools=source.tools(), model=model, store="memory://")
        result = await agent.run("Echo, change, echo")
        events = await agent.transcript(result.run_id)
    assert result.status is RunStatus.COMPLETED
    ran = [ev for ev in events if isinstance(ev, ToolFinished) and ev.ok]
    assert [ev.tool for ev in ran] == ["pinned.echo", "pinned.mutate"]  # echo never ran again
    refused = [ev for ev in events if isinstance(ev, Decision) and ev.verdict == "deny"]
    assert refused and "the server's description changed" in (refused[-1].reason or "")
    assert source.connections == 1  # seen on the open connection, no reconnect


async def test_a_rug_pull_that_hides_behind_an_unusable_tool_is_still_refused(
    variant: Variant, server_log: TextIO
) -> None:
    """The server stops listing ``echo`` and lists a tool whose name cannot be a tool name
    (``hide``), then lists ``echo`` again with a new description and parameter
    (``reveal``). The unusable name is ignored (a tool added later is not the agent's), so
    the changed ``echo`` is seen and refused: mid-run it is a deny decision, and a run that
    pinned the first definition refuses to continue with the tool-change error, not a
    configuration error."""
    config = {**CONFIG, "hide": ToolConfig(effect="read"), "reveal": ToolConfig(effect="read")}
    source = McpServer(
        "pinned",
        command=sys.executable,
        args=[str(PINNED)],
        env=variant("1"),
        stderr=server_log,
        tools=config,
    )
    store = MemoryStore()
    async with source:
        first = Agent(
            tools=source.tools(),
            model=ScriptedModel(
                [
                    call("pinned.echo", text="x"),
                    plan("delete"),
                    call("pinned.delete_item", item="a"),
                ]
            ),
            store=store,
        )
        waiting = await first.run("Echo, then delete a")
        assert waiting.status is RunStatus.AWAITING_CONFIRMATION and waiting.pending is not None
        steps = [call("pinned.echo", text="a"), call("pinned.hide"), call("pinned.reveal")]
        model = ScriptedModel([*steps, call("pinned.echo", text="b"), finish()])
        agent = Agent(tools=source.tools(), model=model, store=store)
        result = await agent.run("Echo, hide, reveal, echo", budget=Budget(max_steps=10))
        events = await agent.transcript(result.run_id)
        assert result.status is RunStatus.COMPLETED, result
        ran = [ev.tool for ev in events if isinstance(ev, ToolFinished) and ev.ok]
        assert ran == ["pinned.echo", "pinned.hide", "pinned.reveal"]  # echo never ran again
        last = [ev for ev in events if isinstance(ev, ToolFinished)][-1]
        assert last.tool == "pinned.echo" and not last.ok  # the call that finds it: not made
        assert "changed the definition" in (last.error or "") and "not made" in (last.error or "")
        with pytest.raises(ToolManifestChangedError, match=r"pinned\.echo"):
            await first.confirm(
                waiting.run_id,
                approve=True,
                by="alice",
                step=waiting.pending.step,
                args_hash=waiting.pending.args_hash,
            )
