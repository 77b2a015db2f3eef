"""Run commands: from a run's folded state and a request, the events to record (or an error).

Each command is pure but for the clock: it reads the state, checks the request and returns
the events that carry it out, which the session records through the run's driver under
the run's lease. Nothing here touches a store. ``start`` begins a run; ``resume``,
``advance``, ``confirm``, ``resolve`` and ``cancel`` continue or end one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import ValidationError

from agentcore.adapters import ModelAdapter
from agentcore.contracts import (
    ContractDocument,
    ToolAction,
    ToolSpec,
    check_run_id,
    check_tenant,
    check_text,
    to_recordable,
)
from agentcore.contracts.errors import (
    AlreadyApprovedError,
    ApprovalExpiredError,
    ConfigurationError,
    ConfirmationMismatchError,
    DuplicateReplyError,
    NotAcceptingRepliesError,
    NotAuthorizedError,
    NotAwaitingConfirmationError,
    OutputTypeChangedError,
    RunError,
    ToolManifestChangedError,
)

from .._manifest import manifest_entry, output_change, tool_changes
from .._state import (
    OpenCall,
    PendingCall,
    RunResult,
    RunState,
    RunStatus,
    args_hash,
)
from .._status import CLOSED_STATUSES, REPLY_STATUSES
from ..approvals import Authorize, person_key, person_name
from ..events import (
    Approval,
    ApprovalExpired,
    Confirmation,
    Event,
    Resolution,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolFinished,
    UserMessage,
)
from ..guards import check_arguments
from ..policy import Budget, Policy
from ..tools import Tool

__all__ = [
    "MAX_IMPORTED_MESSAGES",
    "OUTCOME_UNKNOWN",
    "Answer",
    "Reply",
    "Settlement",
    "TurnInProgressError",
    "advance",
    "cancel",
    "check_approval_window",
    "check_not_compensating",
    "checked_output",
    "checked_tools",
    "confirm",
    "expire",
    "imported_history",
    "needs_continuing",
    "outcome_unknown",
    "outcomes_unknown",
    "reply",
    "resolve",
    "resume",
    "resume_or_dead_letter",
    "scope_names",
    "short_args",
    "start",
]

OUTCOME_UNKNOWN = "outcome unknown: "
"""How the ``tool_finished`` of a call whose outcome is unknown begins (a cancel while it
ran): it failed as far as the run goes, but its effect may have happened."""

Settlement = Literal["result", "rerun", "fail"]
"""How a person settles a call whose outcome was lost (``resolve``)."""


def start(
    task: str,
    *,
    tools: Mapping[str, ToolSpec],
    budget: Budget,
    run_id: str,
    metadata: Mapping[str, Any] | None,  # Any: JSON values recorded as given
    tenant: str | None,
    policy: Policy,
    contract: ContractDocument,
    route: tuple[Sequence[ModelAdapter], Sequence[ModelAdapter]],
    output_hash: str | None = None,
    history: Sequence[Mapping[str, Any]] | None = None,  # Any: chat messages as given
    conversation_budget: Budget | None = None,
) -> RunStarted:
    """A new run's ``run_started``: the task, its scope's tools (their manifest), budget,
    policy, contract, the act and plan routes' names, metadata and tenant; a conversation
    imported from elsewhere (:func:`imported_history`) and the conversation's budget.

    Raises:
        ConfigurationError: an empty task, a history not in the chat format.
        LimitExceededError: a task, metadata, run id, tenant or history message that cannot
            be recorded.
    """
    if not task.strip():
        raise ConfigurationError("The task is empty: say what the agent should do.")
    check_text(task, "task")
    recorded: dict[str, Any] = to_recordable(dict(metadata or {}), "metadata")  # Any: JSON
    check_run_id(run_id)
    if tenant is not None:
        check_tenant(tenant)
    act, plan = route
    return RunStarted(
        run_id=run_id,
        seq=0,
        at=time.time(),
        task=task,
        scope=list(tools),
        budget=budget.to_json(),
        policy=policy.to_json(),
        contract={"version": contract.version, "hash": contract.hash},
        route=[m.name for m in act],
        plan_route=[m.name for m in plan],
        tools={n: manifest_entry(spec) for n, spec in tools.items()},
        metadata=recorded,
        tenant=tenant,
        output_hash=output_hash,
        history=imported_history(history or ()),
        conversation_budget=None if conversation_budget is None else conversation_budget.to_json(),
    )


MAX_IMPORTED_MESSAGES = 1_000
"""The most messages a run may import as its earlier conversation (``history=``)."""

_IMPORTED_ROLES = frozenset({"user", "assistant", "tool"})


def imported_history(
    messages: Sequence[Mapping[str, Any]],  # Any: OpenAI chat messages as given
) -> list[dict[str, str]]:
    """Messages in OpenAI's chat format (``{"role", "content"}``; content as text or as
    text parts; an assistant's ``tool_calls``) as ``run_started.history`` records them:
    ``{"role": "user" | "assistant" | "tool", "content": text}``. System messages are left
    out (the agent has its own instructions); an assistant's tool calls are written out as
    text (``called name(arguments)``).

    Raises:
        ConfigurationError: not a list of such messages (an unknown role, content that is
            not text, more than :data:`MAX_IMPORTED_MESSAGES`).
        LimitExceededError: a message that cannot be recorded.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]  # user input
        raise ConfigurationError("history= takes a list of chat messages ({'role', 'content'})")
    if len(messages) > MAX_IMPORTED_MESSAGES:
        raise ConfigurationError(
            f"history= has {len(messages)} messages; at most {MAX_IMPORTED_MESSAGES} are "
            "imported (summarise older ones into one)"
        )
    out: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]  # user input
            raise ConfigurationError(f"history[{i}] is not a chat message (a mapping)")
        role = m.get("role")
        if role in {"system", "developer"}:
            continue
        if role not in _IMPORTED_ROLES:
            raise ConfigurationError(
                f"history[{i}] has role {role!r}; imported messages are user, assistant or "
                "tool (system messages are left out)"
            )
        text = _message_text(m.get("content"), i)
        for call in cast("list[Any]", m.get("tool_calls") or []):  # Any: as given
            fn: Mapping[str, Any] = {}  # Any: as given
            if isinstance(call, Mapping):
                found = cast("Mapping[str, Any]", call).get("function")
                fn = cast("Mapping[str, Any]", found) if isinstance(found, Mapping) else {}
            text += f"\ncalled {fn.get('name', '?')}({fn.get('arguments', '')})"
        text = text.strip()
        if not text:
            continue
        check_text(text, f"history[{i}]")
        out.append({"role": str(role), "content": text})
    return out


