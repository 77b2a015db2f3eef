"""The agents the Celery tests run, shared by the test process and its worker processes.

A worker process builds them from environment variables (``service.py``); the test
process builds the same ones to submit, confirm and check runs. Nothing here is mocked:
the model is the public :class:`ScriptedModel` with a callable script, and the one
non-idempotent tool appends a line per call to a file, keyed by its idempotency key, so a
duplicated side effect shows as a repeated key.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentcore import Agent, Policy, ToolContext, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.queue import RunQueue
from agentcore.stores import TranscriptStore

TOOL_STEPS = re.compile(r"steps=(\d+)")
"""A task says how many tool steps to take before finishing: ``"... steps=9"``."""


def effects_file() -> Path:
    return Path(os.environ["AGENTCORE_TEST_EFFECTS"])


async def _reconcile_charge(idempotency_key: str) -> dict[str, Any] | None:
    """A started-but-unfinished charge happened iff its key is in the file."""
    path = effects_file()
    if path.exists() and idempotency_key in path.read_text().split():
        return {"charged": idempotency_key, "reconciled": True}
    return None


def make_tools(variant: str = "v1") -> list[Any]:  # Any: Tool objects of several signatures
    @tool(effect="read")
    async def lookup(n: int) -> int:
        """Look up the next number.

        Args:
            n: the number so far.
        """
        return n + 1

    if variant == "v2":  # a rolling deploy: the same tool name, another definition

        @tool(effect="read", name="lookup")
        async def lookup_v2(n: int, by: int = 1) -> int:
            """Look up a later number.

            Args:
                n: the number so far.
                by: how far to look.
            """
            return n + by

        lookup = lookup_v2

    @tool(effect="write", idempotent=False, reconcile=_reconcile_charge)
    def charge(n: int, ctx: ToolContext) -> dict[str, Any]:
        """Charge once for step n (a side effect that must not happen twice).

        Args:
            n: the step.
        """
        with effects_file().open("a") as f:
            f.write(ctx.idempotency_key + "\n")
        return {"charged": ctx.idempotency_key}

    @tool(effect="destructive")
    async def wipe(path: str) -> str:
        """Wipe a path.

        Args:
            path: what to wipe.
        """
        return f"wiped {path}"

    return [lookup, charge, wipe]


def script(latency_ms: tuple[float, float] | None) -> ScriptedModel:
    """A model that reads its task: ``wipe PATH`` wipes then finishes; otherwise it takes
    ``steps=N`` tool steps (every third a charge, the rest lookups) and finishes. With
    ``latency_ms`` each reply waits a random time in that range."""

    async def reply(messages: Sequence[Message]) -> dict[str, Any]:
        if latency_ms is not None:
            await asyncio.sleep(random.uniform(*latency_ms) / 1000)
        task = next(m.content for m in messages if m.role == "user")
        done = sum(1 for m in messages if m.role == "user" and " returned: " in m.content)
        if "wipe " in task:
            if done:
                return {"type": "finish", "thought": "done", "answer": "wiped"}
            return {"type": "tool", "thought": "w", "tool": "wipe", "args": {"path": "/tmp/x"}}
        match = TOOL_STEPS.search(task)
        steps = int(match.group(1)) if match else 3
        if done >= steps:
            return {"type": "finish", "thought": "done", "answer": f"took {done} steps"}
        name = "charge" if done % 3 == 2 else "lookup"
        return {"type": "tool", "thought": "next", "tool": name, "args": {"n": done}}

    return ScriptedModel(reply)


def make_agent(
    store: TranscriptStore,
    *,
    queue: RunQueue | None = None,
    variant: str = "v1",
    latency_ms: tuple[float, float] | None = None,
    lease_s: float = 5.0,
) -> Agent:
    """The agent named ``worker`` (the same definition in the test and its workers)."""
    return Agent(
        tools=make_tools(variant),
        model=script(latency_ms),
        store=store,
        name="worker",
        queue=queue,
        lease_s=lease_s,
        policy=Policy(plan_before_writes=False),
    )
