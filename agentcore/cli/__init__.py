"""The ``agentcore`` command line.

Exit codes (also in docs/cli.md):

=== ===========================================================
0   the run completed (or the command succeeded: ``cancel`` cancelled or requested it)
1   an error: store failure, unknown run, a run that cannot be confirmed, cancelled or
    replied to (a duplicate ``--key``)
2   usage error: bad option, bad argument (an invalid run id), bad configuration, an
    approval without ``--step``/``--args-hash`` and no terminal to ask on
3   the run is awaiting confirmation
4   the run's budget is exhausted
5   the run needs attention
6   the run failed
7   the run was cancelled
8   the run is still marked running (its process may have died: resume it)
9   ``db status`` / ``db upgrade``: the store was written by a newer agentcore
10  ``verify``: a run's tamper-evident chain is broken (its first broken seq is printed)
11  the run is awaiting input: the model asked the user a question (``reply`` answers it)
130 stopped by Ctrl-C at a safe point (the resume command is printed)
=== ===========================================================
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a cost of every --help)
if TYPE_CHECKING:
    from typing import Any

    from ._common import EXIT_CODES, app

__all__ = ["EXIT_CODES", "app", "main"]


def main() -> None:
    """Console-script entry point."""
    args = sys.argv[1:]
    if not args or args == ["--help"]:
        _main_help(args)
    if args == ["--version"]:  # as the app prints it, without loading typer and rich
        from agentcore import __version__

        sys.stdout.write(f"agentcore {__version__}\n")
        raise SystemExit(0)
    app = _app()
    app(args=hoist_verbose(args), prog_name="agentcore")


def _app() -> Any:  # Any: the typer app (typed in _common)
    """The typer app with every command registered (typer, rich and the command modules
    load here, not at ``import agentcore.cli``)."""
    # Imported in the order --help lists them, a user's order: running runs first, then
    # serving, verifying, evaluating, administering.
    from . import _runs, _serve, _verify, _evals, _usage, _admin, _mcp  # noqa: F401, I001  # pyright: ignore[reportUnusedImport]  # registers their commands on `app`
    from ._common import app

    return app


def __getattr__(name: str) -> Any:  # Any: EXIT_CODES or the app
    if name == "app":
        return _app()
    if name == "EXIT_CODES":
        from ._common import EXIT_CODES

        return EXIT_CODES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_MAIN_HELP = """Usage: agentcore [OPTIONS] COMMAND [ARGS]...

  Run, inspect, confirm and resume agentcore runs.

Options:
  -v, --verbose  Log each step to stderr (also accepted after the command).
  --version      Print the version and exit.
  --help         Show this message and exit.

Commands:
  demo        Run the support-desk demo agent (offline: scripted model,...
  run         Start a run of an agent and advance it until it completes,...
  reply       Say the user's next message to a run: a new turn of its...
  runs        List runs, most recently updated first.
  show        Show a run's transcript (creates nothing).
  export      Write a run's transcript to stdout as JSON Lines (one event...
  confirm     Approve or deny the call a run is waiting on, then continue...
  resume      Continue a run from its transcript (after a crash or a...
  resolve     Settle a lost non-idempotent call of a run in...
  cancel      Cancel a run: now, or, while another process advances it,...
  compensate  Undo a stopped run's committed effects, newest first (each...
  expire      Deny or escalate the calls whose approval window passed...
  check       Check a run's transcript integrity (exit 0 when sound, 1...
  repair      Cut a damaged transcript after SEQ; the removed raw events...
  serve       Serve the web console: runs, timelines, approvals, contract...
  verify      Check that a run's stored events are the ones written:...
  eval        Score a model's tool selection on a dataset: one-step...
  stats       Per contract version: runs, steps, plan/tool/finish shares,...
  usage       What each quota has used in its window: per counter, what...
  prune       Delete finished runs older than a date (retention),...
  contract    The next-action contract document.
  db          The store's layout: its version and migrations.
  mcp         MCP: serve an agent to MCP clients (extra [mcp]).
"""
"""What ``agentcore --help`` prints on a terminal at least 80 columns wide (click's help is
80 wide there, whatever the terminal): printed without loading typer, rich and the command
modules, which would slow every ``agentcore --help``. tests/test_cli.py checks that it
is what the app itself prints; after changing a command's name or help, paste the app's
``--help`` output (at ``COLUMNS=80``) here."""


def _main_help(args: list[str]) -> None:
    """``agentcore --help`` (stdout, exit 0) or ``agentcore`` alone (stderr, exit 2), as the
    app prints them, from :data:`_MAIN_HELP`; on a narrower terminal the app prints them."""
    import shutil

    if shutil.get_terminal_size().columns < 80:  # click caps its help at 80 columns
        return
    if args:
        sys.stdout.write(_MAIN_HELP)
        raise SystemExit(0)
    sys.stderr.write(_MAIN_HELP)
    raise SystemExit(2)


def hoist_verbose(args: list[str]) -> list[str]:
    """``-v``/``--verbose`` given after the command (``agentcore run -v ...``) moved to the
    front, where the option lives; a value of another option that happens to read ``-v``
    (``--reason -v``) and anything after ``--`` stay where they are."""
    import typer.main

    group: Any = typer.main.get_command(_app())  # Any: typer's own (vendored) click objects
    command: Any = group  # Any: as above
    hoisted: list[str] = []
    kept: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            kept += args[i:]
            break
        if token in ("-v", "--verbose") and command is not group:
            hoisted.append(token)
            i += 1
            continue
        subcommands: dict[str, Any] = getattr(command, "commands", {})  # Any: click commands
        if token in subcommands:
            command = subcommands[token]
        elif token.startswith("-") and "=" not in token:
            params: list[Any] = command.params  # Any: click parameters
            option = next((p for p in params if token in p.opts), None)
            takes_value = option is not None and getattr(option, "is_flag", True) is False
            if takes_value and not getattr(option, "count", False):
                kept += args[i : i + 2]  # the option and its value, whatever it reads
                i += 2
                continue
        kept.append(token)
        i += 1
    return hoisted + kept
