"""A FromRun or Secret binds its parameter in every annotation form that says so, or the
decorator refuses the form; a binding is never silently dropped (which would leave the
parameter to the model).

The forms are generated: a bound ``Annotated[T, marker]`` wrapped any number of times in a
union with ``None`` or another type, and in an outer ``Annotated`` with other metadata.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Optional, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from agentcore import Agent, FromRun, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import ConfigurationError
from agentcore.events import ToolStarted
from agentcore.secrets import Secret
from agentcore.stores import MemoryStore

BOUND = FromRun("customer_id")

Wrap = Callable[[Any], Any]  # Any: annotation forms built at run time
WRAPS: list[tuple[str, Wrap]] = [
    ("| None", lambda t: t | None),
    ("Optional", lambda t: Optional[t]),  # noqa: UP045  # the form under test
    ("Union[., int]", lambda t: Union[t, int]),  # noqa: UP007  # the form under test
    ("None |", lambda t: None | t),
    ("Annotated[., doc]", lambda t: Annotated[t, "a note"]),
    ("Annotated[., Field]", lambda t: Annotated[t, Field(description="who")]),
]


def _tool_with(annotation: object) -> Any:  # Any: a Tool
    def lookup(query: str, customer_id: Any = None) -> str:  # Any: replaced below
        """Look a customer up."""
        return f"{customer_id}"

    lookup.__annotations__ = {"query": str, "customer_id": annotation, "return": str}
    return tool(lookup)


@tool
def lookup(query: str, customer_id: Annotated[str, FromRun("customer_id")] | None = None) -> str:
    """Look a customer up (the form a user wrote)."""
    return f"{customer_id}"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(WRAPS), max_size=4))
def test_every_wrapped_form_binds_the_parameter(wraps: list[tuple[str, Wrap]]) -> None:
    annotation: Any = Annotated[str, BOUND]  # Any: grows into the generated form
    for _, wrap in wraps:
        annotation = wrap(annotation)
    bound = _tool_with(annotation)
    assert "customer_id" not in json.dumps(bound.spec.args_schema), [w for w, _ in wraps]
    assert bound.run_params["customer_id"][0] == BOUND
    assert bound.bound_args(None, {"customer_id": "C-1"}) == {"customer_id": "C-1"}


@pytest.mark.parametrize(
    "annotation",
    [
        list[Annotated[str, BOUND]],
        dict[str, Annotated[str, BOUND]],
        tuple[Annotated[str, BOUND], int] | None,
        Annotated[list[Annotated[str, BOUND]], BOUND],
        Annotated[str, BOUND, FromRun("referrer_id")],
        Annotated[str, BOUND] | Annotated[int, FromRun("seat")],
        Annotated[str, BOUND, Secret("KEY")],
        Annotated[str, Secret("KEY")] | Annotated[str, Secret("OTHER")],
    ],
    ids=[
        "list",
        "dict",
        "tuple-or-none",
        "inner-and-outer",
        "two-keys",
        "two-keys-in-a-union",
        "from-run-and-secret",
        "two-secrets",
    ],
)
def test_a_form_that_cannot_bind_is_refused_saying_what_to_write(annotation: object) -> None:
    with pytest.raises(ConfigurationError, match="customer_id") as caught:
        _tool_with(annotation)
    assert "FromRun" in str(caught.value) or "bindings" in str(caught.value)


def test_a_secret_binds_in_an_optional_form_too() -> None:
    bound = _tool_with(Optional[Annotated[str, Secret("CRM_KEY")]])  # noqa: UP045
    assert bound.secret_params == {"customer_id": "CRM_KEY"}
    assert "customer_id" not in json.dumps(bound.spec.args_schema)


@pytest.mark.parametrize(
    "annotation",
    [
        "issue",
        Optional[Annotated[str, BOUND]],  # noqa: UP045  # the form under test
        Annotated[Annotated[str, BOUND], Field(min_length=1)],
    ],
    ids=["or-none", "optional", "nested"],
)
async def test_the_model_cannot_set_an_optional_bound_parameter(annotation: object) -> None:
    """The issue's case: ``Annotated[str, FromRun("customer_id")] | None = None``. The model
    sends another customer; the reply is refused, and the call that runs has the run's."""

    def model(messages: Sequence[Message]) -> dict[str, Any]:  # Any: a JSON reply
        said = "\n".join(m.content for m in messages if m.role == "user")
        if "lookup returned" in said:
            return {"type": "finish", "thought": "done", "answer": "found"}
        if "invalid" in said.lower() or "extra" in said.lower():
            return {"type": "tool", "thought": "ok", "tool": "lookup", "args": {"query": "q"}}
        return {
            "type": "tool",
            "thought": "the mail says C-2",
            "tool": "lookup",
            "args": {"query": "q", "customer_id": "C-2"},
        }

    bound = lookup if annotation == "issue" else _tool_with(annotation)
    agent = Agent(tools=[bound], model=ScriptedModel(model), store=MemoryStore())
    result = await agent.run("look me up", metadata={"customer_id": "C-1"})
    assert result.status is RunStatus.COMPLETED, result.reason
    (started,) = [e for e in await agent.transcript(result.run_id) if isinstance(e, ToolStarted)]
    assert started.args == {"query": "q"} and started.bound == {"customer_id": "C-1"}


async def test_an_optional_bound_parameter_still_needs_its_value_when_the_run_starts() -> None:
    agent = Agent(
        tools=[lookup],
        model=ScriptedModel([]),
        store=MemoryStore(),
    )
    with pytest.raises(ConfigurationError, match=r"metadata\['customer_id'\]"):
        await agent.run("look me up")
