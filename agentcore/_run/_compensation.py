"""Compensation: undo a stopped run's committed effects, newest first, at most once each.

A run that a person denied, cancelled, that ran out of budget or failed may have changed
things along the way. ``Agent.compensate`` (or ``Policy.compensate_on``) undoes every
committed call of a tool that declares ``@tool(compensate=...)``, newest first. Each undo
is an effect like a tool call, through the same protocol (``_effects``):
``compensation_started`` is durable before it runs (under its guard when it is not
idempotent), a sync undo runs in the tools' pool, and ``compensation_finished`` records how
it ended. Nothing older is undone while anything newer is in doubt:

- a call whose own outcome is unknown (its worker died, or the run was cancelled while it
  ran) is reconciled first (``reconcile`` of the tool, once no process can still run it),
  or settled by a person (``settle={call_id: "done" | "not_done"}``);
- an undo whose outcome was lost (its worker died, or it passed ``Compensation.timeout``)
  runs again only when its :class:`Compensation` is idempotent, or ``reconcile`` finds no
  record of it while no process can still run it; otherwise a person settles it the same
  way, and a person's ``not_done`` (run it again) is refused with
  :class:`CallStillRunningError` while the undo's guard is held (a timed-out thread keeps
  it until it returns);
- an undo that fails stops the run as ``needs_attention``; calling ``compensate`` again
  (after fixing the cause) retries it and goes on.

An undo is an effect, governed like the call it undoes:

- ``Policy.authorize(by, pending)`` of the agent that compensates is asked about every undo
  still to do before anything is recorded (``pending.kind`` is ``"undo"``, ``pending.tool``
  the tool whose call is undone); a refusal raises :class:`NotAuthorizedError`;
- an undo of a call whose tool needs N approvals (``Policy.approvals`` by tool, label or
  effect, the larger of the run's recorded rules and the agent's; a destructive tool at
  least one) needs N distinct people. Each person's ``compensate`` approves every undo
  still to do; until an undo has its N people an ``approval`` (call id ``<call>:undo``)
  records each one and the run stops as ``needs_attention`` saying who approved and how
  many more are needed. People are compared as confirm compares them
  (:func:`agentcore.approvals.person_key`); the same person twice raises
  :class:`AlreadyApprovedError`. ``compensate_on`` (``by="policy"``) is no person: it
  stops at the first undo that needs one;
- a ``completed`` run is compensated only when the agent's ``Policy.compensate_completed``
  is set.

When every effect is undone the run ends ``cancelled``, with a reason that lists what was
undone and what could not be (a tool without ``compensate``). A run that began
compensating (or whose undo a person approved) never advances again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentcore.contracts.errors import (
    AlreadyApprovedError,
    NotAuthorizedError,
    RunError,
)

from .._faults import crash_point
from .._state import COMPENSATION_ENDINGS, UNDO_SUFFIX, PendingCall, RunStatus
from ..approvals import person_key
from ..events import (
    Approval,
    CompensationFinished,
    CompensationStarted,
    Event,
    RunFinished,
    ToolFinished,
    ToolStarted,
)
from ..policy import Policy
from ..tools import (
    CommittedCall,
    Compensation,
    Tool,
    current_context,
    recordable_result,
)
from ._commands import outcomes_unknown
from ._effects import (
    HELD,
    Failed,
    Running,
    Unknown,
    ask_reconcile,
    free_now,
    guards_for,
    outcome_lost,
    refuse_while_running,
    run_effect,
    run_guarded,
)
from ._loop import Driver
from ._tool_calls import call_context, deps_of

__all__ = ["Settle", "compensate", "compensation_needed"]

Settle = Literal["done", "not_done"]
"""A person's word on a call or an undo whose outcome is unknown: it happened, or not."""

_DONE, _STOPPED = COMPENSATION_ENDINGS
_UNCOMPENSABLE = frozenset({RunStatus.RUNNING, RunStatus.AWAITING_CONFIRMATION})