def _message_text(content: object, i: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in cast("list[object]", content):
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):  # pyright: ignore[reportUnknownMemberType]
                parts.append(cast("str", part["text"]))  # pyright: ignore[reportUnknownArgumentType]
            else:
                raise ConfigurationError(
                    f"history[{i}] has a content part that is not text; only text is imported"
                )
        return "\n".join(parts)
    raise ConfigurationError(f"history[{i}]'s content is not text")


@dataclass(frozen=True, slots=True)
class Reply:
    """The user's next message (``Agent.reply``), its arguments not yet checked."""

    text: str
    key: str | None = None
    budget: Budget | None = None


class TurnInProgressError(RunError):
    """A reply reached a run whose turn is still being advanced (by a queue's workers):
    it waits for the turn to end, then tries again."""


def reply(state: RunState, message: Reply, *, output_hash: str | None) -> list[Event]:
    """The user's next message: the ``user_message`` that starts the next turn.

    Raises:
        NotAcceptingRepliesError: the run is closed for good (cancelled, compensated),
            waits for a person or an operator, failed, or its turn is unfinished.
        TurnInProgressError: its turn is being advanced (:data:`RunStatus.RUNNING`).
        DuplicateReplyError: ``message.key`` began a turn already.
        OutputTypeChangedError: the agent's output type is not the run's.
        ConfigurationError: an empty message.
        LimitExceededError: a message or key that cannot be recorded.
    """
    run = state.run_id
    if not message.text.strip():
        raise ConfigurationError("The message is empty: say what the user said.")
    check_text(message.text, "reply's message")
    if message.key is not None:
        check_run_id(message.key)  # the same rules: non-empty, short, printable
        turn = state.reply_keys.get(message.key)
        if turn is not None:
            raise DuplicateReplyError(
                f"Run {run} already has the message with key {message.key!r} (it began turn "
                f"{turn}); it is not appended twice.",
                turn=turn,
            )
    status = state.status
    if state.compensating or status is RunStatus.CANCELLED:
        raise NotAcceptingRepliesError(
            f"Run {run} was closed by a person ({status.value}"
            f"{': ' + state.reason if state.reason else ''}); it takes no more messages. "
            "Start a new run (history= can carry this conversation over)."
        )
    if status is RunStatus.RUNNING:
        raise TurnInProgressError(f"Run {run} is still advancing turn {state.turn}.")
    if status not in REPLY_STATUSES:
        fix = {
            RunStatus.AWAITING_CONFIRMATION: f"confirm or deny the waiting call first "
            f"(agentcore confirm {run} --by NAME)",
            RunStatus.NEEDS_ATTENTION: f"an operator settles it first (agentcore show {run})",
            RunStatus.FAILED: f"a person resumes it first (agentcore resume {run} --by NAME)",
        }.get(status, "")
        raise NotAcceptingRepliesError(
            f"Run {run} is {status.value}"
            f"{' (' + state.reason + ')' if state.reason else ''}; it takes the user's next "
            f"message once its turn has ended: {fix}."
        )
    checked_output(state, output_hash)
    return [
        UserMessage(
            run_id=run,
            seq=state.next_seq,
            at=time.time(),
            turn=state.turn + 1,
            text=message.text,
            key=message.key,
            budget=None if message.budget is None else message.budget.to_json(),
        )
    ]


