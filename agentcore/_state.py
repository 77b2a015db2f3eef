"""Run state as a fold over transcript events. Nothing else holds state."""

from __future__ import annotations

import bisect
import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic

from typing_extensions import TypeVar

from agentcore.contracts import (
    AskAction,
    BatchAction,
    FinishAction,
    NextAction,
    PlanAction,
    ToolAction,
    Usage,
    canonical_json,
)

from . import events as evt
from ._pending import PendingCall
from ._provenance import normalise
from ._status import RunStatus, status_after
from .policy import Budget, Policy
from .rules import ERROR_CHARS, PastCall, freeze

UNTRUSTED_TEXT_CAP = 4_000_000
"""Characters of untrusted output a run keeps for provenance; later output is not matched
(documented: an argument copied from it is labelled ``model``)."""

UNDO_SUFFIX = ":undo"
"""Ends the ``call_id`` of an ``approval`` of the undo of that call (a compensation that
needs several people), and the idempotency key of the undo itself."""

COMPENSATION_ENDINGS = ("compensated by ", "compensation stopped: ")
"""How the reason of a ``run_finished`` that a compensation records begins: it ended (the
run is ``cancelled``), or it stopped for a person (``needs_attention``). Either marks the
run as compensating, even when it stopped before any undo was recorded."""

IMPORTED = "imported history"
"""Where an imported assistant's or tool's message came from, as provenance names it."""

__all__ = [
    "COMPENSATION_ENDINGS",
    "IMPORTED",
    "UNDO_SUFFIX",
    "OpenCall",
    "PendingCall",
    "RunResult",
    "RunState",
    "RunStatus",
    "RunUsage",
    "Turn",
    "TurnMark",
    "args_hash",
    "status_after",
]