@dataclass(slots=True)
class _Effect:
    """One started call of a tool with an effect, as the transcript has it."""

    started: ToolStarted
    finished: ToolFinished | None = None
    undo_started: CompensationStarted | None = None
    undo_finished: CompensationFinished | None = None
    undo_approvals: list[Approval] = field(default_factory=list[Approval])
    """People's approvals of its undo, before the last (it needs several people)."""

    @property
    def outcome_known(self) -> bool:
        f = self.finished
        return f is not None and not outcome_lost(f)

    @property
    def settled(self) -> bool:
        """Its undo is over: undone, or found not needed."""
        u = self.undo_finished
        return u is not None and u.outcome != "failed"

    @property
    def undo_in_doubt(self) -> bool:
        """An undo started and its outcome was never recorded."""
        s, f = self.undo_started, self.undo_finished
        return s is not None and (f is None or f.seq < s.seq)


def _effects(events: Sequence[Event], effects_of: Mapping[str, str]) -> list[_Effect]:
    """The calls of tools with an effect, newest first, with what happened to each."""
    by_call: dict[str, _Effect] = {}
    for ev in events:
        match ev:
            case ToolStarted() if effects_of.get(ev.tool, "read") != "read":
                by_call.setdefault(ev.call_id, _Effect(ev)).started = ev
            case ToolFinished() if ev.call_id in by_call:
                by_call[ev.call_id].finished = ev
            case CompensationStarted() if ev.call_id in by_call:
                by_call[ev.call_id].undo_started = ev
            case CompensationFinished() if ev.call_id in by_call:
                by_call[ev.call_id].undo_finished = ev
            case Approval() if (
                ev.call_id.endswith(UNDO_SUFFIX) and ev.call_id.removesuffix(UNDO_SUFFIX) in by_call
            ):
                by_call[ev.call_id.removesuffix(UNDO_SUFFIX)].undo_approvals.append(ev)
            case _:
                pass
    return sorted(by_call.values(), key=lambda e: e.started.seq, reverse=True)


def compensation_needed(events: Sequence[Event], tools: Mapping[str, Tool]) -> bool:
    """Whether the run has an effect that happened (or may have) and is not undone."""
    effects = {name: t.spec.effect for name, t in tools.items()}
    return any(
        not e.settled and (not e.outcome_known or (e.finished is not None and e.finished.ok))
        for e in _effects(events, effects)
    )


class _StopError(Exception):
    """The compensation cannot go on without a person (the run is stopped with the reason)."""


async def compensate(
    d: Driver,
    events: Sequence[Event],
    *,
    by: str,
    settle: Mapping[str, Settle],
    policy: Policy | None = None,
    person: bool = True,
) -> None:
    """Undo the run's committed effects newest first (see the module's text).

    Args:
        policy: the policy of the agent that compensates (its ``authorize``, its
            ``approvals`` beside the run's recorded ones, ``compensate_completed``);
            ``None``: the run's recorded policy alone, with no ``authorize``.
        person: ``by`` is a person (``False`` for ``Policy.compensate_on``: it approves
            no undo that needs people).

    Raises:
        RunError: the run is running or waiting for a person (cancel it first), it is
            completed and ``policy.compensate_completed`` is not set, or ``settle`` names
            a call that has nothing in doubt.
        NotAuthorizedError: ``policy.authorize`` refuses ``by`` for an undo still to do
            (nothing is recorded).
        AlreadyApprovedError: ``by`` approved every undo that still needs people already
            (nothing is recorded).
    """
    st = d.state
    last = events[-1] if events else None
    if isinstance(last, RunFinished) and (last.reason or "").startswith(_DONE):
        return  # compensated already: nothing to record again
    if st.status in _UNCOMPENSABLE:
        raise RunError(
            f"Run {st.run_id} is {st.status.value}: cancel it first (agentcore cancel "
            f"{st.run_id}), then compensate it."
        )
    if st.status is RunStatus.COMPLETED and not (policy and policy.compensate_completed):
        raise RunError(
            f"Run {st.run_id} is completed: undoing its effects would cancel it and its answer "
            "would no longer be its result, and this agent's policy does not allow that. To "
            "allow it, give the agent Policy(compensate_completed=True). Nothing was recorded."
        )
    tools = d.setup.tools
    recorded = {name: str(entry.get("effect", "read")) for name, entry in st.tools.items()}
    effect_of = {**recorded, **{n: t.spec.effect for n, t in tools.items()}}
    effects = _effects([*events, *outcomes_unknown(st, "")], effect_of)
    doubtful = {e.started.call_id for e in effects if not e.outcome_known or e.undo_in_doubt}
    stray = sorted(set(settle) - doubtful)
    if stray:
        raise RunError(
            f"Run {st.run_id}: nothing is in doubt about {', '.join(stray)}; settle only "
            "names calls or undos whose outcome is unknown: "
            f"{', '.join(sorted(doubtful)) or 'none'}."
        )
    await _refuse_rerun_while_running(d, effects, settle)  # raises before anything is recorded
    gate = _Gate(d, effects, effect_of, by=by, policy=policy, person=person)
    gate.check(settling=bool(settle))  # raises before anything is recorded
    lost = outcomes_unknown(st, f"a compensation by {by} began")
    for event in lost:  # the open call's outcome is unknown: say so before undoing
        d.record(event)
    added = [*lost, *gate.approve()]
    effects = _effects([*events, *added], effect_of)
    gate.effects = effects
    undone: list[str] = []
    kept: list[str] = []
    try:
        for effect in effects:
            if effect.settled:
                if effect.undo_finished is not None and effect.undo_finished.outcome == "undone":
                    undone.append(_label(effect))
                continue
            await _one(d, effect, tools.get(effect.started.tool), by, settle, undone, kept, gate)
    except _StopError as stop:
        why = str(stop)  # begins with _STOPPED: the run never advances again (the fold)
        d.finish(
            RunStatus.NEEDS_ATTENTION, reason=why if why.startswith(_STOPPED) else _STOPPED + why
        )
        await d.flush()
        return
    what = f"undid {', '.join(undone)}" if undone else "nothing needed undoing"
    if kept:
        what += f"; could not undo (no compensate): {', '.join(kept)}"
    d.finish(RunStatus.CANCELLED, reason=f"{_DONE}{by}: {what}")
    await d.flush()


