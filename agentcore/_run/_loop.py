"""The loop: build context, ask for an action, decide, act, record. Repeat.

A :class:`Driver` advances one run from whatever its transcript says. Starting, resuming,
confirming and recovering from a crash are the same code path: the state is a fold of the
events, and :meth:`Driver.drive` looks at the state to see what comes next. Running a tool
call is in ``_tool_calls``; what a person's command records first is in ``_commands``.

Durability: events are batched and written at durability points. ``tool_started`` (with
everything before it) is durable before a tool runs; a non-idempotent tool's
``tool_finished`` is durable before anything else happens; everything is durable when the
driver returns. An idempotent tool's result may wait for the next batch: if the process
dies first, the tool runs again with the same idempotency key.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from agentcore.adapters import Completion, CompletionRequest, Message, ModelAdapter
from agentcore.contracts import (
    ActionSchema,
    AskAction,
    BatchAction,
    BatchCall,
    ContractDocument,
    FinishAction,
    OutputSpec,
    PlanAction,
    ToolAction,
    ToolSpec,
    check_text,
    clean_text,
    compile_action_schema,
)
from agentcore.contracts._document import contract_for_run
from agentcore.contracts._schema import (
    ask_note,
    batch_note,
    batch_tools,
    parse_loose_batch,
    parse_loose_tool_action,
)
from agentcore.contracts.errors import (
    ConfigurationError,
    LeaseLostError,
    ModelError,
    QuotaExceededError,
    StoreError,
    UnknownToolError,
)

from .._dispatch import Ruling, batch_refusal, decide
from .._faults import crash_point
from .._manifest import changed_since_pinned
from .._observability import get_logger, observer
from .._ownership import Ownership
from .._render import MessageView, Renderer
from .._snapshot import SNAPSHOT_EVERY, dump_state, snapshot_tag
from .._state import OpenCall, RunState, RunStatus
from .._status import CLOSED_STATUSES
from .._window import estimate
from ..events import (
    ActionProposed,
    Charge,
    ContextAdded,
    Event,
    ModelCalled,
    QuotaReleased,
    QuotaReserved,
    RunFinished,
)
from ..quotas import Clock, Quota, counter_words
from ..rules import Rule
from ..secrets import Redactor, SecretResolver
from ..stores import CancelAtAppend, CancelRequest, Snapshot, SnapshotStore, TranscriptStore
from ..stores._quota import quota_store
from ..streaming import SINK, PartialTracker
from ..tools import DepsFactory, Tool
from . import _commands as commands
from ._commands import short_args
from ._quota import (
    REQUEST_OUTPUT_ESTIMATE,
    call_charges,
    over,
    over_ruling,
    released,
    request_charges,
)
from ._tool_calls import LOST_CALL_WAIT_S, decision, recover_call, run_batch, run_call

__all__ = [
    "PAUSE",
    "ContextProvider",
    "ContextRequest",
    "Driver",
    "RunSetup",
    "Shift",
    "UntrustedContext",
]

_REPLY_CAP = 4_000  # characters of an invalid reply kept for the re-ask

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
What it returns is recorded, so replays do not call it again. Trusted, unless wrapped in
:class:`UntrustedContext`."""


