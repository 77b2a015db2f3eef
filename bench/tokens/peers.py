"""The peers' side, run by the peers' own interpreter (``run.py --peer-python``).

Pydantic AI (``OpenAIChatModel`` over ``OpenAIProvider(base_url=...)``), the OpenAI Agents
SDK (``OpenAIChatCompletionsModel`` over ``AsyncOpenAI(base_url=...)``, tracing off) and
LangGraph (``create_react_agent`` over langchain-openai's ``ChatOpenAI(base_url=...)``), each
through its real OpenAI client against the loopback fake, with the task's tools (the same
generated functions; LangChain's ``@tool`` with ``parse_docstring=True`` so the arguments'
descriptions reach the schema as they do for the others) and the operator's instructions as
each framework's own instructions / system prompt. The fake replays the task's decisions as
native tool calls: each step one reply, the thought as ``content`` beside its calls (several
calls are parallel calls), the final answer as text.

Prints one JSON object: ``{"versions": {...}, "runs": [{"framework", "task", "bodies",
"turns", "error"}]}``. The counting is done by ``run.py`` in agentcore's interpreter.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake import FakeChat, Turn
from tasks import TASKS, Task, build_tools

MODEL = "gpt-4.1-mini"
FRAMEWORKS = ("pydantic_ai", "openai_agents", "langgraph")
PACKAGES = (
    "pydantic-ai-slim",
    "openai-agents",
    "langgraph",
    "langchain-openai",
    "langchain-core",
    "openai",
)


def peer_turns(task: Task) -> list[Turn]:
    """One native reply per step: thought + parallel calls, or the answer as text."""
    out: list[Turn] = []
    for step in task.steps:
        if step.answer is not None:
            out.append(Turn(step.answer))
        else:
            calls = tuple(
                (c.tool, json.dumps(dict(c.args), ensure_ascii=False)) for c in step.calls
            )
            out.append(Turn(step.thought, calls))
    return out


def run_pydantic_ai(task: Task, base_url: str) -> None:
    from pydantic_ai import Agent  # pyright: ignore[reportMissingImports]

    try:
        from pydantic_ai.models.openai import OpenAIChatModel as Model  # pyright: ignore[reportMissingImports]
    except ImportError:  # older releases
        from pydantic_ai.models.openai import OpenAIModel as Model  # type: ignore[no-redef]
    from pydantic_ai.providers.openai import OpenAIProvider  # pyright: ignore[reportMissingImports]

    model = Model(MODEL, provider=OpenAIProvider(base_url=base_url, api_key="sk-bench"))
    agent = Agent(model, instructions=task.instructions, tools=build_tools(task))
    agent.run_sync(task.prompt)


def run_openai_agents(task: Task, base_url: str) -> None:
    from agents import (  # pyright: ignore[reportMissingImports]
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI  # noqa: TID251  # the peers' own interpreter

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key="sk-bench")
    agent = Agent(
        name="Assistant",
        instructions=task.instructions,
        model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        tools=[function_tool(f) for f in build_tools(task)],
    )

    async def go() -> None:
        await Runner.run(agent, task.prompt, max_turns=100)

    asyncio.run(go())


def run_langgraph(task: Task, base_url: str) -> None:
    from langchain_core.tools import tool  # pyright: ignore[reportMissingImports]
    from langchain_openai import ChatOpenAI  # pyright: ignore[reportMissingImports]
    from langgraph.prebuilt import create_react_agent  # pyright: ignore[reportMissingImports]

    llm = ChatOpenAI(model=MODEL, base_url=base_url, api_key="sk-bench")  # type: ignore[arg-type]
    tools = [tool(f, parse_docstring=True) for f in build_tools(task)]
    agent = create_react_agent(llm, tools, prompt=task.instructions)
    agent.invoke({"messages": [("user", task.prompt)]}, {"recursion_limit": 200})


RUNNERS: dict[str, Callable[[Task, str], None]] = {
    "pydantic_ai": run_pydantic_ai,
    "openai_agents": run_openai_agents,
    "langgraph": run_langgraph,
}


def versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ns = parser.parse_args()
    runs: list[dict[str, Any]] = []  # Any: JSON
    for name in ns.tasks.split(","):
        task = TASKS[name]
        turns = peer_turns(task)
        for framework in ns.frameworks.split(","):
            error = None
            with FakeChat(turns) as fake:
                try:
                    RUNNERS[framework](task, fake.base_url)
                except Exception:  # reported, not hidden: the table says the run failed
                    error = traceback.format_exc(limit=3)
                bodies = list(fake.bodies)
                if fake.overruns and error is None:
                    error = f"{fake.overruns} request(s) past the script"
            runs.append(
                {
                    "framework": framework,
                    "task": name,
                    "bodies": bodies,
                    "turns": [[t.content, [list(c) for c in t.calls]] for t in turns],
                    "error": error,
                }
            )
    json.dump({"versions": versions(), "runs": runs}, sys.stdout)


if __name__ == "__main__":
    main()
