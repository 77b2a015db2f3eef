"""The ``agentcore`` command line.

Exit codes (also in the README):

=== ===========================================================
0   the run completed (or the command succeeded: ``cancel`` cancelled or requested it)
1   an error: store failure, unknown run, a run that cannot be confirmed or cancelled
2   usage error: bad option, bad argument (an invalid run id), bad configuration, an
    approval without ``--step``/``--args-hash`` and no terminal to ask on
3   the run is awaiting confirmation
4   the run's budget is exhausted
5   the run needs attention
6   the run failed
7   the run was cancelled
8   the run is still marked running (its process may have died: resume it)
9   ``db status`` / ``db upgrade``: the store was written by a newer agentcore
130 stopped by Ctrl-C at a safe point (the resume command is printed)
=== ===========================================================
"""

from __future__ import annotations

import sys
from typing import Any

from . import _admin, _evals, _mcp, _runs, _serve
from ._common import EXIT_CODES, app

# importing these modules registers their commands on `app`
_COMMANDS = (_runs, _evals, _admin, _serve, _mcp)

__all__ = ["EXIT_CODES", "app", "main"]


def main() -> None:
    """Console-script entry point."""
    app(args=hoist_verbose(sys.argv[1:]), prog_name="agentcore")


def hoist_verbose(args: list[str]) -> list[str]:
    """``-v``/``--verbose`` given after the command (``agentcore run -v ...``) moved to the
    front, where the option lives; a value of another option that happens to read ``-v``
    (``--reason -v``) and anything after ``--`` stay where they are."""
    import typer.main

    group: Any = typer.main.get_command(app)  # Any: typer's own (vendored) click objects
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
