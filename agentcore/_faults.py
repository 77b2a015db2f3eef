"""Named crash points for the fault-injection suite (``tests/faults/``) and the crash kit
(:func:`agentcore.testing.crash_test`).

``AGENTCORE_CRASH_AT=<point>[:<n>]`` makes the process SIGKILL itself the n-th time (default
the first) it reaches that point; :func:`arm` sets the same from inside the process (the crash
kit arms a point only for the command it means to kill). Unset, a crash point is one string
comparison. Points:

- ``after_model_response``: a model answered; nothing of that answer is recorded yet.
- ``after_intent_commit``: ``tool_started`` is durable; the tool has not run.
- ``after_tool_return``: the tool returned; its result is not recorded yet.
- ``after_batch_outcome``: one call of a batch returned and its outcome is durable (the
  batch's other calls may still be running).
- ``in_append_transaction``: inside a SQLite append, after the inserts, before COMMIT.
"""

from __future__ import annotations

import os
import signal

__all__ = ["arm", "crash_point"]

_armed: list[str] = ["", "1"]  # the point and the n-th time it kills
_hits: list[int] = [0]


def arm(spec: str) -> None:
    """Kill this process at ``<point>[:<n>]`` from now on (``""``: nowhere); counts afresh."""
    point, _, nth = spec.partition(":")
    _armed[:] = [point, nth or "1"]
    _hits[0] = 0


def crash_point(name: str) -> None:
    """SIGKILL this process here if the armed point is this one (test harness)."""
    if not _armed[0] or name != _armed[0]:
        return
    _hits[0] += 1
    if _hits[0] >= int(_armed[1]):
        os.kill(os.getpid(), signal.SIGKILL)


arm(os.environ.get("AGENTCORE_CRASH_AT", ""))
