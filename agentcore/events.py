"""The transcript: provider-neutral, append-only events. The run state is a fold over them.

Every event has ``run_id``, a per-run ``seq`` (0, 1, 2, ...), a time ``at`` (Unix seconds)
and a schema version ``v``. Call ids (``c1``, ``c2``, ...) are ours, never a provider's.

=================  =====================================================================
type               meaning
=================  =====================================================================
run_started        task, scope, budget, policy, contract hash, model route, tool manifest
context_added      what a context provider returned for a step (rendered on replay)
model_called       one ask of the model: model, attempts, tokens, cost, latency, outcome
action_proposed    the validated action of a step, with our call id
decision           the dispatcher's verdict: execute, deny, needs_plan, needs_confirmation
confirmation       a person approved (possibly with edited arguments) or denied a call
approval           one of several approvers approved a call that needs more than one
approval_expired   a call waited past its approval window: denied, or escalated
tool_started       arguments as executed and the idempotency key; durable before the run
tool_finished      the result or the error
resolution         a person settled a call whose outcome was lost (result, rerun, fail)
run_resumed        a run was resumed (optionally with a new budget)
user_message       the user's next message: a new turn of a conversation (``Agent.reply``)
quota_released     what a call had charged to its quotas is given back (it failed, was undone)
quota_reserved     a model request's tokens reserved from its quotas before it is sent
compensation_*     the undo of a committed call: started (durable first), finished
run_finished       the run stopped: status, answer (typed: also output) or reason; some resume
=================  =====================================================================
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, Never, get_args

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter
from pydantic_core import to_json

from agentcore.contracts import NextAction

__all__ = [
    "EVENT_SCHEMA_VERSION",
    "EVENT_TYPES",
    "ActionProposed",
    "Approval",
    "ApprovalExpired",
    "Charge",
    "CompensationFinished",
    "CompensationStarted",
    "Confirmation",
    "ContextAdded",
    "Decision",
    "Event",
    "ModelCalled",
    "QuotaReleased",
    "QuotaReserved",
    "Resolution",
    "RunFinished",
    "RunResumed",
    "RunStarted",
    "ToolFinished",
    "ToolStarted",
    "UserMessage",
    "Verdict",
    "decode_event",
    "decode_events",
    "dump_event",
    "encode_event_body",
    "unhandled_event",
]

EVENT_SCHEMA_VERSION = 1

Verdict = Literal["execute", "deny", "needs_plan", "needs_confirmation"]


def _unset(value: object) -> bool:
    """A field added after the event's first format, at its default: left out of the
    stored body, so what a run records without it is what it recorded before."""
    return not value


class Charge(BaseModel):
    """What one event charges to one quota's counter (``agentcore.quotas``), in the store's
    transaction that records the event: ``amount`` is added to the counter named ``key``;
    with a ``limit``, the append is refused (nothing is written) when the counter would
    pass it."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    quota: str
    """The quota's name."""
    key: str
    """The counter: the quota, the values it is kept per (tenant, a run-bound value, the
    tool) and its window, as canonical JSON."""
    amount: float
    """Added to the counter (negative: given back)."""
    limit: float | None = None
    """The counter may not pass it (``None``: not checked: a release, a lifted limit, the
    tokens a model call used)."""
    window_end: float | None = None
    """When the counter's window closes (Unix seconds; ``None``: never): prunable after."""
    tenant: str | None = None
    """The run's tenant, for listing the counters by tenant."""
    lifted_by: str | None = None
    """The person whose approval let this call pass its limit."""


class _Event(BaseModel):
    # defer_build: schemas are built on first use, keeping `import agentcore` fast.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    run_id: str
    seq: int
    at: float
    v: int = EVENT_SCHEMA_VERSION


