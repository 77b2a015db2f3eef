"""OpenTelemetry: spans and metrics of runs, read back from the SDK's in-memory exporters.

agentcore reports to the providers given to ``configure_telemetry`` (the fixture below); the
global providers are never set here, so other tests stay untraced.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import hashlib
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext

from agentcore import (
    Agent,
    Budget,
    RunStatus,
    ToolContext,
    configure_telemetry,
    tool,
)
from agentcore.adapters import Completion, CompletionRequest, ScriptedModel
from agentcore.testing import call

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Otel:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    provider: TracerProvider

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.spans.get_finished_spans())
        return [s for s in found if name is None or s.name == name or s.name.startswith(name)]

    def points(self, metric: str) -> list[Any]:  # Any: the SDK's data point classes
        data = self.metrics.get_metrics_data()
        if data is None:
            return []
        return [
            point
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == metric
            for point in m.data.data_points
        ]

    def total(self, metric: str, **attributes: str) -> float:
        """The sum over the points of a counter (or the sum of a histogram) whose
        attributes include ``attributes`` (keys with dots spelled with underscores)."""
        wanted = {k.replace("__", "."): v for k, v in attributes.items()}
        total = 0.0
        for p in self.points(metric):
            if all(p.attributes.get(k) == v for k, v in wanted.items()):
                total += p.value if hasattr(p, "value") else p.sum
        return total


@pytest.fixture
def otel() -> Iterator[Otel]:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[reader])
    configure_telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        yield Otel(spans, reader, tracer_provider)
    finally:
        configure_telemetry()  # back to the default: the global providers, none set here
        tracer_provider.shutdown()
        meter_provider.shutdown()


def run_link(run_id: str) -> tuple[int, int]:
    """The documented derivation: sha256("agentcore.run:" + run_id), 16 + 8 bytes."""
    digest = hashlib.sha256(f"agentcore.run:{run_id}".encode()).digest()
    return int.from_bytes(digest[:16], "big"), int.from_bytes(digest[16:24], "big")


def ids(span: ReadableSpan) -> SpanContext:
    assert span.context is not None
    return span.context


def attr(span: ReadableSpan, key: str) -> Any:  # Any: an attribute value
    assert span.attributes is not None
    return span.attributes[key]


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def only(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


PLAN = {"type": "plan", "thought": "Look it up, then answer.", "steps": ["look up", "answer"]}
FINISH = {"type": "finish", "thought": "Found it.", "answer": "Shipped."}


@tool
async def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"order_id": order_id, "status": "shipped"}


@tool(effect="destructive")
def cancel_order(order_id: str) -> dict[str, bool]:
    """Cancel an order."""
    del order_id
    return {"cancelled": True}


# --------------------------------------------------------------------------- the span tree


async def test_a_run_is_an_advance_of_steps_of_model_and_tool_calls(otel: Otel) -> None:
    model = ScriptedModel([PLAN, call("lookup", order_id="A1"), FINISH])
    agent = Agent(tools=[lookup], model=model, store="memory://", name="shop")
    result = await agent.run("Where is A1?", budget=Budget(max_steps=5))
    assert result.status is RunStatus.COMPLETED

    advance = only(otel.finished("invoke_agent"))
    assert advance.name == "invoke_agent shop" and advance.parent is None
    assert advance.attributes is not None
    assert advance.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert advance.attributes["gen_ai.agent.name"] == "shop"
    assert advance.attributes["gen_ai.conversation.id"] == result.run_id
    assert advance.attributes["agentcore.run_id"] == result.run_id
    assert advance.attributes["agentcore.run.status"] == "completed"
    assert advance.attributes["agentcore.advance.trigger"] == "run_started"
    assert advance.attributes["agentcore.advance.steps"] == 3
    (link,) = advance.links
    assert (link.context.trace_id, link.context.span_id) == run_link(result.run_id)

    steps = sorted(otel.finished("agentcore.step"), key=lambda s: attr(s, "agentcore.step"))
    assert [attr(s, "agentcore.step") for s in steps] == [1, 2, 3]
    assert [attr(s, "agentcore.action.type") for s in steps] == ["plan", "tool", "finish"]
    assert all(parent_id(s) == ids(advance).span_id for s in steps)
    assert all(ids(s).trace_id == ids(advance).trace_id for s in steps)

    chats = otel.finished("chat ")
    assert len(chats) == 3
    for chat, step in zip(chats, steps, strict=True):
        attrs = chat.attributes
        assert attrs is not None
        assert parent_id(chat) == ids(step).span_id
        assert chat.kind is trace.SpanKind.CLIENT
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == "scripted"
        assert attrs["gen_ai.usage.input_tokens"] == 50
        assert isinstance(attrs["gen_ai.usage.output_tokens"], int)
        assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
        assert attrs["agentcore.run_id"] == result.run_id
        assert attrs["agentcore.step"] == attr(step, "agentcore.step")

    tool_span = only(otel.finished("execute_tool"))
    assert tool_span.name == "execute_tool lookup"
    assert parent_id(tool_span) == ids(steps[1]).span_id
    assert tool_span.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "c2",
        "gen_ai.tool.type": "function",
        "agentcore.run_id": result.run_id,
        "agentcore.step": 2,
        "agentcore.tool.effect": "read",
        "agentcore.tool.ok": True,
    }


async def test_a_tools_own_spans_are_children_of_its_tool_call_span(otel: Otel) -> None:
    tracer = otel.provider.get_tracer("shop")
    headers: dict[str, str] = {}

    @tool
    async def shop_query(sku: str, ctx: ToolContext) -> str:
        """Query the shop."""
        headers.update(ctx.trace_headers())  # for a service the tool calls
        with tracer.start_as_current_span("shop.query"):
            return sku

    @tool
    def shop_sync(sku: str) -> str:
        """Query the shop from a thread."""
        with tracer.start_as_current_span("shop.sync"):
            return sku

    model = ScriptedModel([call("shop_query", sku="X"), call("shop_sync", sku="Y"), FINISH])
    agent = Agent(tools=[shop_query, shop_sync], model=model, store="memory://")
    assert (await agent.run("Query X and Y.")).status is RunStatus.COMPLETED
    tools = {s.name: s for s in otel.finished("execute_tool")}
    inner = only(otel.finished("shop.query"))
    assert parent_id(inner) == ids(tools["execute_tool shop_query"]).span_id
    threaded = only(otel.finished("shop.sync"))  # a sync tool runs in a thread: still a child
    assert parent_id(threaded) == ids(tools["execute_tool shop_sync"]).span_id
    query = ids(tools["execute_tool shop_query"])
    assert headers["traceparent"].startswith(f"00-{query.trace_id:032x}-{query.span_id:016x}-")


# --------------------------------------------------------------------------- across a confirm


def test_a_confirm_in_another_process_is_a_second_advance_linked_to_the_first(
    otel: Otel, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    script = [PLAN, call("cancel_order", order_id="A1"), FINISH]

    async def start() -> str:
        agent = Agent(tools=[cancel_order], model=ScriptedModel(script), store=store)
        paused = await agent.run("Cancel A1.")
        assert paused.status is RunStatus.AWAITING_CONFIRMATION
        await agent.close()
        return paused.run_id

    run_id = asyncio.run(start())
    assert otel.total("agentcore.confirmations.waiting") == 1

    async def confirm_in_a_request() -> None:  # a new Agent, a new loop: another process
        agent = Agent(tools=[cancel_order], model=ScriptedModel(script), store=store)
        tracer = otel.provider.get_tracer("web")
        with tracer.start_as_current_span("POST /runs/{id}/confirm"):
            done = await agent.confirm(run_id, approve=True, by="alice")
        assert done.status is RunStatus.COMPLETED
        await agent.close()

    asyncio.run(confirm_in_a_request())
    first, second = sorted(otel.finished("invoke_agent"), key=lambda s: s.start_time or 0)
    request = only(otel.finished("POST "))
    # each advance is its own span; the second belongs to the request that confirmed
    assert first.parent is None and parent_id(second) == ids(request).span_id
    assert ids(first).trace_id != ids(second).trace_id
    assert second.attributes is not None and first.attributes is not None
    assert first.attributes["agentcore.run.status"] == "awaiting_confirmation"
    assert second.attributes["agentcore.advance.trigger"] == "confirmation"
    assert second.attributes["agentcore.run_id"] == run_id
    # both link to the run's context: computable from the run id in any process
    assert [(ln.context.trace_id, ln.context.span_id) for ln in first.links] == [run_link(run_id)]
    assert [ln.context for ln in second.links] == [ln.context for ln in first.links]
    # the confirmed call ran in the second advance, under its step 2 span
    later = [s for s in otel.finished("agentcore.step") if parent_id(s) == ids(second).span_id]
    assert [s.attributes and s.attributes["agentcore.step"] for s in later] == [2, 3]
    step = later[0]
    assert step.attributes is not None and step.attributes["agentcore.confirmation.approved"]
    assert parent_id(only(otel.finished("execute_tool"))) == ids(step).span_id
    assert otel.total("agentcore.confirmations.waiting") == 0


# --------------------------------------------------------------------------- metrics


@dataclasses.dataclass
class Priced:
    """A scripted model whose calls cost 0.25 USD each."""

    inner: ScriptedModel
    name: str = "acme/model-x"

    async def complete_structured(self, request: CompletionRequest) -> Completion:
        done = await self.inner.complete_structured(request)
        usage = dataclasses.replace(done.usage, cost=0.25)
        return dataclasses.replace(done, usage=usage, model=self.name)


async def test_metrics_count_tokens_cost_actions_invalid_replies_reasks_and_budgets(
    otel: Otel,
) -> None:
    model = Priced(ScriptedModel(["not json", call("lookup", order_id="A1"), FINISH]))
    agent = Agent(tools=[lookup], model=model, store="memory://")
    done = await agent.run("Where is A1?")
    assert done.status is RunStatus.COMPLETED

    attrs = {"gen_ai__provider__name": "acme", "gen_ai__request__model": "model-x"}
    assert otel.total("agentcore.actions.invalid", **attrs) == 1
    assert otel.total("agentcore.reasks", **attrs) == 1  # the call after the invalid reply
    assert otel.total("agentcore.actions", agentcore__action__type="tool") == 1
    assert otel.total("agentcore.actions", agentcore__action__type="finish") == 1
    assert otel.total("agentcore.model.cost", **attrs) == pytest.approx(0.75)
    assert otel.total("gen_ai.client.token.usage", gen_ai__token__type="input") == 150
    usage = done.usage
    assert otel.total("gen_ai.client.token.usage", gen_ai__token__type="output") == (
        usage.output_tokens
    )
    assert sum(p.count for p in otel.points("gen_ai.client.operation.duration")) == 3
    assert sum(p.count for p in otel.points("agentcore.step.duration")) == 2
    assert otel.total("agentcore.budget.exhaustions") == 0

    looping = ScriptedModel(lambda _messages: call("lookup", order_id="A1"))
    agent = Agent(tools=[lookup], model=looping, store="memory://")
    stopped = await agent.run("Loop.", budget=Budget(max_steps=2))
    assert stopped.status is RunStatus.BUDGET_EXHAUSTED
    assert otel.total("agentcore.budget.exhaustions") == 1


async def test_a_failing_model_call_is_an_error_span(otel: Otel) -> None:
    from agentcore.errors import ModelError

    down = ModelError("the provider is down")
    down.retryable = False
    model = ScriptedModel([down])
    agent = Agent(tools=[lookup], model=model, store="memory://")
    assert (await agent.run("Where is A1?")).status is RunStatus.FAILED
    chat = only(otel.finished("chat "))
    assert chat.status.status_code is trace.StatusCode.ERROR
    assert chat.attributes is not None and chat.attributes["error.type"] == "ModelError"


async def test_disabled_telemetry_reports_nothing(otel: Otel) -> None:
    configure_telemetry(enabled=False)
    agent = Agent(tools=[lookup], model=ScriptedModel([FINISH]), store="memory://")
    assert (await agent.run("Hi.")).status is RunStatus.COMPLETED
    assert otel.finished() == [] and otel.points("agentcore.actions") == []


# --------------------------------------------------------------------------- zero cost


def _python(code: str, cwd: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=cwd
    )
    return out.stdout.strip()


def test_import_cli_help_and_an_unconfigured_run_load_no_opentelemetry(tmp_path: Path) -> None:
    code = """