def scope_names(tools: Mapping[str, Tool], scope: Sequence[str] | None) -> tuple[str, ...]:
    """Tool names selected by ``scope`` (names or labels; ``None``: every tool).

    Raises:
        ConfigurationError: an entry is neither a tool name nor a label.
    """
    if scope is None:
        return tuple(tools)
    if isinstance(scope, str):
        raise ConfigurationError("scope is a list of tool names or labels, not one string.")
    chosen: dict[str, None] = {}
    for entry in scope:
        if entry in tools:
            chosen[entry] = None
            continue
        labelled = [n for n, t in tools.items() if entry in t.labels]
        if not labelled:
            labels = sorted({lb for t in tools.values() for lb in t.labels})
            raise ConfigurationError(
                f"Scope entry {entry!r} is neither a tool nor a label. Tools: "
                f"{', '.join(tools) or '(none)'}; labels: {', '.join(labels) or '(none)'}."
            )
        chosen.update(dict.fromkeys(labelled))
    return tuple(chosen)


def needs_continuing(state: RunState, by: str | None) -> bool:
    """Whether a plain ``resume`` has anything to do: not closed, not waiting for a person,
    and not failed unless a person (``by``) resumes it."""
    return not (
        state.status in CLOSED_STATUSES
        or state.status is RunStatus.AWAITING_CONFIRMATION
        or (state.status is RunStatus.FAILED and by is None)
    )


def check_not_compensating(state: RunState) -> None:
    """Refuse to continue a run whose compensation began.

    Raises:
        RunError: it began.
    """
    if state.compensating:
        raise RunError(
            f"Run {state.run_id} is being compensated ({state.status.value}): it never "
            f"advances again. Continue the compensation: agentcore compensate {state.run_id} "
            "--by NAME (agent.compensate)."
        )


