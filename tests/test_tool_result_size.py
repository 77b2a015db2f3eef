"""A tool result's size is measured as its compact JSON text: whatever the value (floats
that pydantic-core writes shorter than ``json.dumps``, non-ASCII text, nesting), a result
is kept whole exactly when that text fits ``max_tool_result_bytes``, and cut to its first
bytes otherwise, as before the quicker check for results that plainly fit."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentcore import Agent, Budget, Policy, tool
from agentcore.adapters import ScriptedModel
from agentcore.contracts import json_problem
from agentcore.events import ToolFinished
from agentcore.tools import recordable_result

FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e16, 1e-5, 1.5e300, -2.5e-300, 1e22, 123456789.0]
)
SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | FLOATS | st.text(max_size=20)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=40,
)


def measured(value: Any, max_bytes: int) -> tuple[Any, int | None, str | None]:  # Any: JSON
    """What a result is recorded as, by its compact JSON text (``json.dumps``)."""
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    if len(data) <= max_bytes:
        return value, None, None
    return data[:max_bytes].decode("utf-8", "ignore"), len(data), hashlib.sha256(data).hexdigest()


@settings(max_examples=300, derandomize=True, deadline=None)
@given(value=JSON, scale=st.floats(0.05, 3.0))
@example(value="\x00" * 10, scale=0.7)  # 62 bytes of JSON ("\u0000" each), limit 43
@example(value=None, scale=0.5)  # "null", limit 2
def test_a_result_is_cut_exactly_when_its_json_text_does_not_fit(value: Any, scale: float) -> None:
    if json_problem(value, max_string_chars=None) is not None:
        return  # refused before it is measured (lone surrogates)
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    max_bytes = max(1, int(size * scale))
    assert recordable_result(value, max_bytes) == measured(value, max_bytes)


async def test_floats_pydantic_writes_shorter_are_measured_as_recorded() -> None:
    # 600 floats that json.dumps writes one byte longer each ("1e+16") than pydantic-core
    # ("1e16"): 3,601 bytes of JSON; a 3,100-byte limit cuts it, through a real run.
    values = [1e16] * 600

    @tool(effect="read")
    def readings() -> list[float]:
        """The sensor's readings."""
        return values

    agent = Agent(
        tools=[readings],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "t", "tool": "readings", "args": {}},
                {"type": "finish", "thought": "t", "answer": "done"},
            ]
        ),
        store="memory://",
        policy=Policy(max_tool_result_bytes=3_100),
    )
    result = await agent.run("read", budget=Budget(max_steps=3))
    (done,) = [e for e in await agent.transcript(result.run_id) if isinstance(e, ToolFinished)]
    full = json.dumps(values, separators=(",", ":")).encode()
    assert len(full) == 3_601
    assert done.result_bytes == 3_601
    assert done.result_sha256 == hashlib.sha256(full).hexdigest()
    assert done.result == full[:3_100].decode()