@dataclass(frozen=True, slots=True)
class UntrustedContext:
    """A context provider whose text is third-party content (retrieved documents, tickets,
    web pages): untrusted, as the output of a tool declared ``output="untrusted"`` is.
    ``Agent(context=[UntrustedContext(search_docs)])``, or ``@UntrustedContext`` on the
    function."""

    provider: ContextProvider

    def __call__(self, request: ContextRequest) -> str | Awaitable[str | None] | None:
        return self.provider(request)


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
    system_cache: dict[tuple[str, ...], tuple[str, str]]
    secrets: SecretResolver | None = None
    """Fills tool parameters marked :class:`~agentcore.secrets.Secret`."""
    redactor: Redactor | None = None
    """Values no event may hold (``Agent(redact=..., redact_env=...)``)."""
    snapshot_every: int = SNAPSHOT_EVERY
    """Events between two snapshots of a run (0: none); see ``_snapshot``."""
    lost_call_wait_s: float = LOST_CALL_WAIT_S
    """How long after a lost call started a worker waits for the process that may still
    be running it (see ``_tool_calls``)."""
    deps: DepsFactory | None = None
    """``Agent(deps=...)``: builds ``ToolContext.deps`` from a run's recorded identity."""
    deps_built: dict[str, object] = field(default_factory=dict[str, object])
    """What ``deps`` built, by run id, in this advance (built once per run and advance)."""
    output: OutputSpec | None = None
    """The type of ``finish``'s answer (``Agent(output=...)``; ``None``: text)."""
    quotas: Sequence[Quota] = ()
    """``Agent(quotas=...)``: limits that span runs, kept by the store."""
    clock: Clock = time.time
    """``Agent(clock=...)``: now, for the quotas' windows."""
    rules: Sequence[Rule] = ()
    """``Policy.rules``: rules over what the run has done (code: not in the recorded policy)."""


@dataclass(slots=True)
class History:
    """The events of a run a driver holds: the whole transcript, or (after a snapshot)
    the events from seq ``base`` on, with a renderer holding the messages of those
    before."""

    events: list[Event]
    base: int = 0
    renderer: Renderer | None = None