def resume(
    state: RunState,
    tools: Mapping[str, Tool],
    *,
    taken_over: bool,
    budget: Budget | None,
    by: str | None,
    accept_tool_changes: bool,
    output_hash: str | None,
) -> list[Event]:
    """Continue a run from its transcript: ``run_resumed`` (a recovery when the run was
    left ``running`` by a worker that died or stalled), or the ``run_finished`` that
    dead-letters it.

    Raises:
        ToolManifestChangedError: a tool the run used changed or is gone (and not accepted),
            or the call the run is at has no tool here.
        OutputTypeChangedError: the agent's output type is not the run's.
        RunError: the run is being compensated (it never advances again).
    """
    check_not_compensating(state)
    checked_output(state, output_hash)
    accepted, pinned = checked_tools(state, tools, accept_tool_changes)
    call = state.call
    if (
        call is not None
        and isinstance(call.action, ToolAction)
        and not call.settled
        and call.action.tool not in tools
    ):
        raise ToolManifestChangedError(
            f"Run {state.run_id} is at step {call.step}, a call of {call.action.tool!r}, "
            "which is no longer a tool of this agent: it cannot run, even with "
            f"accept_tool_changes. Add the tool back, or cancel the run (agentcore cancel "
            f"{state.run_id} --by NAME)."
        )
    # A running run was left by a worker that died or stalled (its lease was taken over),
    # or predates leases; a run only submitted (nothing after run_started) and never
    # advanced is not a recovery.
    recovery = state.status is RunStatus.RUNNING and (taken_over or state.next_seq > 1)
    return [
        resume_or_dead_letter(
            state, recovery=recovery, by=by, budget=budget, accepted=accepted, pinned=pinned
        )
    ]


def advance(
    state: RunState,
    tools: Mapping[str, Tool],
    *,
    worker: str,
    taken_over: bool,
    output_hash: str | None,
) -> list[Event]:
    """A queue worker's shift on a ``running`` run: nothing to record first, a recovery
    when it took the run over from a worker that did not finish its shift, or ``needs_attention``
    when the worker's tools or output type differ from the run's (a rolling deploy),
    instead of the run bouncing between workers."""
    changed = tool_changes(state, tools)
    other_output = output_change(state, output_hash)
    if changed or other_output:
        fix = (
            f"with: {'; '.join(changed.values())}. Deploy matching tools, or resume by hand "
            f"with `agentcore resume {state.run_id} --by NAME --accept-tool-changes`."
            if changed
            else f"with: {other_output}. Deploy the agent with the run's output type."
        )
        return [
            RunFinished(
                run_id=state.run_id,
                seq=state.next_seq,
                at=time.time(),
                status=RunStatus.NEEDS_ATTENTION.value,
                reason=f"worker {worker} has {'tools' if changed else 'an output type'} that "
                f"differ from the ones this run started {fix}",
            )
        ]
    return [resume_or_dead_letter(state, recovery=True)] if taken_over else []


def resume_or_dead_letter(
    state: RunState,
    *,
    recovery: bool,
    by: str | None = None,
    budget: Budget | None = None,
    accepted: Sequence[str] = (),
    pinned: Mapping[str, dict[str, Any]] | None = None,  # Any: JSON manifest entries
) -> Event:
    """The event a resume records: ``run_resumed``, which continues the run, or, for a
    recovery of a run whose workers died ``Policy.dead_letter_after`` times in a row
    without progress, the ``run_finished`` that dead-letters it as ``failed`` (a person can
    still resume it)."""
    run_id = state.run_id
    if recovery and by is None and state.recoveries >= state.policy.dead_letter_after:
        return RunFinished(
            run_id=run_id,
            seq=state.next_seq,
            at=time.time(),
            status=RunStatus.FAILED.value,
            reason=(
                f"dead-lettered: the process advancing this run died {state.recoveries + 1} "
                f"times in a row at step {state.steps} without progress; inspect it with "
                f"`agentcore show {run_id}` and resume by hand with "
                f"`agentcore resume {run_id} --by NAME`"
            ),
        )
    return RunResumed(
        run_id=run_id,
        seq=state.next_seq,
        at=time.time(),
        budget=budget.to_json() if budget else None,
        recovery=recovery,
        by=None if by is None else person_name(by),
        accepted_tool_changes=list(accepted),
        accepted_tools=dict(pinned or {}),
    )