class RunStarted(_Event):
    """A run began. Everything needed to render and govern it later is here."""

    type: Literal["run_started"] = "run_started"
    task: str
    scope: list[str]
    budget: dict[str, JsonValue]
    policy: dict[str, JsonValue]
    contract: dict[str, str]
    route: list[str]
    plan_route: list[str] = []
    tools: dict[str, dict[str, JsonValue]]
    metadata: dict[str, JsonValue] = {}
    tenant: str | None = None
    """The run's namespace (``Agent.run(tenant=...)``), for listing, stats, export and prune."""
    output_hash: str | None = None
    """The hash of the answer's type (``Agent(output=T)``; ``None``: a text answer). A run
    continues only with an agent whose output type has the same hash."""
    history: list[dict[str, str]] = Field(default_factory=list[dict[str, str]], exclude_if=_unset)
    """A conversation imported from elsewhere (``Agent.run(history=...)``), before the task:
    ``{"role": "user" | "assistant" | "tool", "content": text}`` in order. Shown to the
    model as imported; what the assistant and tools said there is untrusted."""
    conversation_budget: dict[str, JsonValue] | None = Field(default=None, exclude_if=_unset)
    """Limits of the whole conversation, every turn together (``Agent.run(
    conversation_budget=...)``); ``budget`` is each turn's."""


class ContextAdded(_Event):
    """A context provider's output for a step, recorded so replays render the same context."""

    type: Literal["context_added"] = "context_added"
    step: int
    source: str
    content: str
    untrusted: bool = False
    """The provider's text is third-party content (:class:`~agentcore.UntrustedContext`),
    judged as untrusted tool output is (``Policy.untrusted_arguments``)."""


class ModelCalled(_Event):
    """One ask of a model (its retries included in ``attempts``)."""

    type: Literal["model_called"] = "model_called"
    step: int
    model: str
    outcome: Literal["ok", "invalid", "error"]
    role: Literal["plan", "act", "extract", "child"] = "act"
    mode: Literal["structured", "native"] = "structured"
    """Which part of the route was asked: ``plan`` models until a plan is approved, ``act``
    models after; ``extract``: an extraction (``Agent.extract``) made inside a tool call;
    ``child``: what a sub-agent's run used during a call (``Agent.as_tool``)."""
    attempts: int = 1
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost: float | None = None
    latency_ms: float = 0.0
    finish_reason: str | None = None
    response_id: str | None = None
    reply: str | None = None
    """The raw reply when it was not a valid action (capped), so the re-ask renders again."""
    dropped_calls: list[str] = []
    """Native tool calling: further calls in the same reply that were not executed."""
    error: str | None = None
    tool_calls: int = Field(default=0, exclude_if=_unset)
    """``child``: the tool calls the sub-agent's run made during the call; they count in
    this run's tool-call budget (a run tree is governed as one)."""
    steps: int = Field(default=0, exclude_if=_unset)
    """``child``: the steps the sub-agent's run took during the call; they count in this
    run's step budget."""
    charges: list[Charge] = Field(default_factory=list[Charge], exclude_if=_unset)
    """The call's tokens or cost, charged to the quotas that count them."""


class ActionProposed(_Event):
    """The validated action of a step."""

    type: Literal["action_proposed"] = "action_proposed"
    step: int
    call_id: str
    action: NextAction


class Decision(_Event):
    """What the dispatcher decided about an action, and why."""

    type: Literal["decision"] = "decision"
    step: int
    call_id: str
    verdict: Verdict
    reason: str | None = None
    args_hash: str | None = None
    approvals_needed: int = 1
    """How many distinct people must approve a ``needs_confirmation`` call
    (``Policy.approvals``), fixed when the call starts waiting."""
    provenance: dict[str, str] = {}
    """Where each argument of the call came from (``trusted``, ``untrusted``, ``model``),
    by path, once the run has read untrusted output (see ``agentcore._provenance``)."""
    charges: list[Charge] = Field(default_factory=list[Charge], exclude_if=_unset)
    """An ``execute``'s charges to the quotas that count the call, made in the store's
    transaction that records this decision (refused there when over a limit)."""
    over_quota: list[str] = Field(default_factory=list[str], exclude_if=_unset)
    """The quotas the call would pass (``needs_confirmation``: a person's approval lifts
    them for this call only; ``deny``: refused)."""
    rule: str | None = Field(default=None, exclude_if=_unset)
    """The name of the rule over the run's history (``Policy.rules``) that refused the call
    or put it to a person; ``None`` when no such rule decided."""


