"""``agentcore serve``: the web console (extra ``agentcore[console]``), imported only here."""

from __future__ import annotations

import importlib
import ipaddress
import sys
from typing import Annotated, Any

import typer

from agentcore.cli._common import (
    EXIT_USAGE,
    StoreOpt,
    abort,
    app,
    err,
    load_agent,
    missing_store,
    out,
)
from agentcore.contracts.errors import ConfigurationError

__all__: list[str] = []

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@app.command()
def serve(
    store: StoreOpt = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8700,
    agent: Annotated[
        list[str] | None,
        typer.Option(
            "--agent",
            help="MODULE:ATTR of an Agent whose runs can be approved here (repeat for several).",
        ),
    ] = None,
    auth: Annotated[
        str | None,
        typer.Option(
            help="MODULE:ATTR of a callable that names the user of a request (None: not "
            "signed in). Without it the console listens on loopback only and prints a "
            "one-time login URL."
        ),
    ] = None,
) -> None:
    """Serve the web console: runs, timelines, approvals, contract health (extra [console])."""
    authenticate: Any = None  # Any: the application's callable, checked when called
    if auth is not None:
        authenticate = _import_ref(auth)
    elif not is_loopback(host):
        abort(
            f"Without --auth the console only listens on loopback (127.0.0.1, ::1), not "
            f"{host!r}: anyone who reaches it could approve tool calls. Pass --auth "
            "MODULE:ATTR naming your authentication callable.",
            EXIT_USAGE,
        )
    try:
        import uvicorn

        from agentcore.console import TokenLogin, create_app
    except ImportError as exc:
        abort(f"The console needs its extra: pip install 'agentcore[console]' ({exc}).", EXIT_USAGE)
    try:
        agents = {ref: load_agent(ref, store=store) for ref in agent or ()}
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)
    if (note := missing_store(store)) is not None:
        err.print(f"warning: {note}", highlight=False, soft_wrap=True)
    login = TokenLogin() if authenticate is None else None
    application = create_app(store, agents=agents, authenticate=authenticate, login=login)
    shown = f"[{host}]" if ":" in host else host
    if login is not None:
        out.print(
            f"agentcore console: sign in at http://{shown}:{port}/login?token={login.token} "
            "(the link works once)",
            highlight=False,
            soft_wrap=True,
        )
    else:
        out.print(f"agentcore console: http://{shown}:{port}/", highlight=False)
    sys.stdout.flush()
    uvicorn.run(application, host=host, port=port, log_level="warning")


def _import_ref(ref: str) -> Any:  # Any: whatever the module holds, checked by the caller
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        abort(f"--auth {ref!r} must look like 'package.module:attr'.", EXIT_USAGE)
    sys.path.insert(0, ".")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        abort(f"Cannot import --auth {ref!r}: {exc}", EXIT_USAGE)
    if not callable(found):
        abort(f"--auth {ref!r} is not callable.", EXIT_USAGE)
    return found