def _label(effect: _Effect) -> str:
    return f"{effect.started.tool} at step {effect.started.step}"


async def _refuse_rerun_while_running(
    d: Driver, effects: Sequence[_Effect], settle: Mapping[str, Settle]
) -> None:
    """A person's ``not_done`` for an undo in doubt runs it again: refused, as a rerun of a
    tool call is, while the process that started the undo still holds its guard.

    Raises:
        CallStillRunningError: that guard is held, or cannot be read (nothing recorded).
    """
    for e in effects:
        undo = e.undo_started
        if undo is None or not e.undo_in_doubt or settle.get(e.started.call_id) != "not_done":
            continue
        key = undo.idempotency_key
        await refuse_while_running(
            d.setup.store,
            d.state.run_id,
            key,
            guarded=undo.guarded,
            what=(f"the undo of {_label(e)} ({e.started.call_id}, key {key})", "the undo's guard"),
            instead=f"settle it now: --done {e.started.call_id} (it happened)",
        )


class _Gate:
    """Who may undo what: the agent's ``authorize`` and the approval rules, applied to
    each undo still to do (see the module's text)."""

    def __init__(
        self,
        d: Driver,
        effects: list[_Effect],
        effect_of: Mapping[str, str],
        *,
        by: str,
        policy: Policy | None,
        person: bool,
    ) -> None:
        self.d, self.by, self.policy, self.person = d, by, policy, person
        self.effect_of = effect_of
        self.effects = effects

    def _todo(self) -> list[_Effect]:
        """The effects an undo may still run for, newest first."""
        todo: list[_Effect] = []
        for e in self.effects:
            tool = self.d.setup.tools.get(e.started.tool)
            if e.settled or tool is None or tool.compensation is None:
                continue
            if e.outcome_known and not (e.finished is not None and e.finished.ok):
                continue  # it failed: nothing to undo
            todo.append(e)
        return todo

    def needed(self, e: _Effect) -> int:
        """How many distinct people the undo of ``e`` needs (0: anyone who may ask)."""
        name = e.started.tool
        effect = self.effect_of.get(name, "read")
        tool = self.d.setup.tools.get(name)
        labels = sorted(tool.labels) if tool is not None else []
        keys = (f"tool:{name}", f"effect:{effect}", *(f"label:{lb}" for lb in labels))
        count = self.d.state.policy.approvals_needed(keys)
        if self.policy is not None:
            count = max(count, self.policy.approvals_needed(keys))
        return max(count, 1) if effect == "destructive" else count

    def approved(self, e: _Effect) -> list[str]:
        """Who approved the undo of ``e`` so far (each person once, as recorded)."""
        seen: dict[str, str] = {}
        for a in e.undo_approvals:
            seen.setdefault(person_key(a.by), a.by)
        return list(seen.values())

    def _with_me(self, e: _Effect) -> int:
        people = {person_key(b) for b in self.approved(e)}
        if self.person:
            people.add(person_key(self.by))
        return len(people)

    def ready(self, e: _Effect) -> bool:
        """Whether the undo of ``e`` may run on this request: it began before (it was
        approved then), or enough people approved it, ``by`` included."""
        return e.undo_started is not None or self._with_me(e) >= self.needed(e)

    def pending(self, e: _Effect) -> PendingCall:
        """The undo of ``e`` as ``authorize`` is asked about it."""
        s = e.started
        return PendingCall(
            step=s.step,
            call_id=s.call_id,
            kind="undo",
            thought="",
            tool=s.tool,
            args=dict(s.args),
            effect=self.effect_of.get(s.tool),
            approvals=tuple(self.approved(e)),
            approvals_needed=max(1, self.needed(e)),
            reason=f"the undo of {_label(e)}, asked for by {self.by}",
        )

    def check(self, *, settling: bool = False) -> None:
        """Refuse, before anything is recorded, a person ``authorize`` refuses for an undo
        still to do, and a person who has nothing left to approve (nor to settle:
        ``settling``).

        Raises:
            NotAuthorizedError: ``authorize`` refused.
            AlreadyApprovedError: ``by`` approved every undo still waiting for people, none
                can run, and ``by`` settles nothing.
        """
        todo = self._todo()
        if not self.person or not todo:
            return
        authorize = self.policy.authorize if self.policy is not None else None
        run_id = self.d.state.run_id
        for e in todo:
            if authorize is not None and not authorize(self.by, self.pending(e)):
                raise NotAuthorizedError(
                    f"Run {run_id}: {self.by!r} may not undo {_label(e)} (Policy.authorize "
                    "refused); nothing recorded."
                )
        me = person_key(self.by)
        if (
            not settling
            and not self.ready(todo[0])
            and all(
                me in {person_key(b) for b in self.approved(e)} for e in todo if not self.ready(e)
            )
        ):
            e = todo[0]
            raise AlreadyApprovedError(
                f"Run {run_id}: {self.by!r} approved the undo of {_label(e)} already; it "
                f"needs {self.needed(e)} different people ({len(self.approved(e))} so far: "
                f"{', '.join(self.approved(e))}). Nothing recorded."
            )

    def approve(self) -> list[Approval]:
        """Record ``by``'s approval of each undo that needs more people than it has with
        them (the last approver's is the undo's ``compensation_started``)."""
        if not self.person:
            return []
        me = person_key(self.by)
        recorded: list[Approval] = []
        for e in self._todo():
            if e.undo_started is not None or self.ready(e):
                continue
            if me in {person_key(b) for b in self.approved(e)}:
                continue
            s = e.started
            approval = Approval(
                **self.d.fields(),
                step=s.step,
                call_id=f"{s.call_id}{UNDO_SUFFIX}",
                by=self.by,
                reason=f"approves the undo of {_label(e)}",
            )
            self.d.record(approval)
            recorded.append(approval)
        return recorded

    def why_not(self, e: _Effect) -> str:
        """Why the undo of ``e`` waits: the people it needs and who approved it so far."""
        so_far = self.approved(e)
        who = f"{len(so_far)} so far: {', '.join(so_far)}" if so_far else "none so far"
        asker = (
            "another person approves it"
            if so_far
            else "a person approves it (Policy.compensate_on approves nothing that needs people)"
        )
        return (
            f"compensation stopped: the undo of {_label(e)} ({e.started.call_id}) needs the "
            f"approval of {self.needed(e)} different people ({who}); nothing older is undone "
            f"until {asker}: agentcore compensate {self.d.state.run_id} --by NAME"
        )


