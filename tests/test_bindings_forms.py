"""A FromRun or Secret binds its parameter in every annotation form that says so, or the
decorator refuses the form; a binding is never silently dropped (which would leave the
parameter to the model).

The forms are generated: a bound ``Annotated[T, marker]`` wrapped any number of times in a
union with ``None`` or another type, and in an outer ``Annotated`` with other metadata.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Optional, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from agentcore import Agent, FromRun, Policy, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import ConfigurationError, ToolManifestChangedError
from agentcore.events import RunStarted, ToolStarted
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


# -------------------------------------------------------------- bindings in the manifest


def _refund_bound_to(key: str, ran: list[tuple[int, str]]) -> Any:  # Any: a Tool
    def refund(amount: int, customer_id: Any) -> str:  # Any: replaced below
        """Refund a customer."""
        ran.append((amount, customer_id))
        return f"refunded {amount} to {customer_id}"

    refund.__annotations__ = {
        "amount": int,
        "customer_id": Annotated[str, FromRun(key)],
        "return": str,
    }
    return tool(effect="destructive")(refund)


def _refund_agent(key: str, ran: list[tuple[int, str]], store: MemoryStore) -> Agent:
    return Agent(
        tools=[_refund_bound_to(key, ran)],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "refund", "tool": "refund", "args": {"amount": 5}},
                {"type": "finish", "thought": "done", "answer": "refunded"},
            ]
        ),
        store=store,
        policy=Policy(plan_before_writes=False),
    )


METADATA = {"customer_id": "C-1", "referrer_id": "R-9"}


async def test_a_deploy_that_binds_a_parameter_elsewhere_is_a_changed_tool() -> None:
    """Paused with FromRun("customer_id"); the deploy binds the same parameter to
    FromRun("referrer_id") with the same schema: confirm is refused, naming the binding,
    and the refund never runs for the referrer."""
    store, ran = MemoryStore(), list[tuple[int, str]]()
    paused = await _refund_agent("customer_id", ran, store).run(
        "refund 5", run_id="r1", metadata=METADATA
    )
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    (started,) = [e for e in await store.load("r1") if isinstance(e, RunStarted)]
    assert started.tools["refund"]["bindings"] == {"customer_id": "metadata:customer_id"}
    redeployed = _refund_agent("referrer_id", ran, store)
    with pytest.raises(ToolManifestChangedError, match="referrer_id") as caught:
        await redeployed.confirm("r1", approve=True, by="alice")
    assert "customer_id bound to metadata:referrer_id, was metadata:customer_id" in str(
        caught.value
    )
    assert ran == []
    same = await _refund_agent("customer_id", ran, store).confirm("r1", approve=True, by="alice")
    assert same.status is RunStatus.COMPLETED and ran == [(5, "C-1")]


def _as_recorded_before_bindings(entry: dict[str, Any]) -> dict[str, Any]:  # Any: JSON
    """A manifest entry as a version that did not record bindings wrote it: no
    ``bindings`` key, and the hash of the rest (name, description, schema, effect,
    idempotency) computed as that version did."""
    old = {k: v for k, v in entry.items() if k != "bindings"}
    doc = {
        "name": "refund",
        "description": old["description"],
        "schema": old["schema"],
        "effect": old["effect"],
        "idempotent": old["idempotent"],
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    old["hash"] = hashlib.sha256(blob).hexdigest()[:16]
    return old


async def _paused_before_bindings(ran: list[tuple[int, str]]) -> MemoryStore:
    """A run paused by a version that did not record bindings: its transcript, with the
    run_started written as that version wrote it, in a store of its own."""
    first = MemoryStore()
    await _refund_agent("customer_id", ran, first).run("refund 5", run_id="r1", metadata=METADATA)
    events = await first.load("r1")
    started = events[0]
    assert isinstance(started, RunStarted)
    tools = {"refund": _as_recorded_before_bindings(started.tools["refund"])}
    older = MemoryStore()
    await older.append("r1", 0, [started.model_copy(update={"tools": tools}), *events[1:]])
    return older


async def test_a_run_paused_before_bindings_were_recorded_still_confirms() -> None:
    ran: list[tuple[int, str]] = []
    store = await _paused_before_bindings(ran)
    done = await _refund_agent("customer_id", ran, store).confirm("r1", approve=True, by="alice")
    assert done.status is RunStatus.COMPLETED and ran == [(5, "C-1")]


async def test_a_run_recorded_without_bindings_is_compared_as_it_was_then() -> None:
    """The rule of the version that recorded it: the binding is not compared (it was not
    recorded), everything else still is."""
    ran: list[tuple[int, str]] = []
    store = await _paused_before_bindings(ran)

    @tool(effect="write", name="refund")
    def other_effect(amount: int, customer_id: Annotated[str, FromRun("customer_id")]) -> str:
        """Refund a customer."""
        return "no"

    changed = Agent(tools=[other_effect], model=ScriptedModel([]), store=store)
    with pytest.raises(ToolManifestChangedError, match="effect changed from destructive"):
        await changed.confirm("r1", approve=True, by="alice")
    assert ran == []


async def test_a_deploy_that_adds_a_binding_to_a_recorded_tool_is_a_changed_tool() -> None:
    store, ran = MemoryStore(), list[tuple[int, str]]()

    @tool(effect="destructive", name="refund")
    def unbound(amount: int) -> str:
        """Refund a customer."""
        return "no"

    agent = Agent(
        tools=[unbound],
        model=ScriptedModel(
            [{"type": "tool", "thought": "refund", "tool": "refund", "args": {"amount": 5}}]
        ),
        store=store,
        policy=Policy(plan_before_writes=False),
    )
    await agent.run("refund 5", run_id="r1", metadata=METADATA)
    with pytest.raises(ToolManifestChangedError, match="customer_id now bound to metadata"):
        await _refund_agent("customer_id", ran, store).confirm("r1", approve=True, by="alice")
    assert ran == []