def checked_output(state: RunState, output_hash: str | None) -> None:
    """A continuation (resume, confirm, resolve) by an agent whose output type hashes to
    ``output_hash``.

    Raises:
        OutputTypeChangedError: the run was started with another output type: its answer
            would be validated and decoded as another type.
    """
    change = output_change(state, output_hash)
    if change is not None:
        raise OutputTypeChangedError(
            f"{change[0].upper()}{change[1:]}. Nothing was recorded or run. Continue it with "
            "an agent whose output= is the one it started with, or cancel it (agentcore "
            f"cancel {state.run_id} --by NAME)."
        )


def read(state: RunState, output_hash: str | None) -> RunResult[Any]:  # Any: not decoded
    """The run's result, read by an agent whose output type hashes to ``output_hash``
    (``result``, or ``resume``/``run`` of a run that has ended).

    Raises:
        OutputTypeChangedError: the run completed with an answer of another output type
            (the pin ``run_started.output_hash``): it would be decoded as this agent's.
    """
    change = output_change(state, output_hash)
    if change is not None and state.status is RunStatus.COMPLETED:
        raise OutputTypeChangedError(
            f"{change[0].upper()}{change[1:]}, and it completed: its answer is not of this "
            "agent's type. Read it with an agent whose output= is the one it started with."
        )
    return state.result()


def checked_tools(
    state: RunState, tools: Mapping[str, Tool], accept: bool
) -> tuple[list[str], dict[str, dict[str, Any]]]:  # Any: JSON manifest entries
    """A person's continuation (resume, confirm, resolve) of a run whose tools changed.

    Returns:
        With ``accept``: what changed in every tool of the run's scope, in words, and the
        current definitions of those tools (recorded: the run is pinned to them from then
        on); otherwise nothing.

    Raises:
        ToolManifestChangedError: a tool the run used or is about to run changed (or is
            gone) and ``accept`` is false.
    """
    changed = tool_changes(state, tools)
    if changed and not accept:
        raise ToolManifestChangedError(
            f"Run {state.run_id} used tools that changed since it started: "
            f"{'; '.join(changed.values())}. Nothing was recorded or run. Continue with "
            "accept_tool_changes=True (--accept-tool-changes) if the run may go on with "
            "the new definitions."
        )
    if not accept:
        return [], {}
    every = tool_changes(state, tools, whole_scope=True)
    pinned = {n: manifest_entry(tools[n].spec) for n in every if n in tools}
    return list(every.values()), pinned


def resolve(
    state: RunState,
    tools: Mapping[str, Tool],
    *,
    decision: Settlement,
    by: str,
    result: Any,  # Any: the JSON result the lost call produced (decision "result")
    reason: str | None,
    accept_tool_changes: bool,
    output_hash: str | None,
) -> list[Event]:
    """A person settles the call whose outcome was lost: ``resolution``, and for
    ``result`` or ``fail`` the call's ``tool_finished``.

    Raises:
        RunError: the run is not waiting on a lost call.
        ConfigurationError: ``rerun`` of a tool this agent does not have; a result that
            is not JSON.
        ToolManifestChangedError: a tool the run used changed or is gone.
        OutputTypeChangedError: the agent's output type is not the run's.
    """
    check_not_compensating(state)
    checked_output(state, output_hash)
    run_id, call = state.run_id, state.call
    if (
        state.status is not RunStatus.NEEDS_ATTENTION
        or call is None
        or call.started is None
        or call.finished is not None
        or not isinstance(call.action, ToolAction)
    ):
        raise RunError(
            f"Run {run_id} is {state.status.value} and has no call with a lost outcome to resolve."
        )
    accepted, pinned = checked_tools(state, tools, accept_tool_changes)
    if decision == "rerun" and call.action.tool not in tools:
        raise ConfigurationError(
            f"This agent has no tool {call.action.tool!r} to run again; resolve with "
            "result=... or fail=True, or use the agent that has the tool."
        )
    if decision == "result":
        result = to_recordable(result, "result given to resolve()")
    now, seq = time.time(), state.next_seq
    batch: list[Event] = [
        Resolution(
            run_id=run_id,
            seq=seq,
            at=now,
            step=call.step,
            call_id=call.call_id,
            decision=decision,
            by=by,
            reason=reason,
            accepted_tool_changes=accepted,
            accepted_tools=pinned,
        )
    ]
    if decision != "rerun":
        why = f"marked as failed by {by}" + (f": {reason}" if reason else "")
        batch.append(
            ToolFinished(
                run_id=run_id,
                seq=seq + 1,
                at=now,
                step=call.step,
                call_id=call.call_id,
                tool=call.action.tool,
                ok=decision == "result",
                result=result if decision == "result" else None,
                error=None if decision == "result" else why,
            )
        )
    return batch