async def _one(
    d: Driver,
    effect: _Effect,
    tool: Tool | None,
    by: str,
    settle: Mapping[str, Settle],
    undone: list[str],
    kept: list[str],
    gate: _Gate,
) -> None:
    """Settle one effect: find whether it happened, then undo it once (when the people it
    needs approved it)."""
    started = effect.started
    call_id = started.call_id
    result: Any = None  # Any: the call's JSON result
    if effect.outcome_known and not (effect.finished is not None and effect.finished.ok):
        return  # it failed: nothing happened to undo
    if tool is not None and tool.compensation is not None and not gate.ready(effect):
        raise _StopError(gate.why_not(effect))  # before anything else is asked or recorded
    if effect.outcome_known:
        assert effect.finished is not None
        result = effect.finished.result
    else:
        happened, result = await _did_it_happen(d, effect, tool, settle.get(call_id))
        if not happened:
            d.record(
                _finished(d, started, "not_needed", reason=_why_not_needed(settle.get(call_id), by))
            )
            await d.flush()
            return
    if tool is None or tool.compensation is None:
        kept.append(_label(effect))
        return
    comp = tool.compensation
    key = f"{started.idempotency_key}{UNDO_SUFFIX}"
    if effect.undo_in_doubt:
        word = settle.get(call_id)
        if word == "done":
            d.record(_finished(d, started, "undone", reason=f"{by} says the undo happened"))
            await d.flush()
            undone.append(_label(effect))
            return
        if word is None and not comp.idempotent:
            found = await _reconciled_undo(d, effect, comp, key)
            if found is not None:
                d.record(_finished(d, started, "undone", result=found[0], reason=found[1]))
                await d.flush()
                undone.append(_label(effect))
                return
    committed = CommittedCall(
        d.state.run_id,
        started.step,
        call_id,
        started.tool,
        dict(started.args),
        result,
        started.idempotency_key,
    )
    await _run_undo(d, effect, comp, committed, key, by)
    undone.append(_label(effect))


