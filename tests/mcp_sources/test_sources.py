"""MCP servers as tool sources, against real servers started by the tests."""

from __future__ import annotations

import sys
from typing import Any, TextIO

import pytest

from agentcore import Agent, RunStatus
from agentcore.adapters import ScriptedModel
from agentcore.errors import ConfigurationError, RemoteToolError
from agentcore.events import Decision, Event, ToolFinished
from agentcore.mcp import McpServer, ToolConfig, connect
from agentcore.testing import call, finish, plan

from .mcp_helpers import PINNED, executable

pytestmark = pytest.mark.subprocess


def finished(events: list[Event]) -> list[ToolFinished]:
    return [ev for ev in events if isinstance(ev, ToolFinished)]


def pinned(log: TextIO, **kwargs: Any) -> McpServer:
    return McpServer("pinned", command=sys.executable, args=[str(PINNED)], stderr=log, **kwargs)


async def test_time_server_tools_run_through_an_agent(server_log: TextIO) -> None:
    time = McpServer(
        "time",
        command=executable("mcp-server-time"),
        args=["--local-timezone", "UTC"],
        tools={"get_current_time": ToolConfig(effect="read")},
        stderr=server_log,
    )
    async with time:
        tools = {t.name: t for t in time.tools()}
        assert set(tools) == {"time.get_current_time", "time.convert_time"}
        assert all(t.labels == {"time"} for t in tools.values())
        # configured: a read; not configured, on an untrusted server: a non-idempotent write
        assert tools["time.get_current_time"].spec.effect == "read"
        convert = tools["time.convert_time"].spec
        assert (convert.effect, convert.idempotent) == ("write", False)
        assert convert.source is not None and convert.source["annotations"]["readOnlyHint"]
        model = ScriptedModel([call("time.get_current_time", timezone="Asia/Tokyo"), finish()])
        agent = Agent(tools=time.tools(), model=model, store="memory://")
        result = await agent.run("What time is it in Tokyo?", scope=["time"])
        assert result.status is RunStatus.COMPLETED
        (done,) = finished(await agent.transcript(result.run_id))
        assert done.ok
        # the structured content is the result
        assert isinstance(done.result, dict) and done.result["timezone"] == "Asia/Tokyo"
        assert {"datetime", "is_dst"} <= set(done.result)
        # the tool's definition as the server listed it is in the run's manifest
        started = (await agent.transcript(result.run_id))[0]
        entry = started.tools["time.get_current_time"]  # type: ignore[attr-defined]
        assert entry["source"]["name"] == "get_current_time"
        assert entry["source"]["input_schema"]["required"] == ["timezone"]


async def test_an_is_error_result_is_an_error_observation(server_log: TextIO) -> None:
    time = McpServer(
        "time",
        command=executable("mcp-server-time"),
        tools={"get_current_time": ToolConfig(effect="read")},
        stderr=server_log,
    )
    async with time:
        model = ScriptedModel([call("time.get_current_time", timezone="Mars/Olympus"), finish()])
        agent = Agent(tools=time.tools(), model=model, store="memory://")
        result = await agent.run("Time on Mars?")
        (done,) = finished(await agent.transcript(result.run_id))
        assert not done.ok
        assert "RemoteToolError" in (done.error or "") and "Mars/Olympus" in (done.error or "")
        # the model read the server's text
        assert "Mars/Olympus" in " ".join(str(m.content) for m in model.requests[1].messages)


async def test_fetch_reads_only_the_loopback_page_it_is_given(
    server_log: TextIO, loopback_site: str
) -> None:
    fetch = McpServer(
        "fetch",
        command=executable("mcp-server-fetch"),
        args=["--allow-private-ips", "--ignore-robots-txt"],
        tools={"fetch": ToolConfig(effect="read")},
        stderr=server_log,
    )
    async with fetch:
        model = ScriptedModel([call("fetch.fetch", url=loopback_site), finish()])
        agent = Agent(tools=fetch.tools(), model=model, store="memory://")
        result = await agent.run("What does the page say?")
        assert result.status is RunStatus.COMPLETED
        (done,) = finished(await agent.transcript(result.run_id))
        assert done.ok and "The answer is 42." in str(done.result)