import asyncio, contextlib, io, sys
import agentcore, agentcore.cli
from agentcore import Agent
from agentcore.adapters import ScriptedModel
sys.argv = ["agentcore", "--help"]
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    agentcore.cli.main()
finish = {"type": "finish", "thought": "t", "answer": "a"}
agent = Agent(tools=[], model=ScriptedModel([finish]), store="memory://")
assert asyncio.run(agent.run("x")).status.value == "completed"
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""
    assert _python(code, tmp_path) == "[]"


def test_only_the_otel_module_imports_opentelemetry_at_module_level() -> None:
    for path in sorted((ROOT / "agentcore").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:  # module level only: functions and TYPE_CHECKING are fine
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] == "opentelemetry" for n in names):
                assert path.name == "_otel.py", f"{path.relative_to(ROOT)}:{node.lineno}"


def test_an_application_that_set_the_global_providers_is_traced_unasked(tmp_path: Path) -> None:
    code = """
import asyncio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext
from agentcore import Agent
from agentcore.adapters import ScriptedModel
spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)
finish = {"type": "finish", "thought": "t", "answer": "a"}
agent = Agent(tools=[], model=ScriptedModel([finish]), store="memory://")
asyncio.run(agent.run("x"))
print(sorted(s.name for s in spans.get_finished_spans()))
"""
    assert _python(code, tmp_path) == "['agentcore.step', 'chat scripted', 'invoke_agent']"


