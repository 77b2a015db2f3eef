"""An agent as an MCP server: MCP clients start governed runs (``agentcore mcp serve``).

Two tools:

* ``run`` (task in, answer out): starts a run and advances it until it completes, stops,
  or waits for a person. A run waiting for confirmation returns at once with its run id and
  the pending call (tool, arguments, args hash, step); it never blocks the client.
* ``get_run`` (run id in): the run's current result, for a client that comes back after a
  person decided.

There is no tool to approve a pending call, on purpose: the client's own model could call
it, so an injected instruction in a tool result could approve its own destructive call. A
person confirms out of band (``agentcore confirm``, a console, ``Agent.confirm``), bound to
the step and args hash the result reported.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Literal

import anyio
import mcp_types as mt
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, Field, ValidationError

from agentcore import Agent, RunResult
from agentcore.contracts.errors import AgentcoreError

__all__ = ["PendingCallOut", "RunOutcome", "agent_server", "serve"]

Transport = Literal["stdio", "http"]


class PendingCallOut(BaseModel):
    """The call a run waits on, as an MCP client receives it."""

    kind: str = Field(description="'tool' or 'plan'")
    step: int
    call_id: str
    tool: str | None = None
    args: dict[str, Any] | None = None  # Any: JSON values
    args_hash: str | None = None
    effect: str | None = None
    thought: str = ""
    plan_steps: list[str] | None = None


class RunOutcome(BaseModel):
    """A run's result as an MCP client receives it."""

    run_id: str
    status: str = Field(
        description="completed, awaiting_confirmation, budget_exhausted, needs_attention, "
        "running, failed or cancelled"
    )
    answer: str | None = None
    reason: str | None = None
    pending: PendingCallOut | None = Field(
        default=None,
        description="the call waiting for a person (awaiting_confirmation); a person confirms "
        "it out of band, bound to its step and args_hash",
    )


_RUN_DESCRIPTION = (
    "Start a governed agentcore run for a task and return its result. A run that needs a "
    "person's approval (a destructive call) returns at once with status "
    "'awaiting_confirmation', its run_id and the pending call; a person approves or denies it "
    "out of band, and get_run returns the outcome later."
)


def agent_server(agent: Agent, *, name: str | None = None) -> MCPServer:
    """An MCP server (the SDK's ``MCPServer``) with the ``run`` and ``get_run`` tools for
    ``agent``; run it with the SDK (``run_stdio_async``, ``streamable_http_app``, ...)."""
    server: MCPServer = MCPServer(
        name=name or agent.name or "agentcore",
        instructions=(
            "Runs tasks with a governed agent. Destructive calls wait for a person: the "
            "result then says awaiting_confirmation with the pending call."
        ),
    )

    async def run(task: str, run_id: str | None = None) -> RunOutcome:
        """Run a task (see the tool description)."""
        try:
            result = await agent.run(task, run_id=run_id)
        except AgentcoreError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc  # the client reads it
        return _outcome(result)

    async def get_run(run_id: str) -> RunOutcome:
        """The current result of a run started with the run tool."""
        try:
            result = await agent.result(run_id)
        except AgentcoreError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc  # the client reads it
        return _outcome(result)

    server.add_tool(
        run,
        name="run",
        description=_RUN_DESCRIPTION,
        annotations=mt.ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
        structured_output=True,
    )
    server.add_tool(
        get_run,
        name="get_run",
        description="The current result of a run, by its run_id (after a person decided).",
        annotations=mt.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        structured_output=True,
    )
    return server


def _outcome(result: RunResult) -> RunOutcome:
    pending = result.pending
    return RunOutcome(
        run_id=result.run_id,
        status=result.status.value,
        answer=result.answer,
        reason=result.reason,
        pending=None
        if pending is None
        else PendingCallOut(
            kind=pending.kind,
            step=pending.step,
            call_id=pending.call_id,
            tool=pending.tool,
            args=dict(pending.args) if pending.args is not None else None,
            args_hash=pending.args_hash,
            effect=pending.effect,
            thought=pending.thought,
            plan_steps=list(pending.plan_steps) or None,
        ),
    )


async def serve(
    agent: Agent,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str | None = None,
) -> None:
    """Serve ``agent`` over MCP until the process is stopped.

    Args:
        transport: ``stdio`` (a client starts this process) or ``http`` (Streamable HTTP at
            ``http://HOST:PORT/mcp``).
        host: the address to bind for ``http``; the default answers only this machine.
        port: the port for ``http``.
    """
    server = agent_server(agent, name=name)
    if transport == "stdio":
        low = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]  # the SDK's own stdio runner, with the read stream wrapped
        async with stdio_server() as (read, write):
            await low.run(_Answering(read, write), write, low.create_initialization_options())
    else:
        await server.run_streamable_http_async(host=host, port=port)


class _Answering:
    """The server's read stream over stdio, answering a line that is not a JSON-RPC
    message (invalid JSON, nesting past the parser's limit, a malformed request) with a
    JSON-RPC error (id null: a line that cannot be read has no id to recover) and going on
    with the next. The SDK passes such a line on as an exception and only logs it, so the
    client would wait for its own timeout."""

    def __init__(
        self, inner: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage]
    ) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> object:
        """The sender's context of the last item (the SDK's context-carrying streams)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._write.send(SessionMessage(_unreadable(item)))

    def __aiter__(self) -> _Answering:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Answering:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _unreadable(exc: Exception) -> mt.JSONRPCError:
    """The JSON-RPC error for a line that could not be read as a message: a parse error
    when it is not JSON (or nests past the parser's limit), else an invalid request."""
    not_json = isinstance(exc, ValidationError) and any(
        e["type"] == "json_invalid" for e in exc.errors()
    )
    code, what = (
        (mt.PARSE_ERROR, "Parse error") if not_json else (mt.INVALID_REQUEST, "Invalid Request")
    )
    return mt.JSONRPCError(
        jsonrpc="2.0", id=None, error=mt.ErrorData(code=code, message=f"{what}: {str(exc)[:200]}")
    )
