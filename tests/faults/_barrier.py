"""A start line for worker processes that must begin at once (the fault tests' races).

Imported by the worker scripts, which run with their folder on ``sys.path``.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path


def wait_at_barrier(variable: str, wait_s: float) -> None:
    """With ``$variable`` set to ``<folder>:<count>``: mark this process as arrived in
    the folder, then wait until ``count`` processes have (at most ``wait_s`` seconds)."""
    spec = os.environ.get(variable)
    if not spec:
        return
    folder, _, count = spec.rpartition(":")
    Path(folder, f"{os.getpid()}-{uuid.uuid4().hex}").touch()
    deadline = time.monotonic() + wait_s
    while len(list(Path(folder).iterdir())) < int(count):
        if time.monotonic() > deadline:
            raise TimeoutError("the other workers never reached the barrier")
        time.sleep(0.001)
