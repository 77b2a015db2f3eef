"""The store's proof that an event reads back (``stores._proof``) against pydantic's
decode-and-compare: what the proof accepts reads back equal, and a store refuses exactly
what decode-and-compare refuses, whichever path checked it.

Events are built with ``model_construct`` as well as validated, so values no validator
would let through (tuples, str subclasses, NaN, over-long thoughts) reach the proof.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentcore.contracts import FinishAction, PlanAction, ToolAction
from agentcore.errors import StoreError
from agentcore.events import (
    ActionProposed,
    Decision,
    ModelCalled,
    RunStarted,
    ToolFinished,
    ToolStarted,
    decode_event,
    encode_event_body,
)
from agentcore.stores import MemoryStore
from agentcore.stores._codec import DECODE_ERRORS
from agentcore.stores._proof import MAX_DEPTH, reads_back

RUN = "run-1"
# Values of the wrong type make pydantic warn while it serializes them; that is the point.
pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
PROFILE = settings(
    derandomize=True,
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class Text(str):
    """A str subclass: encodes like a str, but is not exactly one."""


texts = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    st.sampled_from(["", "A00001", "\x00", "é", "😀", "\udc80"]),
    st.builds(Text, st.text(max_size=4)),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.sampled_from([1 << 63, (1 << 63) - 1, -(1 << 63), -(1 << 63) - 1, 10**40]),
    st.floats(),  # NaN and the infinities included
    texts,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(texts, inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
    ),
    max_leaves=20,
)


def nested(depth: int) -> Any:  # Any: a JSON value
    value: Any = "leaf"  # Any: grows below
    for _ in range(depth):
        value = {"k": [value]}
    return value


def decodes_equal(event: Any) -> bool:  # Any: an event, possibly model_construct-ed
    """The slow path: the body decodes back to an equal event."""
    try:
        return decode_event(RUN, event.seq, encode_event_body(event)) == event
    except DECODE_ERRORS:
        return False


def stored(event: Any) -> bool:  # Any: an event, possibly model_construct-ed
    """Whether a store accepts ``event`` (the first of a run: after a run_started)."""
    store = MemoryStore()
    start = RunStarted(
        run_id=RUN,
        seq=0,
        at=1.0,
        task="t",
        scope=[],
        budget={},
        policy={},
        contract={},
        route=[],
        tools={},
    )

    async def go() -> bool:
        await store.append(RUN, 0, [start])
        try:
            await store.append(RUN, 1, [event])
        except StoreError:
            return False
        return True

    return asyncio.run(go())


def tool_started(args: Any, **over: Any) -> ToolStarted:  # Any: unchecked values
    fields: dict[str, Any] = {  # Any: event fields
        "run_id": RUN,
        "seq": 1,
        "at": 1.5,
        "v": 1,
        "type": "tool_started",
        "step": 1,
        "call_id": "c1",
        "tool": "t",
        "args": args,
        "idempotency_key": "k",
        "guarded": False,
        "bound": {},
    }
    fields.update(over)
    return ToolStarted.model_construct(**fields)


def check_agrees(event: Any) -> None:  # Any: an event
    if reads_back(event):
        assert decodes_equal(event), event
    assert stored(event) == decodes_equal(event), event


@PROFILE
@given(json_values)
def test_a_proven_result_reads_back_and_a_store_refuses_what_pydantic_refuses(value: Any) -> None:
    finished = ToolFinished.model_construct(
        run_id=RUN,
        seq=1,
        at=2.0,
        v=1,
        type="tool_finished",
        step=1,
        call_id="c1",
        tool="t",
        ok=True,
        result=value,
        error=None,
        duration_ms=0.5,
        result_bytes=None,
        result_sha256=None,
        untrusted=False,
    )
    check_agrees(finished)


@PROFILE
@given(st.dictionaries(texts, json_values, max_size=4))
def test_proven_arguments_read_back(args: Any) -> None:
    check_agrees(tool_started(args))


@PROFILE
@example(math.nan, "at")
@example(-math.inf, "at")
@example(1 << 64, "step")
@example("\udc80", "call_id")
@example(True, "step")
@given(scalars, st.sampled_from(["call_id", "tool", "step", "at", "guarded", "v"]))
def test_a_scalar_field_of_any_value_is_judged_as_pydantic_would(value: Any, field: str) -> None:
    check_agrees(tool_started({}, **{field: value}))


@PROFILE
@given(texts, st.integers(min_value=0, max_value=10), texts)
def test_a_nested_action_is_judged_as_pydantic_would(thought: str, steps: int, tool: str) -> None:
    for action in (
        ToolAction.model_construct(type="tool", thought=thought, tool=tool, args={}),
        PlanAction.model_construct(type="plan", thought=thought, steps=["s"] * steps),
        FinishAction.model_construct(type="finish", thought=thought * 50, answer=tool),
    ):
        proposed = ActionProposed.model_construct(
            run_id=RUN,
            seq=1,
            at=1.0,
            v=1,
            type="action_proposed",
            step=1,
            call_id="c1",
            action=action,
        )
        check_agrees(proposed)


def test_validated_events_of_a_step_are_proven() -> None:
    """The common case takes the fast path: values as the loop records them."""
    events = [
        ModelCalled(run_id=RUN, seq=1, at=1.0, step=1, model="m", outcome="ok"),
        ActionProposed(
            run_id=RUN,
            seq=2,
            at=1.0,
            step=1,
            call_id="c1",
            action=ToolAction(thought="look", tool="t", args={"id": "A1", "n": [1, 2.5]}),
        ),
        Decision(run_id=RUN, seq=3, at=1.0, step=1, call_id="c1", verdict="execute"),
        tool_started({"id": "é", "deep": nested(MAX_DEPTH // 2 - 2)}),
        ToolFinished(
            run_id=RUN, seq=5, at=1.0, step=1, call_id="c1", tool="t", ok=True, result={"a": 1}
        ),
    ]
    for event in events:
        assert reads_back(event), event
        assert decodes_equal(event)


@pytest.mark.parametrize(
    "args",
    [
        {"x": math.nan},
        {"x": math.inf},
        {"x": 1 << 64},
        {"x": "\ud800"},
        {"\udfff": 1},
        {"x": (1, 2)},
        {"x": Text("a")},
        {"deep": nested(MAX_DEPTH)},
    ],
)
def test_what_the_proof_does_not_cover_is_decoded_and_compared(args: dict[str, Any]) -> None:
    """Not proven; the store then decides by decoding (a big int or a deep value is stored,
    NaN, a lone surrogate, a tuple refused), exactly as pydantic's round trip says."""
    event = tool_started(args)
    assert not reads_back(event)
    assert stored(event) == decodes_equal(event)


def test_an_event_of_a_newer_format_is_not_proven() -> None:
    assert not reads_back(tool_started({}, v=2))
    assert not stored(tool_started({}, v=2))
