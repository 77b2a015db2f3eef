"""Tool calls: run one (write-ahead, under its guard), recover one whose outcome was never
recorded, and settle a lost call of a non-idempotent tool.

A tool call is an effect (``_effects``: intent under a guard, run, outcome). The
durability rule lives here: ``tool_started`` (with everything before it) is durable before
the tool runs, and a non-idempotent tool's ``tool_finished`` is durable before anything
else happens. The at-most-once rule for a call too: a non-idempotent call whose outcome is
unknown is adopted from ``reconcile``, run again only when no process can still be running
it (waiting up to ``lost_call_wait_s`` for its guard), or put to a person
(``_settle_lost_call``).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol

from agentcore.contracts import BatchAction, ToolAction, clean_text
from agentcore.contracts.errors import LimitExceededError

from .._dispatch import Ruling, batch_refusal, decide_in_batch
from .._extract import ExtractionLog, extraction_log
from .._faults import crash_point
from .._state import OpenCall, RunState, RunStatus
from ..events import Decision, Event, ModelCalled, ToolFinished, ToolStarted
from ..quotas import Quota
from ..rules import Rule
from ..secrets import Redactor, SecretResolver, resolve_secret
from ..tools import DepsFactory, RunIdentity, Tool, ToolContext, ToolOutcome, recordable_result
from ._commands import short_args
from ._effects import (
    HELD,
    Elsewhere,
    Failed,
    ask_reconcile,
    guards_for,
    refuse_while_running,
    run_guarded,
    wait_for_guard,
)

if TYPE_CHECKING:
    from .._observability import Observer
    from .._ownership import Ownership
    from ..stores import CancelRequest, TranscriptStore

__all__ = [
    "GUARD_POLL_S",
    "LOST_CALL_WAIT_S",
    "CallDriver",
    "call_context",
    "decision",
    "deps_of",
    "recover_call",
    "refuse_rerun_while_running",
    "run_batch",
    "run_call",
]

LOST_CALL_WAIT_S: Final = 300.0
"""How long after a lost call started a worker waits, by default, while the process that
ran it may still be running it (it holds the call's guard) before asking a person."""

GUARD_POLL_S: Final = 0.25
"""How often a waiting worker looks at a lost call's guard."""

_ERROR_CAP: Final = 4_000  # characters of an extraction's error kept in its event


class CallSetup(Protocol):
    """What a tool call reads of the agent's setup (``_loop.RunSetup`` is one)."""

    @property
    def tools(self) -> Mapping[str, Tool]: ...
    @property
    def store(self) -> TranscriptStore: ...
    @property
    def secrets(self) -> SecretResolver | None: ...
    @property
    def lost_call_wait_s(self) -> float: ...
    @property
    def deps(self) -> DepsFactory | None: ...
    @property
    def deps_built(self) -> dict[str, object]: ...
    @property
    def rules(self) -> Sequence[Rule]: ...
    @property
    def quotas(self) -> Sequence[Quota]: ...


class CallDriver(Protocol):
    """What running a tool call needs of the driver that advances the run
    (``_loop.Driver`` is the one; the loop imports this module, so it is named by what it
    does here rather than imported)."""

    @property
    def state(self) -> RunState: ...
    @property
    def setup(self) -> CallSetup: ...
    @property
    def own(self) -> Ownership | None: ...
    @property
    def log(self) -> Any: ...  # Any: a structlog bound logger (structlog types it loosely)
    @property
    def obs(self) -> Observer: ...
    @property
    def redactor(self) -> Redactor: ...
    @property
    def ruled(self) -> dict[str, Ruling]: ...
    def record(self, event: Event) -> None: ...
    def fields(self) -> dict[str, Any]: ...  # Any: common event fields
    async def flush(self) -> None: ...
    def finish(
        self,
        status: RunStatus,
        *,
        answer: str | None = None,
        reason: str | None = None,
        guard_held: bool = False,
    ) -> None: ...
    async def cancel_at_intent(self) -> CancelRequest | None: ...
    async def cancel_requested(self) -> bool: ...
    def cancel(self, by: str, reason: str | None) -> None: ...


async def run_call(d: CallDriver, call: OpenCall) -> None:
    assert isinstance(call.action, ToolAction)
    tool = d.setup.tools[call.action.tool]
    key = f"{d.state.run_id}:{call.step}"
    guards = guards_for(d.setup.store, idempotent=tool.spec.idempotent)
    if guards is None:
        await _start(d, call, tool, key, guarded=False)
        return

    async def body() -> tuple[None, asyncio.Future[Any] | None]:  # Any: unused result
        return None, await _start(d, call, tool, key, guarded=True)

    if await run_guarded(guards, d.state.run_id, key, body, thread=tool.runs_in_thread) is HELD:
        # Another process holds it: a worker that lost the run is running this call, or
        # is about to find out that it may not.
        await _settle_lost_call(d, call, tool, key, timed_out=False, since=time.time())


async def _start(
    d: CallDriver, call: OpenCall, tool: Tool, key: str, *, guarded: bool
) -> asyncio.Future[Any] | None:  # Any: the call's result, unused
    """Write the call's intent, run it and record its outcome; a timed-out sync call's
    thread, when it is still running."""
    args = call.run_args()
    runs, deps = await _intent(d, call, tool, args, key, guarded=guarded)
    if not runs:
        await d.flush()
        return None
    await d.flush()  # write-ahead: the intent is durable before the side effect
    if d.own is not None:
        # The append was fenced, but a renewal may have failed since: a worker that may
        # no longer own the run starts no side effect (the new owner settles the call).
        d.own.check()
    if (request := await d.cancel_at_intent()) is not None:
        # Someone asked to cancel the run before the intent committed: the call does not
        # start, and its record says so.
        why = f"not run: the run was cancelled by {request.by} before the call started"
        d.record(not_run(d, call, tool, why))
        d.cancel(request.by, request.reason)
        return None
    crash_point("after_intent_commit")
    outcome, extractions = await _run(d, call, tool, args, key, deps)
    crash_point("after_tool_return")
    _record_extractions(d, call.step, extractions)
    if (outcome.timed_out or outcome.lost) and not tool.spec.idempotent:
        # Not a failure: the call may have happened, or still be happening (a sync
        # tool's thread keeps running, a remote server may have acted before its
        # connection broke). Reported to the model as a failure it would invite a
        # retry, a second payment. It is a lost call.
        d.log.warning("tool_outcome_lost", step=call.step, tool=tool.name)
        await _settle_lost_call(
            d,
            call,
            tool,
            key,
            timed_out=True,
            cause=None if outcome.timed_out else outcome.error,
            elsewhere=outcome.settled_elsewhere,
        )
        return outcome.still_running
    d.record(finished(d, call.step, call.call_id, tool, outcome))
    if not tool.spec.idempotent:
        await d.flush()
    return None


async def _intent(
    d: CallDriver,
    call: OpenCall,
    tool: Tool,
    args: dict[str, Any],  # Any: JSON values
    key: str,
    *,
    guarded: bool,
) -> tuple[bool, Any]:  # Any: what the application's factory built
    """Record the call's ``tool_started`` (one call, or one of a batch): whether it may run,
    and its ``ToolContext.deps``. A call that cannot start (the application's deps factory
    raised, or a changed tool's run-bound values do not fit) also gets its ``tool_finished``:
    nothing ran, a failure the model sees like a tool's own."""
    st = d.state
    problem: str | None = None
    bound: dict[str, Any] = {}  # Any: JSON values from the run's record
    deps: Any = None  # Any: what the application's factory built
    try:
        bound = tool.bound_args(st.tenant, st.metadata) if tool.run_params else {}
        deps = await deps_of(d)
    except Exception as exc:  # the application's factory, or a changed tool: not run
        problem = f"{type(exc).__name__}: {exc}"
    d.record(
        ToolStarted(
            **d.fields(),
            step=call.step,
            call_id=call.call_id,
            tool=tool.name,
            args=args,
            idempotency_key=key,
            guarded=guarded,
            bound=bound,
        )
    )
    if problem is not None:
        d.record(not_run(d, call, tool, f"the call could not start (nothing ran): {problem}"))
        return False, None
    return True, deps


async def _run(
    d: CallDriver,
    call: OpenCall,
    tool: Tool,
    args: dict[str, Any],  # Any: JSON values
    key: str,
    deps: Any,  # Any: what the application's factory built
) -> tuple[ToolOutcome, ExtractionLog]:
    """Run a started call (one call, or one of a batch) in its observability span: its
    outcome, and the extractions it made."""
    ctx = call_context(d, call.step, call.call_id, key, deps)
    with extraction_log() as extractions:
        outcome = await d.obs.tool_call(
            call.call_id,
            call.step,
            tool.name,
            tool.run(args, ctx, max_result_bytes=d.state.policy.max_tool_result_bytes),
        )
    return outcome, extractions


def decision(d: CallDriver, call: OpenCall, ruling: Ruling) -> Decision:
    """The ``decision`` event of ``call`` (an action of its own, or one of a batch)."""
    return Decision(
        **d.fields(),
        step=call.step,
        call_id=call.call_id,
        verdict=ruling.verdict,
        reason=ruling.reason,
        approvals_needed=ruling.approvals_needed,
        provenance=dict(ruling.provenance),
        rule=ruling.rule,
    )


def not_run(d: CallDriver, call: OpenCall, tool: Tool, why: str) -> ToolFinished:
    """The ``tool_finished`` of a started call that did not run (nothing happened): a
    failure the model sees, saying why."""
    return ToolFinished(
        **d.fields(), step=call.step, call_id=call.call_id, tool=tool.name, ok=False, error=why
    )


def finished(
    d: CallDriver, step: int, call_id: str, tool: Tool, outcome: ToolOutcome
) -> ToolFinished:
    """The ``tool_finished`` of a call that returned (one call, or one of a batch)."""
    return ToolFinished(
        **d.fields(),
        step=step,
        call_id=call_id,
        tool=tool.name,
        ok=outcome.ok,
        result=outcome.result,
        error=outcome.error,
        duration_ms=round(outcome.duration_ms, 3),
        result_bytes=outcome.result_bytes,
        result_sha256=outcome.result_sha256,
        untrusted=tool.output == "untrusted",
    )


async def run_batch(d: CallDriver, call: OpenCall) -> None:
    """Decide, start and run the calls of a batch that have no outcome yet.

    Each call is decided in order as a call of its own (a refused batch: each is denied
    with the batch's reason), and an executed one records its ``tool_started`` before the
    next is decided, so budgets count each call. All intents are durable before any call
    runs; the calls run concurrently; each outcome is recorded as it would be alone. Every
    call is read-only and idempotent: each outcome is durable as soon as its call returns,
    and after a crash those without an outcome run again (with the same idempotency
    keys), those with one do not.
    """
    assert isinstance(call.action, BatchAction)
    st, tools = d.state, d.setup.tools
    ruled = d.ruled.pop(call.call_id, None)  # refused whole as the reply was read
    whole = ruled.reason if ruled is not None else batch_refusal(st, call.action, tools)
    fresh = all(m.started is None for m in call.members)
    if fresh and any(m.decision is None for m in call.members) and await d.cancel_requested():
        return
    todo: list[tuple[OpenCall, Tool, str, Any]] = []  # Any: the run's deps
    for m in call.members:
        if m.decision is None:
            assert isinstance(m.action, ToolAction)
            counted = [q.name for q in d.setup.quotas if q.counts(tools[m.action.tool])]
            ruling = (
                Ruling("deny", whole)
                if whole is not None
                else Ruling(
                    "deny",
                    f"tool {m.action.tool!r} is counted by quota {counted[0]!r}: call it on "
                    "its own, not in a batch",
                )
                if counted
                else decide_in_batch(st, m.action, tools, d.setup.rules)
            )
            d.record(decision(d, m, ruling))
        assert m.decision is not None
        if m.decision.verdict != "execute" or m.finished is not None:
            continue
        assert isinstance(m.action, ToolAction)
        tool = tools[m.action.tool]
        key = f"{st.run_id}:{m.call_id.removeprefix('c')}"
        runs, deps = await _intent(d, m, tool, m.run_args(), key, guarded=False)
        if runs:  # read-only and idempotent: no guard
            todo.append((m, tool, key, deps))
    await d.flush()  # write-ahead: every intent is durable before any call runs
    if not todo:
        return
    if d.own is not None:
        d.own.check()
    crash_point("after_intent_commit")

    async def one(
        m: OpenCall, tool: Tool, key: str, deps: Any
    ) -> tuple[OpenCall, Tool, ToolOutcome, ExtractionLog]:
        return m, tool, *await _run(d, m, tool, m.run_args(), key, deps)

    # Each outcome is recorded and made durable as its call returns: after a crash, only
    # the calls still without one run again.
    for done in asyncio.as_completed([one(*item) for item in todo]):
        m, tool, outcome, extractions = await done
        crash_point("after_tool_return")
        _record_extractions(d, m.step, extractions)
        d.record(finished(d, m.step, m.call_id, tool, outcome))
        await d.flush()
        crash_point("after_batch_outcome")


def call_context(
    d: CallDriver,
    step: int,
    call_id: str,
    key: str,
    deps: Any = None,  # Any: what the application's factory built
) -> ToolContext:
    """What a tool (or an undo) is given about its call and its run, in this worker."""
    st = d.state
    return ToolContext(
        st.run_id,
        step,
        call_id,
        key,
        _secrets(d),
        fencing_token=None if d.own is None else d.own.lease.epoch,
        tenant=st.tenant,
        metadata=MappingProxyType(st.metadata),
        deps=deps,
        budget_left=st.budget.remaining(st.turn_used()),
    )


async def deps_of(d: CallDriver) -> Any:  # Any: whatever the application's factory builds
    """``ToolContext.deps`` for this run: built by ``Agent(deps=...)`` from the run's
    recorded identity, once per run and advance, in whichever process advances it."""
    factory = d.setup.deps
    if factory is None:
        return None
    run_id = d.state.run_id
    if run_id not in d.setup.deps_built:
        st = d.state
        built = factory(RunIdentity(run_id, st.tenant, MappingProxyType(st.metadata)))
        if inspect.isawaitable(built):
            built = await built
        d.setup.deps_built[run_id] = built
    return d.setup.deps_built[run_id]


def _secrets(d: CallDriver) -> Callable[[str], Awaitable[str]] | None:
    """The call's secret resolver: the agent's, each value it returns redacted from then on."""
    resolver = d.setup.secrets
    if resolver is None:
        return None

    async def secret(name: str) -> str:
        value = await resolve_secret(resolver, name)
        d.redactor.add(name, value)
        return value

    return secret


def _record_extractions(d: CallDriver, step: int, log: ExtractionLog) -> None:
    """The extractions the tool made (``Agent.extract`` inside the call): model calls of
    the run, so their tokens count in its usage and budget."""
    for entry in log.entries:
        d.record(
            ModelCalled(
                **d.fields(),
                step=step,
                model=entry.model,
                outcome="error" if entry.error else "ok",
                role=entry.role,
                attempts=entry.attempts,
                input_tokens=entry.usage.input_tokens,
                output_tokens=entry.usage.output_tokens,
                cached_input_tokens=entry.usage.cached_input_tokens,
                cost=entry.usage.cost,
                latency_ms=round(entry.latency_ms, 3),
                error=clean_text(entry.error, _ERROR_CAP) if entry.error else None,
                tool_calls=entry.tool_calls,
                steps=entry.steps,
            )
        )


async def recover_call(d: CallDriver, call: OpenCall) -> None:
    """A tool was started but its outcome was never recorded (the process died, or it
    timed out and a person has not settled it yet)."""
    assert isinstance(call.action, ToolAction) and call.started is not None
    tool = d.setup.tools[call.action.tool]
    if tool.spec.idempotent:
        await run_call(d, call)
        return
    await _settle_lost_call(d, call, tool, call.started.idempotency_key, timed_out=False)


async def _settle_lost_call(
    d: CallDriver,
    call: OpenCall,
    tool: Tool,
    key: str,
    *,
    timed_out: bool,
    cause: str | None = None,
    since: float | None = None,
    elsewhere: bool = False,
) -> None:
    """A non-idempotent call whose outcome is unknown: adopt what ``reconcile`` finds,
    run it again, or stop as ``needs_attention`` for a person.

    The one rule: never a second execution while the first may still be running, never
    one a person was asked about unless a person said so, and never one ``reconcile``
    was not asked about first. A call runs again when no process can still be running it
    (its guard, held by the worker that ran it and let go when the call returns or that
    worker's process or database session ends, is free), ``reconcile`` (when the tool
    has one) finds no record of it, and either a person's ``resolve(rerun=True)`` not yet
    used authorises it, or the tool has ``reconcile`` and no person was asked since the
    call last started (a stop only because the guard was held does not count). A held
    guard is waited for up to ``lost_call_wait_s`` after the call started (plus the
    tool's timeout). Right after a timeout or a lost connection (a sync tool's thread may
    still be running, a remote call may still land) only ``reconcile`` or a person
    settles it.

    Args:
        since: when the call started, when it has no ``tool_started`` (its guard was
            found held before this worker could write one).
        elsewhere: ``cause`` says what settles the call instead of a person's resolve (a
            sub-agent's run waiting for a person): the reason is that, nothing more.
    """
    # A call with no intent yet (its guard was found held before one was written) never
    # ran here: once the guard is free it runs, as any new call does.
    authorised = call.rerun_authorised or call.started is None
    may_rerun = not timed_out and (
        authorised or (tool.reconcile is not None and not call.put_to_a_person)
    )
    free, problem, guard_held = False, "", False
    if may_rerun:
        free, problem, guard_held = await _wait_while_held(d, call, tool, key, since, authorised)
        if d.state.status is not RunStatus.RUNNING:
            return  # cancelled while it waited
    if tool.reconcile is not None:
        found = await ask_reconcile(tool.reconcile, key)
        if isinstance(found, Elsewhere):  # e.g. a sub-agent's run still waits for a person
            d.finish(
                RunStatus.NEEDS_ATTENTION,
                reason=f"tool {tool.name!r} at step {call.step}: {found.error}",
            )
            return
        if isinstance(found, Failed):
            problem, free, guard_held = f"; reconcile raised {found.error}", False, False
        elif found is not None:
            d.record(_reconciled(d, call, tool.name, found))
            await d.flush()
            return
        elif not free:
            problem = "; reconcile(key) found no record of it" + problem
    if free:
        await run_call(d, call)  # it did not happen and nothing can still run it
        return
    if elsewhere and cause is not None:  # e.g. a sub-agent's run waits for a person
        d.finish(
            RunStatus.NEEDS_ATTENTION, reason=f"tool {tool.name!r} at step {call.step}: {cause}"
        )
        return
    if cause is not None:
        what = (
            f"lost its outcome at step {call.step} with {short_args(call.run_args())} "
            f"(idempotency key {key}): {cause}; it may have happened, so it is neither "
            "retried nor reported to the model as failed"
        )
    elif timed_out:
        what = (
            f"timed out after {tool.timeout:g}s at step {call.step} with "
            f"{short_args(call.run_args())} (idempotency key {key}); its outcome is unknown "
            "and it may still be running, so it is neither retried nor reported to the "
            "model as failed"
        )
    elif authorised:
        what = (
            f"was to run again at step {call.step} with {short_args(call.run_args())} "
            f"(idempotency key {key}), as a person decided, but it may still be running"
        )
    else:
        what = (
            f"was started at step {call.step} with {short_args(call.run_args())} "
            f"(idempotency key {key}) but its outcome was not recorded"
        )
    if guard_held and not authorised:
        # Nobody is asked anything: a free guard later settles it as if the run had never
        # stopped. A person may still settle it (result or fail; a rerun waits for the guard).
        d.finish(
            RunStatus.NEEDS_ATTENTION,
            reason=(
                f"non-idempotent tool {tool.name!r} {what}{problem}; once that worker is gone "
                f"or its call returns, agentcore resume {d.state.run_id} settles it (reconcile, "
                f"then run it once if nothing is found), or a person says whether it happened: "
                f"agentcore resolve {d.state.run_id} --result JSON | --fail --by NAME"
            ),
            guard_held=True,
        )
        return
    d.finish(
        RunStatus.NEEDS_ATTENTION,
        reason=(
            f"non-idempotent tool {tool.name!r} {what}{problem}; a person must say whether "
            f"it happened: agentcore resolve {d.state.run_id} --result JSON | --rerun "
            "| --fail --by NAME"
        ),
    )


async def refuse_rerun_while_running(store: object, state: RunState) -> None:
    """Before a person's rerun of the lost call ``state`` waits on is recorded: refuse it
    while the process that started the call still holds its guard (a timed-out sync
    tool's thread, a stalled worker), so that one rerun never runs beside the call.

    Raises:
        CallStillRunningError: the call's guard is held (nothing is recorded).
    """
    call = state.call
    if call is None or call.started is None:
        return
    started = call.started
    await refuse_while_running(
        store,
        state.run_id,
        started.idempotency_key,
        guarded=started.guarded,
        what=(f"call {started.idempotency_key} ({started.tool})", "the call's guard"),
        instead="settle it now with --result JSON or --fail",
    )


async def _wait_while_held(
    d: CallDriver, call: OpenCall, tool: Tool, key: str, since: float | None, authorised: bool
) -> tuple[bool, str, bool]:
    """Wait while another process may still be running the call (its guard is held),
    up to the bound; whether none can now, if not why (for the person), and whether the
    guard was still held at the end.

    Returns at once when the call's guard is free, or when whether its worker is gone
    cannot be told (the call was started without a guard): then it counts as free only
    when a person ``authorised`` the rerun. A cancel request honoured while waiting ends
    the run (``state.status`` tells the caller).
    """
    started = call.started
    guards = guards_for(d.setup.store, idempotent=tool.spec.idempotent)
    unknown = ""
    if started is not None and not started.guarded:
        unknown = (
            ", and whether the worker that started it is gone cannot be told (it ran "
            "without a call guard: an older agentcore, or a store that keeps none)"
        )
    elif guards is None:
        unknown = (
            ", and whether the worker that started it is gone cannot be told (the store "
            "keeps no call guards)"
        )
    if guards is None or unknown:
        return authorised, "" if authorised else unknown, False
    begun = started.at if started is not None else since if since is not None else time.time()

    async def on_wait() -> None:
        d.log.warning("lost_call_waiting", step=call.step, tool=tool.name, until=deadline)
        await d.flush()  # what this worker recorded is not held back by the wait

    async def between() -> bool:
        if d.own is not None:
            d.own.check()
        return await d.cancel_requested()

    deadline = begun + d.setup.lost_call_wait_s + (tool.timeout or 0.0)
    look = await wait_for_guard(
        guards,
        d.state.run_id,
        key,
        deadline=deadline,
        poll_s=GUARD_POLL_S,
        on_wait=on_wait,
        between=between,
        on_unreadable=lambda exc: d.log.warning(
            "call_guard_unreadable", step=call.step, error=str(exc)
        ),
    )
    if look is None:
        return False, "", False  # a cancel request was honoured
    if look.state == "free":
        if look.waited:
            d.log.info("lost_call_guard_free", step=call.step, tool=tool.name)
        return True, "", False
    after = f"{time.time() - begun:.0f}s after it started"
    if look.state == "unreadable":
        return (
            False,
            (
                f", and whether the worker that started it is gone could not be told {after} "
                f"(its guard could not be read: {look.error})"
            ),
            True,
        )
    return (
        False,
        (
            f", and the worker that started it still holds the call's guard {after}: it may "
            "still be running it (a stalled process, or a timed-out tool's thread)"
        ),
        True,
    )


def _reconciled(d: CallDriver, call: OpenCall, tool: str, found: object) -> ToolFinished:
    """The outcome ``reconcile`` reported for a lost call, recorded like a result."""
    try:
        result, full, digest = recordable_result(found, d.state.policy.max_tool_result_bytes)
    except LimitExceededError as exc:
        return ToolFinished(
            **d.fields(),
            step=call.step,
            call_id=call.call_id,
            tool=tool,
            ok=False,
            error=f"reconcile found the call happened, but {exc}",
        )
    return ToolFinished(
        **d.fields(),
        step=call.step,
        call_id=call.call_id,
        tool=tool,
        ok=True,
        result=result,
        result_bytes=full,
        result_sha256=digest,
        untrusted=getattr(d.setup.tools.get(tool), "output", "trusted") == "untrusted",
    )