async def _did_it_happen(
    d: Driver, effect: _Effect, tool: Tool | None, word: Settle | None
) -> tuple[bool, Any]:  # Any: the call's JSON result
    """Whether a call whose outcome is unknown happened (and its result): a person's
    word, else ``reconcile`` once no process can still be running it.

    Raises:
        _StopError: neither can say.
    """
    started = effect.started
    if word is not None:
        return word == "done", None
    key = started.idempotency_key
    if tool is not None and tool.reconcile is not None:
        free = await _free_now(d, key) if started.guarded else None
        if free:
            found = await ask_reconcile(tool.reconcile, key)
            if isinstance(found, Failed):
                raise _StopError(_doubt(d, effect, f"reconcile raised {found.error}"))
            return found is not None, found
        why = (
            "the worker that ran it still holds its guard: it may still be running"
            if free is False
            else "whether the worker that ran it is gone cannot be told (no call guard)"
        )
        raise _StopError(_doubt(d, effect, why))
    raise _StopError(_doubt(d, effect, "the tool has no reconcile to ask"))


def _doubt(d: Driver, effect: _Effect, why: str) -> str:
    s = effect.started
    return (
        f"compensation stopped: the call {s.tool} at step {s.step} ({s.call_id}, idempotency "
        f"key {s.idempotency_key}) may or may not have happened ({why}); nothing older is "
        f"undone until a person says: agentcore compensate {d.state.run_id} --by NAME "
        f"--done {s.call_id} | --not-done {s.call_id}"
    )


def _why_not_needed(word: Settle | None, by: str) -> str:
    if word is not None:
        return f"{by} says the call did not happen"
    return "reconcile found no record of the call, and no process can still be running it"


async def _reconciled_undo(
    d: Driver, effect: _Effect, comp: Compensation, key: str
) -> tuple[Any, str] | None:  # Any: JSON result
    """A lost undo of a non-idempotent compensation: ``(result, reason)`` when it
    happened; ``None`` when it did not and may run again.

    Raises:
        _StopError: it cannot be told (no reconcile, its worker may still run it, or
            reconcile failed).
    """
    s = effect.started
    assert effect.undo_started is not None

    def stop(why: str) -> _StopError:
        return _StopError(
            f"compensation stopped: the undo of {s.tool} at step {s.step} ({s.call_id}, key "
            f"{key}) was started and its outcome was not recorded; {why}. A person says "
            f"whether it happened: agentcore compensate {d.state.run_id} --by NAME --done "
            f"{s.call_id} (it happened) | --not-done {s.call_id} (run it again)"
        )

    if comp.reconcile is None:
        raise stop("its compensation is not idempotent and has no reconcile")
    if not effect.undo_started.guarded:
        raise stop("whether the worker that ran it is gone cannot be told (no guard)")
    if not await _free_now(d, key):
        raise stop("the worker that ran it still holds its guard: it may still be running")
    found = await ask_reconcile(comp.reconcile, key)
    if isinstance(found, Failed):
        raise stop(f"reconcile raised {found.error}")
    return None if found is None else (found, "reconcile found it happened")