async def test_fetch_refusing_loopback_is_an_error_observation(
    server_log: TextIO, loopback_site: str
) -> None:
    fetch = McpServer(
        "fetch",
        command=executable("mcp-server-fetch"),
        tools={"fetch": ToolConfig(effect="read")},
        stderr=server_log,
    )
    async with fetch:
        model = ScriptedModel([call("fetch.fetch", url=loopback_site), finish()])
        agent = Agent(tools=fetch.tools(), model=model, store="memory://")
        result = await agent.run("What does the page say?")
        assert result.status is RunStatus.COMPLETED
        (done,) = finished(await agent.transcript(result.run_id))
        assert not done.ok and done.error is not None and "RemoteToolError" in done.error


def _everything_checks(tools: dict[str, Any]) -> None:
    assert {"everything.echo", "everything.get-sum", "everything.get-structured-content"} <= set(
        tools
    )


async def test_everything_over_stdio_and_its_hints_only_when_trusted(
    everything_js: str, server_log: TextIO
) -> None:
    untrusted = McpServer(
        "everything", command="node", args=[everything_js, "stdio"], stderr=server_log
    )
    trusted = McpServer(
        "trusted", command="node", args=[everything_js, "stdio"], stderr=server_log, trusted=True
    )
    async with connect(untrusted, trusted) as all_tools:
        tools = {t.name: t for t in all_tools}
        _everything_checks(tools)
        # readOnlyHint=true: a hint, honoured only for the trusted server
        assert tools["everything.echo"].spec.effect == "write"
        assert not tools["everything.echo"].spec.idempotent
        assert tools["trusted.echo"].spec.effect == "read"
        assert tools["trusted.echo"].spec.idempotent
        # readOnlyHint=false, destructiveHint=false, idempotentHint=true
        gzip = tools["trusted.gzip-file-as-resource"].spec
        assert (gzip.effect, gzip.idempotent) == ("write", True)
        model = ScriptedModel(
            [
                call("trusted.get-sum", a=2, b=3),
                call("trusted.get-structured-content", location="New York"),
                finish(),
            ]
        )
        agent = Agent(tools=all_tools, model=model, store="memory://")
        result = await agent.run("Add and look up the weather", scope=["trusted"])
        assert result.status is RunStatus.COMPLETED
        summed, weather = finished(await agent.transcript(result.run_id))
        assert summed.ok and "5" in str(summed.result)
        assert weather.ok and isinstance(weather.result, dict)
        assert "temperature" in weather.result


async def test_everything_over_streamable_http(everything_http: str) -> None:
    server = McpServer("everything", url=everything_http, tools={"echo": ToolConfig(effect="read")})
    async with server:
        tools = {t.name: t for t in server.tools()}
        _everything_checks(tools)
        model = ScriptedModel([call("everything.echo", message="over http"), finish()])
        agent = Agent(tools=server.tools(), model=model, store="memory://")
        result = await agent.run("Echo something")
        assert result.status is RunStatus.COMPLETED
        (done,) = finished(await agent.transcript(result.run_id))
        assert done.ok and done.result == "Echo: over http"


async def test_a_protocol_error_is_an_error_observation(server_log: TextIO) -> None:
    server = pinned(server_log, effect="read")
    async with server:
        model = ScriptedModel([call("pinned.broken"), call("pinned.fail"), finish()])
        agent = Agent(tools=server.tools(), model=model, store="memory://")
        result = await agent.run("Try both")
        assert result.status is RunStatus.COMPLETED
        broken, failed = finished(await agent.transcript(result.run_id))
        assert not broken.ok and "protocol error -32602: broken on purpose" in (broken.error or "")
        assert not failed.ok and "the disk is full" in (failed.error or "")


async def test_a_server_killed_mid_call_gives_an_error_then_a_reconnect(
    server_log: TextIO,
) -> None:
    server = pinned(server_log, effect="read")
    async with server:
        model = ScriptedModel(
            [call("pinned.count"), call("pinned.crash"), call("pinned.count"), finish()]
        )
        agent = Agent(tools=server.tools(), model=model, store="memory://")
        result = await agent.run("Count, crash, count")
        assert result.status is RunStatus.COMPLETED
        before, crashed, after = finished(await agent.transcript(result.run_id))
        assert not crashed.ok
        assert "closed during the call" in (crashed.error or "")
        assert before.ok and after.ok
        assert isinstance(before.result, dict) and isinstance(after.result, dict)
        assert before.result["pid"] != after.result["pid"]  # a new server process
        assert server.connections == 2


