"""MCP: tools from MCP servers under the same governance, and an agent served over MCP.

Needs the extra: ``pip install 'agentcore[mcp]'`` (the official ``mcp`` SDK, major
version 2).

Tool sources::

    from agentcore.mcp import McpServer, ToolConfig, connect

    time = McpServer("time", command="mcp-server-time",
                     tools={"get_current_time": ToolConfig(effect="read")})
    docs = McpServer("docs", url="http://127.0.0.1:3001/mcp", trusted=True)

    async with connect(time, docs) as tools:          # open once, for the application
        agent = Agent(tools=[*local_tools, *tools], model=..., store=...)
        await agent.run("What time is it in Tokyo?")

Every remote tool is an ordinary :class:`~agentcore.Tool` to the agent: the dispatcher
decides on it (scope, pinned definition, budgets, plan before writes, destructive stop),
its timeout applies, and its outcome is recorded like any other. Its name is the server's
name, a dot, and its name on the server (``time.get_current_time``; adapters map it to each
provider's naming rules), and it is labelled with the server's name.

Effects and trust: annotations are hints from whoever runs the server. Unless the user
configures otherwise (:class:`ToolConfig`, ``McpServer(effect=...)``) a remote tool is a
non-idempotent ``write``; the hints are honoured only for a server marked ``trusted=True``.

Pinning: a remote tool's definition as the server lists it (name, title, description,
input schema, annotations) is part of each run's manifest. A server that lists it
differently later (a rug pull, or an upgrade) has the tool refused: on resume, confirm and
resolve (``ToolManifestChangedError`` naming what changed, until ``accept_tool_changes``),
and between steps of a run in progress (a ``deny`` decision the model reads).

Lifecycle: a server's connection is opened by ``async with`` and lives in a task of its
own; open it once per process and event loop (an application's startup, a worker's), and
build agents from its tools inside. A server that dies mid-call gives that call an error
observation (a non-idempotent tool's call is a lost call: ``reconcile``, or a person
decides) and the next call reconnects.

Serving an agent: :func:`serve` (``agentcore mcp serve MODULE:ATTR``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from agentcore.contracts.errors import ConfigurationError

try:
    import mcp as _mcp  # noqa: F401  # pyright: ignore[reportUnusedImport]  # a clear error without the extra
except ImportError as _missing:  # pragma: no cover - the extra is installed in CI
    raise ConfigurationError(
        "agentcore.mcp needs the mcp SDK: pip install 'agentcore[mcp]'"
    ) from _missing

from ._client import McpServer, McpTool
from ._config import ToolConfig
from ._serve import agent_server, serve

if TYPE_CHECKING:
    from agentcore.tools import Tool

__all__ = ["McpServer", "McpTool", "ToolConfig", "agent_server", "connect", "serve"]


@contextlib.asynccontextmanager
async def connect(*servers: McpServer) -> AsyncGenerator[list[Tool]]:
    """Open ``servers`` together and yield all their tools; close them on the way out.

    Raises:
        RemoteToolError: a server could not be started, reached or listed.
        ConfigurationError: two servers share a name, or a server's configuration names a
            tool it does not list.
    """
    names = [s.name for s in servers]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"MCP server names must be unique, got {names}.")
    async with contextlib.AsyncExitStack() as stack:
        tools: list[Tool] = []
        for server in servers:
            await stack.enter_async_context(server)
            tools.extend(server.tools())
        yield tools
