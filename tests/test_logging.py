"""structlog: one log event per transcript event, configured by the application only."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from agentcore import Agent, RunStatus, configure_logging, tool
from agentcore.adapters import ScriptedModel
from agentcore.errors import ModelError

SECRET_TASK = "Where is order A1 of Mrs Example?"
SECRET_RESULT = "42 Example Street"
SECRET_ANSWER = "It is on its way to 42 Example Street."


@tool
async def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"order_id": order_id, "address": SECRET_RESULT}


SCRIPT = [
    {"type": "plan", "thought": "Look it up.", "steps": ["look up", "answer"]},
    {"type": "tool", "thought": "Look.", "tool": "lookup", "args": {"order_id": "A1"}},
    "not an action",
    {"type": "finish", "thought": "Found.", "answer": SECRET_ANSWER},
]


@pytest.fixture
def restore_structlog() -> Iterator[None]:
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


def lines_of(out: io.StringIO) -> list[dict[str, Any]]:  # Any: JSON log fields
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.mark.usefixtures("restore_structlog")
async def test_one_json_log_event_per_transcript_event_with_run_id_and_step() -> None:
    out = io.StringIO()
    configure_logging(json=True, level="info", file=out)
    agent = Agent(tools=[lookup], model=ScriptedModel(SCRIPT), store="memory://")
    result = await agent.run(SECRET_TASK)
    assert result.status is RunStatus.COMPLETED
    events = await agent.transcript(result.run_id)

    logged = [line for line in lines_of(out) if "seq" in line]  # every line parses as JSON
    assert [(line["event"], line["seq"]) for line in logged] == [(e.type, e.seq) for e in events]
    for line, event in zip(logged, events, strict=True):
        assert line["run_id"] == result.run_id
        assert line.get("step") == getattr(event, "step", None)
        assert line["level"] == "info" and line["timestamp"].endswith("Z")
    actions = [line["action"] for line in logged if line["event"] == "action_proposed"]
    assert actions == ["plan", "tool", "finish"]
    by_type = {line["event"]: line for line in logged}
    assert by_type["tool_finished"] | {"duration_ms": 0} == by_type["tool_finished"] | {
        "run_id": result.run_id,
        "step": 2,
        "call_id": "c2",
        "tool": "lookup",
        "ok": True,
        "duration_ms": 0,
    }
    assert by_type["run_finished"]["status"] == "completed"
    invalid = [line for line in logged if line.get("outcome") == "invalid"]
    assert len(invalid) == 1 and "error" in invalid[0]
    # facts, not contents: the task, the tool's result and the answer stay in the transcript
    text = out.getvalue()
    assert SECRET_TASK not in text and SECRET_RESULT not in text and SECRET_ANSWER not in text


@pytest.mark.usefixtures("restore_structlog")
async def test_console_rendering_for_a_terminal() -> None:
    out = io.StringIO()
    configure_logging(json=False, level="info", file=out)
    agent = Agent(tools=[lookup], model=ScriptedModel(SCRIPT), store="memory://")
    result = await agent.run(SECRET_TASK)
    lines = out.getvalue().splitlines()
    assert len(lines) == len(await agent.transcript(result.run_id))
    assert "run_finished" in lines[-1] and f"run_id={result.run_id}" in lines[-1]
    assert not lines[0].startswith("{")


@pytest.mark.usefixtures("restore_structlog")
async def test_below_the_level_no_event_fields_are_gathered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agentcore._observability._observer as observe

    def gathered(_event: object) -> dict[str, Any]:  # Any: as the real one
        raise AssertionError("fields gathered for a level that is off")

    monkeypatch.setattr(observe, "_fields", gathered)
    out = io.StringIO()
    configure_logging(json=True, level="warning", file=out)
    agent = Agent(tools=[lookup], model=ScriptedModel(SCRIPT), store="memory://")
    assert (await agent.run(SECRET_TASK)).status is RunStatus.COMPLETED
    assert out.getvalue() == ""


@pytest.mark.usefixtures("restore_structlog")
async def test_warnings_pass_a_warning_level() -> None:
    out = io.StringIO()
    configure_logging(json=True, level="warning", file=out)
    down = ModelError("the provider is down")
    down.retryable = False
    agent = Agent(tools=[lookup], model=ScriptedModel([down]), store="memory://")
    assert (await agent.run(SECRET_TASK)).status is RunStatus.FAILED
    (line,) = lines_of(out)
    assert line["event"] == "model_called" and line["level"] == "warning"
    assert line["outcome"] == "error" and "the provider is down" in line["error"]


def test_an_unknown_level_says_which_exist() -> None:
    with pytest.raises(ValueError, match="use debug, info, warning"):
        configure_logging(level="chatty")


def test_nothing_is_configured_at_import(tmp_path: Path) -> None:
    code = """
import logging, sys
import agentcore, agentcore.stores
import structlog
handlers = logging.getLogger().handlers, logging.getLogger("agentcore").handlers
print(structlog.is_configured(), *handlers)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.split() == ["False", "[]", "[]"]