class Confirmation(_Event):
    """A person's answer to an action that waited for confirmation."""

    type: Literal["confirmation"] = "confirmation"
    step: int
    call_id: str
    approved: bool
    by: str
    reason: str | None = None
    args: dict[str, JsonValue] | None = None
    """Edited arguments, when the person changed them; ``None`` runs the proposed ones."""
    args_hash: str | None = None
    accepted_tool_changes: list[str] = []
    """Tools that changed since the run started, accepted by the person who confirmed."""
    accepted_tools: dict[str, dict[str, JsonValue]] = {}
    """The accepted tools' definitions (manifest entries), pinned from here on."""
    approvers: list[str] = []
    """Everyone who approved, in order, when the call needed more than one person (the
    last of them is ``by``); empty for a single approval and for a denial."""
    charges: list[Charge] = Field(default_factory=list[Charge], exclude_if=_unset)
    """An approval's charges to the quotas that count the call (a lifted limit's with
    ``lifted_by``), made in the store's transaction that records it."""


class Approval(_Event):
    """One person's approval of a call that needs more than one (``Policy.approvals``),
    before the last: the run keeps waiting. The last approval is the ``confirmation``.

    A new event type rather than a field of ``confirmation``: an agentcore that predates
    it refuses to read the transcript instead of taking one approval for all of them."""

    type: Literal["approval"] = "approval"
    step: int
    call_id: str
    by: str
    reason: str | None = None
    args: dict[str, JsonValue] | None = None
    """Edited arguments (only the first approver may edit); later approvers approve them."""
    args_hash: str | None = None
    """The hash of the call as approved (tool and the arguments that will run)."""


class ApprovalExpired(_Event):
    """A call waited longer than ``Policy.approval_ttl``: with ``action="deny"`` a
    ``confirmation`` denying it follows; with ``"escalate"`` the run keeps waiting, the
    approval window starts again from this event and ``Policy.on_pending`` is told."""

    type: Literal["approval_expired"] = "approval_expired"
    step: int
    call_id: str
    action: Literal["deny", "escalate"]
    waited_s: float
    escalations: int = 0
    """Escalations of this call so far, this one included."""


class ToolStarted(_Event):
    """A tool is about to run with exactly these arguments. Durable before the tool runs."""

    type: Literal["tool_started"] = "tool_started"
    step: int
    call_id: str
    tool: str
    args: dict[str, JsonValue]
    idempotency_key: str
    guarded: bool = False
    """The worker held the call's guard while it ran (a lock its process or database
    session lets go of when it ends), so a later worker can tell whether it may still be
    running. Only non-idempotent tools with ``reconcile`` are guarded."""
    bound: dict[str, JsonValue] = {}
    """The values of the parameters bound to the run (``FromRun``) the call ran with, from
    the run's recorded tenant and metadata; never the model's."""


class ToolFinished(_Event):
    """A tool returned (``ok``) or failed (``error``)."""

    type: Literal["tool_finished"] = "tool_finished"
    step: int
    call_id: str
    tool: str
    ok: bool
    result: JsonValue = None
    error: str | None = None
    duration_ms: float = 0.0
    result_bytes: int | None = None
    """Set when the result was truncated: the size of the full result's JSON (UTF-8)."""
    result_sha256: str | None = None
    """Set when the result was truncated: the sha256 of the full result's JSON; ``result``
    then holds the first ``Policy.max_tool_result_bytes`` bytes of it as a string."""
    untrusted: bool = False
    """The result is third-party content (``@tool(output="untrusted")``): arguments that
    could only have come from it are judged by ``Policy.untrusted_arguments``."""
    outcome_unknown: bool = Field(default=False, exclude_if=_unset)
    """The call started and its outcome was never recorded (the run was cancelled, or
    compensated, while it ran): it failed as far as the run goes, but its effect may have
    happened, so it is reconciled or put to a person before anything older is undone."""


class RunResumed(_Event):
    """A run was resumed; ``budget`` replaces the old one when given.

    ``recovery`` is true when the run was still marked running, i.e. the process that was
    advancing it died. Consecutive recoveries without progress count towards dead-lettering.
    """

    type: Literal["run_resumed"] = "run_resumed"
    budget: dict[str, JsonValue] | None = None
    recovery: bool = False
    by: str | None = None
    accepted_tool_changes: list[str] = []
    accepted_tools: dict[str, dict[str, JsonValue]] = {}
    """The accepted tools' definitions (manifest entries), pinned from here on."""


