"""An agent to serve over MCP in the tests: ``agentcore mcp serve served_agent:agent``.

Its model is scripted by the task: "Look up ..." reads a record and answers; "Delete ..."
plans, then calls the destructive tool, which waits for a person. The store is
``$AGENTCORE_STORE`` (the test's), so the test can confirm the run out of band.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentcore import Agent, tool
from agentcore.adapters import Message, ScriptedModel


@tool(effect="read")
def lookup(key: str) -> str:
    """Read a record by its key."""
    return f"record {key}: active"


@tool(effect="destructive")
def delete_record(key: str) -> str:
    """Delete a record for good."""
    return f"deleted {key}"


def _reply(messages: Sequence[Message]) -> dict[str, Any]:
    text = "\n".join(str(m.content) for m in messages)
    if "[c1]" in text and "lookup returned" in text:
        return {"type": "finish", "thought": "Found it.", "answer": "Record A1 is active."}
    if "delete_record returned" in text:
        return {"type": "finish", "thought": "Gone.", "answer": "Record R1 was deleted."}
    if "Delete" in text:
        if "[c1]" not in text:
            return {"type": "plan", "thought": "Delete it.", "steps": ["delete R1"]}
        return {
            "type": "tool",
            "thought": "Deleting.",
            "tool": "delete_record",
            "args": {"key": "R1"},
        }
    return {"type": "tool", "thought": "Look.", "tool": "lookup", "args": {"key": "A1"}}


agent = Agent(tools=[lookup, delete_record], model=ScriptedModel(_reply), name="records")
