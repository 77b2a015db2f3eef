"""Named crash points for the fault-injection suite (``tests/faults/``).

``AGENTCORE_CRASH_AT=<point>[:<n>]`` makes the process SIGKILL itself the n-th time (default
the first) it reaches that point. Unset, a crash point is one string comparison. Points:

- ``after_model_response``: a model answered; nothing of that answer is recorded yet.
- ``after_intent_commit``: ``tool_started`` is durable; the tool has not run.
- ``after_tool_return``: the tool returned; its result is not recorded yet.
- ``in_append_transaction``: inside a SQLite append, after the inserts, before COMMIT.
"""

from __future__ import annotations

import os
import signal

__all__ = ["crash_point"]

_SPEC = os.environ.get("AGENTCORE_CRASH_AT", "")
_POINT, _, _NTH = _SPEC.partition(":")
_hits: list[int] = [0]


def crash_point(name: str) -> None:
    """SIGKILL this process here if ``AGENTCORE_CRASH_AT`` names this point (test harness)."""
    if not _POINT or name != _POINT:
        return
    _hits[0] += 1
    if _hits[0] >= int(_NTH or "1"):
        os.kill(os.getpid(), signal.SIGKILL)
