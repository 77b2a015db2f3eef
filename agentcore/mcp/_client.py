"""MCP servers as tool sources: one connection per server, its tools as agent :class:`Tool` s.

A connection lives in a task of its own (the SDK's transports are anyio task groups, which
must be entered and left in one task); calls come from any task of the same event loop. A
connection that breaks is dropped and the next call opens a new one, which lists the tools
again; so does a change the server announces (``subscriptions/listen``, or
``notifications/tools/list_changed`` from older servers). A tool whose definition changed (a
rug pull) is updated in place, so the dispatcher sees the change at the next decision and
refuses it until a person accepts it, and a call that finds the change is not made.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import anyio
import mcp_types as mt
from mcp import Client, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from agentcore import get_logger
from agentcore.contracts import TOOL_NAME_PATTERN, Effect, ToolSpec, model_from_json_schema
from agentcore.contracts.errors import (
    ConfigurationError,
    RemoteToolError,
    ToolDefinitionError,
    ToolOutcomeUnknownError,
)
from agentcore.tools import Tool, ToolContext

from ._config import ToolConfig, resolve_effect

__all__ = ["McpServer", "McpTool"]

_SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
_IDEMPOTENCY_META = "io.agentcore/idempotency-key"
"""The ``_meta`` key a call carries its idempotency key in, for servers that deduplicate."""
_FENCING_META = "io.agentcore/fencing-token"
"""The ``_meta`` key a call carries its fencing token in (an integer), for servers that
reject a stale writer."""


class McpTool(Tool):
    """A tool of an MCP server, called through the server's connection.

    An ordinary :class:`Tool` to the agent: the dispatcher governs it, ``Tool.run`` applies
    its timeout and records its outcome. Its :attr:`spec` follows the server's listing:
    when the server lists the tool differently, the spec changes, and a run that pinned the
    earlier definition refuses it.

    Attributes:
        server: the server it belongs to.
        remote_name: the tool's name on the server.
    """

    def __init__(
        self,
        server: McpServer,
        remote_name: str,
        spec: ToolSpec,
        *,
        timeout: float | None,
        config: ToolConfig | None,
    ) -> None:
        # Not Tool.__init__: there is no Python function to read a signature from; the
        # spec comes from the server's listing.
        self.fn = self._unbound_call
        self.labels = frozenset({server.name})
        self.timeout = timeout
        self.reconcile = None if config is None else config.reconcile
        self.policies = () if config is None else tuple(config.policies)
        self.requires = None if config is None else config.requires
        self._is_async = True
        self.inline = False
        self._ctx_param = None
        self.secret_params = {}  # a remote tool's parameters are all the model's
        self.run_params = {}
        self.compensation = None
        # what a remote server returns is third-party content unless configured trusted
        self.output = "untrusted" if config is None or not config.trusted else "trusted"
        self.spec = spec
        self.server = server
        self.remote_name = remote_name
        self.gone: str | None = None
        """Why the tool cannot be called any more (the server stopped listing it)."""

    def __repr__(self) -> str:
        return f"<McpTool {self.spec.name} effect={self.spec.effect} server={self.server.name}>"

    async def _unbound_call(self, **arguments: Any) -> Any:  # Any: JSON in and out
        """Calling the object directly calls the remote tool (no run, no governance)."""
        return await self.server.call(self, dict(arguments), None)

    def _call(
        self, args: BaseModel, ctx: ToolContext, secrets: Mapping[str, Any] | None = None
    ) -> Any:  # Any: an awaitable of JSON; a remote tool has no secret parameters
        # The schema's own property names, and only the arguments that were sent.
        return self.server.call(self, args.model_dump(mode="json"), ctx)


class McpServer:
    """One MCP server: how to start or reach it, what its tools may do, and its connection.

    Open it once, for as long as the application runs (``async with``), and pass its tools
    to an :class:`~agentcore.Agent`::

        time = McpServer("time", command="mcp-server-time", tools={
            "get_current_time": ToolConfig(effect="read"),
        })
        async with time:
            agent = Agent(tools=[*time.tools()], model=..., store=...)
            await agent.run("What time is it in Tokyo?")

    Give exactly one of ``command`` (a local process spoken to over stdio) or ``url`` (a
    Streamable HTTP endpoint).

    Args:
        name: the server's name: every tool's name gets it as a prefix (``time.get_current_time``)
            and it is each tool's label (``scope=["time"]`` selects them all). Letters,
            digits, ``_`` and ``-``; at most 32 characters.
        command: the process to start for stdio.
        args: its arguments.
        env: added to a minimal default environment, as the SDK does.
        cwd: its working directory.
        stderr: where the process's standard error goes (default: this process's).
        url: a Streamable HTTP endpoint (``http://127.0.0.1:3001/mcp``).
        headers: HTTP headers sent with every request (an authorization header, ...).
        trusted: honour the server's annotations for effects (see :mod:`agentcore.mcp`);
            leave it false for a server you do not run.
        effect: the default for every tool of this server (``None``: see
            :class:`ToolConfig`).
        idempotent: the same, for idempotency.
        tools: settings per remote tool name. A name the server does not list is an error.
        include: only these remote tools (default: every tool the server lists).
        timeout: seconds before a call is abandoned (default 60; ``None``: no limit). A
            non-idempotent tool's timeout is a lost call: a person decides.
        connect_timeout: seconds to connect and list the tools.
    """

    def __init__(
        self,
        name: str,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: TextIO | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        trusted: bool = False,
        effect: Effect | None = None,
        idempotent: bool | None = None,
        tools: Mapping[str, ToolConfig] | None = None,
        include: Sequence[str] | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
    ) -> None:
        if not _SERVER_NAME.match(name):
            raise ConfigurationError(
                f"MCP server name {name!r}: use letters, digits, '_' or '-', starting with a "
                "letter, at most 32 characters (it prefixes every tool's name)."
            )
        if (command is None) == (url is None):
            raise ConfigurationError(
                f"McpServer({name!r}) takes exactly one of command=... (stdio) or url=... "
                "(Streamable HTTP)."
            )
        if effect is not None:
            ToolConfig(effect=effect)  # validates it
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"McpServer({name!r}): timeout must be > 0 or None.")
        self.name = name
        self.command = command
        self.args = tuple(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.stderr = stderr
        self.url = url
        self.headers = dict(headers or {})
        self.trusted = trusted
        self.effect: Effect | None = effect
        self.idempotent = idempotent
        self.tool_configs = dict(tools or {})
        self.include = tuple(include) if include is not None else None
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._tools: dict[str, McpTool] = {}  # by remote name
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._open = False
        self._stale = False
        self._background: set[asyncio.Task[None]] = set()
        self.connections = 0
        """How many connections were opened (the first, then one per reconnect)."""
        self.log = get_logger().bind(mcp_server=name)

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> McpServer:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect and list the tools (:meth:`tools` needs this first).

        Raises:
            RemoteToolError: the server could not be started, reached or listed.
            ConfigurationError: ``tools=`` or ``include=`` names a tool the server does not
                list, or a tool's input schema cannot be used.
        """
        if self._open:
            return
        self._lock = asyncio.Lock()
        self._open = True
        try:
            async with self._lock:
                await self._connect()
        except BaseException:
            await self.close()
            raise
        unknown = sorted(
            (set(self.tool_configs) | set(self.include or ()))
            - set(self._tools)
            - set(self._skipped)
        )
        if unknown:
            await self.close()
            raise ConfigurationError(
                f"MCP server {self.name!r} lists no tool named {', '.join(map(repr, unknown))}; "
                f"it lists: {', '.join(sorted(self._listed)) or '(none)'}."
            )

    async def close(self) -> None:
        """Close the connection (the server process, for stdio, ends)."""
        self._open = False
        for task in list(self._background):
            task.cancel()
        await self._disconnect()

    def tools(self) -> list[McpTool]:
        """The server's tools as agent tools (as listed when the server was opened).

        Raises:
            ConfigurationError: the server is not open.
        """
        if not self._open:
            raise ConfigurationError(
                f"MCP server {self.name!r} is not open: use `async with server:` (or await "
                "server.open()) before taking its tools."
            )
        return list(self._tools.values())

    async def refresh(self) -> list[str]:
        """List the tools again now; returns the names of tools whose definition changed or
        that the server no longer lists (a run that pinned them refuses them)."""
        client = await self._connected()
        return await self._relist(client)

    # -- connection ---------------------------------------------------------------------------

    def _target(self, http: Any) -> Any:  # Any: the SDK's transport; an httpx2 client
        if self.command is not None:
            params = StdioServerParameters(
                command=self.command, args=list(self.args), env=self.env, cwd=self.cwd
            )
            return stdio_client(params, errlog=self.stderr or sys.stderr)
        assert self.url is not None
        return streamable_http_client(self.url, http_client=http)

    async def _connect(self) -> Client:
        """Open a connection in a task of its own and list the tools (under the lock)."""
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()

        async def hold() -> None:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    http = None
                    if self.url is not None:  # the SDK leaves a client it was given open
                        http = create_mcp_http_client(headers=self.headers or None)
                        await stack.enter_async_context(http)
                    client = await stack.enter_async_context(
                        Client(self._target(http), cache=None, message_handler=self._on_message)
                    )
                    tasks = await stack.enter_async_context(anyio.create_task_group())
                    tasks.start_soon(self._listen, client)
                    ready.set_result(client)
                    await stop.wait()
                    tasks.cancel_scope.cancel()
            except Exception as exc:
                if not ready.done():
                    ready.set_exception(exc)
                else:  # the connection broke while open: the next call reconnects
                    self.log.info("mcp_connection_ended", error=f"{type(exc).__name__}: {exc}")
            finally:
                if not ready.done():
                    ready.set_exception(RemoteToolError("the connection ended while opening"))

        self._stop = stop
        self._holder = asyncio.create_task(hold(), name=f"mcp:{self.name}")
        try:
            client = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except TimeoutError as exc:
            await self._disconnect()
            raise RemoteToolError(
                f"MCP server {self.name!r} did not connect within {self.connect_timeout:g}s"
            ) from exc
        except Exception as exc:
            await self._disconnect()
            raise RemoteToolError(
                f"MCP server {self.name!r} could not be connected: {type(exc).__name__}: {exc}"
            ) from exc
        self._client = client
        self.connections += 1
        try:
            await asyncio.wait_for(self._relist(client), self.connect_timeout)
        except (MCPError, TimeoutError, OSError) as exc:
            await self._disconnect()
            raise RemoteToolError(
                f"MCP server {self.name!r} connected but its tools could not be listed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return client

    async def _disconnect(self) -> None:
        self._client = None
        holder, self._holder = self._holder, None
        if self._stop is not None:
            self._stop.set()
        if holder is not None:
            try:
                await asyncio.wait_for(asyncio.shield(holder), 5)
            except (TimeoutError, Exception):
                holder.cancel()
                with contextlib.suppress(BaseException):
                    await holder

    async def _connected(self) -> Client:
        """The open connection, or a new one if it broke (and the tools listed again)."""
        if not self._open or self._lock is None:
            raise RemoteToolError(
                f"MCP server {self.name!r} is closed; the application must keep it open "
                "(async with server:) while runs use its tools"
            )
        async with self._lock:
            alive = self._holder is not None and not self._holder.done()
            if self._client is not None and alive:
                if self._stale:
                    await self._relist(self._client)
                return self._client
            if self._client is not None:
                self.log.info("mcp_reconnecting")
            await self._disconnect()
            return await self._connect()

    async def _listen(self, client: Client) -> None:
        """Follow the server's tool-list changes (``subscriptions/listen``, protocol
        2026-07-28; older servers send ``notifications/tools/list_changed`` instead)."""
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    self._tools_changed()
        except (ListenNotSupportedError, SubscriptionLost, MCPError, TimeoutError) as exc:
            self.log.debug("mcp_listen_ended", error=f"{type(exc).__name__}: {exc}")

    def _tools_changed(self) -> None:
        # Listed again before the next call, and at once in the background (not here: this
        # runs in the connection's reader, which the listing needs), so the next decision
        # already sees a changed definition.
        self._stale = True
        task = asyncio.get_running_loop().create_task(self._refresh_quietly())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self._tools_changed()

    async def _refresh_quietly(self) -> None:
        with contextlib.suppress(Exception):
            await self.refresh()

    # -- the tool listing ---------------------------------------------------------------------

    async def _relist(self, client: Client) -> list[str]:
        listed: list[mt.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a paginator that never ends cannot hang the connection
            page = await client.session.list_tools(params=mt.PaginatedRequestParams(cursor=cursor))
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        changed = self._absorb(listed)
        self._stale = False
        return changed

    _listed: tuple[str, ...] = ()
    _skipped: tuple[str, ...] = ()

    def _absorb(self, listed: Sequence[mt.Tool]) -> list[str]:
        """Build the tools on the first listing; later, update the ones the agent has.

        A later listing is absorbed whole or not at all: a tool it adds is ignored before
        anything else is read of it (the agent never saw it; an unusable name there must
        not stop the tools after it from being checked), and a listing that cannot be
        absorbed leaves every tool of the server refused, its definition marked as
        changed, until a listing is absorbed and a person accepts the change.
        """
        first = not self._tools
        try:
            return self._absorb_listing(listed, first=first)
        except Exception as exc:
            if first:
                raise  # opening the server fails, saying why
            self.log.warning("mcp_listing_refused", error=f"{type(exc).__name__}: {exc}")
            for tool in self._tools.values():
                self._refuse(tool, f"the server's listing could not be used: {exc}")
            return [tool.name for tool in self._tools.values()]

    def _absorb_listing(self, listed: Sequence[mt.Tool], *, first: bool) -> list[str]:
        self._listed = tuple(t.name for t in listed)
        wanted = [t for t in listed if self.include is None or t.name in self.include]
        self._skipped = tuple(t.name for t in listed if t not in wanted)
        changed: list[str] = []
        seen: set[str] = set()
        for remote in wanted:
            seen.add(remote.name)
            tool = self._tools.get(remote.name)
            if tool is None and not first:  # a tool added later is not the agent's
                self.log.info("mcp_tool_added_ignored", tool=remote.name)
                continue
            try:
                spec = self._spec(remote)
            except ConfigurationError as exc:
                if tool is None:
                    raise  # the first listing: opening the server fails, saying why
                self._refuse(tool, f"its new definition cannot be used: {exc}")
                changed.append(tool.name)
                continue
            if tool is None:
                config = self.tool_configs.get(remote.name)
                timeout = config.timeout if config and config.timeout else self.timeout
                self._tools[remote.name] = McpTool(
                    self, remote.name, spec, timeout=timeout, config=config
                )
                continue
            tool.gone = None
            if tool.spec.manifest_hash != spec.manifest_hash:
                self.log.warning("mcp_tool_definition_changed", tool=spec.name)
                tool.spec = spec
                changed.append(spec.name)
        for remote_name, tool in self._tools.items():
            if remote_name not in seen and tool.gone is None:
                tool.gone = f"the MCP server {self.name!r} no longer lists {remote_name!r}"
                changed.append(tool.name)
        return changed

    def _refuse(self, tool: McpTool, why: str) -> None:
        """Refuse ``tool`` until a listing defines it usably again: its calls are not made,
        and its definition no longer matches a run's pin (a resume or a confirmation
        raises the tool-change error naming ``why``)."""
        tool.gone = why
        source = {**(tool.spec.source or {}), "unusable": why[:500]}
        tool.spec = dataclasses.replace(tool.spec, source=source)

    def _spec(self, remote: mt.Tool) -> ToolSpec:
        name = self._local_name(remote.name)
        annotations = (
            remote.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
            if remote.annotations is not None
            else None
        )
        effect, idempotent = resolve_effect(
            self.tool_configs.get(remote.name),
            self.effect,
            self.idempotent,
            self.trusted,
            annotations,
        )
        source: dict[str, Any] = {  # Any: JSON values
            "server": self.name,
            "name": remote.name,
            "title": remote.title,
            "description": remote.description,
            "input_schema": remote.input_schema,
            "annotations": annotations,
        }
        description = remote.description or remote.title or f"{remote.name} (MCP: {self.name})"
        try:
            args_model = model_from_json_schema(f"{name}_args", dict(remote.input_schema))
            return ToolSpec(
                name=name,
                description=description,
                args_model=args_model,
                effect=effect,
                idempotent=idempotent,
                source=source,
            )
        except ToolDefinitionError as exc:
            raise ConfigurationError(
                f"MCP server {self.name!r}, tool {remote.name!r}: {exc}. Leave it out with "
                "include=[...]."
            ) from exc

    def _local_name(self, remote: str) -> str:
        name = f"{self.name}.{remote}"
        if not TOOL_NAME_PATTERN.match(name):
            raise ConfigurationError(
                f"MCP server {self.name!r} lists a tool {remote!r} whose name cannot be a tool "
                f"name ({name!r}: letters, digits, '_', '.', '-', at most 64 characters). Use a "
                "shorter server name, or leave it out with include=[...]."
            )
        return name

    # -- calls ----------------------------------------------------------------------------------

    async def call(
        self,
        tool: McpTool,
        arguments: dict[str, Any],  # Any: JSON values
        ctx: ToolContext | None,
    ) -> Any:  # Any: the JSON result
        """Call ``tool`` with ``arguments``: its structured content if it has any, else its
        text (one string), else its content blocks.

        Raises:
            RemoteToolError: an ``isError`` result, a JSON-RPC error, no connection, or a
                definition that changed since the tool was listed (then nothing was called).
            ToolOutcomeUnknownError: the connection broke after the request was sent.
        """
        before = tool.spec.manifest_hash
        client = await self._connected()
        if tool.gone is not None:
            raise RemoteToolError(f"{tool.gone}; the call was not made")
        if tool.spec.manifest_hash != before:
            raise RemoteToolError(
                f"the MCP server {self.name!r} changed the definition of {tool.remote_name!r} "
                "since it was listed; the call was not made. A person must accept the change "
                "(accept_tool_changes) before it can run"
            )
        meta: Any = None  # Any: the SDK's RequestParamsMeta (a dict)
        if ctx is not None:
            meta = {_IDEMPOTENCY_META: ctx.idempotency_key}
            if ctx.fencing_token is not None:
                meta[_FENCING_META] = ctx.fencing_token
        try:
            result = await client.session.call_tool(tool.remote_name, arguments, meta=meta)
        except MCPError as exc:
            if exc.error.code == mt.CONNECTION_CLOSED:
                await self._drop(client)
                raise ToolOutcomeUnknownError(
                    f"the connection to MCP server {self.name!r} closed during the call "
                    f"({exc.error.message}); it may or may not have happened. The next call "
                    "reconnects"
                ) from exc
            raise RemoteToolError(
                f"MCP server {self.name!r} answered with a protocol error "
                f"{exc.error.code}: {exc.error.message}"
            ) from exc
        except (OSError, RuntimeError) as exc:
            raise RemoteToolError(f"MCP server {self.name!r}: {type(exc).__name__}: {exc}") from exc
        if result.is_error:
            raise RemoteToolError(_text(result) or "the server reported an error without text")
        return _value(result)

    async def _drop(self, client: Client) -> None:
        """Forget a connection that broke (if it is still the current one)."""
        if self._lock is None:
            return
        async with self._lock:
            if self._client is client:
                await self._disconnect()


def _text(result: mt.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, mt.TextContent))


def _value(result: mt.CallToolResult) -> Any:  # Any: JSON values
    if result.structured_content is not None:
        return result.structured_content
    if all(isinstance(b, mt.TextContent) for b in result.content):
        return _text(result)
    return [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content]
