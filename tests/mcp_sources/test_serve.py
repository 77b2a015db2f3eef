"""An agent served over MCP (``agentcore mcp serve``), called by the SDK's own client."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agentcore import Agent, RunStatus

from .mcp_helpers import HERE, free_port, wait_for_port

pytestmark = pytest.mark.subprocess

SERVERS = HERE / "servers"
SERVE = [sys.executable, "-m", "agentcore.cli", "mcp", "serve", "served_agent:agent"]


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'served.db'}"


@pytest.fixture
def local_agent(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Agent:
    """The served agent, in this process, on the same store: a person's side."""
    monkeypatch.syspath_prepend(str(SERVERS))
    agent: Agent = importlib.import_module("served_agent").agent
    return agent.configured(store=store_url)


@pytest.fixture
def http_url(store_url: str, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "AGENTCORE_STORE": store_url}
    with (tmp_path / "serve.log").open("w") as log:
        proc = subprocess.Popen(
            [*SERVE, "--transport", "http", "--port", str(port)],
            cwd=SERVERS,
            env=env,
            stdout=log,
            stderr=log,
        )
        try:
            wait_for_port(port, proc)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            proc.wait(10)


async def _check(client: Client, local_agent: Agent) -> None:
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == {"run", "get_run"}  # no approval tool
    done = await client.call_tool("run", {"task": "Look up A1"})
    assert not done.is_error
    out: Any = done.structured_content  # Any: JSON from the server
    assert out["status"] == "completed" and out["answer"] == "Record A1 is active."
    assert out["pending"] is None

    waiting = await client.call_tool("run", {"task": "Delete R1"})
    out = waiting.structured_content
    assert out["status"] == "awaiting_confirmation"
    pending = out["pending"]
    assert pending["tool"] == "delete_record" and pending["args"] == {"key": "R1"}
    assert pending["step"] == 2 and len(pending["args_hash"]) == 16
    assert pending["effect"] == "destructive"
    run_id = out["run_id"]

    # a person confirms out of band, bound to what the client was shown
    confirmed = await local_agent.confirm(
        run_id, approve=True, by="alice", step=pending["step"], args_hash=pending["args_hash"]
    )
    assert confirmed.status is RunStatus.COMPLETED
    later = await client.call_tool("get_run", {"run_id": run_id})
    out = later.structured_content
    assert out["status"] == "completed" and out["answer"] == "Record R1 was deleted."


async def test_an_agent_served_over_stdio(store_url: str, local_agent: Agent) -> None:
    params = StdioServerParameters(
        command=SERVE[0], args=SERVE[1:], cwd=SERVERS, env={"AGENTCORE_STORE": store_url}
    )
    with (Path(store_url.removeprefix("sqlite:///")).parent / "stdio.log").open("w") as log:
        from mcp.client.stdio import stdio_client

        async with Client(stdio_client(params, errlog=log)) as client:
            await _check(client, local_agent)
    await local_agent.close()


async def test_an_agent_served_over_streamable_http(http_url: str, local_agent: Agent) -> None:
    async with Client(http_url) as client:
        await _check(client, local_agent)
    await local_agent.close()


async def test_an_unknown_run_is_an_error_result(http_url: str) -> None:
    async with Client(http_url) as client:
        missing = await client.call_tool("get_run", {"run_id": "nope"})
        assert missing.is_error
        assert "RunNotFoundError" in str(missing.content)


def test_http_refuses_a_non_loopback_interface() -> None:
    refused = subprocess.run(
        [*SERVE, "--transport", "http", "--host", "0.0.0.0"],  # the refusal
        cwd=SERVERS,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "--allow-remote" in refused.stderr


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("[" * 100_000 + "]" * 100_000, -32700),  # nested past the parser's limit
        (
            '{"jsonrpc": "2.0", "id": 1, "method": "x", "params": '
            + '{"a": ' * 50_000
            + "1"
            + "}" * 50_000
            + "}",
            -32700,
        ),
        ("{not json", -32700),
        ('{"jsonrpc": "2.0", "id": 7}', -32600),  # JSON, but no JSON-RPC message
    ],
    ids=["deep-array", "deep-params", "not-json", "not-a-message"],
)
def test_an_unreadable_request_gets_a_json_rpc_error_and_the_server_goes_on(
    line: str, code: int, store_url: str
) -> None:
    """Over stdio, a line the server cannot read as a message is answered at once with a
    JSON-RPC error (id null), and the next request is served as usual."""
    import json
    import queue
    import threading

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    proc = subprocess.Popen(
        SERVE,
        cwd=SERVERS,
        env={**os.environ, "AGENTCORE_STORE": store_url},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()])
    reader.start()
    try:
        assert proc.stdin is not None
        proc.stdin.write(line + "\n" + json.dumps(initialize) + "\n")
        proc.stdin.flush()
        error = json.loads(lines.get(timeout=30))  # no answer: queue.Empty after 30 s
        assert error["id"] is None and error["error"]["code"] == code, error
        served = json.loads(lines.get(timeout=30))
        assert served["id"] == 1 and "serverInfo" in served["result"], served
    finally:
        proc.kill()
        proc.wait(10)
        reader.join(10)  # the pipe's end ends its loop
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