class UserMessage(_Event):
    """The user's next message to a run whose turn ended (``Agent.reply``): it starts turn
    ``turn`` (the task was turn 1), with everything before it in view. Trusted, like the
    task."""

    type: Literal["user_message"] = "user_message"
    turn: int
    text: str
    key: str | None = None
    """The caller's idempotency key: a second message with the same key is refused."""
    budget: dict[str, JsonValue] | None = None
    """This turn's budget; ``None``: the run's (``run_started``'s, without its deadline)."""


class Resolution(_Event):
    """A person settled a call whose outcome was lost (a non-idempotent tool that was started
    but never recorded as finished): ``result`` (it happened, with this result), ``rerun``
    (it did not happen: run it once) or ``fail`` (treat it as failed)."""

    type: Literal["resolution"] = "resolution"
    step: int
    call_id: str
    decision: Literal["result", "rerun", "fail"]
    by: str
    reason: str | None = None
    accepted_tool_changes: list[str] = []
    """Tools that changed since the run started, accepted by the person who resolved."""
    accepted_tools: dict[str, dict[str, JsonValue]] = {}
    """The accepted tools' definitions (manifest entries), pinned from here on."""


class QuotaReleased(_Event):
    """What a call charged to its quotas is given back (negative ``charges``): the call
    failed, was undone, settled as failed, or never ran. Recorded with the event that
    says so, in the same append."""

    type: Literal["quota_released"] = "quota_released"
    call_id: str
    charges: list[Charge]
    reason: str


class QuotaReserved(_Event):
    """Before a model request is sent, what it may use (its estimated input plus its
    reply's cap) reserved from the quotas that count tokens, with their limits: the store
    refuses the append when a counter would pass its limit, and the request is not sent.
    The request's ``model_called`` settles it (what it used, less this)."""

    type: Literal["quota_reserved"] = "quota_reserved"
    step: int
    charges: list[Charge]


class CompensationStarted(_Event):
    """The undo of a committed call is about to run (``@tool(compensate=...)``). Durable
    before it runs, like ``tool_started``."""

    type: Literal["compensation_started"] = "compensation_started"
    step: int
    call_id: str
    tool: str
    idempotency_key: str
    """The compensation's own key: the call's key plus ``:undo``."""
    by: str
    """Who asked for the compensation (``policy`` when ``Policy.compensate_on`` did)."""
    guarded: bool = False
    """The worker held the compensation's guard while it ran (see ``tool_started``)."""


class CompensationFinished(_Event):
    """How the undo of a call ended: ``undone`` (with its result), ``failed`` (its error;
    the run stops for a person), or ``not_needed`` (the call's effect never happened, as
    ``reconcile`` or a person found)."""

    type: Literal["compensation_finished"] = "compensation_finished"
    step: int
    call_id: str
    tool: str
    outcome: Literal["undone", "failed", "not_needed"]
    result: JsonValue = None
    error: str | None = None
    reason: str | None = None
    """How the outcome was established when the undo was not simply run: reconciled, or
    settled by a person (who is named)."""
    duration_ms: float = 0.0


class RunFinished(_Event):
    """The run stopped advancing. ``completed``, ``failed`` and ``cancelled`` are final;
    ``awaiting_confirmation``, ``budget_exhausted`` and ``needs_attention`` can continue."""

    type: Literal["run_finished"] = "run_finished"
    status: str
    answer: str | None = None
    reason: str | None = None
    output: JsonValue = None
    """A completed run's typed answer as JSON (``Agent(output=T)``); ``answer`` then holds
    its canonical JSON text. ``None`` for a text answer."""
    guard_held: bool = Field(default=False, exclude_if=_unset)
    """A ``needs_attention`` stop whose only reason is that the worker which started the
    open call still holds its call guard (it may still be running the call). No person was
    asked anything: once the guard is free, the call is reconciled and, when ``reconcile``
    finds nothing, run once more, as if the run had never stopped."""


