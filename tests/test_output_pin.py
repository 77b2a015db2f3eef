"""A run's output type is pinned on every read, and a typed answer is validated as strictly
as a tool's arguments, through the public API.

A run completed with ``output=Invoice`` used to read back as any type whose fields its
answer happened to fit (``result()``, ``resume()``, ``run()`` with its id), and a finish
answer was validated leniently (an extra field dropped, ``true`` taken for ``1``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from agentcore import Agent, Policy, RunStatus, tool
from agentcore.adapters import ScriptedModel
from agentcore.errors import OutputTypeChangedError
from agentcore.events import ModelCalled, RunFinished
from agentcore.stores import MemoryStore


class Invoice(BaseModel):
    customer: str
    total_cents: int


class Receipt(BaseModel):  # the same fields, another type
    customer: str
    total_cents: int


class Line(BaseModel):
    sku: str
    qty: int


class Order(BaseModel):
    lines: list[Line]


class Summary(TypedDict):
    title: str
    words: int


INVOICE = {"customer": "acme", "total_cents": 1250}


def finish(answer: Any) -> dict[str, Any]:  # Any: a JSON answer
    return {"type": "finish", "thought": "Here it is.", "answer": answer}


@tool(effect="destructive")
def void_invoice(invoice_id: str) -> str:
    """Void an invoice for good."""
    return f"voided {invoice_id}"


def agent_of(
    script: list[dict[str, Any]],  # Any: JSON replies
    output: Any,  # Any: an output type
    store: MemoryStore,
) -> Agent[Any]:  # Any: the output type varies by test
    return Agent(
        tools=[void_invoice],
        model=ScriptedModel(script),
        store=store,
        output=output,
        policy=Policy(plan_before_writes=False, max_reasks=2),
    )


async def test_a_completed_run_reads_back_only_as_its_own_type() -> None:
    store = MemoryStore()
    done = await agent_of([finish(INVOICE)], Invoice, store).run("Bill acme.", run_id="r1")
    assert done.status is RunStatus.COMPLETED and isinstance(done.output, Invoice)
    for other in (Receipt, str, dict[str, Any]):
        reader = agent_of([], other, store)
        with pytest.raises(OutputTypeChangedError, match="Read it with an agent"):
            await reader.result("r1")
        with pytest.raises(OutputTypeChangedError):
            await reader.resume("r1")
        with pytest.raises(OutputTypeChangedError):
            await reader.run("Bill acme.", run_id="r1")
    same = await agent_of([], Invoice, store).result("r1")
    assert same.output == Invoice(**INVOICE)
    resumed = await agent_of([], Invoice, store).resume("r1")
    assert resumed.output == Invoice(**INVOICE)


async def test_a_text_run_does_not_read_back_as_a_typed_answer() -> None:
    store = MemoryStore()
    text = json.dumps(INVOICE)
    done = await agent_of([finish(text)], str, store).run("Bill acme.", run_id="r1")
    assert done.output == text
    with pytest.raises(OutputTypeChangedError):
        await agent_of([], Invoice, store).result("r1")


async def test_a_run_that_has_not_completed_is_still_readable_by_another_type() -> None:
    """Nothing is decoded while the run waits: the pin is compared when there is an answer
    (and when the run continues, as before)."""
    store = MemoryStore()
    call = {"type": "tool", "thought": "void", "tool": "void_invoice", "args": {"invoice_id": "I"}}
    paused = await agent_of([call], Invoice, store).run("Void I.", run_id="r1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    seen = await agent_of([], Receipt, store).result("r1")
    assert seen.status is RunStatus.AWAITING_CONFIRMATION and seen.output is None
    with pytest.raises(OutputTypeChangedError):
        await agent_of([], Receipt, store).confirm("r1", approve=True, by="alice")


@pytest.mark.parametrize(
    ("output", "bad", "good"),
    [
        (Invoice, {**INVOICE, "iban": "DE00 attacker"}, INVOICE),  # an extra field
        (Invoice, {"customer": "acme", "total_cents": True}, INVOICE),  # True is not an int
        (Invoice, {"customer": "acme", "total_cents": "1250"}, INVOICE),  # nor is "1250"
        (
            Order,
            {"lines": [{"sku": "w", "qty": 1, "note": "x"}]},
            {"lines": [{"sku": "w", "qty": 1}]},
        ),
        (Order, {"lines": [{"sku": "w", "qty": False}]}, {"lines": [{"sku": "w", "qty": 0}]}),
        (Summary, {"title": "Q3", "words": 2, "extra": 1}, {"title": "Q3", "words": 2}),
        (int, True, 1),
        (list[int], [1, True], [1, 2]),
    ],
    ids=[
        "extra-field",
        "bool-as-int",
        "string-as-int",
        "nested-extra",
        "nested-bool",
        "typeddict-extra",
        "bare-bool",
        "list-bool",
    ],
)
@pytest.mark.parametrize("form", ["typed", "generic"])
async def test_a_lenient_answer_is_asked_again(
    output: Any,  # Any: an output type
    bad: Any,  # Any: JSON
    good: Any,  # Any: JSON
    form: str,
) -> None:
    def reply(answer: Any) -> dict[str, Any]:  # Any: JSON
        if form == "generic":
            return {"type": "finish", "thought": "t", "answer_json": json.dumps(answer)}
        return finish(answer)

    store = MemoryStore()
    agent = Agent(
        tools=[void_invoice],
        model=ScriptedModel([reply(bad), reply(good)]),
        store=store,
        output=output,
        policy=Policy(plan_before_writes=False, max_reasks=2, schema_form=form),  # pyright: ignore[reportArgumentType]
    )
    result = await agent.run("Answer.", run_id="r1")
    assert result.status is RunStatus.COMPLETED, result.reason
    events = await agent.transcript("r1")
    outcomes = [e.outcome for e in events if isinstance(e, ModelCalled)]
    assert outcomes == ["invalid", "ok"], outcomes
    (ended,) = [e for e in events if isinstance(e, RunFinished)]
    assert ended.answer is not None and json.loads(ended.answer) == good