async def _run_undo(
    d: Driver, effect: _Effect, comp: Compensation, call: CommittedCall, key: str, by: str
) -> None:
    """Record the undo's intent, run it (under its guard when it is not idempotent, in the
    tools' pool when it is sync, within ``comp.timeout``), record its outcome.

    Raises:
        _StopError: it failed, or its outcome is unknown (it timed out), or another
            process holds its guard.
    """
    s = effect.started
    guards = guards_for(d.setup.store, idempotent=comp.idempotent)
    begun = 0.0

    async def body() -> tuple[object, Running | None]:
        nonlocal begun
        d.record(
            CompensationStarted(
                **d.fields(),
                step=s.step,
                call_id=s.call_id,
                tool=s.tool,
                idempotency_key=key,
                by=by,
                guarded=guards is not None,
            )
        )
        await d.flush()  # write-ahead, as for a tool call
        if d.own is not None:
            d.own.check()
        crash_point("after_compensation_intent")
        begun = time.perf_counter()
        ctx = call_context(d, s.step, s.call_id, key, await deps_of(d))
        with current_context(ctx):  # a sync undo's thread runs in a copy of this context
            value = await run_effect(comp.fn, call, within=comp.timeout)
        crash_point("after_compensation_effect")
        return value, value.still_running if isinstance(value, Unknown) else None

    crash_point("before_compensation_intent")
    if guards is None:
        value, _ = await body()
    else:
        value = await run_guarded(guards, d.state.run_id, key, body, thread=True)
        if value is HELD:
            raise _StopError(
                f"compensation stopped: another process holds the guard of the undo of "
                f"{s.tool} at step {s.step} (key {key}); run compensate again later"
            )
    took = round((time.perf_counter() - begun) * 1000, 3)
    if isinstance(value, Unknown):
        # Not a failure: the undo may have happened, or still be happening (its thread
        # keeps running, and keeps its guard until it returns). It stays in doubt.
        d.log.warning("compensation_outcome_lost", step=s.step, tool=s.tool)
        settle = (
            f"run compensate again once it has returned: reconcile settles it "
            f"(agentcore compensate {d.state.run_id} --by NAME)"
            if comp.reconcile is not None and not comp.idempotent
            else f"a person says whether it happened once it has returned: agentcore "
            f"compensate {d.state.run_id} --by NAME --done {s.call_id} (it happened) | "
            f"--not-done {s.call_id} (run it again)"
            if not comp.idempotent
            else f"run compensate again (agentcore compensate {d.state.run_id} --by NAME): "
            "it is idempotent and runs again"
        )
        raise _StopError(
            f"compensation stopped: the undo of {s.tool} at step {s.step} (key {key}) "
            f"{value.why}; its outcome is unknown and it may still be running; nothing "
            f"older was undone; {settle}"
        )
    if isinstance(value, Failed):
        d.record(_finished(d, s, "failed", error=value.error, duration_ms=took))
        await d.flush()
        raise _StopError(
            f"compensation stopped: the undo of {s.tool} at step {s.step} failed: "
            f"{value.error}; nothing older was undone. Fix the cause and run compensate "
            f"again (it retries this undo): agentcore compensate {d.state.run_id} --by NAME"
        )
    try:
        result, _, _ = recordable_result(value, d.state.policy.max_tool_result_bytes)
    except Exception as exc:
        result = f"(result not recordable: {exc})"
    d.record(_finished(d, s, "undone", result=result, duration_ms=took))
    await d.flush()


async def _free_now(d: Driver, key: str) -> bool:
    """Whether no process holds the guard of ``key`` now. Compensation does not wait for a
    guard, as a tool call's recovery does: a person asked for it, and is told to ask again
    later."""
    return await free_now(
        d.setup.store,
        d.state.run_id,
        key,
        lambda exc: d.log.warning("call_guard_unreadable", key=key, error=str(exc)),
    )


def _finished(
    d: Driver,
    s: ToolStarted,
    outcome: Literal["undone", "failed", "not_needed"],
    *,
    result: Any = None,  # Any: JSON
    error: str | None = None,
    reason: str | None = None,
    duration_ms: float = 0.0,
) -> CompensationFinished:
    return CompensationFinished(
        **d.fields(),
        step=s.step,
        call_id=s.call_id,
        tool=s.tool,
        outcome=outcome,
        result=result,
        error=error,
        reason=reason,
        duration_ms=duration_ms,
    )