@dataclass(frozen=True, slots=True)
class Shift:
    """A worker's shift on a run: how long one worker advances it before handing it back
    (a queue's bounded slice of the run): at most ``max_steps`` new steps and
    ``max_seconds`` seconds, checked between steps, so a shift ends with the current step's
    tool finished and recorded. (Not a "turn": that word is kept for a user's turn in a
    conversation.)"""

    max_steps: int | None = None
    max_seconds: float | None = None

    def over(self, steps: int, started: float) -> bool:
        """Whether a shift that has taken ``steps`` steps since ``started`` (monotonic) is
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
        self.unflushed: list[Event] = []
        """Events recorded (folded, shown) but not yet written: the next :meth:`flush`'s."""
        self.renderer = history.renderer or Renderer(state.policy.max_observation_chars)
        store = setup.store
        self.snapshots = store if own is not None and isinstance(store, SnapshotStore) else None
        """Where snapshots go: the store, when it keeps them and this driver holds a lease."""
        self.cancel_at_append = store if isinstance(store, CancelAtAppend) else None
        """The store, when its appends read the cancel request as they commit: a call's
        write-ahead commit then tells whether to start it (no read before it)."""
        self.log = get_logger().bind(run_id=state.run_id)
        self.obs = observer(state, self.log)
        """Logs, spans and metrics: told about the advance, each step, model call, tool call
        and recorded event (a shared no-op when nothing listens)."""
        self.sink = SINK.get()
        self.redactor = Redactor() if setup.redactor is None else setup.redactor.copy()
        """The agent's listed values, plus the secrets resolved in this advance."""
        self.contract = contract_for_run(setup.contract, state.contract)
        """The agent's contract document, or the built-in version the run started under."""
        self.contract_hash = self.contract.hash
        """Its hash, once (hashing the document costs ~60 us: not once a step)."""
        self._reserved: list[Charge] = []
        """What the model request in flight reserved from token quotas (``_used`` settles)."""
        self.ruled: dict[str, Ruling] = {}
        """Rulings made while reading a reply, by call id: a tool the step did not offer
        and the dispatcher refuses, a batch refused whole. The call's decision is that
        ruling, so each call is decided once (after a crash, the resume decides it again
        from the same state)."""

    # -- recording ------------------------------------------------------------------------

    def record(self, event: Event) -> None:
        """Fold ``event`` (redacted) into the state and queue it for the next flush."""
        if self.redactor:
            event = self.redactor.event(event)
        self._fold(event)
        self.unflushed.append(event)
        if self.state.charged and (back := released(self.state, event)) is not None:
            call_id, charges, why = back  # in the same append as the event that says why
            self.record(
                QuotaReleased(**self.fields(), call_id=call_id, charges=charges, reason=why)
            )

    async def commit(self, event: Event) -> None:
        """Write ``event`` on its own (after what is queued), then fold and show it: the
        store may refuse it (a quota's limit: :class:`QuotaExceededError`), and then
        nothing of it was written, folded or shown."""
        await self.flush()
        if self.redactor:
            event = self.redactor.event(event)
        lease = None if self.own is None else self.own.lease
        await self.setup.store.append(self.state.run_id, event.seq, [event], lease=lease)
        self._fold(event)

    def _fold(self, event: Event) -> None:
        """Fold a recorded event into the state and the history, and tell the observer and
        the stream (``record`` and ``commit`` both)."""
        self.state.apply(event)
        self.events.append(event)
        self.obs.event(event)
        if self.sink is not None:
            self.sink(event)

    def fields(self) -> dict[str, Any]:  # Any: common event fields
        """The fields every event recorded next starts with: run id, seq and time."""
        return {"run_id": self.state.run_id, "seq": self.state.next_seq, "at": time.time()}

    async def flush(self) -> None:
        """Write queued events in one conditional append."""
        if not self.unflushed:
            return
        batch, self.unflushed = self.unflushed, []
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
        self,
        status: RunStatus,
        *,
        answer: str | None = None,
        reason: str | None = None,
        guard_held: bool = False,
    ) -> None:
        """Record that the run stopped; a typed answer (``answer`` is its canonical JSON) is
        recorded as JSON in ``output`` too. ``guard_held``: see ``RunFinished.guard_held``."""
        output = None if answer is None or self.setup.output is None else json.loads(answer)
        self.record(
            RunFinished(
                **self.fields(),
                status=status.value,
                answer=answer,
                reason=reason,
                output=output,
                guard_held=guard_held,
            )
        )

    # -- the loop ---------------------------------------------------------------------------

    async def drive(self, shift: Shift | None = None) -> None:
        """Advance until the run completes, stops or waits for a person, or until ``shift``
        is over (then the run stays ``running`` for the next shift); then flush.

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
                elif await self.cancel_requested():
                    pass
                elif stop := self._stop_reason():
                    status, reason = stop
                    self.finish(status, reason=reason)
                elif shift is not None and shift.over(st.steps - first_step, started):
                    break  # between steps: the next shift starts with a new model call
                else:
                    await self._ask_model()
            if st.status not in CLOSED_STATUSES:
                await self.cancel_requested()  # a request that came while it was pausing
        except asyncio.CancelledError:
            # Task cancellation (a shutdown, a caller's timeout) is not a decision about the
            # run: keep what was recorded and leave it resumable. Agent.cancel() ends a run.
            await asyncio.shield(self.flush())
            raise
        await self.flush()

    async def cancel_at_intent(self) -> CancelRequest | None:
        """Right after a call's ``tool_started`` committed: the cancel request its commit
        saw (with a store that cannot tell, the read before the call covered it)."""
        if self.cancel_at_append is None:
            return None
        try:
            return self.cancel_at_append.cancel_at_append(self.state.run_id)
        except LookupError:
            return await self.setup.store.cancel_request(self.state.run_id)

    async def cancel_requested(self) -> bool:
        """At a safe point: cancel the run if someone asked for it (see :meth:`cancel`)."""
        request = await self.setup.store.cancel_request(self.state.run_id)
        if request is None:
            return False
        self.cancel(request.by, request.reason)
        return True

    def cancel(self, by: str, reason: str | None) -> None:
        """Record that ``by`` cancelled the run (see :func:`._commands.cancel`)."""
        for event in commands.cancel(self.state, by, reason):
            self.record(event)

    def _stop_reason(self) -> tuple[RunStatus, str] | None:
        st, budget = self.state, self.state.budget
        call = st.call
        if st.failures and call is not None and isinstance(call.action, ToolAction):
            key = st.failure_key(call)
            if st.failures[key] >= st.policy.max_repeated_failures:
                return (
                    RunStatus.FAILED,
                    f"the same call {call.action.tool}({short_args(call.run_args())}) failed or "
                    f"was refused {st.failures[key]} times; stopping instead of repeating it",
                )
        now = time.time()
        why = budget.exhausted(st.turn_used(), now)
        if why is None and st.conversation_budget is not None:
            why = st.conversation_budget.exhausted(st, now)
            why = None if why is None else f"the conversation's {why}"
        return None if why is None else (RunStatus.BUDGET_EXHAUSTED, why)

    # -- asking the model -------------------------------------------------------------------

    def _schema(self) -> ActionSchema:
        st, budget = self.state, self.state.budget
        used, whole = st.turn_used(), st.conversation_budget
        finish_only = budget.finish_only(used) or (whole is not None and whole.finish_only(st))
        names = tuple(n for n in self._offered() if budget.refuses(n, used) is None)
        tools = self.setup.tools
        key = (
            self.contract_hash,
            names,
            tuple(tools[n].spec.manifest_hash for n in names),  # a relisted remote tool
            finish_only,
            st.policy.schema_form,
            st.policy.max_reply_bytes,
            st.policy.max_batch,
            st.policy.ask,
        )
        schema = self.setup.schema_cache.get(key)
        if schema is None:
            schema = compile_action_schema(
                [self.setup.tools[n].spec for n in names],
                finish_only=finish_only,
                form=st.policy.schema_form,
                max_reply_bytes=st.policy.max_reply_bytes,
                thought_first=self.contract.thought_first,
                tool_args=self.contract.tool_args,
                output=self.setup.output,  # the agent's one output type
                max_batch=st.policy.max_batch,
                ask=st.policy.ask,
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

    def _systems(self) -> tuple[str, str]:
        """The step's system text, and the same for an adapter in native mode (which
        offers the tools as functions: see ``ContractDocument.render_system``), rendered
        together once per tool set and cached."""
        offered = self._offered()
        most = self.state.policy.max_batch
        key = tuple(f"{n}:{self.setup.tools[n].spec.manifest_hash}" for n in offered)
        key = (self.contract_hash, *key)
        if most:
            key = (*key, f"max_batch:{most}")  # a run without batches keys as before
        ask = self.state.policy.ask
        if ask:
            key = (*key, "ask")
        texts = self.setup.system_cache.get(key)
        if texts is None:
            specs: list[ToolSpec] = [self.setup.tools[n].spec for n in offered]
            reads = [s.name for s in batch_tools(specs)]
            rendered: list[str] = []
            for native in (False, True):
                text = self.contract.render_system(specs, self.setup.output, native=native)
                if most >= 2 and reads:
                    text = f"{text}\n\n{batch_note(most, reads)}"
                if ask:
                    text = f"{text}\n\n{ask_note()}"
                if self.setup.instructions:
                    text = f"{text}\n\nInstructions from the operator:\n{self.setup.instructions}"
                rendered.append(text)
            texts = (rendered[0], rendered[1])
            self.setup.system_cache[key] = texts
        if self.redactor:  # instructions may quote one
            return self.redactor.text(texts[0]), self.redactor.text(texts[1])
        return texts

    def _status_note(self, schema: ActionSchema) -> Message:
        st = self.state
        return Message("user", st.budget.note(st.turn_used(), finish_only=schema.finish_only))

    async def _gather_context(self, step: int) -> None:
        st = self.state
        for provider in self.setup.context_providers:
            value = provider(ContextRequest(st.run_id, st.task, step, st.scope))
            if inspect.isawaitable(value):
                value = await value
            if value:
                if isinstance(provider, UntrustedContext):
                    inner, untrusted = provider.provider, True
                else:
                    inner, untrusted = provider, False
                source = getattr(inner, "__name__", type(inner).__name__)
                if not isinstance(value, str):  # pyright: ignore[reportUnnecessaryIsInstance]  # user code
                    raise ConfigurationError(
                        f"Context provider {source!r} returned {type(value).__name__}; "
                        "return a str, or None for nothing."
                    )
                check_text(value, f"output of context provider {source!r}")
                self.record(
                    ContextAdded(
                        **self.fields(),
                        step=step,
                        source=source,
                        content=value,
                        untrusted=untrusted,
                    )
                )

    async def _ask_model(self) -> None:
        """Ask the route's model for the next step's action (gathering the step's context
        first) and record what came of it: a proposed action, an invalid reply asked again
        (up to ``max_reasks``), or the run's end (no valid action, the budget)."""
        st = self.state
        step = st.steps + 1
        self.obs.step(step)
        if st.reasks == 0 and self.setup.context_providers and not self._context_recorded(step):
            await self._gather_context(step)
        while True:
            schema = self._schema()
            (system, native_system), window = self._systems(), st.budget.max_request_tokens
            messages = MessageView(
                self.renderer,
                self.events,
                st.next_seq,
                self._status_note(schema),
                self.base,
                system=system,
                max_tokens=window,
            )
            if window is not None and not messages.fitted.fits:
                self.finish(
                    RunStatus.BUDGET_EXHAUSTED,
                    reason=f"the next request would hold about {messages.fitted.tokens} tokens "
                    f"with every older result elided, over max_request_tokens ({window}): "
                    "raise it to continue (resume with a larger budget)",
                )
                return
            request = CompletionRequest(
                schema=schema,
                system=system,
                native_system=native_system,
                messages=messages,
                run_id=st.run_id,
                step=step,
                deadline=st.budget.deadline,
                prior_calls=dict(st.calls_by_model),
                on_partial=(
                    PartialTracker(self.sink, step, answers=schema.output is not None)
                    if self.sink is not None
                    else None
                ),
            )
            if any(isinstance(ev, ModelCalled) for ev in self.unflushed):
                # Earlier replies' tokens are not recomputable: make them durable before
                # spending more. (A pending idempotent tool result is: it may wait.)
                await self.flush()
            if self.setup.quotas and (stop := await self._reserve_request(messages, request)):
                self.finish(RunStatus.BUDGET_EXHAUSTED, reason=stop)
                return
            completion = await self._complete(request)
            if completion is None:
                return
            crash_point("after_model_response")
            if completion.action is not None:
                self._model_called(step, completion, "ok")
                self.record(
                    ActionProposed(
                        **self.fields(), step=step, call_id=f"c{step}", action=completion.action
                    )
                )
                return
            error = completion.error
            loose = (
                parse_loose_tool_action(completion.text)
                if isinstance(error, UnknownToolError)
                else None
            )
            ruling = (
                decide(st, loose, self.setup.tools, self.setup.rules)
                if loose is not None and loose.tool in self.setup.tools
                else None
            )
            if loose is not None and ruling is not None and ruling.verdict == "deny":
                # A real tool the schema does not offer at this step (out of scope or over its
                # budget): a decision, not a malformed reply. The dispatcher refuses it.
                self.ruled[f"c{step}"] = ruling
                self._model_called(step, completion, "ok")
                self.record(
                    ActionProposed(**self.fields(), step=step, call_id=f"c{step}", action=loose)
                )
                return
            refused = self._refused_batch(schema, completion.text, f"c{step}")
            if refused is not None:
                # A batch the dispatcher refuses (it holds a write) or partly refuses (a
                # call out of scope or over its budget): decided, not re-asked.
                self._model_called(step, completion, "ok")
                self.record(
                    ActionProposed(**self.fields(), step=step, call_id=f"c{step}", action=refused)
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

    def _refused_batch(self, schema: ActionSchema, text: str, call_id: str) -> BatchAction | None:
        """A batch the step's schema did not accept whose refusal is the dispatcher's to
        give: it holds a tool that is not a read (refused whole), or a tool of the agent
        the schema does not offer now (refused call by call). Every call of an offered
        tool must still have valid arguments, or the reply is re-asked as invalid."""
        st, tools = self.state, self.setup.tools
        if st.policy.max_batch < 2:
            return None
        loose = parse_loose_batch(text)
        if loose is None or not all(c.tool in tools for c in loose.calls):
            return None
        whole = batch_refusal(st, loose, tools)
        if whole is not None:
            self.ruled[call_id] = Ruling("deny", whole)
            return loose  # nothing in it runs
        checked: list[BatchCall] = []
        for c in loose.calls:
            spec = schema.spec(c.tool)
            if spec is None:
                checked.append(c)  # denied by the dispatcher; never run
                continue
            try:
                args = spec.args_model.model_validate(c.args)
            except ValidationError:
                return None
            checked.append(BatchCall(tool=c.tool, args=args.model_dump(mode="json")))
        if all(schema.spec(c.tool) is not None for c in loose.calls):
            return None  # invalid for another reason: re-asked
        return BatchAction(thought=loose.thought, calls=checked)

    def _context_recorded(self, step: int) -> bool:
        return self.state.context_step == step

    def _model_called(self, step: int, c: Completion, outcome: str) -> None:
        invalid = outcome == "invalid"
        self.record(
            ModelCalled(
                **self.fields(),
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
                charges=self._used(c.usage.input_tokens + c.usage.output_tokens, c.usage.cost),
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
                    **self.fields(),
                    step=request.step,
                    model=name,
                    outcome="error",
                    role=self._role(),
                    attempts=getattr(failure, "attempts", 1),
                    input_tokens=tokens[0],
                    output_tokens=tokens[1],
                    error=message,
                    charges=self._used(tokens[0] + tokens[1], None),
                )
            )
            if not retryable:
                break
        self.finish(RunStatus.FAILED, reason="no model in the route answered: " + "; ".join(errors))
        return None

    # -- deciding and acting ----------------------------------------------------------------

    async def _decide_within_quotas(self, call: OpenCall, ruling: Ruling) -> None:
        """Decide a call the dispatcher lets run (or puts to a person) under the agent's
        quotas: charged with its decision, in the append that records it (a call that
        waits for a person is charged when approved); over a limit, refused, put to a
        person, or the run stops for the operator, as the quota says."""
        setup, st = self.setup, self.state
        assert isinstance(call.action, ToolAction)
        check = call_charges(setup.quotas, st, call, setup.tools, setup.clock())
        if check.refused is not None:
            self.record(decision(self, call, Ruling("deny", check.refused)))
            return
        passing: list[tuple[Charge, float]] = []
        if check.charges:
            used = await quota_store(setup.store).quota_usage([c.key for c in check.charges])
            passing = over(check.charges, used)
        if not passing:
            if ruling.verdict == "needs_confirmation" or not check.charges:
                self.record(decision(self, call, ruling))
                if ruling.verdict == "needs_confirmation":
                    self.finish(RunStatus.AWAITING_CONFIRMATION, reason=ruling.reason)
                return
            charged = decision(self, call, ruling).model_copy(
                update={"charges": list(check.charges)}
            )
            try:
                await self.commit(charged)
            except QuotaExceededError as exc:  # another worker spent it first
                lost = next(c for c in check.charges if c.key == exc.key)
                passing = [(lost, exc.used)]
            else:
                return
        await self._over_quota(call, ruling, passing)

    async def _over_quota(
        self, call: OpenCall, ruling: Ruling, passing: list[tuple[Charge, float]]
    ) -> None:
        """A call over a quota's limit: refused, put to a person (whose approval lets it
        pass), or the run stops for the operator."""
        assert isinstance(call.action, ToolAction)
        over_ruled, mode = over_ruling(self.setup.quotas, passing, call.action.tool)
        if mode == "attention":  # nothing decided: a resume decides it again
            self.finish(RunStatus.NEEDS_ATTENTION, reason=over_ruled.reason)
            return
        names = sorted({c.quota for c, _ in passing})
        if mode == "confirm" and ruling.verdict == "needs_confirmation":  # asked anyway
            why = f"{ruling.reason}; {over_ruled.reason}"
            over_ruled = Ruling(
                "needs_confirmation", why, ruling.provenance, ruling.approvals_needed
            )
        event = decision(self, call, over_ruled)
        self.record(event.model_copy(update={"over_quota": names}))
        if over_ruled.verdict == "needs_confirmation":
            self.finish(RunStatus.AWAITING_CONFIRMATION, reason=over_ruled.reason)

    async def _reserve_request(
        self, messages: MessageView, request: CompletionRequest
    ) -> str | None:
        """Reserve what the next model request may use from the quotas that count tokens
        (its estimated input plus its reply's cap), in an append of its own that the store
        refuses over a limit; a cost quota already used up holds it back too. Why it may
        not be sent, or ``None``: it may (its ``model_called`` settles the reservation)."""
        setup, st = self.setup, self.state
        quotas = [q for q in setup.quotas if q.counts_requests]
        if not quotas:
            return None
        now = setup.clock()
        tokens = estimate(request.system, messages) + (
            request.max_output_tokens or REQUEST_OUTPUT_ESTIMATE
        )
        costs = [q.charge(st, None, 0.0, now) for q in quotas if q.count == "cost"]
        if costs:
            used = await quota_store(setup.store).quota_usage([c.key for c in costs])
            for charge in costs:
                if used.get(charge.key, 0.0) >= (charge.limit or 0.0):
                    return _held_back(charge, used.get(charge.key, 0.0))
        charges = [q.charge(st, None, float(tokens), now) for q in quotas if q.count == "tokens"]
        if not charges:
            return None
        try:
            await self.commit(QuotaReserved(**self.fields(), step=request.step, charges=charges))
        except QuotaExceededError as exc:
            return _held_back(next(c for c in charges if c.key == exc.key), exc.used)
        self._reserved = charges
        return None

    def _used(self, tokens: int, cost: float | None) -> list[Charge]:
        """What a model request used, charged to the quotas that count it, less what was
        reserved for it (settled once: the first ``model_called`` of the request)."""
        if not self.setup.quotas:
            return []
        used = request_charges(self.setup.quotas, self.state, tokens, cost, self.setup.clock())
        reserved, self._reserved = self._reserved, []
        for held in reserved:
            found = next((c for c in used if c.key == held.key), None)
            if found is not None:
                used[used.index(found)] = found.model_copy(
                    update={"amount": found.amount - held.amount}
                )
            else:
                used.append(held.model_copy(update={"amount": -held.amount, "limit": None}))
        return [c for c in used if c.amount]

    async def _continue(self, call: OpenCall) -> None:
        st = self.state
        if isinstance(call.action, BatchAction):  # each of its calls is decided on its own
            await run_batch(self, call)
            return
        if call.decision is None:
            ruling = self.ruled.pop(call.call_id, None) or decide(
                st, call.action, self.setup.tools, self.setup.rules
            )
            if (
                self.setup.quotas
                and ruling.verdict in ("execute", "needs_confirmation")
                and isinstance(call.action, ToolAction)
            ):
                await self._decide_within_quotas(call, ruling)
                return
            self.record(decision(self, call, ruling))
            if ruling.verdict == "needs_confirmation":
                self.finish(RunStatus.AWAITING_CONFIRMATION, reason=ruling.reason)
            return
        if call.decision.verdict == "needs_confirmation" and call.confirmation is None:
            self.finish(RunStatus.AWAITING_CONFIRMATION, reason=call.decision.reason)
            return
        match call.action:
            case FinishAction(answer=answer):
                self.finish(RunStatus.COMPLETED, answer=answer)
            case AskAction(question=question):  # the user answers with Agent.reply
                self.finish(RunStatus.AWAITING_INPUT, reason=question)
            case PlanAction():  # settled once decided or confirmed; never reached
                return
            case ToolAction():
                if call.started is not None:
                    await recover_call(self, call)
                elif self.cancel_at_append is not None or not await self.cancel_requested():
                    await run_call(self, call)  # a request is read as its intent commits


def _held_back(charge: Charge, held: float) -> str:
    """Why a model request was not sent: ``charge`` would pass its quota's limit."""
    need = f", and this request may use about {charge.amount:g}" if charge.amount else ""
    return (
        f"quota {charge.quota!r} ({counter_words(charge.key)}): {held:g} of "
        f"{charge.limit or 0.0:g} used{need}; the request was not sent"
    )
