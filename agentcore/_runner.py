"""The loop: build context, ask for an action, decide, act, record. Repeat.

A :class:`Driver` advances one run from whatever its transcript says. Starting, resuming,
confirming and recovering from a crash are the same code path: the state is a fold of the
events, and :meth:`Driver.advance` looks at the state to see what comes next.

Durability: events are batched and written at durability points. ``tool_started`` (with
everything before it) is durable before a tool runs; a non-idempotent tool's
``tool_finished`` is durable before anything else happens; everything is durable when the
driver returns. An idempotent tool's result may wait for the next batch: if the process
dies first, the tool runs again with the same idempotency key.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentcore.adapters import Completion, CompletionRequest, Message, ModelAdapter
from agentcore.contracts import (
    ActionSchema,
    ContractDocument,
    FinishAction,
    PlanAction,
    ToolAction,
    ToolSpec,
    check_text,
    clean_text,
    compile_action_schema,
)
from agentcore.contracts._schema import parse_loose_tool_action
from agentcore.contracts.errors import (
    ConfigurationError,
    LeaseLostError,
    LimitExceededError,
    ModelError,
    StoreError,
    UnknownToolError,
)

from ._dispatch import changed_since_pinned, decide
from ._extract import ExtractionLog, extraction_log
from ._faults import crash_point
from ._observability import get_logger, observer
from ._ownership import Ownership
from ._render import MessageView, Renderer
from ._snapshot import SNAPSHOT_EVERY, dump_state, snapshot_tag
from ._state import FINAL_STATUSES, OpenCall, RunState, RunStatus
from .events import (
    ActionProposed,
    ContextAdded,
    Decision,
    Event,
    ModelCalled,
    RunFinished,
    ToolFinished,
    ToolStarted,
)
from .secrets import Redactor, SecretResolver, resolve_secret
from .stores import CallGuardStore, Snapshot, SnapshotStore, TranscriptStore
from .streaming import SINK, PartialTracker
from .tools import Tool, ToolContext, recordable_result

__all__ = ["PAUSE", "ContextProvider", "ContextRequest", "Driver", "RunSetup", "Turn"]

_REPLY_CAP = 4_000  # characters of an invalid reply kept for the re-ask

LOST_CALL_WAIT_S: Final = 300.0
"""How long after a lost call started a worker waits, by default, while the process that
ran it may still be running it (it holds the call's guard) before asking a person."""

GUARD_POLL_S: Final = 0.25
"""How often a waiting worker looks at a lost call's guard."""

PAUSE: ContextVar[asyncio.Event | None] = ContextVar("agentcore_pause", default=None)
"""Set by a caller (the CLI, on Ctrl-C) around runs it starts: once the event is set, a run
stops at its next safe point (a tool in progress has finished and is recorded; a proposed
tool has not started) and stays ``running``, resumable from its transcript."""


@dataclass(frozen=True, slots=True)
class ContextRequest:
    """What a context provider is told about the step it contributes to."""

    run_id: str
    task: str
    step: int
    scope: tuple[str, ...]


ContextProvider = Callable[[ContextRequest], "str | Awaitable[str | None] | None"]
"""A callable (sync or async) returning extra context for a step, or ``None`` for nothing.
What it returns is recorded, so replays do not call it again."""


@dataclass(frozen=True, slots=True)
class RunSetup:
    """What a driver needs from its agent: tools, contract, route, providers, store."""

    tools: Mapping[str, Tool]
    contract: ContractDocument
    instructions: str | None
    route: Sequence[ModelAdapter]
    plan_route: Sequence[ModelAdapter]
    context_providers: Sequence[ContextProvider]
    store: TranscriptStore
    schema_cache: dict[tuple[object, ...], ActionSchema]
    system_cache: dict[tuple[str, ...], str]
    secrets: SecretResolver | None = None
    """Fills tool parameters marked :class:`~agentcore.secrets.Secret`."""
    redactor: Redactor | None = None
    """Values no event may hold (``Agent(redact=..., redact_env=...)``)."""
    snapshot_every: int = SNAPSHOT_EVERY
    """Events between two snapshots of a run (0: none); see ``_snapshot``."""
    lost_call_wait_s: float = LOST_CALL_WAIT_S
    """How long after a lost call started a worker waits for the process that may still
    be running it (see ``Driver._settle_lost_call``)."""


@dataclass(slots=True)
class History:
    """The events of a run a driver holds: the whole transcript, or (after a snapshot)
    the events from seq ``base`` on, with a renderer holding the messages of those
    before."""

    events: list[Event]
    base: int = 0
    renderer: Renderer | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """How long one worker advances a run before handing it back (a queue's bounded
    slice): at most ``max_steps`` new steps and ``max_seconds`` seconds, checked between
    steps, so a turn ends with the current step's tool finished and recorded."""

    max_steps: int | None = None
    max_seconds: float | None = None

    def over(self, steps: int, started: float) -> bool:
        """Whether a turn that has taken ``steps`` steps since ``started`` (monotonic) is
        over."""
        if self.max_steps is not None and steps >= self.max_steps:
            return True
        return self.max_seconds is not None and time.monotonic() - started >= self.max_seconds


class Driver:
    """Advances one run. Create one per ``run``/``resume``/``confirm`` call."""

    def __init__(
        self,
        setup: RunSetup,
        state: RunState,
        history: History,
        own: Ownership | None = None,
    ) -> None:
        self.setup = setup
        self.own = own
        self.state = state
        self.events = history.events
        self.base = history.base
        """The seq of ``events[0]``: the events before it are in the renderer's messages."""
        self.pending: list[Event] = []
        self.renderer = history.renderer or Renderer(state.policy.max_observation_chars)
        store = setup.store
        self.snapshots = store if own is not None and isinstance(store, SnapshotStore) else None
        """Where snapshots go: the store, when it keeps them and this driver holds a lease."""
        self.log = get_logger().bind(run_id=state.run_id)
        self.obs = observer(state, self.log)
        """Logs, spans and metrics: told about the advance, each step, model call, tool call
        and recorded event (a shared no-op when nothing listens)."""
        self.sink = SINK.get()
        self.redactor = Redactor() if setup.redactor is None else setup.redactor.copy()
        """The agent's listed values, plus the secrets resolved in this advance."""

    # -- recording ------------------------------------------------------------------------

    def record(self, event: Event) -> None:
        """Fold ``event`` (redacted) into the state and queue it for the next flush."""
        if self.redactor:
            event = self.redactor.event(event)
        self.state.apply(event)
        self.events.append(event)
        self.pending.append(event)
        self.obs.event(event)
        if self.sink is not None:
            self.sink(event)

    def _seq(self) -> dict[str, Any]:  # Any: common event fields
        return {"run_id": self.state.run_id, "seq": self.state.next_seq, "at": time.time()}

    async def flush(self) -> None:
        """Write queued events in one conditional append."""
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        lease = None if self.own is None else self.own.lease
        await self.setup.store.append(self.state.run_id, batch[0].seq, batch, lease=lease)
        if (
            self.snapshots is not None
            and self.state.next_seq - self.renderer.chunked >= self.setup.snapshot_every > 0
        ):
            await self._snapshot(self.snapshots)

    async def _snapshot(self, store: SnapshotStore) -> None:
        """Keep a snapshot of the run as just written (``_snapshot``); then let go of the
        events it covers: a long run's memory grows with its messages, not its events.
        A snapshot that cannot be saved is logged and skipped: it is only a cache."""
        assert self.own is not None
        st = self.state
        start = self.renderer.chunked
        history = self.renderer.chunk(self.events, st.next_seq, self.base)
        snap = Snapshot(st.next_seq - 1, start, snapshot_tag(), dump_state(st), history)
        try:
            await store.save_snapshot(st.run_id, snap, lease=self.own.lease)
        except (StoreError, LeaseLostError) as exc:
            self.renderer.unchunk()
            self.log.warning("snapshot_not_saved", seq=snap.seq, error=str(exc))
            return
        del self.events[: st.next_seq - self.base]
        self.base = st.next_seq

    def finish(
        self, status: RunStatus, *, answer: str | None = None, reason: str | None = None
    ) -> None:
        """Record that the run stopped."""
        self.record(RunFinished(**self._seq(), status=status.value, answer=answer, reason=reason))

    # -- the loop ---------------------------------------------------------------------------

    async def advance(self, turn: Turn | None = None) -> None:
        """Advance until the run completes, stops or waits for a person, or until ``turn``
        is over (then the run stays ``running`` for the next turn); then flush.

        A cancel request another process recorded (``Agent.cancel`` while this one held
        the run) is honoured at safe points: before asking the model, before starting a
        tool, and when the run stops or pauses. A tool already running is never abandoned:
        its outcome is recorded first, then the cancellation.
        """
        st = self.state
        first_step, started = st.steps, time.monotonic()
        try:
            while st.status is RunStatus.RUNNING:
                if (pause := PAUSE.get()) is not None and pause.is_set():
                    break  # a safe point: no tool is running; resume continues from here
                call = st.call
                if call is not None and not call.settled:
                    await self._continue(call)
                elif await self._cancel_requested():
                    pass
                elif stop := self._stop_reason():
                    status, reason = stop
                    self.finish(status, reason=reason)
                elif turn is not None and turn.over(st.steps - first_step, started):
                    break  # between steps: the next turn starts with a new model call
                else:
                    await self._ask()
            if st.status not in FINAL_STATUSES:
                await self._cancel_requested()  # a request that came while it was pausing
        except asyncio.CancelledError:
            # Task cancellation (a shutdown, a caller's timeout) is not a decision about the
            # run: keep what was recorded and leave it resumable. Agent.cancel() ends a run.
            await asyncio.shield(self.flush())
            raise
        await self.flush()

    async def _cancel_requested(self) -> bool:
        """At a safe point: cancel the run if someone asked for it (see :meth:`cancel`)."""
        request = await self.setup.store.cancel_request(self.state.run_id)
        if request is None:
            return False
        self.cancel(request.by, request.reason)
        return True

    def cancel(self, by: str, reason: str | None) -> None:
        """Record that ``by`` cancelled the run. A call that started and has no recorded
        outcome (its process died, or it was lost to a timeout) is never dropped silently:
        a ``tool_finished`` first says its outcome is unknown, with its idempotency key."""
        st = self.state
        why = f"cancelled by {by}" + (f": {reason}" if reason else "")
        call = st.call
        if (
            call is not None
            and call.started is not None
            and call.finished is None
            and isinstance(call.action, ToolAction)
        ):
            key = call.started.idempotency_key
            self.record(
                ToolFinished(
                    **self._seq(),
                    step=call.step,
                    call_id=call.call_id,
                    tool=call.action.tool,
                    ok=False,
                    error=(
                        f"outcome unknown: the run was cancelled by {by} after this call "
                        "started and before its outcome was recorded; it may or may not have "
                        f"happened (idempotency key {key})"
                    ),
                )
            )
            why += (
                f"; the call {call.action.tool}({_short(call.run_args())}) at step {call.step} "
                f"had started and its outcome is unknown (idempotency key {key})"
            )
        self.finish(RunStatus.CANCELLED, reason=why)

    def _stop_reason(self) -> tuple[RunStatus, str] | None:
        st, budget = self.state, self.state.budget
        call = st.call
        if st.failures and call is not None and isinstance(call.action, ToolAction):
            key = st.failure_key(call)
            if st.failures[key] >= st.policy.max_repeated_failures:
                return (
                    RunStatus.FAILED,
                    f"the same call {call.action.tool}({_short(call.run_args())}) failed or was "
                    f"refused {st.failures[key]} times; stopping instead of repeating it",
                )
        why = budget.exhausted(st, time.time())
        return None if why is None else (RunStatus.BUDGET_EXHAUSTED, why)

    # -- asking the model -------------------------------------------------------------------

    def _schema(self) -> ActionSchema:
        st, budget = self.state, self.state.budget
        finish_only = budget.finish_only(st)
        names = tuple(n for n in self._offered() if budget.refuses(n, st) is None)
        tools = self.setup.tools
        key = (
            names,
            tuple(tools[n].spec.manifest_hash for n in names),  # a relisted remote tool
            finish_only,
            st.policy.schema_form,
            st.policy.max_reply_bytes,
        )
        schema = self.setup.schema_cache.get(key)
        if schema is None:
            schema = compile_action_schema(
                [self.setup.tools[n].spec for n in names],
                finish_only=finish_only,
                form=st.policy.schema_form,
                max_reply_bytes=st.policy.max_reply_bytes,
                thought_first=self.setup.contract.thought_first,  # the agent's one contract
            )
            self.setup.schema_cache[key] = schema
        return schema

    def _offered(self) -> tuple[str, ...]:
        """The run's tools the model is shown: in scope, known to this agent, and as the
        run pinned them. A tool whose definition changed since (a remote tool relisted
        differently) is not shown, neither its new description nor its new schema: a
        model that calls it anyway is refused by the dispatcher, naming the change."""
        st, tools = self.state, self.setup.tools
        return tuple(
            n for n in st.scope if n in tools and changed_since_pinned(st, tools[n]) is None
        )

    def _system(self) -> str:
        offered = self._offered()
        key = tuple(f"{n}:{self.setup.tools[n].spec.manifest_hash}" for n in offered)
        text = self.setup.system_cache.get(key)
        if text is None:
            specs: list[ToolSpec] = [self.setup.tools[n].spec for n in offered]
            text = self.setup.contract.render_system(specs)
            if self.setup.instructions:
                text = f"{text}\n\nInstructions from the operator:\n{self.setup.instructions}"
            self.setup.system_cache[key] = text
        return self.redactor.text(text) if self.redactor else text  # instructions may quote one

    def _status_note(self, schema: ActionSchema) -> Message:
        return Message("user", self.state.budget.note(self.state, finish_only=schema.finish_only))

    async def _gather_context(self, step: int) -> None:
        st = self.state
        for provider in self.setup.context_providers:
            value = provider(ContextRequest(st.run_id, st.task, step, st.scope))
            if inspect.isawaitable(value):
                value = await value
            if value:
                source = getattr(provider, "__name__", type(provider).__name__)
                if not isinstance(value, str):  # pyright: ignore[reportUnnecessaryIsInstance]  # user code
                    raise ConfigurationError(
                        f"Context provider {source!r} returned {type(value).__name__}; "
                        "return a str, or None for nothing."
                    )
                check_text(value, f"output of context provider {source!r}")
                self.record(ContextAdded(**self._seq(), step=step, source=source, content=value))

    async def _ask(self) -> None:
        st = self.state
        step = st.steps + 1
        self.obs.step(step)
        if st.reasks == 0 and self.setup.context_providers and not self._context_recorded(step):
            await self._gather_context(step)
        while True:
            schema = self._schema()
            request = CompletionRequest(
                schema=schema,
                system=self._system(),
                messages=MessageView(
                    self.renderer,
                    self.events,
                    st.next_seq,
                    self._status_note(schema),
                    self.base,
                ),
                run_id=st.run_id,
                step=step,
                deadline=st.budget.deadline,
                prior_calls=dict(st.calls_by_model),
                on_partial=PartialTracker(self.sink, step) if self.sink is not None else None,
            )
            if any(isinstance(ev, ModelCalled) for ev in self.pending):
                # Earlier replies' tokens are not recomputable: make them durable before
                # spending more. (A pending idempotent tool result is: it may wait.)
                await self.flush()
            completion = await self._complete(request)
            if completion is None:
                return
            crash_point("after_model_response")
            if completion.action is not None:
                self._model_called(step, completion, "ok")
                self.record(
                    ActionProposed(
                        **self._seq(), step=step, call_id=f"c{step}", action=completion.action
                    )
                )
                return
            error = completion.error
            loose = (
                parse_loose_tool_action(completion.text)
                if isinstance(error, UnknownToolError)
                else None
            )
            if (
                loose is not None
                and loose.tool in self.setup.tools
                and decide(st, loose, self.setup.tools).verdict == "deny"
            ):
                # A real tool the schema does not offer at this step (out of scope or over its
                # budget): a decision, not a malformed reply. The dispatcher refuses it.
                self._model_called(step, completion, "ok")
                self.record(
                    ActionProposed(**self._seq(), step=step, call_id=f"c{step}", action=loose)
                )
                return
            self._model_called(step, completion, "invalid")
            if st.reasks > st.policy.max_reasks:
                if schema.finish_only:
                    # The budget forced a finish-only step and the model would not finish:
                    # the budget, not the model, ended the run; a larger one can continue it.
                    self.finish(
                        RunStatus.BUDGET_EXHAUSTED,
                        reason=f"budget nearly used up: the last step allows only finish and the "
                        f"model did not finish in {st.reasks} replies (last error: {error})",
                    )
                    return
                self.finish(
                    RunStatus.FAILED,
                    reason=f"the model gave no valid action in {st.reasks} replies; "
                    f"last error: {error}",
                )
                return
            if stop := self._stop_reason():
                self.finish(stop[0], reason=stop[1])
                return

    def _context_recorded(self, step: int) -> bool:
        return self.state.context_step == step

    def _model_called(self, step: int, c: Completion, outcome: str) -> None:
        invalid = outcome == "invalid"
        self.record(
            ModelCalled(
                **self._seq(),
                step=step,
                model=c.model,
                outcome="invalid" if invalid else "ok",
                role=self._role(),
                attempts=c.attempts,
                input_tokens=c.usage.input_tokens,
                output_tokens=c.usage.output_tokens,
                cached_input_tokens=c.usage.cached_input_tokens,
                cost=c.usage.cost,
                latency_ms=round(c.latency_ms, 3),
                finish_reason=c.finish_reason,
                response_id=c.response_id,
                reply=clean_text(c.text, _REPLY_CAP) if invalid else None,
                dropped_calls=[clean_text(d, _REPLY_CAP) for d in c.dropped_calls],
                mode=c.mode,
                error=clean_text(str(c.error), _REPLY_CAP) if invalid and c.error else None,
            )
        )

    def _role(self) -> Literal["plan", "act"]:
        return "plan" if self.setup.plan_route and not self.state.plan_approved else "act"

    async def _complete(self, request: CompletionRequest) -> Completion | None:
        """Ask each model of the route in turn until one answers."""
        errors: list[str] = []
        route = self.setup.plan_route if self._role() == "plan" else self.setup.route
        for adapter in route:
            name = getattr(adapter, "name", type(adapter).__name__)
            try:
                return await self.obs.model_call(
                    name, request.step, adapter.complete_structured(request)
                )
            except ModelError as exc:
                failure, tokens, retryable = (
                    exc,
                    (exc.input_tokens, exc.output_tokens),
                    exc.retryable,
                )
            except Exception as exc:  # an adapter bug must not lose the run: record it
                failure, tokens, retryable = exc, (0, 0), True
            message = clean_text(f"{type(failure).__name__}: {failure}", _REPLY_CAP)
            errors.append(f"{name}: {message}")
            self.record(
                ModelCalled(
                    **self._seq(),
                    step=request.step,
                    model=name,
                    outcome="error",
                    role=self._role(),
                    attempts=getattr(failure, "attempts", 1),
                    input_tokens=tokens[0],
                    output_tokens=tokens[1],
                    error=message,
                )
            )
            if not retryable:
                break
        self.finish(RunStatus.FAILED, reason="no model in the route answered: " + "; ".join(errors))
        return None

    # -- deciding and acting ----------------------------------------------------------------

    async def _continue(self, call: OpenCall) -> None:
        st = self.state
        if call.decision is None:
            ruling = decide(st, call.action, self.setup.tools)
            self.record(
                Decision(
                    **self._seq(),
                    step=call.step,
                    call_id=call.call_id,
                    verdict=ruling.verdict,
                    reason=ruling.reason,
                )
            )
            if ruling.verdict == "needs_confirmation":
                self.finish(RunStatus.AWAITING_CONFIRMATION, reason=ruling.reason)
            return
        if call.decision.verdict == "needs_confirmation" and call.confirmation is None:
            self.finish(RunStatus.AWAITING_CONFIRMATION, reason=call.decision.reason)
            return
        match call.action:
            case FinishAction(answer=answer):
                self.finish(RunStatus.COMPLETED, answer=answer)
            case PlanAction():  # settled once decided or confirmed; never reached
                return
            case ToolAction():
                if call.started is not None:
                    await self._recover(call)
                elif not await self._cancel_requested():
                    await self._run_tool(call)

    async def _run_tool(self, call: OpenCall) -> None:
        assert isinstance(call.action, ToolAction)
        tool = self.setup.tools[call.action.tool]
        key = f"{self.state.run_id}:{call.step}"
        guards = self._guards(tool)
        if guards is None:
            await self._start_tool(call, tool, key, guarded=False)
            return
        # A call that reconcile may settle runs under its guard, taken before its intent
        # is written and let go when it returns, so whoever settles it later can tell
        # whether it may still be running.
        async with guards.guard_call(self.state.run_id, key) as held:
            if held:
                await self._start_tool(call, tool, key, guarded=True)
                return
        # Another process holds it: a worker that lost the run is running this call, or
        # is about to find out that it may not.
        await self._settle_lost_call(call, tool, key, timed_out=False, since=time.time())

    def _guards(self, tool: Tool) -> CallGuardStore | None:
        """Where a call of ``tool`` takes its guard: only a non-idempotent tool with
        ``reconcile`` is ever run again automatically, so only it needs one."""
        store = self.setup.store
        if tool.spec.idempotent or tool.reconcile is None:
            return None
        return store if isinstance(store, CallGuardStore) else None

    async def _start_tool(self, call: OpenCall, tool: Tool, key: str, *, guarded: bool) -> None:
        args = call.run_args()
        self.record(
            ToolStarted(
                **self._seq(),
                step=call.step,
                call_id=call.call_id,
                tool=tool.name,
                args=args,
                idempotency_key=key,
                guarded=guarded,
            )
        )
        await self.flush()  # write-ahead: the intent is durable before the side effect
        if self.own is not None:
            # The append was fenced, but a renewal may have failed since: a worker that may
            # no longer own the run starts no side effect (the new owner settles the call).
            self.own.check()
        crash_point("after_intent_commit")
        secrets = None if self.setup.secrets is None else self._secret
        ctx = ToolContext(self.state.run_id, call.step, call.call_id, key, secrets)
        with extraction_log() as extractions:
            outcome = await self.obs.tool_call(
                call.call_id,
                call.step,
                tool.name,
                tool.run(args, ctx, max_result_bytes=self.state.policy.max_tool_result_bytes),
            )
        crash_point("after_tool_return")
        self._record_extractions(call.step, extractions)
        if (outcome.timed_out or outcome.lost) and not tool.spec.idempotent:
            # Not a failure: the call may have happened, or still be happening (a sync
            # tool's thread keeps running, a remote server may have acted before its
            # connection broke). Reported to the model as a failure it would invite a
            # retry, a second payment. It is a lost call.
            self.log.warning("tool_outcome_lost", step=call.step, tool=tool.name)
            await self._settle_lost_call(
                call, tool, key, timed_out=True, cause=None if outcome.timed_out else outcome.error
            )
            return
        self.record(
            ToolFinished(
                **self._seq(),
                step=call.step,
                call_id=call.call_id,
                tool=tool.name,
                ok=outcome.ok,
                result=outcome.result,
                error=outcome.error,
                duration_ms=round(outcome.duration_ms, 3),
                result_bytes=outcome.result_bytes,
                result_sha256=outcome.result_sha256,
            )
        )
        if not tool.spec.idempotent:
            await self.flush()

    async def _secret(self, name: str) -> str:
        """A secret's value from the agent's resolver; redacted from now on."""
        assert self.setup.secrets is not None
        value = await resolve_secret(self.setup.secrets, name)
        self.redactor.add(name, value)
        return value

    def _record_extractions(self, step: int, log: ExtractionLog) -> None:
        """The extractions the tool made (``Agent.extract`` inside the call): model calls of
        the run, so their tokens count in its usage and budget."""
        for entry in log.entries:
            self.record(
                ModelCalled(
                    **self._seq(),
                    step=step,
                    model=entry.model,
                    outcome="error" if entry.error else "ok",
                    role="extract",
                    attempts=entry.attempts,
                    input_tokens=entry.usage.input_tokens,
                    output_tokens=entry.usage.output_tokens,
                    cached_input_tokens=entry.usage.cached_input_tokens,
                    cost=entry.usage.cost,
                    latency_ms=round(entry.latency_ms, 3),
                    error=clean_text(entry.error, _REPLY_CAP) if entry.error else None,
                )
            )

    async def _recover(self, call: OpenCall) -> None:
        """A tool was started but its outcome was never recorded (the process died, or it
        timed out and a person has not settled it yet)."""
        assert isinstance(call.action, ToolAction) and call.started is not None
        tool = self.setup.tools[call.action.tool]
        if tool.spec.idempotent or (
            call.resolution is not None and call.resolution.decision == "rerun"
        ):
            await self._run_tool(call)
            return
        await self._settle_lost_call(call, tool, call.started.idempotency_key, timed_out=False)

    async def _settle_lost_call(
        self,
        call: OpenCall,
        tool: Tool,
        key: str,
        *,
        timed_out: bool,
        cause: str | None = None,
        since: float | None = None,
    ) -> None:
        """A non-idempotent call whose outcome is unknown: adopt what ``reconcile`` finds,
        run it again, or stop as ``needs_attention`` for a person.

        The one rule: never a second execution while the first may still be running, and
        never one a person was asked about. ``reconcile`` finding nothing reruns the call
        only when no process can still be running it: its guard (held by the worker that
        ran it, let go when the call returns or that worker's process or database session
        ends) is free, and the run was not put to a person since. A stalled worker keeps
        its guard: the run waits for it up to ``lost_call_wait_s`` after the call started
        (plus the tool's timeout), asking ``reconcile`` again once it is free. After a
        timeout (a sync tool's thread may still be running, a remote call may still land)
        or once a person was asked, only a person's ``resolve(rerun=True)`` runs it again.

        Args:
            since: when the call started, when it has no ``tool_started`` (its guard was
                found held before this worker could write one).
        """
        problem = ""
        if tool.reconcile is not None:
            may_rerun = not timed_out and not self._put_to_a_person(call)
            free: bool | None = None
            if may_rerun:
                free, problem = await self._guard_free(call, tool, key, since)
                if self.state.status is not RunStatus.RUNNING:
                    return  # cancelled while it waited
            found, failed = await self._reconcile(tool, key)
            if found is not None:
                self.record(self._reconciled(call, tool.name, found))
                await self.flush()
                return
            if failed:
                problem = failed
            elif free:
                await self._run_tool(call)  # it did not happen and nothing can still run it
                return
            else:
                problem = "; reconcile(key) found no record of it" + problem
        if cause is not None:
            what = (
                f"lost its outcome at step {call.step} with {_short(call.run_args())} "
                f"(idempotency key {key}): {cause}; it may have happened, so it is neither "
                "retried nor reported to the model as failed"
            )
        elif timed_out:
            what = (
                f"timed out after {tool.timeout:g}s at step {call.step} with "
                f"{_short(call.run_args())} (idempotency key {key}); its outcome is unknown "
                "and it may still be running, so it is neither retried nor reported to the "
                "model as failed"
            )
        else:
            what = (
                f"was started at step {call.step} with {_short(call.run_args())} "
                f"(idempotency key {key}) but its outcome was not recorded"
            )
        self.finish(
            RunStatus.NEEDS_ATTENTION,
            reason=(
                f"non-idempotent tool {tool.name!r} {what}{problem}; a person must say whether "
                f"it happened: agentcore resolve {self.state.run_id} --result JSON | --rerun "
                "| --fail --by NAME"
            ),
        )

    async def _reconcile(self, tool: Tool, key: str) -> tuple[object | None, str]:
        """What ``reconcile(key)`` found (``None``: no record), and why it could not say."""
        assert tool.reconcile is not None
        try:
            found = tool.reconcile(key)
            if inspect.isawaitable(found):
                found = await found
        except Exception as exc:  # user code: its failure is a reason for a person
            return None, f"; reconcile raised {type(exc).__name__}: {exc}"
        return found, ""

    async def _guard_free(
        self, call: OpenCall, tool: Tool, key: str, since: float | None
    ) -> tuple[bool, str]:
        """Wait while another process may still be running the call (its guard is held),
        up to the bound; whether none can now, and if not, why (for the person).

        Returns at once when the call's guard is free, or when whether its worker is gone
        cannot be told (the call was started without a guard). A cancel request honoured
        while waiting ends the run (``state.status`` tells the caller).
        """
        started = call.started
        if started is not None and not started.guarded:
            return False, (
                ", and whether the worker that started it is gone cannot be told (it ran "
                "without a call guard: an older agentcore, or a store that keeps none)"
            )
        guards = self._guards(tool)
        if guards is None:
            return False, (
                ", and whether the worker that started it is gone cannot be told (the store "
                "keeps no call guards)"
            )
        begun = started.at if started is not None else since if since is not None else time.time()
        deadline = begun + self.setup.lost_call_wait_s + (tool.timeout or 0.0)
        waited = False
        while True:
            try:
                running = await guards.call_running(self.state.run_id, key)
            except StoreError as exc:  # cannot tell now: assume it may run, ask again
                self.log.warning("call_guard_unreadable", step=call.step, error=str(exc))
                running = True
            if not running:
                if waited:
                    self.log.info("lost_call_guard_free", step=call.step, tool=tool.name)
                return True, ""
            now = time.time()
            if now >= deadline:
                return False, (
                    f", and the worker that started it still holds the call's guard "
                    f"{now - begun:.0f}s after it started: it may still be running it (a "
                    "stalled process)"
                )
            if not waited:
                waited = True
                self.log.warning(
                    "lost_call_waiting", step=call.step, tool=tool.name, until=deadline
                )
                await self.flush()  # what this worker recorded is not held back by the wait
            await asyncio.sleep(min(GUARD_POLL_S, deadline - now))
            if self.own is not None:
                self.own.check()
            if await self._cancel_requested():
                return False, ""

    def _put_to_a_person(self, call: OpenCall) -> bool:
        """Whether the run stopped as ``needs_attention`` since this call last started."""
        return call.put_to_a_person

    def _reconciled(self, call: OpenCall, tool: str, found: object) -> ToolFinished:
        """The outcome ``reconcile`` reported for a lost call, recorded like a result."""
        try:
            result, full, digest = recordable_result(found, self.state.policy.max_tool_result_bytes)
        except LimitExceededError as exc:
            return ToolFinished(
                **self._seq(),
                step=call.step,
                call_id=call.call_id,
                tool=tool,
                ok=False,
                error=f"reconcile found the call happened, but {exc}",
            )
        return ToolFinished(
            **self._seq(),
            step=call.step,
            call_id=call.call_id,
            tool=tool,
            ok=True,
            result=result,
            result_bytes=full,
            result_sha256=digest,
        )


def _short(args: Mapping[str, object], limit: int = 200) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) <= limit else text[:limit] + "..."