async def test_quota_metrics_count_charges_releases_refusals_and_lifted_limits(
    otel: Otel,
) -> None:
    from agentcore import Policy, Quota

    def refunding(amounts: list[float]) -> ScriptedModel:
        def step(messages: Sequence[Any]) -> dict[str, Any]:  # Any: messages, JSON
            seen = sum(m.role == "user" and m.call_id is not None for m in messages)
            if seen < len(amounts):
                return call("refund", order_id=f"O-{seen}", amount=amounts[seen])
            return FINISH

        return ScriptedModel(step)

    @tool(effect="write")
    def refund(order_id: str, amount: float) -> str:
        """Refund an order.

        Args:
            order_id: the order.
            amount: EUR.
        """
        if amount == 13:
            raise RuntimeError("the bank is down")
        return f"refunded {order_id}"

    refunds = Quota("refunds", limit=500, count="sum:amount")
    tokens = Quota("tokens", limit=1_000_000, count="tokens")
    agent = Agent(
        tools=[refund],
        model=refunding([200, 13, 250, 100]),
        store="memory://",
        policy=Policy(plan_before_writes=False),
        quotas=[refunds, tokens],
    )
    done = await agent.run("Refund.", tenant="acme")
    assert done.status is RunStatus.COMPLETED

    def charges(quota: str, outcome: str) -> float:
        return otel.total(
            "agentcore.quota.charges",
            agentcore__quota__name=quota,
            agentcore__quota__outcome=outcome,
        )

    def amount(quota: str, outcome: str) -> float:
        return otel.total(
            "agentcore.quota.amount",
            agentcore__quota__name=quota,
            agentcore__quota__outcome=outcome,
        )

    # 200, 13 (failed: given back) and 250 were charged; 100 would pass 500 and was refused
    assert (charges("refunds", "charged"), amount("refunds", "charged")) == (3, 463)
    assert (charges("refunds", "released"), amount("refunds", "released")) == (1, 13)
    assert charges("refunds", "refused") == 1
    assert otel.total("agentcore.quota.charges", agentcore__decision="deny") == 1
    assert charges("refunds", "lifted") == 0
    # every model request's tokens were charged with what it used
    assert charges("tokens", "charged") == 5
    assert amount("tokens", "charged") == done.usage.input_tokens + done.usage.output_tokens

    confirming = Agent(
        tools=[refund],
        model=refunding([450, 100]),
        store="memory://",
        policy=Policy(plan_before_writes=False),
        quotas=[Quota("refunds", limit=500, count="sum:amount", over="confirm")],
    )
    waiting = await confirming.run("Refund.", tenant="acme")
    assert waiting.status is RunStatus.AWAITING_CONFIRMATION and waiting.pending is not None
    assert otel.total("agentcore.quota.charges", agentcore__decision="needs_confirmation") == 1
    p = waiting.pending
    approved = await confirming.confirm(
        waiting.run_id, approve=True, by="ann", step=p.step, args_hash=p.args_hash
    )
    assert approved.status is RunStatus.COMPLETED
    assert (charges("refunds", "lifted"), amount("refunds", "lifted")) == (1, 100)
    assert (charges("refunds", "charged"), amount("refunds", "charged")) == (4, 913)
