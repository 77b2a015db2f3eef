"""A worker for the mid-batch crash test (``tests/test_batches.py``).

``python batch_worker.py start|resume|cancel <db> <ledger>``: a scripted agent over a SQLite store
whose first step is a batch of three lookups (one fast, two slow), each appending its key
to the ledger; then it finishes. Prints one JSON line: status, tool calls, the outcomes
recorded per call id and any integrity problem.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter

from agentcore import Agent, Policy, tool
from agentcore._integrity import check_transcript
from agentcore.adapters import ScriptedModel
from agentcore.events import ToolFinished
from agentcore.testing import batch, call, finish

RUN_ID = "batch-run"


async def main(cmd: str, db: str, ledger: str) -> None:
    def note(key: str) -> None:
        with open(ledger, "a") as f:
            f.write(key + "\n")

    @tool(effect="read")
    async def lookup(key: str) -> str:
        """Look one key up."""
        note(key)
        if key != "fast":
            await asyncio.sleep(1.0)
        return f"value of {key}"

    @tool(effect="read")
    def ping() -> str:
        """Say pong."""
        return "pong"

    model = ScriptedModel(
        [
            batch(
                call("lookup", key="fast"),
                call("lookup", key="slow-1"),
                call("lookup", key="slow-2"),
            ),
            finish("Looked up."),
        ]
    )
    agent = Agent(
        tools=[lookup, ping], model=model, store=f"sqlite:///{db}", policy=Policy(max_batch=4)
    )
    try:
        if cmd == "start":
            result = await agent.run("Look these up.", run_id=RUN_ID)
        elif cmd == "cancel":
            result = await agent.cancel(RUN_ID, by="ann")
        else:
            result = await agent.resume(RUN_ID)
        events = await agent.transcript(RUN_ID)
    finally:
        await agent.close()
    finished = Counter(e.call_id for e in events if isinstance(e, ToolFinished))
    print(
        json.dumps(
            {
                "status": result.status.value,
                "tool_calls": result.usage.tool_calls,
                "finished": dict(sorted(finished.items())),
                "problems": check_transcript(events),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