@dataclass(frozen=True, slots=True)
class Answer:
    """A person's answer to the call a run waits on: ``Agent.confirm``'s arguments, by name
    (``by`` and ``reason`` checked there)."""

    approve: bool
    by: str
    reason: str | None
    args: Mapping[str, Any] | None  # Any: JSON arguments, validated by the tool
    step: int | None
    args_hash: str | None
    accept_tool_changes: bool


def confirm(
    state: RunState,
    tools: Mapping[str, Tool],
    answer: Answer,
    *,
    output_hash: str | None,
    authorize: Authorize | None = None,
) -> list[Event]:
    """A person approves or denies the call the run waits on: its ``confirmation``, or,
    when the call needs more people than have approved so far, an ``approval``.

    Raises:
        NotAwaitingConfirmationError: the run is not waiting for a person.
        ConfirmationMismatchError: ``answer.step`` or ``answer.args_hash`` is not what is
            waiting, the approval came after ``Policy.approval_ttl``
            (:class:`ApprovalExpiredError`), or ``by`` approved this call already
            (:class:`AlreadyApprovedError`).
        NotAuthorizedError: ``authorize`` refuses ``by`` for this call.
        ToolManifestChangedError: a tool the run used changed or is gone.
        OutputTypeChangedError: the agent's output type is not the run's.
        ConfigurationError: edited ``args`` do not validate, a policy of the tool refuses
            them, or they come after another person's approval; the tool to run is not
            this agent's.
    """
    run_id, approve, reason, step = state.run_id, answer.approve, answer.reason, answer.step
    by = person_name(answer.by)  # recorded as normalised, compared case-folded (person_key)
    pending = state.pending()
    if pending is None:
        raise NotAwaitingConfirmationError(
            f"Run {run_id} is {state.status.value}, not awaiting confirmation; nothing to confirm."
        )
    checked_output(state, output_hash)
    if step is not None and step != pending.step:
        raise ConfirmationMismatchError(
            f"Run {run_id} is waiting at step {pending.step}, not step {step}; nothing recorded."
        )
    if answer.args_hash is not None and answer.args_hash != pending.args_hash:
        raise ConfirmationMismatchError(
            f"Run {run_id}: the waiting call's args hash is {pending.args_hash}, not "
            f"{answer.args_hash}; the call changed since it was shown. Nothing recorded."
        )
    if authorize is not None and not authorize(by, pending):
        raise NotAuthorizedError(
            f"Run {run_id}: {by!r} may not {'approve' if approve else 'deny'} the call at "
            f"step {pending.step} (Policy.authorize refused); nothing recorded."
        )
    if approve:
        check_approval_window(state)
        if person_key(by) in {person_key(name) for name in pending.approvals}:
            raise AlreadyApprovedError(
                f"Run {run_id}: {by!r} approved the call at step {pending.step} already; it "
                f"needs {pending.approvals_needed} different people "
                f"({len(pending.approvals)} so far). Nothing recorded."
            )
    last = not approve or len(pending.approvals) + 1 >= pending.approvals_needed
    # Only the answer that continues the run must accept changed tools.
    accepted, pinned = checked_tools(state, tools, answer.accept_tool_changes) if last else ([], {})
    if approve and pending.tool is not None and pending.tool not in tools:
        raise ConfigurationError(
            f"This agent has no tool {pending.tool!r} to run; deny the call, or confirm "
            "with the agent that has the tool."
        )
    edited: dict[str, Any] | None = None  # Any: JSON values
    new_hash = pending.args_hash
    if answer.args is not None:
        edited = _edited_args(pending, tools, answer.args)
        new_hash = args_hash(str(pending.tool), edited)
    # A person's answer, as an approval: it is recorded as one when more are needed; the
    # last (or a denial) is a confirmation, the same answer with what it settles.
    approval = Approval(
        run_id=run_id,
        seq=state.next_seq,
        at=time.time(),
        step=pending.step,
        call_id=pending.call_id,
        by=by,
        reason=reason,
        args=edited,
        args_hash=new_hash,
    )
    if not last:
        return [approval]
    return [
        Confirmation(
            **approval.model_dump(exclude={"type"}),
            approved=approve,
            accepted_tool_changes=accepted,
            accepted_tools=pinned,
            approvers=[*pending.approvals, by] if approve and pending.approvals else [],
        )
    ]