Event = Annotated[
    RunStarted
    | ContextAdded
    | ModelCalled
    | ActionProposed
    | Decision
    | Confirmation
    | Approval
    | ApprovalExpired
    | ToolStarted
    | ToolFinished
    | RunResumed
    | UserMessage
    | QuotaReleased
    | QuotaReserved
    | Resolution
    | CompensationStarted
    | CompensationFinished
    | RunFinished,
    Field(discriminator="type"),
]
"""Any transcript event."""

EVENT_TYPES: Final[Mapping[str, type[_Event]]] = MappingProxyType(
    {cls.model_fields["type"].default: cls for cls in get_args(get_args(Event)[0])}
)
"""Every event type by its ``type`` tag, in the union's order: the members of
:data:`Event`, the one place an event type is declared."""


def unhandled_event(event: Never, view: str) -> TypeError:
    """The error a view of the transcript (the fold, the model's messages, a timeline)
    raises in the last case of its ``match`` over :data:`Event`
    (``case _: raise unhandled_event(ev, "the fold")``): type checkers report the call
    when a member of the union has no case before it, and at run time it names the view
    and the event type it was given."""
    kind = getattr(event, "type", type(event).__name__)
    return TypeError(
        f"{view} has no case for the event type {kind!r}: every member of "
        "agentcore.events.Event needs one (docs/contributing.md, 'Adding an event type')"
    )


@functools.cache
def _event_adapter() -> TypeAdapter[Any]:  # Any: the union's members, checked by pydantic
    return TypeAdapter(Event)


_KEYS = {"run_id", "seq"}


def encode_event_body(event: _Event) -> str:
    """The event as compact JSON without ``run_id`` and ``seq`` (stores keep those as columns)."""
    return event.model_dump_json(exclude=_KEYS)


def decode_event(run_id: str, seq: int, body: str | bytes) -> Event:
    """Decode a stored event body.

    Raises:
        ValueError: a bad body (pydantic's ``ValidationError``), or an event written in a
            newer format version than this code reads (never misread as an older one).
    """
    text = body.decode() if isinstance(body, bytes) else body
    if not text.startswith("{"):
        # Let pydantic produce the error for bodies that are not JSON objects.
        return _event_adapter().validate_json(text)
    head = f'{{"run_id":{_json_str(run_id)},"seq":{int(seq)}'
    rest = text[1:].lstrip()
    event: Event = _event_adapter().validate_json(head + ("," + rest if rest != "}" else "}"))
    if event.v > EVENT_SCHEMA_VERSION:
        raise ValueError(
            f"the event has format version {event.v}, newer than this agentcore reads "
            f"({EVENT_SCHEMA_VERSION}): upgrade agentcore to read it"
        )
    return event


@functools.cache
def _events_adapter() -> TypeAdapter[list[Any]]:  # Any: the union's members
    return TypeAdapter(list[Event])


def decode_events(run_id: str, bodies: Sequence[tuple[int, str]]) -> list[Event]:
    """Decode several stored bodies (``(seq, body)``, each a JSON object) in one
    validation: what :func:`decode_event` gives for each, without its per-call cost.

    Raises:
        ValueError: any body is bad or of a newer format version (decode them one by one
            with :func:`decode_event` to learn which and why).
    """
    head = f'{{"run_id":{_json_str(run_id)},"seq":'
    parts: list[str] = []
    for seq, body in bodies:
        if not body.startswith("{"):
            raise ValueError(f"the body at seq {seq} is not a JSON object")
        rest = body[1:].lstrip()
        parts.append(f"{head}{int(seq)}" + ("," + rest if rest != "}" else "}"))
    events: list[Event] = _events_adapter().validate_json("[" + ",".join(parts) + "]")
    if any(event.v > EVENT_SCHEMA_VERSION for event in events):
        raise ValueError("an event has a format version newer than this agentcore reads")
    return events


def _json_str(value: str) -> str:
    return to_json(value).decode()


def dump_event(event: Event) -> dict[str, Any]:  # Any: JSON-ready event for export
    """The event as a JSON-ready dict (export, ``show --json``)."""
    return event.model_dump(mode="json")