async def test_a_lost_call_of_a_non_idempotent_remote_tool_waits_for_a_person(
    server_log: TextIO,
) -> None:
    server = pinned(server_log)  # untrusted: every tool a non-idempotent write
    async with server:
        model = ScriptedModel([plan("crash it"), call("pinned.crash"), finish()])
        agent = Agent(tools=server.tools(), model=model, store="memory://")
        result = await agent.run("Crash")
        assert result.status is RunStatus.NEEDS_ATTENTION
        assert "lost its outcome" in (result.reason or "")
        assert "agentcore resolve" in (result.reason or "")
        # a person says it did not happen: it runs once more, on a new connection
        settled = await agent.resolve(result.run_id, by="ops", fail=True)
        assert settled.status is RunStatus.COMPLETED


async def test_trusted_hints_and_the_users_settings(server_log: TextIO) -> None:
    untrusted = pinned(server_log)
    trusted = McpServer(
        "trusted",
        command=sys.executable,
        args=[str(PINNED)],
        stderr=server_log,
        trusted=True,
        tools={"count": ToolConfig(effect="write", idempotent=False)},
    )
    async with connect(untrusted, trusted) as all_tools:
        spec = {t.name: t.spec for t in all_tools}
        for name in ("delete_item", "count", "fail"):
            assert (spec[f"pinned.{name}"].effect, spec[f"pinned.{name}"].idempotent) == (
                "write",
                False,
            )
        assert spec["trusted.delete_item"].effect == "destructive"
        assert spec["trusted.echo"].effect == "read"
        assert spec["trusted.fail"].effect == "destructive"  # no hints: the spec's defaults
        assert (spec["trusted.count"].effect, spec["trusted.count"].idempotent) == ("write", False)
        # the destructive hint stops a trusted server's call for a person
        model = ScriptedModel([plan("delete"), call("trusted.delete_item", item="x"), finish()])
        agent = Agent(tools=all_tools, model=model, store="memory://")
        waiting = await agent.run("Delete x", scope=["trusted"])
        assert waiting.status is RunStatus.AWAITING_CONFIRMATION
        assert waiting.pending is not None and waiting.pending.tool == "trusted.delete_item"
        # the same hint from an untrusted server decides nothing: a write after a plan
        model = ScriptedModel([plan("delete"), call("pinned.delete_item", item="x"), finish()])
        agent = Agent(tools=all_tools, model=model, store="memory://")
        done = await agent.run("Delete x", scope=["pinned"])
        assert done.status is RunStatus.COMPLETED
        events = await agent.transcript(done.run_id)
        assert [d.verdict for d in events if isinstance(d, Decision)] == ["execute"] * 3


async def test_configuration_naming_a_tool_the_server_lacks_is_an_error(
    server_log: TextIO,
) -> None:
    server = pinned(server_log, tools={"ech": ToolConfig(effect="read")})
    with pytest.raises(ConfigurationError, match=r"lists no tool named 'ech'.*echo"):
        await server.open()
    with pytest.raises(ConfigurationError, match="exactly one of command"):
        McpServer("x")
    with pytest.raises(ConfigurationError, match="server name"):
        McpServer("a.b", command="true")
    with pytest.raises(ConfigurationError, match="is not open"):
        pinned(server_log).tools()


async def test_a_remote_call_past_its_timeout(server_log: TextIO) -> None:
    server = pinned(
        server_log,
        tools={"slow": ToolConfig(effect="read", timeout=0.5), "count": ToolConfig(effect="read")},
    )
    async with server:
        model = ScriptedModel([call("pinned.slow", seconds=30), call("pinned.count"), finish()])
        agent = Agent(tools=server.tools(), model=model, store="memory://")
        result = await agent.run("Wait, then count")
        assert result.status is RunStatus.COMPLETED
        slow, counted = finished(await agent.transcript(result.run_id))
        assert not slow.ok and "timed out after 0.5s" in (slow.error or "")
        assert counted.ok  # the same connection serves the next call
        assert server.connections == 1


async def test_a_server_that_cannot_start_is_a_clear_error(server_log: TextIO) -> None:
    server = McpServer("gone", command="/nonexistent/mcp-server", stderr=server_log)
    with pytest.raises(RemoteToolError, match="'gone' could not be connected"):
        await server.open()