def _edited_args(
    pending: PendingCall,
    tools: Mapping[str, Tool],
    args: Mapping[str, Any],  # Any: JSON arguments, validated by the tool
) -> dict[str, Any]:  # Any: JSON values
    """A person's edit of the waiting call's arguments, validated like the model's.

    Raises:
        ConfigurationError: not a tool call, another person approved already, no such
            tool, or the arguments do not validate or are refused by the tool's policies.
    """
    if pending.kind != "tool" or pending.tool is None:
        raise ConfigurationError("Only a tool call's arguments can be edited, not a plan's.")
    if pending.approvals:
        raise ConfigurationError(
            f"{', '.join(pending.approvals)} approved these arguments already: only the first "
            "approver may edit them. Approve them as they are, or deny the call."
        )
    tool = tools.get(pending.tool)
    if tool is None:
        raise ConfigurationError(f"This agent has no tool {pending.tool!r} to validate args for.")
    try:
        edited = tool.validate_args(dict(args))
    except ValidationError as exc:
        raise ConfigurationError(f"Edited args for {pending.tool!r} are invalid: {exc}") from exc
    refused = check_arguments(tool.policies, edited)
    if refused is not None:  # a person's edit passes the same rules as the model's
        raise ConfigurationError(f"Edited args for {pending.tool!r} are refused: {refused}")
    return edited


def check_approval_window(state: RunState) -> None:
    """Refuse an approval that arrives after ``Policy.approval_ttl`` (the run's policy),
    counted from when the call began waiting or from its latest escalation.

    Raises:
        ApprovalExpiredError: the call has waited longer than that.
    """
    deadline, now = state.approval_deadline(), time.time()
    if deadline is None or now <= deadline:
        return
    ttl = state.policy.approval_ttl or 0.0
    step = state.call.step if state.call is not None else "?"
    raise ApprovalExpiredError(
        f"Run {state.run_id}: the call at step {step} has waited {now - deadline + ttl:.0f}s "
        f"for approval; approvals expire after {ttl:g}s (Policy.approval_ttl), so this one "
        "is refused and nothing was recorded. The run keeps waiting: deny the call (the "
        "model then proposes again) or cancel the run."
    )


