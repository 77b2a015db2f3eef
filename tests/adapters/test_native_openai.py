"""OpenAIAdapter in native tool-calling mode, against a fake OpenAI on loopback.

The requests go through litellm's real OpenAI code; each test checks what left the process
(functions, tool choice, the history as tool calls and tool results with our call ids) and
what the adapter made of OpenAI's documented ``message.tool_calls`` answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentcore import Agent, RunStatus, tool
from agentcore.adapters import (
    BreakerPolicy,
    CompletionRequest,
    Message,
    PartialAction,
    RetryPolicy,
    ScriptedModel,
    resolve_model,
)
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.contracts import (
    FinishAction,
    PlanAction,
    ToolAction,
    ToolSpec,
    compile_action_schema,
    compile_parameters,
)
from agentcore.errors import (
    ConfigurationError,
    ModelRefusedError,
    ModelTruncatedError,
)
from agentcore.evals import EvalCase, evaluate
from agentcore.events import ActionProposed, Decision, ModelCalled
from agentcore.streaming import ActionDetected, RunEnded, ThoughtDelta

from .conftest import TOOLS
from .fakes import FakeProvider, JsonReply, SseReply, error_reply, ok, split
from .native_payloads import (
    chat_tool_calls,
    chat_tool_stream,
    responses_tool_calls,
)

RequestFactory = Callable[..., CompletionRequest]


def gpt(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    **options: Any,  # Any: OpenAIAdapter options
) -> OpenAIAdapter:
    return OpenAIAdapter(
        "gpt-4.1-mini",
        api_base=fake.base_url,
        api_key="sk-test",
        retry=retry,
        breaker=breaker,
        mode="native",
        **options,
    )


@pytest.fixture
def adapter(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> OpenAIAdapter:
    return gpt(fake, retry, breaker)


def tool_names(body: dict[str, Any]) -> list[str]:  # Any: JSON
    return [t["function"]["name"] for t in body["tools"]]


# --------------------------------------------------------------------------- the wire


async def test_request_offers_strict_functions_with_auto_choice_and_no_response_format(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(JsonReply(chat_tool_calls([("get_order", {"order_id": "A1"})], "Look it up.")))
    request = make_request()
    completion = await adapter.complete_structured(request)

    body = fake.last.body
    assert fake.last.path == "/v1/chat/completions"
    assert "response_format" not in body
    assert body["tool_choice"] == "auto"
    assert body["parallel_tool_calls"] is False
    assert tool_names(body) == ["get_order", "add_note", "plan", "finish"]
    get_order = body["tools"][0]["function"]
    assert get_order["strict"] is True
    assert get_order["parameters"] == compile_parameters(TOOLS[0].args_schema, "openai_strict")
    assert get_order["parameters"]["additionalProperties"] is False
    assert all(t["function"]["strict"] is True for t in body["tools"])
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are a careful support agent.")
    assert "calling exactly one function" in system["content"]
    assert body["messages"][1:] == [
        {"role": "user", "content": "Task: where is order A1?\n\nNote: be brief."}
    ]

    assert completion.mode == "native"
    assert completion.action == ToolAction(
        thought="Look it up.", tool="get_order", args={"order_id": "A1"}
    )
    assert completion.dropped_calls == ()
    assert completion.finish_reason == "tool_calls"
    assert completion.usage.input_tokens == 120
    assert completion.attempts == 1


async def test_parallel_calls_take_the_first_and_report_the_rest(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        JsonReply(
            chat_tool_calls(
                [
                    ("get_order", {"order_id": "A1"}),
                    ("add_note", {"order_id": "A1", "note": "x"}),
                    ("finish", {"thought": "t", "answer": "a"}),
                ]
            )
        )
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.action == ToolAction(thought="", tool="get_order", args={"order_id": "A1"})
    assert completion.dropped_calls == (
        'add_note({"order_id": "A1", "note": "x"})',
        'finish({"thought": "t", "answer": "a"})',
    )


async def test_a_text_reply_without_a_call_is_a_finish(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(ok("Order A1 shipped yesterday."))
    completion = await adapter.complete_structured(make_request())
    assert completion.action == FinishAction(thought="", answer="Order A1 shipped yesterday.")
    assert completion.mode == "native"


async def test_plan_and_finish_calls_map_to_their_actions(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        JsonReply(chat_tool_calls([("plan", {"thought": "Two steps.", "steps": ["a", "b"]})])),
        JsonReply(chat_tool_calls([("finish", {"thought": "", "answer": "Done."})], "All set.")),
    )
    plan = await adapter.complete_structured(make_request())
    assert plan.action == PlanAction(thought="Two steps.", steps=["a", "b"])
    finish = await adapter.complete_structured(make_request())
    assert finish.action == FinishAction(thought="All set.", answer="Done.")


async def test_invalid_arguments_are_an_invalid_reply_not_an_exception(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        JsonReply(chat_tool_calls([("get_order", {"id": "A1"})])),
        JsonReply(chat_tool_calls([("get_order", '{"order_id": ')])),
    )
    wrong = await adapter.complete_structured(make_request())
    assert wrong.action is None
    assert wrong.error is not None
    assert json.loads(wrong.text)["tool"] == "get_order"
    broken = await adapter.complete_structured(make_request())
    assert broken.action is None
    assert "not valid JSON" in str(broken.error)
    assert broken.text == 'get_order({"order_id": )'


class GcdArgs(BaseModel):
    a: int
    b: int


class Anything(BaseModel):
    payload: dict[str, Any]  # Any: an open object, not expressible strictly


async def test_dotted_tool_names_are_mapped_and_mapped_back(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    schema = compile_action_schema(
        [
            ToolSpec("math.gcd", "Greatest common divisor.", GcdArgs),
            ToolSpec("blob", "B.", Anything),
        ]
    )
    fake.queue(JsonReply(chat_tool_calls([("math_gcd", {"a": 12, "b": 18})])))
    completion = await adapter.complete_structured(make_request(schema=schema))
    body = fake.last.body
    assert tool_names(body) == ["math_gcd", "blob", "plan", "finish"]
    assert "math.gcd is math_gcd" in body["messages"][0]["content"]
    by_name = {t["function"]["name"]: t["function"] for t in body["tools"]}
    assert by_name["math_gcd"]["strict"] is True
    assert "strict" not in by_name["blob"]  # an open object cannot be strict
    assert completion.action == ToolAction(thought="", tool="math.gcd", args={"a": 12, "b": 18})


async def test_a_finish_only_step_offers_only_finish(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    last = compile_action_schema(TOOLS, finish_only=True)
    fake.queue(JsonReply(chat_tool_calls([("finish", {"thought": "t", "answer": "bye"})])))
    completion = await adapter.complete_structured(make_request(schema=last))
    assert tool_names(fake.last.body) == ["finish"]
    assert fake.last.body["tool_choice"] == "auto"
    assert completion.action == FinishAction(thought="t", answer="bye")


# --------------------------------------------------------------------------- stop reasons


async def test_truncated_tool_arguments_are_asked_again_and_never_executed(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    cut = chat_tool_calls([("add_note", '{"order_id": "A1", "no')], finish_reason="length")
    fake.queue(JsonReply(cut), JsonReply(cut))
    with pytest.raises(ModelTruncatedError) as caught:
        await adapter.complete_structured(make_request())
    assert [b["max_completion_tokens"] for b in fake.bodies] == [1024, 2048]
    assert caught.value.attempts == 2
    assert caught.value.input_tokens == 240


async def test_truncated_once_then_complete(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        JsonReply(chat_tool_calls([("get_order", '{"order')], finish_reason="length")),
        JsonReply(chat_tool_calls([("get_order", {"order_id": "A1"})])),
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.action == ToolAction(thought="", tool="get_order", args={"order_id": "A1"})
    assert completion.attempts == 2
    assert completion.usage.input_tokens == 240


async def test_a_refusal_raises_as_in_structured_mode(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(ok(None, refusal="I can't help with that."))
    with pytest.raises(ModelRefusedError, match="can't help"):
        await adapter.complete_structured(make_request())


async def test_retries_are_the_same_as_in_structured_mode(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        error_reply(503, "overloaded", type="server_error"),
        JsonReply(chat_tool_calls([("get_order", {"order_id": "A1"})])),
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2
    assert completion.action == ToolAction(thought="", tool="get_order", args={"order_id": "A1"})
    assert fake.bodies[0] == fake.bodies[1]


# --------------------------------------------------------------------------- streaming


async def test_streaming_shows_the_thought_and_the_tool_once_its_name_is_known(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        SseReply(chat_tool_stream([("add_note", {"order_id": "A1", "note": "called"})], "Note it."))
    )
    seen: list[PartialAction] = []
    completion = await adapter.complete_structured(make_request(on_partial=seen.append))
    body = fake.last.body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "response_format" not in body
    assert seen[0] == PartialAction(thought="No")
    assert PartialAction(thought="Note it.") in seen
    assert seen[-1] == PartialAction(type="tool", tool="add_note", thought="Note it.")
    assert all(p.type is None for p in seen[: seen.index(PartialAction(thought="Note it.")) + 1])
    assert completion.action == ToolAction(
        thought="Note it.", tool="add_note", args={"order_id": "A1", "note": "called"}
    )
    assert completion.usage.input_tokens == 120


async def test_a_stream_cut_inside_the_arguments_is_sent_again(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    whole = chat_tool_stream([("get_order", {"order_id": "A1"})])
    cut = [c for c in whole if not c["choices"] or c["choices"][0]["finish_reason"] is None]
    cut = cut[:3]  # the call's head and one piece of its arguments, no stop reason
    fake.queue(SseReply(cut, done=True), SseReply(whole))
    completion = await adapter.complete_structured(make_request(on_partial=lambda p: None))
    assert completion.action == ToolAction(thought="", tool="get_order", args={"order_id": "A1"})
    assert completion.attempts == 2


# --------------------------------------------------------------------------- Responses API


async def test_responses_api_native_mode(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    adapter = gpt(fake, retry, breaker, api="responses")
    fake.queue(
        JsonReply(
            responses_tool_calls(
                [("get_order", {"order_id": "B2"}), ("finish", {"thought": "", "answer": "x"})]
            )
        )
    )
    ping = ToolAction(thought="look", tool="get_order", args={"order_id": "A1"})
    request = make_request(
        messages=[
            Message("user", "Task: go"),
            Message("assistant", ping.model_dump_json(), call_id="c1", action=ping),
            Message("user", "[c1] get_order returned: {}", call_id="c1"),
            Message("user", "Step 2 of 8."),
        ]
    )
    completion = await adapter.complete_structured(request)
    body = fake.last.body
    assert fake.last.path == "/v1/responses"
    assert "text" not in body
    assert body["tool_choice"] == "auto"
    assert body["parallel_tool_calls"] is False
    assert [t["name"] for t in body["tools"]] == ["get_order", "add_note", "plan", "finish"]
    assert all(t["type"] == "function" and t["strict"] is True for t in body["tools"])
    assert body["input"] == [
        {"role": "user", "content": "Task: go"},
        {"role": "assistant", "content": "look"},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "get_order",
            "arguments": '{"order_id": "A1"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "[c1] get_order returned: {}"},
        {"role": "user", "content": "Step 2 of 8."},
    ]
    assert completion.action == ToolAction(thought="", tool="get_order", args={"order_id": "B2"})
    assert completion.dropped_calls == ('finish({"thought": "", "answer": "x"})',)


def responses_call_stream(name: str, arguments: str) -> list[dict[str, Any]]:  # Any: JSON
    """A Responses API stream of one function call: ``response.output_item.added`` with the
    item (its name), ``response.function_call_arguments.delta`` pieces, then
    ``response.completed`` with the whole response."""
    final = responses_tool_calls([(name, arguments)])
    item = final["output"][0]
    events: list[dict[str, Any]] = [  # Any: JSON
        {"type": "response.created", "sequence_number": 0, "response": {**final, "output": []}},
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {**item, "arguments": "", "status": "in_progress"},
        },
    ]
    for piece in split(arguments, 3):
        events.append(
            {
                "type": "response.function_call_arguments.delta",
                "sequence_number": len(events),
                "item_id": item["id"],
                "output_index": 0,
                "delta": piece,
            }
        )
    events.append({"type": "response.completed", "sequence_number": len(events), "response": final})
    return events


async def test_responses_api_native_streaming(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    adapter = gpt(fake, retry, breaker, api="responses")
    fake.queue(
        SseReply(responses_call_stream("get_order", '{"order_id": "A1"}'), done=False, named=True)
    )
    seen: list[PartialAction] = []
    completion = await adapter.complete_structured(make_request(on_partial=seen.append))
    assert fake.last.body["stream"] is True
    assert seen == [PartialAction(type="tool", tool="get_order")]
    assert completion.action == ToolAction(thought="", tool="get_order", args={"order_id": "A1"})


# --------------------------------------------------------------------------- configuration


def test_mode_through_the_registry_and_with_mode(fake: FakeProvider) -> None:
    made = resolve_model("openai/gpt-4.1-mini", mode="native", api_base=fake.base_url)
    assert isinstance(made, OpenAIAdapter)
    assert made.mode == "native"
    assert "mode='native'" in repr(made)
    structured = made.with_mode("structured")
    assert structured.mode == "structured"
    assert made.mode == "native"  # a copy: the original is unchanged
    assert structured.breaker is made.breaker
    assert structured.name == made.name
    with pytest.raises(ConfigurationError, match="Invalid mode 'sideways'"):
        made.with_mode("sideways")  # pyright: ignore[reportArgumentType]  # the point
    with pytest.raises(ConfigurationError, match="Invalid mode"):
        OpenAIAdapter("gpt-4.1-mini", mode="both")  # pyright: ignore[reportArgumentType]


# --------------------------------------------------------------------------- public API


NOTES: dict[str, list[str]] = {}


@tool(effect="read")
def get_order(order_id: str) -> dict[str, Any]:  # Any: JSON
    """Look up one order.

    Args:
        order_id: the order's id, e.g. A1.
    """
    return {"order_id": order_id, "status": "shipped", "notes": NOTES.get(order_id, [])}


@tool(effect="write")
def add_note(order_id: str, note: str) -> str:
    """Add a note to an order.

    Args:
        order_id: the order's id.
        note: the note's text.
    """
    NOTES.setdefault(order_id, []).append(note)
    return "noted"


async def test_a_native_run_renders_its_history_as_tool_calls_with_our_ids(
    adapter: OpenAIAdapter, fake: FakeProvider
) -> None:
    NOTES.clear()
    fake.queue(
        JsonReply(
            chat_tool_calls([("plan", {"thought": "Look, then note.", "steps": ["a", "b"]})])
        ),
        JsonReply(
            chat_tool_calls(
                [("get_order", {"order_id": "A1"}), ("get_order", {"order_id": "B2"})], "Look."
            )
        ),
        JsonReply(chat_tool_calls([("add_note", {"order_id": "A1", "note": "called"})])),
        ok("A1 shipped; noted."),
    )
    agent = Agent(tools=[get_order, add_note], model=adapter, store="memory://")
    try:
        result = await agent.run("Note that the customer called about A1.")
        events = await agent.transcript(result.run_id)
    finally:
        await agent.close()

    assert result.status is RunStatus.COMPLETED, result.reason
    assert result.answer == "A1 shipped; noted."
    assert NOTES == {"A1": ["called"]}
    called = [ev for ev in events if isinstance(ev, ModelCalled)]
    assert [ev.mode for ev in called] == ["native"] * 4
    assert called[1].dropped_calls == ['get_order({"order_id": "B2"})']
    proposed = [ev.call_id for ev in events if isinstance(ev, ActionProposed)]
    assert proposed == ["c1", "c2", "c3", "c4"]
    assert [ev.verdict for ev in events if isinstance(ev, Decision)] == ["execute"] * 4

    last = [m for m in fake.bodies[3]["messages"] if m["role"] != "system"]
    calls = [
        (m["tool_calls"][0]["id"], m["tool_calls"][0]["function"]["name"])
        for m in last
        if m.get("tool_calls")
    ]
    assert calls == [("c1", "plan"), ("c2", "get_order"), ("c3", "add_note")]
    results = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
    assert results["c1"] == "[c1] Plan approved. Go ahead with it."
    assert results["c2"].startswith("[c2] Only one action runs per step; not executed: get_order(")
    assert "[c2] get_order returned: " in results["c2"]
    assert results["c3"] == "[c3] add_note returned: noted"
    for i, m in enumerate(last):  # every call is answered right after it, in order
        if m.get("tool_calls"):
            assert last[i + 1] == {
                "role": "tool",
                "tool_call_id": m["tool_calls"][0]["id"],
                "content": results[m["tool_calls"][0]["id"]],
            }
    assert "call_fake" not in json.dumps(fake.bodies[3])  # the provider's ids are not kept
    # The dropped call was told to the model in the very next request.
    nxt = [m for m in fake.bodies[2]["messages"] if m["role"] == "tool"]
    assert "not executed: get_order" in nxt[-1]["content"]


async def test_agent_stream_in_native_mode_detects_the_tool_before_the_action(
    adapter: OpenAIAdapter, fake: FakeProvider
) -> None:
    fake.queue(
        SseReply(chat_tool_stream([("get_order", {"order_id": "A1"})], "Looking it up.")),
        SseReply(chat_tool_stream([("finish", {"thought": "Known.", "answer": "Shipped."})])),
    )
    agent = Agent(tools=[get_order, add_note], model=adapter, store="memory://")
    seen: list[object] = []
    try:
        async for item in agent.stream("Where is A1?"):
            seen.append(item)
    finally:
        await agent.close()
    kinds = [type(x).__name__ for x in seen]
    detected = [x for x in seen if isinstance(x, ActionDetected)]
    assert [(d.step, d.type, d.tool) for d in detected] == [
        (1, "tool", "get_order"),
        (2, "finish", None),
    ]
    thought = "".join(x.text for x in seen if isinstance(x, ThoughtDelta) and x.step == 1)
    assert thought == "Looking it up."
    assert kinds.index("ActionDetected") < kinds.index("ActionProposed")
    assert isinstance(seen[-1], RunEnded)
    assert seen[-1].result.answer == "Shipped."


# --------------------------------------------------------------------------- evaluation


CASES = [
    {
        "id": "n-1",
        "category": "straightforward",
        "messages": [{"role": "user", "content": "Where is order A-1?"}],
        "tools": [
            {
                "name": "orders.get",
                "description": "Look up one order by id.",
                "parameters": {
                    "type": "object",
                    "properties": {"order_id": {"type": "string"}},
                    "required": ["order_id"],
                },
            }
        ],
        "expected": {"type": "tool", "tool": "orders.get", "args": {"order_id": ["A-1"]}},
    },
    {
        "id": "n-2",
        "category": "no_tool",
        "messages": [{"role": "user", "content": "Tell me a joke."}],
        "tools": [
            {
                "name": "orders.get",
                "description": "Look up one order.",
                "parameters": {"type": "object"},
            }
        ],
        "expected": {"type": "finish"},
    },
]


async def test_evaluate_in_native_mode(adapter: OpenAIAdapter, fake: FakeProvider) -> None:
    cases = [EvalCase.model_validate(c) for c in CASES]
    structured = adapter.with_mode("structured")
    fake.queue(
        JsonReply(chat_tool_calls([("orders_get", {"order_id": "A-1"})])),
        ok("Why did the order cross the road?"),
    )
    card = await evaluate(cases, structured, mode="native", concurrency=1)
    assert card.mode == "native"
    assert card.model == "openai/gpt-4.1-mini"
    assert card.metrics["accuracy"] == 1.0
    assert all("tools" in b and "response_format" not in b for b in fake.bodies)


def test_cli_eval_both_modes_side_by_side(tmp_path: Path, fake: FakeProvider) -> None:
    dataset = tmp_path / "cases.jsonl"
    dataset.write_text("\n".join(json.dumps(c) for c in CASES) + "\n")
    (tmp_path / "fake_models.py").write_text(
        textwrap.dedent(
            """
            import os
            from agentcore.adapters.openai import OpenAIAdapter

            def model():
                return OpenAIAdapter(
                    "gpt-4.1-mini", api_base=os.environ["FAKE_OPENAI"], api_key="sk-test"
                )
            """
        )
    )
    structured_right = {
        "action": {
            "type": "tool",
            "thought": "t",
            "call": {"tool": "orders.get", "args": {"order_id": "A-1"}},
        }
    }
    structured_finish = {
        "action": {"type": "finish", "thought": "t", "answer": "No tool for jokes."}
    }
    fake.queue(
        ok(structured_right),
        ok(structured_finish),
        JsonReply(chat_tool_calls([("orders_get", {"order_id": "B-9"})])),  # wrong argument
        ok("A joke, then."),
    )
    env = {
        **os.environ,
        "FAKE_OPENAI": fake.base_url,
        "AGENTCORE_SCORECARDS": str(tmp_path / "cards"),
        "COLUMNS": "200",
    }
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentcore.cli",
            "eval",
            str(dataset),
            "--model",
            "fake_models:model",
            "--mode",
            "both",
            "--concurrency",
            "1",
            "--out",
            "cards.json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    header = next(line for line in res.stdout.splitlines() if "metric" in line)
    assert header.index("structured") < header.index("native")
    rows = {
        cells[0]: cells[1:]
        for line in res.stdout.splitlines()
        if len(cells := [c.strip() for c in line.strip("│┃ ").split("│")]) == 3
    }
    assert rows["accuracy"] == ["1", "0.5"]
    assert rows["argument_accuracy"] == ["1", "0"]
    assert rows["straightforward"] == ["1", "0"]
    cards = json.loads((tmp_path / "cards.json").read_text())
    assert [c["mode"] for c in cards] == ["structured", "native"]
    assert [c["metrics"]["accuracy"] for c in cards] == [1.0, 0.5]
    assert (tmp_path / "cards" / "openai_gpt-4.1-mini--native.json").is_file()
    assert (tmp_path / "cards" / "openai_gpt-4.1-mini--structured.json").is_file()
    assert "response_format" in fake.bodies[0] and "tools" not in fake.bodies[0]
    assert "tools" in fake.bodies[2] and "response_format" not in fake.bodies[2]


async def test_parallel_calls_are_requested_only_when_a_batch_is_offered(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    reads = [get_order.spec, ToolSpec("get_customer", "Look up a customer.", GcdArgs)]
    fake.queue(
        JsonReply(chat_tool_calls([("get_order", {"order_id": "A1"})])),
        JsonReply(chat_tool_calls([("get_order", {"order_id": "A1"})])),
    )
    await adapter.complete_structured(make_request(schema=compile_action_schema(reads)))
    assert fake.last.body["parallel_tool_calls"] is False
    batched = compile_action_schema(reads, max_batch=4)
    await adapter.complete_structured(make_request(schema=batched))
    assert fake.last.body["parallel_tool_calls"] is True


async def test_a_native_run_does_not_list_the_tools_it_offers_as_functions(
    adapter: OpenAIAdapter, fake: FakeProvider
) -> None:
    """Native mode sends each tool once, as a function: the system text names only what a
    function definition does not carry (which tools write, and how), so native mode is not
    larger than structured mode (issue 37)."""
    NOTES.clear()
    fake.queue(
        JsonReply(chat_tool_calls([("get_order", {"order_id": "A1"})], "Look.")),
        ok("A1 shipped."),
    )
    agent = Agent(tools=[get_order, add_note], model=adapter, store="memory://")
    try:
        result = await agent.run("Where is A1?")
    finally:
        await agent.close()
    assert result.status is RunStatus.COMPLETED, result.reason
    body = fake.bodies[0]
    system = body["messages"][0]["content"]
    assert {t["function"]["name"] for t in body["tools"]} >= {"get_order", "add_note"}
    assert "get_order(" not in system and "Look up" not in system  # not listed again
    assert "Effects: add_note (write); every other tool reads." in system
    assert "Native function calling is on" in system
    # the same agent in structured mode lists them, with their signatures
    structured = Agent(tools=[get_order, add_note], model=ScriptedModel([]), store="memory://")
    try:
        text = structured.contract.render_system([t.spec for t in structured.tools.values()])
    finally:
        await structured.close()
    assert "- get_order(order_id: str)" in text
    assert len(system) < len(text) + 400  # the native note is all it adds
