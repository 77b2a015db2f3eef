"""OpenTelemetry spans and metrics of a run (extra ``[otel]``): the observer behind
:func:`agentcore.configure_telemetry`. Imported only when telemetry is in use.

Spans, following the GenAI semantic conventions where they apply:

- ``invoke_agent [name]``: one advance of a run (one shift under its lease: ``run``, a
  ``confirm`` days later, a worker's ``advance``). A child of the caller's current span
  (a web request, a queue task), so a confirm made in another process shows in that
  request's trace; linked to the run's own span context, which is derived from the run id
  (:func:`run_span_context`), so every advance of a run, in any process, carries a link to
  the same context, and ``agentcore.run_id`` / ``gen_ai.conversation.id`` name the run.
- ``agentcore.step``: the part of one step done in this advance.
- ``chat <model>``: one model call (one route entry, its retries inside).
- ``execute_tool <tool>``: one tool call. The tool runs with this span current, so its own
  spans are its children (a sync tool's thread too), and ``ToolContext.trace_headers()``
  carries it to the services it calls.

Metrics (counted from the recorded events, so a resumed or recovered run counts once):
``gen_ai.client.token.usage``, ``gen_ai.client.operation.duration``, ``agentcore.step.duration``,
``agentcore.model.cost``, ``agentcore.actions``, ``agentcore.actions.invalid``,
``agentcore.reasks``, ``agentcore.confirmations.waiting``, ``agentcore.budget.exhaustions``,
``agentcore.quota.charges`` and ``agentcore.quota.amount`` (by quota and outcome: ``charged``,
``lifted`` by a person's approval, ``released`` when given back, ``refused`` over the limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Awaitable, Generator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

from agentcore._status import RunStatus
from agentcore.events import (
    ActionProposed,
    Charge,
    Confirmation,
    Decision,
    Event,
    ModelCalled,
    QuotaReleased,
    QuotaReserved,
    RunFinished,
)

from ._observer import LogObserver, Observer

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from agentcore._state import RunState
    from agentcore.adapters import Completion
    from agentcore.tools import ToolOutcome

__all__ = ["OtelObserver", "configured_providers", "run_span_context"]

_SCOPE = "agentcore"

# The bucket boundaries the GenAI semantic conventions give for their two client metrics
# ("This metric SHOULD be specified with ExplicitBucketBoundaries of [...]": Semantic
# conventions for generative AI metrics, https://opentelemetry.io/docs/specs/semconv/gen-ai/
# gen-ai-metrics/): powers of 4 from 1 token to 64 Mi, and doublings from 10 ms to 81.92 s.
# The SDK's default boundaries (0, 5, 10, 25, ..., 10,000) put every model call under 5 s
# in one bucket and every prompt over 10,000 tokens in another. Given as advice: a View the
# application registers for these instruments still decides.
_TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864
)  # fmt: skip
_DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92
)  # fmt: skip


def configured_providers(
    tracer_provider: TracerProvider | None, meter_provider: MeterProvider | None
) -> tuple[TracerProvider | None, MeterProvider | None] | None:
    """The explicit providers, else the global ones the application set; ``None`` when
    neither spans nor metrics would go anywhere."""
    if tracer_provider is None:
        found = trace.get_tracer_provider()
        if not isinstance(found, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            tracer_provider = found
    if meter_provider is None:
        found_m = metrics.get_meter_provider()
        # the API's placeholder until a provider is set is private (_ProxyMeterProvider)
        if not isinstance(found_m, metrics.NoOpMeterProvider) and not type(
            found_m
        ).__name__.startswith("_Proxy"):
            meter_provider = found_m
    if tracer_provider is None and meter_provider is None:
        return None
    return tracer_provider, meter_provider


def run_span_context(run_id: str) -> SpanContext:
    """The span context every advance of ``run_id`` links to: trace id and span id are the
    first 16 and next 8 bytes of ``sha256("agentcore.run:" + run_id)``, so any process can
    compute it from the run id alone, and no event has to carry it."""
    digest = hashlib.sha256(f"agentcore.run:{run_id}".encode()).digest()
    return SpanContext(
        trace_id=int.from_bytes(digest[:16], "big") or 1,
        span_id=int.from_bytes(digest[16:24], "big") or 1,
        is_remote=True,
    )


@dataclass(frozen=True, slots=True)
class _Instruments:
    tracer: Tracer
    tokens: metrics.Histogram
    model_duration: metrics.Histogram
    step_duration: metrics.Histogram
    cost: metrics.Counter
    actions: metrics.Counter
    invalid: metrics.Counter
    reasks: metrics.Counter
    waiting: metrics.UpDownCounter
    exhausted: metrics.Counter
    quota_charges: metrics.Counter
    quota_amount: metrics.Counter


_CACHE: dict[tuple[object, object], _Instruments] = {}


def _instruments(tp: TracerProvider | None, mp: MeterProvider | None) -> _Instruments:
    """The tracer and instruments for a pair of providers, created once per pair."""
    found = _CACHE.get((tp, mp))
    if found is not None:
        return found
    from agentcore._version import __version__

    tracer = (tp or trace.get_tracer_provider()).get_tracer(_SCOPE, __version__)
    meter = (mp or metrics.get_meter_provider()).get_meter(_SCOPE, __version__)
    made = _Instruments(
        tracer=tracer,
        tokens=meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens per model call.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        ),
        model_duration=meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Model call duration.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        ),
        step_duration=meter.create_histogram(
            "agentcore.step.duration",
            unit="s",
            description="Time spent advancing a step (a wait for a person is not included).",
        ),
        cost=meter.create_counter(
            "agentcore.model.cost", unit="USD", description="Model cost, where known."
        ),
        actions=meter.create_counter(
            "agentcore.actions", unit="{action}", description="Valid actions by type."
        ),
        invalid=meter.create_counter(
            "agentcore.actions.invalid",
            unit="{reply}",
            description="Model replies that were not a valid action.",
        ),
        reasks=meter.create_counter(
            "agentcore.reasks",
            unit="{call}",
            description="Model calls asking again after an invalid reply.",
        ),
        waiting=meter.create_up_down_counter(
            "agentcore.confirmations.waiting",
            unit="{run}",
            description="Runs waiting for a person to confirm a call (sum over processes).",
        ),
        exhausted=meter.create_counter(
            "agentcore.budget.exhaustions", unit="{run}", description="Runs stopped by a budget."
        ),
        quota_charges=meter.create_counter(
            "agentcore.quota.charges",
            unit="{charge}",
            description="Quota charges by quota and outcome: charged, lifted (an approval let "
            "the call pass the limit), released (given back), refused (over the limit).",
        ),
        quota_amount=meter.create_counter(
            "agentcore.quota.amount",
            unit="1",
            description="What quota charges counted (calls, an argument's sum, tokens or "
            "cost), by quota and outcome; a release counts what was given back.",
        ),
    )
    _CACHE[(tp, mp)] = made
    return made


def _model_attributes(route_entry: str) -> dict[str, str]:
    provider, _, model = route_entry.partition("/")
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model or route_entry,
    }


class OtelObserver(Observer):
    """Spans and metrics of one advance of a run (see the module docstring)."""

    __slots__ = (
        "_advance",
        "_ins",
        "_log",
        "_reserved",
        "_step",
        "_step_action",
        "_step_span",
        "_step_started",
        "_steps",
        "_waiting",
        "state",
    )

    def __init__(
        self,
        state: RunState,
        providers: tuple[TracerProvider | None, MeterProvider | None],
        log: LogObserver | None,
    ) -> None:
        self.state = state
        self._ins = _instruments(*providers)
        self._log = log
        self._advance: Span | None = None
        self._step = 0
        self._step_span: Span | None = None
        self._step_started = 0.0
        self._step_action = "none"
        self._steps = 0
        self._waiting = state.status is RunStatus.AWAITING_CONFIRMATION
        # What the model request in flight reserved, by counter: its model_called charges
        # what it used less this (counted here as what it used).
        self._reserved: dict[str, float] = {}

    def _common(self) -> dict[str, str | int]:
        return {"agentcore.run_id": self.state.run_id}

    def _contract(self) -> str:
        return self.state.contract.get("version", "")

    # -- the advance and its steps ------------------------------------------------------------

    @contextlib.contextmanager
    def _advancing(self, first: Iterable[Event], agent: str | None) -> Generator[None]:
        st = self.state
        # the command's first event; a new run has only run_started; else a worker's shift
        trigger = next((ev.type for ev in first), "run_started" if st.next_seq == 1 else "advance")
        attributes: dict[str, str | int] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": st.run_id,
            "agentcore.run_id": st.run_id,
            "agentcore.advance.trigger": trigger,
            "agentcore.contract.version": self._contract(),
        }
        if agent:
            attributes["gen_ai.agent.name"] = agent
        span = self._ins.tracer.start_span(
            f"invoke_agent {agent}" if agent else "invoke_agent",
            attributes=attributes,
            links=[Link(run_span_context(st.run_id), {"agentcore.link": "run"})],
        )
        self._advance = span
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield
        except asyncio.CancelledError:
            # a shutdown or a caller's timeout: the run stays resumable, nothing failed
            span.set_attribute("agentcore.advance.cancelled", True)
            raise
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            self._end_step()
            span.set_attribute("agentcore.run.status", st.status.value)
            span.set_attribute("agentcore.advance.steps", self._steps)
            otel_context.detach(token)
            span.end()
            self._advance = None

    def advance(
        self, first: Iterable[Event], agent: str | None
    ) -> contextlib.AbstractContextManager[None]:
        return self._advancing(first, agent)

    def step(self, step: int) -> None:
        if step == self._step or self._advance is None:
            return
        self._end_step()
        self._step, self._steps = step, self._steps + 1
        self._step_started = time.perf_counter()
        self._step_action = "none"
        self._step_span = self._ins.tracer.start_span(
            "agentcore.step",
            context=trace.set_span_in_context(self._advance),
            attributes={**self._common(), "agentcore.step": step},
        )

    def _end_step(self) -> None:
        if not self._step:
            return
        self._ins.step_duration.record(
            time.perf_counter() - self._step_started,
            {
                "agentcore.action.type": self._step_action,
                "agentcore.contract.version": self._contract(),
            },
        )
        if self._step_span is not None:
            self._step_span.end()
        self._step, self._step_span = 0, None

    # -- model and tool calls -----------------------------------------------------------------

    def model_call(
        self, model: str, step: int, call: Awaitable[Completion]
    ) -> Awaitable[Completion]:
        return self._model_call(model, step, call)

    async def _model_call(self, model: str, step: int, call: Awaitable[Completion]) -> Completion:
        self.step(step)
        attributes: dict[str, str | int | bool] = {
            **_model_attributes(model),
            **self._common(),
            "agentcore.step": step,
            "agentcore.reask": self.state.reasks > 0,
        }
        span = self._ins.tracer.start_span(
            f"chat {attributes['gen_ai.request.model']}",
            context=self._parent(),
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            completion = await call
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            for name in ("input_tokens", "output_tokens"):
                tokens = getattr(exc, name, None)
                if isinstance(tokens, int) and tokens:
                    span.set_attribute(f"gen_ai.usage.{name}", tokens)
            span.end()
            raise
        finally:
            otel_context.detach(token)
        c = completion
        span.set_attributes(
            {
                "gen_ai.usage.input_tokens": c.usage.input_tokens,
                "gen_ai.usage.output_tokens": c.usage.output_tokens,
                "agentcore.model.attempts": c.attempts,
                "agentcore.model.outcome": "ok" if c.action is not None else "invalid",
                "agentcore.model.mode": c.mode,
            }
        )
        if c.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [c.finish_reason])
        if c.response_id:
            span.set_attribute("gen_ai.response.id", c.response_id)
        if c.usage.cached_input_tokens:
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", c.usage.cached_input_tokens)
        if c.usage.cost is not None:
            span.set_attribute("agentcore.model.cost", c.usage.cost)
        if c.action is not None:
            span.set_attribute("agentcore.action.type", c.action.type)
        elif c.error is not None:
            span.set_attribute("agentcore.model.error", str(c.error)[:1000])
        span.end()
        return completion

    def tool_call(
        self, call_id: str, step: int, tool: str, call: Awaitable[ToolOutcome]
    ) -> Awaitable[ToolOutcome]:
        return self._tool_call(call_id, step, tool, call)

    async def _tool_call(
        self, call_id: str, step: int, tool: str, call: Awaitable[ToolOutcome]
    ) -> ToolOutcome:
        self.step(step)
        attributes: dict[str, str | int] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            **self._common(),
            "agentcore.step": step,
        }
        effect = self.state.tools.get(tool, {}).get("effect")
        if isinstance(effect, str):
            attributes["agentcore.tool.effect"] = effect
        span = self._ins.tracer.start_span(
            f"execute_tool {tool}", context=self._parent(), attributes=attributes
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            outcome = await call
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            span.end()
            raise
        finally:
            otel_context.detach(token)
        span.set_attribute("agentcore.tool.ok", outcome.ok)
        if not outcome.ok:
            kind = "tool_error"
            if outcome.timed_out or outcome.lost:
                kind = "timeout" if outcome.timed_out else "outcome_unknown"
            span.set_attribute("error.type", kind)
            span.set_status(Status(StatusCode.ERROR, (outcome.error or kind)[:1000]))
        span.end()
        return outcome

    def _charged(self, charges: list[Charge], released: bool) -> None:
        """Count an event's quota charges (recorded, so the store applied them)."""
        for c in charges:
            outcome = "released" if released else "lifted" if c.lifted_by else "charged"
            attributes = {"agentcore.quota.name": c.quota, "agentcore.quota.outcome": outcome}
            self._ins.quota_charges.add(1, attributes)
            self._ins.quota_amount.add(abs(c.amount), attributes)

    def _parent(self) -> otel_context.Context | None:
        span = self._step_span or self._advance
        return None if span is None else trace.set_span_in_context(span)

    # -- events: metrics, and what spans learn from them -----------------------------------------

    def event(self, event: Event) -> None:
        if self._log is not None:
            self._log.event(event)
        ins, st = self._ins, self.state
        step = getattr(event, "step", None)
        if isinstance(step, int):
            self.step(step)
        match event:
            case ModelCalled():
                attributes = _model_attributes(event.model)
                attributes["agentcore.model.role"] = event.role
                if event.outcome == "error":
                    attributes["error.type"] = "model_error"
                if event.latency_ms:
                    ins.model_duration.record(event.latency_ms / 1000, attributes)
                for kind, tokens in (
                    ("input", event.input_tokens),
                    ("output", event.output_tokens),
                ):
                    if tokens:
                        ins.tokens.record(tokens, {**attributes, "gen_ai.token.type": kind})
                if event.cost:
                    ins.cost.add(event.cost, attributes)
                if event.role not in ("extract", "child"):
                    invalid = event.outcome == "invalid"
                    counted = {**attributes, "agentcore.contract.version": self._contract()}
                    if invalid:
                        ins.invalid.add(1, counted)
                    if st.reasks - invalid > 0:  # an invalid reply came before it in this step
                        ins.reasks.add(1, counted)
            case ActionProposed():
                self._step_action = event.action.type
                ins.actions.add(
                    1,
                    {
                        "agentcore.action.type": event.action.type,
                        "agentcore.contract.version": self._contract(),
                    },
                )
                if self._step_span is not None:
                    self._step_span.set_attribute("agentcore.action.type", event.action.type)
            case Decision():
                if self._step_span is not None:
                    self._step_span.set_attribute("agentcore.decision", event.verdict)
                for name in event.over_quota:
                    ins.quota_charges.add(
                        1,
                        {
                            "agentcore.quota.name": name,
                            "agentcore.quota.outcome": "refused",
                            "agentcore.decision": event.verdict,
                        },
                    )
            case Confirmation():
                if self._step_span is not None:
                    self._step_span.set_attribute("agentcore.confirmation.approved", event.approved)
            case RunFinished():
                if event.status == RunStatus.BUDGET_EXHAUSTED.value:
                    ins.exhausted.add(1, {"agentcore.contract.version": self._contract()})
            case _:
                pass
        if isinstance(event, QuotaReserved):  # counted when its request's use is known
            self._reserved.update((c.key, c.amount) for c in event.charges)
        elif isinstance(event, ModelCalled) and (event.charges or self._reserved):
            used = [
                c.model_copy(update={"amount": c.amount + self._reserved.pop(c.key, 0.0)})
                for c in event.charges
            ]
            self._reserved.clear()
            self._charged([c for c in used if c.amount], released=False)
        elif isinstance(event, Decision | Confirmation | QuotaReleased) and event.charges:
            self._charged(event.charges, isinstance(event, QuotaReleased))
        waiting = st.status is RunStatus.AWAITING_CONFIRMATION
        if waiting != self._waiting:
            self._waiting = waiting
            ins.waiting.add(1 if waiting else -1)