def args_hash(tool: str, args: dict[str, Any]) -> str:  # Any: JSON values
    """The hash an approval is bound to: tool name plus canonical JSON of the arguments."""
    blob = canonical_json({"tool": tool, "args": args}).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class RunUsage:
    """What a run has consumed so far."""

    steps: int = 0
    tool_calls: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation: the user's message and how the run's advance on it
    ended (the task is turn 1; each ``Agent.reply`` starts the next).

    Attributes:
        number: 1 for the task, then 2, 3, ...
        message: what the user said (the task, for turn 1).
        status: how the turn ended (``completed``, ``awaiting_input``, ...); the run's
            status for the latest turn.
        answer: the turn's answer when it completed (a typed output's canonical JSON).
        reason: why it stopped otherwise (for ``awaiting_input``: the model's question).
        seq: the seq of the event that began it (``run_started``, ``user_message``).
    """

    number: int
    message: str
    status: RunStatus
    answer: str | None = None
    reason: str | None = None
    seq: int = 0


@dataclass(frozen=True, slots=True)
class TurnMark:
    """What the run had used when its latest turn began: a turn's budget counts from here."""

    steps: int = 0
    tool_calls: int = 0
    child_steps: int = 0
    child_tool_calls: int = 0
    per_tool: Mapping[str, int] = field(default_factory=dict[str, int])
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """What the latest turn has used: a run's use less its :class:`TurnMark` (a budget
    reads it as ``Consumption``)."""

    steps: int
    tool_calls: int
    child_steps: int
    child_tool_calls: int
    per_tool: Mapping[str, int]
    usage: Usage
    last_call_tokens: int


OutputT = TypeVar("OutputT", default=str)
"""The type of a run's answer (``Agent(output=T)``); ``str`` by default."""


@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """The state of a run after ``run``, ``confirm`` or ``resume`` returned.

    Attributes:
        run_id: the run's id.
        status: see :class:`RunStatus`.
        answer: the final answer when ``completed`` (for a typed output, its canonical
            JSON).
        reason: why the run stopped, when it did not complete.
        pending: the call waiting for confirmation, when ``awaiting_confirmation``.
        usage: steps, tool calls, model calls, tokens and cost so far.
        output: the final answer as the agent's output type when ``completed`` (the text
            of ``answer`` for the default ``str``), else ``None``.
        turns: the conversation's turns in order, the latest last (one for a run nobody
            replied to): each message and how its turn ended.
    """

    run_id: str
    status: RunStatus
    answer: str | None
    reason: str | None
    pending: PendingCall | None
    usage: RunUsage
    output: OutputT | None = None
    turns: tuple[Turn, ...] = ()

    @property
    def question(self) -> str | None:
        """The model's question for the user when the run is ``awaiting_input`` (answer it
        with ``Agent.reply``), else ``None``."""
        return self.reason if self.status is RunStatus.AWAITING_INPUT else None


@dataclass(slots=True)
class OpenCall:
    """The most recent action and how far it got."""

    step: int
    call_id: str
    action: NextAction
    decision: evt.Decision | None = None
    confirmation: evt.Confirmation | None = None
    approvals: list[evt.Approval] = field(default_factory=list[evt.Approval])
    """Approvals before the last, of a call that needs several people."""
    expiry: evt.ApprovalExpired | None = None
    """The latest expiry of the call's approval window, if it had one."""
    started: evt.ToolStarted | None = None
    finished: evt.ToolFinished | None = None
    resolution: evt.Resolution | None = None
    put_to_a_person: bool = False
    """The run stopped as ``needs_attention`` since this call last started, for a person
    to settle (a stop only because the call's guard was still held does not count)."""
    rerun_authorised: bool = False
    """A person's ``resolve(rerun=True)`` that no ``tool_started`` has used yet: one rerun
    authorises one execution."""
    members: list[OpenCall] = field(default_factory=list["OpenCall"])
    """A batch's calls (``c<step>.1``, ``c<step>.2``...), each a tool call of its own with
    its own decision and outcome; empty for any other action."""

    @property
    def settled(self) -> bool:
        """Nothing more will happen for this call; the next step may begin."""
        if isinstance(self.action, BatchAction):
            return all(m.settled for m in self.members)
        d = self.decision
        if d is None:
            return False
        if d.verdict in ("deny", "needs_plan"):
            return True
        if d.verdict == "needs_confirmation" and self.confirmation is None:
            return False
        if self.confirmation is not None and not self.confirmation.approved:
            return True
        match self.action:
            case ToolAction():
                return self.finished is not None
            case PlanAction():
                return True
            case FinishAction() | AskAction():  # settled only by the run_finished after it
                return False

    def member(self, call_id: str) -> OpenCall | None:
        """The batch call ``call_id`` of this action, or ``None``."""
        return next((m for m in self.members if m.call_id == call_id), None)

    def run_args(self) -> dict[str, Any]:  # Any: JSON values
        """The arguments that run: edited ones from an approval, else the proposed ones."""
        if self.confirmation is not None and self.confirmation.args is not None:
            return dict(self.confirmation.args)
        for approval in self.approvals:  # only the first approver may edit
            if approval.args is not None:
                return dict(approval.args)
        assert isinstance(self.action, ToolAction)
        return dict(self.action.args)


@dataclass(slots=True)
class RunState:
    """The fold of a run's events. Apply events in ``seq`` order with :meth:`apply`."""

    run_id: str
    task: str = ""
    scope: tuple[str, ...] = ()
    budget: Budget = field(default_factory=Budget)
    policy: Policy = field(default_factory=Policy)
    route: tuple[str, ...] = ()
    contract: dict[str, str] = field(default_factory=dict[str, str])
    tools: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    status: RunStatus = RunStatus.RUNNING
    answer: str | None = None
    reason: str | None = None
    steps: int = 0
    tool_calls: int = 0
    child_steps: int = 0
    """Steps the sub-agents' runs took during this run's calls (they count in its budget)."""
    child_tool_calls: int = 0
    """Tool calls the sub-agents' runs made during this run's calls (they count in its
    budget)."""
    per_tool: Counter[str] = field(default_factory=Counter[str])
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    calls_by_model: dict[str, int] = field(default_factory=dict[str, int])
    """``model_called`` events so far per model name (a scripted model's position)."""
    last_call_tokens: int = 0
    plan_approved: bool = False
    person_plan_approved: bool = False
    """A person (not the policy) approved a plan in this run (``requires="person_plan"``)."""
    call: OpenCall | None = None
    reasks: int = 0
    failures: Counter[str] = field(default_factory=Counter[str])
    next_seq: int = 0
    started_at: float = 0.0
    updated_at: float = 0.0
    recoveries: int = 0
    """Consecutive recovery resumes (the worker died) without progress in between."""
    context_step: int = 0
    """The step whose context providers' output was recorded since the last action (0:
    none): a resumed step does not ask them again."""
    tenant: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])  # Any: JSON values
    """The run's identity as recorded in ``run_started`` (what ``FromRun`` reads)."""
    trusted_text: str = ""
    """The task and what people entered, normalised (``agentcore._provenance``)."""
    untrusted_text: str = ""
    """What untrusted tools returned, normalised, up to ``UNTRUSTED_TEXT_CAP`` characters."""
    untrusted_reads: list[tuple[int, str, str]] = field(default_factory=list[tuple[int, str, str]])
    """Where each untrusted result ends in ``untrusted_text``, with its call id and tool
    (a context provider's: no call id, the provider's name)."""
    confirmed_plan: str | None = None
    """The latest plan a person approved, normalised (what it covers: ``Policy.
    writes_after_untrusted``); ``None`` before one."""
    compensating: bool = False
    """A compensation of the run began: the run never advances again; only
    ``Agent.compensate`` continues it."""
    output_hash: str | None = None
    """The hash of the run's output type (``run_started``; ``None``: a text answer)."""
    turns: list[Turn] = field(default_factory=list[Turn])
    """The conversation's turns; the latest's status is set when it ends (``run_finished``)."""
    turn_mark: TurnMark = field(default_factory=TurnMark)
    """What the run had used when the latest turn began (the turn's budget counts from it)."""
    turn_budget: Budget = field(default_factory=Budget)
    """Each turn's budget when a reply names none: ``run_started``'s, without its deadline."""
    conversation_budget: Budget | None = None
    """Limits of all turns together (``run_started``), or ``None``."""
    reply_keys: dict[str, int] = field(default_factory=dict[str, int])
    """The idempotency keys of the user's messages, with the turn each began."""
    charged: dict[str, list[evt.Charge]] = field(default_factory=dict[str, list[evt.Charge]])
    """What each call charged to quotas and has not been given back, by call id."""
    past_calls: list[PastCall] = field(default_factory=list[PastCall])
    """Every tool call the run started, in order, with its outcome (what ``Policy.rules``
    see; ``agentcore.rules``)."""

    @classmethod
    def of(cls, events: Sequence[evt.Event]) -> RunState:
        """The state of the run whose transcript is ``events`` (all of it, from seq 0).

        Raises:
            ValueError: the transcript is empty, or an event is out of ``seq`` order.
        """
        if not events:
            raise ValueError("an empty transcript has no run state: pass the run's events")
        state = cls(events[0].run_id)
        for ev in events:
            state.apply(ev)
        return state

    def apply(self, event: evt.Event) -> None:
        """Fold one event into the state (events must arrive in ``seq`` order)."""
        if event.seq != self.next_seq:
            raise ValueError(f"event seq {event.seq} applied at expected seq {self.next_seq}")
        self.next_seq += 1
        self.updated_at = event.at
        match event:  # most frequent first
            case evt.ContextAdded():
                self.context_step = event.step
                if event.untrusted:
                    self._read(event.content, "", event.source)
            case evt.ModelCalled():
                self.model_calls += 1
                self.calls_by_model[event.model] = self.calls_by_model.get(event.model, 0) + 1
                self.usage = self.usage + Usage(
                    event.input_tokens, event.output_tokens, event.cached_input_tokens, event.cost
                )
                if event.role in ("plan", "act"):  # a step's size, for the graceful end
                    self.last_call_tokens = event.input_tokens + event.output_tokens
                if event.outcome == "invalid":
                    self.reasks += 1
                self.child_steps += event.steps
                self.child_tool_calls += event.tool_calls
            case evt.ActionProposed():
                self.recoveries = 0
                self.steps += 1
                self.reasks = 0
                self.context_step = 0
                self.call = OpenCall(event.step, event.call_id, event.action)
                if isinstance(event.action, BatchAction):
                    self.call.members = [
                        OpenCall(event.step, f"{event.call_id}.{i + 1}", event.action.member(i))
                        for i in range(len(event.action.calls))
                    ]
            case evt.Decision():
                call = self._call(event.call_id)
                call.decision = event
                if event.charges:
                    self.charged.setdefault(event.call_id, []).extend(event.charges)
                if event.verdict == "execute" and isinstance(call.action, PlanAction):
                    self.plan_approved = True
                if event.verdict in ("deny", "needs_plan") and isinstance(call.action, ToolAction):
                    self.failures[self.failure_key(call)] += 1
            case evt.Confirmation():
                if event.charges:
                    self.charged.setdefault(event.call_id, []).extend(event.charges)
                self._heard(event.reason, event.args)
                self.tools.update(event.accepted_tools)
                call = self._call(event.call_id)
                call.confirmation = event
                self._set_status(event)
                if event.approved and isinstance(call.action, PlanAction):
                    self.plan_approved = self.person_plan_approved = True
                    self.confirmed_plan = normalise("\n".join(call.action.steps))
                if not event.approved and isinstance(call.action, ToolAction):
                    self.failures[self.failure_key(call)] += 1
            case evt.Approval() if event.call_id.endswith(UNDO_SUFFIX):
                self.compensating = True  # a person's approval of an undo (``_compensation``)
            case evt.Approval():
                self._call(event.call_id).approvals.append(event)
            case evt.ApprovalExpired():
                self._call(event.call_id).expiry = event
            case evt.ToolStarted():
                call = self._call(event.call_id)
                if call.started is None:
                    self.tool_calls += 1
                    self.per_tool[event.tool] += 1
                    self.past_calls.append(self._past_call(call, event))
                else:  # run again (a person's rerun): no outcome yet
                    self._settle_past(event.call_id, None, None)
                call.started = event
                call.finished = None
                call.put_to_a_person = call.rerun_authorised = False
            case evt.ToolFinished():
                self.recoveries = 0
                call = self._call(event.call_id)
                call.finished = event
                self._settle_past(event.call_id, event.ok, event.error)
                if event.untrusted and event.ok:
                    self._read(event.result, event.call_id, event.tool)
                if not event.ok:
                    self.failures[self.failure_key(call)] += 1
            case evt.QuotaReleased():
                self.charged.pop(event.call_id, None)
            case evt.QuotaReserved():
                pass  # the store's counters hold it; the request's model_called settles it
            case evt.UserMessage():
                self._heard(event.text)  # trusted, like the task
                if self.turns:  # how the turn before ended
                    self.turns[-1] = replace(self.turns[-1], status=self.status)
                self.turns.append(Turn(event.turn, event.text, RunStatus.RUNNING, seq=event.seq))
                if event.key is not None:
                    self.reply_keys[event.key] = event.turn
                self.turn_mark = TurnMark(
                    self.steps,
                    self.tool_calls,
                    self.child_steps,
                    self.child_tool_calls,
                    dict(self.per_tool),
                    self.usage,
                )
                self.budget = (
                    self.turn_budget if event.budget is None else Budget.from_json(event.budget)
                )
                # A new request: the last turn's finish is done, its plan covers it no more.
                self.call = None
                self.answer = None
                self.last_call_tokens = self.reasks = self.context_step = self.recoveries = 0
                self.plan_approved = self.person_plan_approved = False
                self.confirmed_plan = None
                self._set_status(event)
            case evt.RunResumed():
                self.tools.update(event.accepted_tools)
                if event.budget is not None:
                    self.budget = Budget.from_json(event.budget)
                self.recoveries = self.recoveries + 1 if event.recovery else 0
                self._set_status(event)
            case evt.Resolution():
                self._heard(event.reason)
                self.tools.update(event.accepted_tools)
                call = self._call(event.call_id)
                call.resolution = event
                call.rerun_authorised = event.decision == "rerun"
                self._set_status(event)
            case evt.RunFinished():
                self._set_status(event)
                if (
                    event.status == RunStatus.NEEDS_ATTENTION.value
                    and self.call is not None
                    and self.call.started is not None
                    and not event.guard_held
                ):
                    self.call.put_to_a_person = True
                self.answer = event.answer
                self.reason = event.reason
                if self.turns:
                    self.turns[-1] = replace(
                        self.turns[-1], answer=event.answer, reason=event.reason
                    )
                if (event.reason or "").startswith(COMPENSATION_ENDINGS):
                    self.compensating = True  # it never advances again (``_compensation``)
            case evt.CompensationStarted() | evt.CompensationFinished():
                self.compensating = True
            case evt.RunStarted():
                self.trusted_text = normalise(event.task)
                self.task = event.task
                self.scope = tuple(event.scope)
                self.budget = Budget.from_json(event.budget)
                self.policy = Policy.from_json(event.policy)
                self.route = tuple(event.route)
                self.contract = dict(event.contract)
                self.tools = {k: dict(v) for k, v in event.tools.items()}
                self.tenant = event.tenant
                self.metadata = dict(event.metadata)
                self.started_at = event.at
                self.output_hash = event.output_hash
                self.turns = [Turn(1, event.task, RunStatus.RUNNING, seq=event.seq)]
                for said in event.history:  # imported: the user's trusted, the rest not
                    if said["role"] == "user":
                        self._heard(said["content"])
                    else:
                        self._read(said["content"], "", IMPORTED)
                self.turn_budget = replace(self.budget, deadline=None)
                if event.conversation_budget is not None:
                    self.conversation_budget = Budget.from_json(event.conversation_budget)
            case _:
                raise evt.unhandled_event(event, "the run state's fold (RunState.apply)")

    def _read(self, result: object, call_id: str, tool: str) -> None:
        """Untrusted output the model saw."""
        if len(self.untrusted_text) < UNTRUSTED_TEXT_CAP:
            text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
            self.untrusted_text += "\n" + normalise(text)
            self.untrusted_reads.append((len(self.untrusted_text), call_id, tool))

    def _past_call(self, call: OpenCall, event: evt.ToolStarted) -> PastCall:
        """The record of a call that starts (``past_calls``)."""
        confirmed = call.confirmation
        approved_by: tuple[str, ...] = ()
        if confirmed is not None and confirmed.approved:
            approved_by = tuple(confirmed.approvers) or (confirmed.by,)
        effect = self.tools.get(event.tool, {}).get("effect")
        return PastCall(
            event.call_id,
            event.step,
            self.turn,
            event.tool,
            freeze(event.args),
            effect if isinstance(effect, str) else None,
            approved_by,
        )

    def _settle_past(self, call_id: str, ok: bool | None, error: str | None) -> None:
        """Record the outcome of the started call ``call_id`` (searched from the latest)."""
        for i in range(len(self.past_calls) - 1, -1, -1):
            past = self.past_calls[i]
            if past.call_id == call_id:
                cut = None if error is None else error[:ERROR_CHARS]
                self.past_calls[i] = past._replace(ok=ok, error=cut)
                return

    def untrusted_source(self, offset: int) -> tuple[str, str] | None:
        """The call id and tool of the untrusted result that holds ``untrusted_text``'s
        character at ``offset``."""
        at = bisect.bisect_right([end for end, _, _ in self.untrusted_reads], offset)
        if at == len(self.untrusted_reads):
            return None
        _, call_id, tool = self.untrusted_reads[at]
        return call_id, tool

    def _heard(self, *said: object) -> None:
        """What a person entered (trusted)."""
        for item in said:
            if item:
                text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
                self.trusted_text += "\n" + normalise(text)

    def _set_status(self, event: evt.Event) -> None:
        status = RunStatus(status_after(self.status.value, event))
        if status is not self.status or status is RunStatus.RUNNING:
            self.reason = None
        self.status = status

    def _call(self, call_id: str) -> OpenCall:
        if self.call is not None and self.call.members:
            member = self.call.member(call_id)
            if member is not None:
                return member
        if self.call is None or self.call.call_id != call_id:
            raise ValueError(f"event for call {call_id!r} which is not the open call")
        return self.call

    @staticmethod
    def failure_key(call: OpenCall) -> str:
        """Identity of a call for repeated-failure detection: tool plus argument hash."""
        assert isinstance(call.action, ToolAction)
        return args_hash(call.action.tool, call.run_args())

    @property
    def turn(self) -> int:
        """The latest turn's number (1 until someone replies)."""
        return len(self.turns) or 1

    def turn_used(self) -> RunState | TurnUsage:
        """What the latest turn has used, as its budget reads it (the run itself, on the
        first turn: nothing to subtract)."""
        mark = self.turn_mark
        if len(self.turns) <= 1:
            return self
        u, m = self.usage, mark.usage
        cost = None if u.cost is None else u.cost - (m.cost or 0.0)
        return TurnUsage(
            self.steps - mark.steps,
            self.tool_calls - mark.tool_calls,
            self.child_steps - mark.child_steps,
            self.child_tool_calls - mark.child_tool_calls,
            {k: n - mark.per_tool.get(k, 0) for k, n in self.per_tool.items()},
            Usage(
                u.input_tokens - m.input_tokens,
                u.output_tokens - m.output_tokens,
                u.cached_input_tokens - m.cached_input_tokens,
                cost,
            ),
            self.last_call_tokens,
        )

    def run_usage(self) -> RunUsage:
        """Consumption so far."""
        u = self.usage
        return RunUsage(
            steps=self.steps,
            tool_calls=self.tool_calls,
            model_calls=self.model_calls,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cached_input_tokens=u.cached_input_tokens,
            cost=u.cost,
        )

    def pending(self) -> PendingCall | None:
        """The call waiting for a person, if the run is waiting for one."""
        call = self.call
        if (
            self.status is not RunStatus.AWAITING_CONFIRMATION
            or call is None
            or call.decision is None
            or call.decision.verdict != "needs_confirmation"
            or call.confirmation is not None
        ):
            return None
        approvals = tuple(a.by for a in call.approvals)
        needed, expires = call.decision.approvals_needed, self.approval_deadline()
        why, provenance = call.decision.reason, dict(call.decision.provenance)
        match call.action:
            case ToolAction(tool=name, thought=thought):
                args = call.run_args()
                effect = self.tools.get(name, {}).get("effect")
                return PendingCall(
                    call.step,
                    call.call_id,
                    "tool",
                    thought,
                    name,
                    args,
                    str(effect) if effect else None,
                    args_hash(name, args),
                    approvals=approvals,
                    approvals_needed=needed,
                    expires_at=expires,
                    reason=why,
                    provenance=provenance,
                )
            case PlanAction(thought=thought, steps=steps):
                return PendingCall(
                    call.step,
                    call.call_id,
                    "plan",
                    thought,
                    plan_steps=tuple(steps),
                    approvals=approvals,
                    approvals_needed=needed,
                    expires_at=expires,
                    reason=why,
                )
            case FinishAction() | BatchAction() | AskAction():  # a batch's calls never wait
                return None

    def approval_deadline(self) -> float | None:
        """When the waiting call's approval window ends (``Policy.approval_ttl`` after it
        began waiting, or after its latest escalation), or ``None`` without a window."""
        ttl = self.policy.approval_ttl
        call = self.call
        if ttl is None or call is None or call.decision is None:
            return None
        return (call.expiry.at if call.expiry is not None else call.decision.at) + ttl

    def result(self) -> RunResult:
        """A snapshot for the caller."""
        turns = self.turns
        if turns and turns[-1].status is not self.status:
            turns = [*turns[:-1], replace(turns[-1], status=self.status)]
        return RunResult(
            self.run_id,
            self.status,
            self.answer,
            self.reason,
            self.pending(),
            self.run_usage(),
            turns=tuple(turns),
        )
