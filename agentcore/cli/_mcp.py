"""``agentcore mcp serve``: an agent as an MCP server (extra ``agentcore[mcp]``, imported
only when the command runs)."""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from typing import Annotated

import typer

from agentcore.cli._common import EXIT_USAGE, StoreOpt, abort, app, err, load_agent, run_async
from agentcore.contracts.errors import ConfigurationError

__all__: list[str] = []

mcp_app = typer.Typer(
    help="MCP: serve an agent to MCP clients (extra [mcp]).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(mcp_app, name="mcp")


class McpTransport(StrEnum):
    """How MCP clients reach the served agent."""

    stdio = "stdio"
    http = "http"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@mcp_app.command("serve")
def serve(
    target: Annotated[str, typer.Argument(help="MODULE:ATTR of the Agent (or a factory).")],
    transport: Annotated[
        McpTransport, typer.Option(help="stdio (a client starts this process) or http.")
    ] = McpTransport.stdio,
    host: Annotated[str, typer.Option(help="Interface to listen on (http).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (http).")] = 8000,
    allow_remote: Annotated[
        bool,
        typer.Option(
            help="Listen on a non-loopback interface (http). The endpoint has no "
            "authentication: put it behind one."
        ),
    ] = False,
    model: Annotated[str | None, typer.Option(help="Override the agent's model.")] = None,
    store: StoreOpt = None,
) -> None:
    """Serve an agent as an MCP tool (`run`: task in, answer out; `get_run`).

    A run that needs a person's confirmation returns its run id and pending call at once;
    there is no approval tool: a person confirms out of band (agentcore confirm).
    """
    if transport is McpTransport.http and not _loopback(host) and not allow_remote:
        abort(
            f"The MCP endpoint has no authentication, so it listens on loopback only, not "
            f"{host!r}; pass --allow-remote to listen there anyway (behind your own auth).",
            EXIT_USAGE,
        )
    try:
        from agentcore.mcp import serve as serve_agent
    except (ImportError, ConfigurationError) as exc:
        abort(f"agentcore mcp needs its extra: pip install 'agentcore[mcp]' ({exc}).", EXIT_USAGE)
    try:
        agent = load_agent(target, model=model, store=store)
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)
    if transport is McpTransport.http:  # stdout is the protocol's channel under stdio
        err.print(f"agentcore mcp: http://{host}:{port}/mcp", highlight=False)
    try:
        run_async(serve_agent(agent, transport=transport.value, host=host, port=port))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
