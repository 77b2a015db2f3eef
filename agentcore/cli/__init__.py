"""The ``agentcore`` command line.

Exit codes (also in the README):

== ===========================================================
0  the run completed (or the command succeeded: ``cancel`` cancelled or requested it)
1  an error: store failure, unknown run, a run that cannot be confirmed or cancelled
2  usage error: bad option, bad argument (an invalid run id), bad configuration, an
   approval without ``--step``/``--args-hash`` and no terminal to ask on
3  the run is awaiting confirmation
4  the run's budget is exhausted
5  the run needs attention
6  the run failed
7  the run was cancelled
8  the run is still marked running (its process may have died: resume it)
9  ``db status`` / ``db upgrade``: the store was written by a newer agentcore
== ===========================================================
"""

from __future__ import annotations

from . import _admin, _evals, _runs
from ._common import EXIT_CODES, app

_COMMANDS = (_runs, _evals, _admin)  # importing these modules registers their commands on `app`

__all__ = ["EXIT_CODES", "app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
