"""Testing an agent offline: the actions a scripted model replies with, an agent driven by a
script over an in-memory store, and the tool calls a run made.

A test writes the model's side of the run as a script of actions, runs the agent on it and
checks what the agent did: which tools ran with which arguments, what the run ended as. The
run goes through the same contract, validation, dispatcher and transcript as one with a real
model; nothing calls out.

:func:`crash_test` proves a tool at-most-once: it kills a real process at each durability
boundary of a call, resumes the run in a fresh one and counts the tool's effects.

Example:
    >>> import asyncio
    >>> from agentcore import tool
    >>> from agentcore.testing import call, finish, scripted_agent, tool_calls
    >>> @tool(effect="read")
    ... def get_order(order_id: str) -> dict[str, str]:
    ...     '''Look up one order by id.'''
    ...     return {"id": order_id, "status": "shipped"}
    >>> agent = scripted_agent([get_order], call("get_order", order_id="A-1"), finish("Shipped."))
    >>> result = agent.run_sync("Where is order A-1?")
    >>> result.answer
    'Shipped.'
    >>> tool_calls(asyncio.run(agent.transcript(result.run_id)))
    [('get_order', {'order_id': 'A-1'})]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agentcore.adapters import ScriptedModel, ScriptItem

from ._crashkit import BOUNDARIES, Boundary, BoundaryResult, CrashReport, crash_test
from .agent import Agent
from .events import Event, ToolStarted
from .policy import Policy
from .tools import Tool

__all__ = [
    "BOUNDARIES",
    "Boundary",
    "BoundaryResult",
    "CrashReport",
    "batch",
    "call",
    "crash_test",
    "finish",
    "plan",
    "scripted_agent",
    "tool_calls",
]


def call(name: str, /, thought: str = "I need this.", **args: Any) -> dict[str, Any]:  # Any: JSON
    """A ``tool`` action: call the tool ``name`` with ``args``.

    Args:
        name: the tool's name.
        thought: the model's reason, as recorded.
        **args: the tool's arguments.

    Returns:
        The action as the model would reply it, for a :class:`~agentcore.adapters.ScriptedModel`.
    """
    return {"type": "tool", "thought": thought, "tool": name, "args": args}


def batch(
    *calls: dict[str, Any], thought: str = "I need all of these."
) -> dict[str, Any]:  # Any: JSON
    """A ``batch`` action: several read-only calls in one step (``Policy(max_batch=...)``).

    Args:
        *calls: the calls, each made with :func:`call` (their thoughts are not used).
        thought: the model's reason, as recorded.

    Returns:
        The action as the model would reply it.
    """
    return {
        "type": "batch",
        "thought": thought,
        "calls": [{"tool": c["tool"], "args": c["args"]} for c in calls],
    }


def plan(*steps: str, thought: str = "Here is how.") -> dict[str, Any]:  # Any: JSON
    """A ``plan`` action: the steps the model means to take (before writes, when the policy
    asks for a plan).

    Args:
        *steps: the plan's steps, in order.
        thought: the model's reason, as recorded.

    Returns:
        The action as the model would reply it.
    """
    return {"type": "plan", "thought": thought, "steps": list(steps)}


def finish(answer: str = "Done.", thought: str = "I can answer.") -> dict[str, Any]:  # Any: JSON
    """A ``finish`` action: the run's answer.

    Args:
        answer: the answer the run ends with.
        thought: the model's reason, as recorded.

    Returns:
        The action as the model would reply it.
    """
    return {"type": "finish", "thought": thought, "answer": answer}


def scripted_agent(
    tools: Sequence[Tool],
    *script: ScriptItem,
    policy: Policy | None = None,
    store: str = "memory://",
) -> Agent:
    """An agent whose model replies with ``script``, one item per step, over ``store``.

    Args:
        tools: the agent's tools.
        *script: the model's replies in order: actions (:func:`call`, :func:`plan`,
            :func:`finish`, or any dict), raw strings (an invalid reply, re-asked),
            exceptions (a provider error) or callables of the rendered messages; see
            :class:`~agentcore.adapters.ScriptedModel`.
        policy: the agent's policy (default: :class:`~agentcore.Policy`'s defaults).
        store: where the transcript goes (default: in memory, gone with the process).

    Returns:
        The agent; run it as any other (``await agent.run(task)``, ``agent.run_sync(task)``).
    """
    return Agent(tools=tools, model=ScriptedModel(script), store=store, policy=policy)


def tool_calls(events: Iterable[Event]) -> list[tuple[str, dict[str, Any]]]:  # Any: JSON
    """The tool calls a run started, in order, as ``(tool, args)``.

    Args:
        events: the run's transcript (``await agent.transcript(run_id)``).

    Returns:
        One ``(tool name, arguments)`` pair per call started, a refused call not included.
    """
    return [(e.tool, dict(e.args)) for e in events if isinstance(e, ToolStarted)]
