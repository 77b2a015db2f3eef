"""agentcore's side: a task run through the real OpenAI adapter against the loopback fake.

``measure_agentcore(task, mode, **agent_kwargs)`` runs ``task`` with
:class:`~agentcore.adapters.openai.OpenAIAdapter` (litellm's real OpenAI client, Chat
Completions, ``api_base`` = the fake), the model's decisions replayed as agentcore must
write them today, and returns one :class:`~count.RequestRecord` per model request.

The replies are the minimal valid ones for each step with the task's thought text:

* structured mode: ``message.content`` = the ``openai_strict`` action,
  ``{"action": {"type": "tool", "thought", "call": {"tool", "args"}}}`` (plan, finish and
  batch unwrapped: ``{"action": {"type": "plan", "thought", "steps"}}``);
* native mode: the thought as ``content`` and the call as a ``tool_calls`` item; a plan is
  the ``plan`` function (its ``thought`` and ``steps``), the answer plain text (a reply with
  no call is a ``finish``).

Policy: with ``plan_before_writes`` (the default) a plan action comes before the first
write (one more request than a peer makes). A step with several calls is one ``batch``
when ``Policy(max_batch=...)`` allows it and every call is a read, else one call per request.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))

from count import RequestRecord, records
from fake import FakeChat, Turn
from tasks import TASKS, Call, Task, build_tools

__all__ = ["AgentcoreRun", "agentcore_turns", "measure_agentcore", "run_agentcore"]

Mode = Literal["structured", "native"]
MODEL = "gpt-4.1-mini"


def _policy_of(agent_kwargs: Mapping[str, Any]) -> tuple[bool, int]:  # Any: Agent options
    from agentcore import Policy

    policy = agent_kwargs.get("policy") or Policy()
    return bool(policy.plan_before_writes), int(policy.max_batch)


def agentcore_turns(
    task: Task, mode: Mode, *, plan_before_writes: bool = True, max_batch: int = 0
) -> list[Turn]:
    """The replies agentcore's model must send for ``task`` (see the module doc)."""
    writes = {t.name for t in task.tools if t.effect != "read"}
    turns: list[Turn] = []
    planned = not plan_before_writes

    def action(value: dict[str, Any]) -> Turn:  # Any: JSON
        return Turn(json.dumps({"action": value}, ensure_ascii=False))

    for step in task.steps:
        if step.answer is not None:
            if mode == "structured":
                turns.append(
                    action({"type": "finish", "thought": step.thought, "answer": step.answer})
                )
            else:
                turns.append(Turn(step.answer))
            continue
        if not planned and any(c.tool in writes for c in step.calls):
            planned = True
            plan = {"thought": task.plan_thought, "steps": list(task.plan_steps)}
            if mode == "structured":
                turns.append(action({"type": "plan", **plan}))
            else:
                turns.append(Turn(None, (("plan", json.dumps(plan, ensure_ascii=False)),)))
        batch = (
            len(step.calls) > 1
            and max_batch >= len(step.calls)
            and not any(c.tool in writes for c in step.calls)
        )
        groups: list[tuple[Call, ...]] = [step.calls] if batch else [(c,) for c in step.calls]
        for group in groups:
            if mode == "native":
                turns.append(
                    Turn(
                        step.thought,
                        tuple(
                            (c.tool, json.dumps(dict(c.args), ensure_ascii=False)) for c in group
                        ),
                    )
                )
            elif len(group) > 1:
                calls = [{"tool": c.tool, "args": dict(c.args)} for c in group]
                turns.append(action({"type": "batch", "thought": step.thought, "calls": calls}))
            else:
                c = next(iter(group))
                turns.append(
                    action(
                        {
                            "type": "tool",
                            "thought": step.thought,
                            "call": {"tool": c.tool, "args": dict(c.args)},
                        }
                    )
                )
    return turns


@dataclass(frozen=True)
class AgentcoreRun:
    """A measured run: its records, the bodies sent, the replies and how it ended."""

    records: list[RequestRecord]
    bodies: list[dict[str, Any]]  # Any: JSON
    turns: list[Turn]
    status: str
    reason: str | None
    model_calls: int  # model_called events in the transcript


async def run_agentcore(
    task: Task | str,
    mode: Mode = "structured",
    *,
    budget: Any = None,  # Any: agentcore.Budget (imported lazily)
    **agent_kwargs: Any,  # Any: Agent options
) -> AgentcoreRun:
    """Run ``task`` through agentcore against the fake; see :func:`measure_agentcore`.

    ``budget``: the run's :class:`~agentcore.Budget` (default: ``Budget()``, or
    ``Budget(max_steps=task.max_steps)`` when the task sets it)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from agentcore import Agent, Budget, tool
    from agentcore.adapters.openai import OpenAIAdapter
    from agentcore.events import ModelCalled

    task = TASKS[task] if isinstance(task, str) else task
    plan_before_writes, max_batch = _policy_of(agent_kwargs)
    turns = agentcore_turns(task, mode, plan_before_writes=plan_before_writes, max_batch=max_batch)
    effects = {t.name: t for t in task.tools}
    tools = [
        tool(effect=effects[f.__name__].effect, idempotent=effects[f.__name__].idempotent)(f)  # pyright: ignore[reportArgumentType]
        for f in build_tools(task)
    ]
    with FakeChat(turns) as fake:
        adapter = OpenAIAdapter(MODEL, api_base=fake.base_url, api_key="sk-bench", mode=mode)
        options: dict[str, Any] = {
            "store": "memory://",
            "instructions": task.instructions,
        }  # Any: Agent options
        options.update(agent_kwargs)
        agent = Agent(tools=tools, model=adapter, **options)
        try:
            if budget is None and task.max_steps is not None:
                budget = Budget(max_steps=task.max_steps)
            result = await agent.run(task.prompt, budget=budget)
            events = await agent.transcript(result.run_id)
        finally:
            await agent.close()
        bodies = list(fake.bodies)
    calls = sum(1 for e in events if isinstance(e, ModelCalled))
    return AgentcoreRun(
        records=records(bodies, turns, task.instructions, list(task.results().values())),
        bodies=bodies,
        turns=turns,
        status=str(result.status.value),
        reason=result.reason,
        model_calls=calls,
    )


def measure_agentcore(
    task: Task | str, mode: Mode = "structured", **agent_kwargs: Any
) -> list[RequestRecord]:  # Any: Agent options
    """One record per model request of ``task`` run by agentcore in ``mode``
    (``agent_kwargs`` go to :class:`~agentcore.Agent`, e.g. ``policy=Policy(max_batch=4)``).

    Raises RuntimeError when the run did not complete as scripted."""
    run = asyncio.run(run_agentcore(task, mode, **agent_kwargs))
    if run.status != "completed" or len(run.bodies) != len(run.turns):
        raise RuntimeError(
            f"agentcore did not follow the script: {run.status} ({run.reason}); "
            f"{len(run.bodies)} requests for {len(run.turns)} scripted replies"
        )
    return run.records
