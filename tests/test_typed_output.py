"""Typed results (``Agent(output=T)``) through the public API, with the scripted model.

The ``finish`` action's answer has the agent's output type: validated like tool arguments,
asked again when invalid, recorded as JSON, returned as a ``T`` by every entry point that
returns a result, and pinned: a run continues only with an agent of the same output type.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from agentcore import Agent, PartialOutput, Policy, RunEnded, RunStatus, ThoughtDelta, tool
from agentcore.adapters import ScriptedModel
from agentcore.errors import ConfigurationError, OutputTypeChangedError
from agentcore.events import Event, ModelCalled, RunFinished, RunStarted
from agentcore.testing import call


class Invoice(BaseModel):
    customer: str
    total_cents: int = Field(ge=0)
    lines: list[str]


class Refund(BaseModel):
    kind: Literal["refund"] = "refund"
    amount_cents: int


class Escalation(BaseModel):
    kind: Literal["escalation"] = "escalation"
    team: str


class Summary(TypedDict):
    title: str
    words: int


@dataclasses.dataclass
class Point:
    x: float
    y: float


INVOICE = {"customer": "acme", "total_cents": 1250, "lines": ["2 x widget"]}


def typed_finish(answer: Any, thought: str = "Here it is.") -> dict[str, Any]:  # Any: JSON
    return {"type": "finish", "thought": thought, "answer": answer}


@tool(effect="read")
def get_order(order_id: str) -> dict[str, str]:
    """Look up an order.

    Args:
        order_id: the order's id.
    """
    return {"order_id": order_id, "customer": "acme"}


@tool(effect="destructive")
def void_invoice(invoice_id: str) -> str:
    """Void an invoice for good.

    Args:
        invoice_id: the invoice's id.
    """
    return f"voided {invoice_id}"


def agent_of(
    script: list[Any],  # Any: scripted replies
    output: Any = str,  # Any: the output type under test
    store: str = "memory://",
    **options: Any,  # Any: Agent options
) -> Agent[Any]:
    return Agent(
        tools=[get_order, void_invoice],
        model=ScriptedModel(script),
        store=store,
        output=output,
        policy=Policy(plan_before_writes=False),
        **options,
    )


E = TypeVar("E")


def only(events: list[Event], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


# --------------------------------------------------------------------------- the happy path


async def test_a_model_answer_is_validated_recorded_as_json_and_returned_typed() -> None:
    agent = agent_of([call("get_order", order_id="A1"), typed_finish(INVOICE)], Invoice)
    result = await agent.run("Bill order A1.")
    events = await agent.transcript(result.run_id)

    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.output == Invoice(customer="acme", total_cents=1250, lines=["2 x widget"])
    assert isinstance(result.output, Invoice)
    # answer is the canonical JSON of the value; run_finished keeps the value as JSON too.
    assert result.answer is not None and json.loads(result.answer) == INVOICE
    (finished,) = only(events, RunFinished)
    assert finished.output == INVOICE
    (started,) = only(events, RunStarted)
    assert started.output_hash is not None and len(started.output_hash) == 16
    # result() reads the same typed value back from the store.
    assert (await agent.result(result.run_id)).output == result.output


async def test_the_default_text_answer_records_nothing_new() -> None:
    agent = agent_of([typed_finish("It shipped.")])
    result = await agent.run("Where is A1?")
    events = await agent.transcript(result.run_id)
    assert (result.answer, result.output) == ("It shipped.", "It shipped.")
    assert only(events, RunStarted)[0].output_hash is None
    assert only(events, RunFinished)[0].output is None
    body = only(events, RunFinished)[0].model_dump(exclude={"run_id", "seq", "at"})
    assert body == {
        "v": 1,
        "type": "run_finished",
        "status": "completed",
        "answer": "It shipped.",
        "reason": None,
        "output": None,
    }


async def test_the_schema_sent_to_the_model_has_the_typed_answer() -> None:
    agent = agent_of([typed_finish(INVOICE)], Invoice)
    await agent.run("Bill order A1.")
    model = agent.route[0]
    assert isinstance(model, ScriptedModel)
    schema = model.requests[0].schema.json_schema()
    finish = schema["$defs"]["FinishAction"]
    assert finish["properties"]["answer"] == {"$ref": "#/$defs/Invoice"}
    assert schema["$defs"]["Invoice"]["required"] == ["customer", "total_cents", "lines"]


async def test_an_invalid_answer_is_asked_again_with_the_errors_then_accepted() -> None:
    wrong = typed_finish({"customer": "acme", "total_cents": -5, "lines": "2 x widget"})
    agent = agent_of([wrong, typed_finish(INVOICE)], Invoice)
    result = await agent.run("Bill order A1.")
    events = await agent.transcript(result.run_id)

    assert result.status is RunStatus.COMPLETED, result.reason
    assert isinstance(result.output, Invoice) and result.output.total_cents == 1250
    called = only(events, ModelCalled)
    assert [c.outcome for c in called] == ["invalid", "ok"]
    assert called[0].error is not None
    assert "finish.answer.total_cents" in called[0].error
    assert "finish.answer.lines" in called[0].error
    # The model saw why in the re-ask.
    model = agent.route[0]
    assert isinstance(model, ScriptedModel)
    reask = model.requests[1].messages[-2].content
    assert "finish.answer.total_cents" in reask


async def test_the_generic_form_takes_the_answer_as_json_text_and_returns_it_typed() -> None:
    """``Policy(schema_form="generic")`` (or a strict dialect that cannot send the answer's
    type): the answer comes as ``answer_json``, checked here and asked again when invalid."""
    wrong = {"type": "finish", "thought": "Billed.", "answer_json": '{"customer": "acme"}'}
    right = {"type": "finish", "thought": "Billed.", "answer_json": json.dumps(INVOICE)}
    agent = Agent(
        tools=[get_order],
        model=ScriptedModel([wrong, right]),
        store="memory://",
        output=Invoice,
        policy=Policy(schema_form="generic"),
    )
    result = await agent.run("Bill order A1.")
    events = await agent.transcript(result.run_id)

    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.output == Invoice.model_validate(INVOICE)
    called = only(events, ModelCalled)
    assert [c.outcome for c in called] == ["invalid", "ok"]
    assert called[0].error is not None and "answer_json is not a valid Invoice" in called[0].error
    (finished,) = only(events, RunFinished)
    assert finished.output == INVOICE


async def test_an_answer_that_never_validates_fails_the_run_like_any_invalid_reply() -> None:
    agent = agent_of([typed_finish("a text answer")] * 5, Invoice)
    result = await agent.run("Bill order A1.")
    assert result.status is RunStatus.FAILED
    assert result.output is None
    assert result.reason is not None and "no valid action" in result.reason


@pytest.mark.parametrize(
    ("output", "answer", "expected"),
    [
        (Summary, {"title": "Q3", "words": 120}, {"title": "Q3", "words": 120}),
        (Point, {"x": 1.5, "y": -2}, Point(1.5, -2.0)),
        (int, 42, 42),
        (list[str], ["a", "b"], ["a", "b"]),
        (
            [Refund, Escalation],
            {"kind": "escalation", "team": "billing"},
            Escalation(team="billing"),
        ),
        ([Refund, Escalation], {"kind": "refund", "amount_cents": 300}, Refund(amount_cents=300)),
    ],
    ids=["typeddict", "dataclass", "int", "list", "union-escalation", "union-refund"],
)
async def test_every_kind_of_output_type(
    output: Any, answer: Any, expected: Any
) -> None:  # Any: cases
    agent = agent_of([typed_finish(answer)], output)
    result = await agent.run("Answer.")
    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.output == expected
    assert type(result.output) is type(expected)


async def test_a_primitive_answer_of_the_wrong_type_is_asked_again() -> None:
    agent = agent_of([typed_finish("forty-two"), typed_finish(42)], int)
    result = await agent.run("How many?")
    assert result.output == 42
    events = await agent.transcript(result.run_id)
    assert [c.outcome for c in only(events, ModelCalled)] == ["invalid", "ok"]


def test_an_output_that_is_not_a_type_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="is not a type"):
        agent_of([], output="Invoice")
    with pytest.raises(ConfigurationError, match="names no type"):
        agent_of([], output=[])


# --------------------------------------------------------------------------- continuing


async def test_confirm_and_resume_return_the_same_typed_value(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    script = [call("void_invoice", invoice_id="I9"), typed_finish(INVOICE)]
    paused = await agent_of(script, Invoice, store).run("Void I9 and bill A1.")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    assert paused.output is None

    # Another process (a new agent, a new model) confirms it.
    confirmed = await agent_of(script, Invoice, store).confirm(
        paused.run_id, approve=True, by="ops"
    )
    assert confirmed.status is RunStatus.COMPLETED, confirmed.reason
    assert isinstance(confirmed.output, Invoice) and confirmed.output.customer == "acme"
    resumed = await agent_of([], Invoice, store).resume(paused.run_id)
    assert resumed.output == confirmed.output


async def test_a_typed_run_resumes_from_snapshots_with_its_output_type_pinned(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    script = [
        call("get_order", order_id="A1"),
        call("void_invoice", invoice_id="I9"),
        typed_finish(INVOICE),
    ]
    paused = await agent_of(script, Invoice, store, snapshot_every=1).run("Bill A1.")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION, paused.reason
    with pytest.raises(OutputTypeChangedError):  # the pin survived the snapshots
        await agent_of(script, Summary, store, snapshot_every=1).confirm(
            paused.run_id, approve=True, by="ops"
        )
    done = await agent_of(script, Invoice, store, snapshot_every=1).confirm(
        paused.run_id, approve=True, by="ops"
    )
    assert isinstance(done.output, Invoice), done.reason


async def test_another_output_type_refuses_to_continue_and_records_nothing(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    script = [call("void_invoice", invoice_id="I9"), typed_finish(INVOICE)]
    typed = agent_of(script, Invoice, store)
    paused = await typed.run("Void I9 and bill A1.")
    before = len(await typed.transcript(paused.run_id))

    for other in (str, Summary):
        agent = agent_of(script, other, store)
        with pytest.raises(OutputTypeChangedError, match="output") as caught:
            await agent.confirm(paused.run_id, approve=True, by="ops")
        assert paused.run_id in str(caught.value)
    assert len(await typed.transcript(paused.run_id)) == before

    # A run that needs continuing (submitted, never advanced) is not resumed either.
    submitted = await typed.submit("Bill A1.")
    with pytest.raises(OutputTypeChangedError, match="Nothing was recorded"):
        await agent_of(script, Summary, store).resume(submitted, by="ops")
    assert len(await typed.transcript(submitted)) == 1

    # A text run is refused to a typed agent the same way.
    text_run = await agent_of(script, str, store).run("Void I9.")
    with pytest.raises(OutputTypeChangedError, match="a text answer"):
        await typed.confirm(text_run.run_id, approve=True, by="ops")


async def test_a_queue_worker_with_another_output_type_stops_the_run_for_a_person(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    script = [typed_finish(INVOICE)]
    run_id = await agent_of(script, Invoice, store).submit("Bill A1.")
    result = await agent_of(script, Summary, store, name="billing").advance(run_id)
    assert result.status is RunStatus.NEEDS_ATTENTION
    assert result.reason is not None and "output type" in result.reason
    done = await agent_of(script, Invoice, store).resume(run_id, by="ops")
    assert isinstance(done.output, Invoice), done.reason


async def test_reading_a_completed_run_as_another_type_is_refused(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    result = await agent_of([typed_finish("plain words")], str, store).run("Say it.")
    with pytest.raises(OutputTypeChangedError, match="started for a text answer"):
        await agent_of([], Invoice, store).result(result.run_id)


# --------------------------------------------------------------------------- streaming


async def test_stream_yields_the_partial_output_and_the_typed_result_last() -> None:
    model = ScriptedModel([typed_finish(INVOICE, thought="Billing it now.")], stream_chunk_chars=8)
    agent = Agent(tools=[get_order], model=model, store="memory://", output=Invoice)
    seen = [item async for item in agent.stream("Bill A1.")]

    partials = [x.value for x in seen if isinstance(x, PartialOutput)]
    assert len(partials) >= 3, partials  # it grew as it was written
    assert partials[-1] == INVOICE
    assert all(isinstance(p, dict | str) for p in partials)
    thought = "".join(x.text for x in seen if isinstance(x, ThoughtDelta))
    assert thought == "Billing it now."
    last = seen[-1]
    assert isinstance(last, RunEnded)
    assert isinstance(last.result.output, Invoice)  # typed, never a partial object
    kinds = [type(x).__name__ for x in seen]
    assert kinds.index("PartialOutput") < kinds.index("ActionProposed")


async def test_a_text_stream_has_no_partial_output() -> None:
    agent = agent_of([typed_finish("It shipped.")])
    seen = [item async for item in agent.stream("Where is A1?")]
    assert not [x for x in seen if isinstance(x, PartialOutput)]
    last = seen[-1]
    assert isinstance(last, RunEnded) and last.result.output == "It shipped."


async def test_an_answer_that_cannot_be_recorded_is_asked_again() -> None:
    nan = '{"type": "finish", "thought": "Here.", "answer": {"x": NaN, "y": 1}}'
    agent = agent_of([nan, typed_finish({"x": 0.5, "y": 1})], Point)
    result = await agent.run("Where?")
    assert result.output == Point(0.5, 1.0)
    events = await agent.transcript(result.run_id)
    (invalid, _) = only(events, ModelCalled)
    assert invalid.outcome == "invalid" and invalid.error is not None
    assert "cannot be recorded" in invalid.error


async def test_the_system_text_says_the_answer_is_typed_and_text_runs_keep_theirs() -> None:
    typed = agent_of([typed_finish(INVOICE)], Invoice)
    text = agent_of([typed_finish("Shipped.")])
    await typed.run("Bill A1.")
    await text.run("Where is A1?")
    systems: list[str] = []
    for agent in (typed, text):
        model = agent.route[0]
        assert isinstance(model, ScriptedModel)
        systems.append(model.requests[0].system)
    assert "The answer of finish is not text in this task" in systems[0]
    assert '"total_cents"' in systems[0]
    assert "The answer of finish" not in systems[1]
    rules = systems[1].split("\n\nTools you can call:")[0]  # the contract's own text
    assert systems[0].startswith(rules + "\n\nThe answer of finish is not text")