def expire(state: RunState, now: float) -> list[Event]:
    """What ``Policy.approval_expiry`` does with a call whose approval window passed by
    ``now``: ``deny`` records the expiry and a denial by ``agentcore``; ``escalate``
    records the expiry, which starts the window again; ``wait`` records nothing. A run
    that is not waiting, or whose window is open, gets nothing."""
    deadline = state.approval_deadline()
    call, action = state.call, state.policy.approval_expiry
    if (
        call is None
        or call.decision is None
        or state.pending() is None
        or deadline is None
        or now <= deadline
        or action == "wait"
    ):
        return []
    since = call.expiry.at if call.expiry is not None else call.decision.at
    escalations = call.expiry.escalations if call.expiry is not None else 0
    expired = ApprovalExpired(
        run_id=state.run_id,
        seq=state.next_seq,
        at=now,
        step=call.step,
        call_id=call.call_id,
        action=action,
        waited_s=round(now - since, 3),
        escalations=escalations + (action == "escalate"),
    )
    if action == "escalate":
        return [expired]
    denial = Confirmation(
        run_id=state.run_id,
        seq=state.next_seq + 1,
        at=now,
        step=call.step,
        call_id=call.call_id,
        approved=False,
        by="agentcore",
        reason=(
            f"No one approved this call within {state.policy.approval_ttl:g}s, so it was "
            "denied (Policy.approval_expiry='deny')."
        ),
    )
    return [expired, denial]


def cancel(state: RunState, by: str, reason: str | None) -> list[Event]:
    """End the run as ``cancelled`` by ``by``. A call that started and has no recorded
    outcome (its process died, or it was lost to a timeout) is never dropped silently: a
    ``tool_finished`` first says its outcome is unknown, with its idempotency key."""
    by = person_name(by)
    why = f"cancelled by {by}" + (f": {reason}" if reason else "")
    call, now, seq = state.call, time.time(), state.next_seq
    events: list[Event] = []
    for member in () if call is None else call.members:  # a batch's calls left running
        lost = _unknown(state, member, seq + len(events), f"the run was cancelled by {by}")
        if lost is not None:
            events.append(lost)
    unknown = outcome_unknown(state, f"the run was cancelled by {by}")
    if unknown is not None and call is not None and call.started is not None:
        events.append(unknown)
        key = call.started.idempotency_key
        why += (
            f"; the call {unknown.tool}({short_args(call.run_args())}) at step "
            f"{call.step} had started and its outcome is unknown (idempotency key {key})"
        )
    events.append(
        RunFinished(
            run_id=state.run_id,
            seq=seq + len(events),
            at=now,
            status=RunStatus.CANCELLED.value,
            reason=why,
        )
    )
    return events


def outcome_unknown(state: RunState, what: str) -> ToolFinished | None:
    """The ``tool_finished`` that closes the run's open call when it started and has no
    recorded outcome (its process died, or it was lost to a timeout), saying its outcome is
    unknown, so that no started call is ever silently dropped; ``None`` when there is none.
    ``what`` says what ends it (``the run was cancelled by ann``)."""
    return None if state.call is None else _unknown(state, state.call, state.next_seq, what)


def outcomes_unknown(state: RunState, what: str) -> list[ToolFinished]:
    """:func:`outcome_unknown` for the open call, or for each call of an open batch."""
    call = state.call
    if call is None or not call.members:
        lost = outcome_unknown(state, what)
        return [] if lost is None else [lost]
    found: list[ToolFinished] = []
    for member in call.members:
        lost = _unknown(state, member, state.next_seq + len(found), what)
        if lost is not None:
            found.append(lost)
    return found


def _unknown(state: RunState, call: OpenCall, seq: int, what: str) -> ToolFinished | None:
    """``outcome_unknown`` for ``call`` (the open call, or one call of its batch)."""
    if call.started is None or call.finished is not None or not isinstance(call.action, ToolAction):
        return None
    key = call.started.idempotency_key
    return ToolFinished(
        run_id=state.run_id,
        seq=seq,
        at=time.time(),
        step=call.step,
        call_id=call.call_id,
        tool=call.action.tool,
        ok=False,
        outcome_unknown=True,
        error=(
            f"{OUTCOME_UNKNOWN}{what} after this call started and before its outcome was "
            f"recorded; it may or may not have happened (idempotency key {key})"
        ),
    )


def short_args(args: Mapping[str, object], limit: int = 200) -> str:
    """A call's arguments in one line for a reason a person reads, cut at ``limit``."""
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) <= limit else text[:limit] + "..."
