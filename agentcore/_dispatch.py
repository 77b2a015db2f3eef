"""The dispatcher: one decision path for every action, whatever model proposed it.

Order: scope gate -> pinned definition -> tool budgets -> argument policies -> rules over
what the run has done (``Policy.rules``, in their order; a refusal ends the decision, a
``Confirm`` is applied last) -> a person's plan (tools with ``requires="person_plan"``) ->
plan before writes -> arguments from untrusted output -> a write after untrusted output
that no plan a person approved covers -> approvers -> destructive stop -> a rule's
``Confirm`` -> execute. A plan waits for a person under
``Policy(confirm_plans=True)``, while no person has approved one and the scope holds a tool
that requires a person's plan, and once the run has read untrusted output (with a write in
scope; ``Policy.writes_after_untrusted``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from agentcore.contracts import (
    AskAction,
    BatchAction,
    FinishAction,
    NextAction,
    PlanAction,
    ToolAction,
)

from ._manifest import changed_since_pinned
from ._observability import get_logger
from ._provenance import judge_arguments, plan_misses
from ._state import RunState
from .events import Verdict
from .guards import check_arguments
from .rules import Confirm, ProposedCall, Refuse, Rule, RunView, freeze, rule_name
from .tools import Tool

__all__ = ["Ruling", "batch_refusal", "decide", "decide_in_batch", "run_view"]


@dataclass(frozen=True, slots=True)
class Ruling:
    """A verdict and the reason the model (and the audit log) will read."""

    verdict: Verdict
    reason: str | None = None
    provenance: Mapping[str, str] = field(default_factory=dict[str, str])
    """Where each argument came from, once the run read untrusted output."""
    approvals_needed: int = 1
    """People who must approve a ``needs_confirmation`` (``Policy.approvals``)."""
    rule: str | None = None
    """The rule over the run's history that refused the call or put it to a person."""


def decide(
    state: RunState, action: NextAction, tools: Mapping[str, Tool], rules: Sequence[Rule] = ()
) -> Ruling:
    """Decide what happens to ``action`` in the run described by ``state``; ``rules``:
    the agent's ``Policy.rules`` (code, so not in the run's recorded policy)."""
    match action:
        case FinishAction() | AskAction():  # an answer, or a question, for the user
            return Ruling("execute")
        case PlanAction():
            people = state.policy.approvals_needed(("plan",))
            if people:
                return _people(people, "a plan")
            if state.policy.confirm_plans:
                return Ruling("needs_confirmation", "plans wait for a person's approval")
            if not state.person_plan_approved and _person_plan_in_scope(state, tools):
                return Ruling(
                    "needs_confirmation",
                    "a tool in this run's scope runs only after a plan a person approved: "
                    "this plan waits for a person",
                )
            if _after_untrusted(state) and _writes_in_scope(state, tools):
                return Ruling(
                    "needs_confirmation",
                    "the run has read untrusted tool output (text a third party wrote): a plan "
                    "proposed from now on waits for a person",
                )
            return Ruling("execute", "approved by policy")
        case ToolAction():
            return _decide_tool(state, action, tools, rules)
        case BatchAction():  # its calls are decided one by one (decide_in_batch)
            refused = batch_refusal(state, action, tools)
            return Ruling("execute") if refused is None else Ruling("deny", refused)


def batch_refusal(state: RunState, action: BatchAction, tools: Mapping[str, Tool]) -> str | None:
    """Why a batch is refused as a whole (words the model reads), or ``None``: batches
    are not allowed in the run, it holds too many calls, or it holds a tool that is not
    read-only and idempotent (a write never runs in a batch, whatever else it holds)."""
    most = state.policy.max_batch
    if most < 2:
        return "batches are not allowed in this run; call one tool per step."
    if len(action.calls) > most:
        return (
            f"the batch holds {len(action.calls)} calls; at most {most} may run in one "
            "batch. Nothing in it ran."
        )
    for call in action.calls:
        tool = tools.get(call.tool)
        if tool is not None and (tool.spec.effect != "read" or not tool.spec.idempotent):
            what = f"effect {tool.spec.effect}" if tool.spec.effect != "read" else "not idempotent"
            return (
                f"the batch holds {call.tool!r}, which is not a read-only, idempotent tool "
                f"({what}); a batch may hold only reads, so nothing in it ran. Call "
                f"{call.tool!r} alone, in a step of its own."
            )
    return None


def decide_in_batch(
    state: RunState, action: ToolAction, tools: Mapping[str, Tool], rules: Sequence[Rule] = ()
) -> Ruling:
    """The decision of one call of an accepted batch: the same rules as a call of its
    own (scope, pinned definition, budgets, argument policies, rules over the run,
    provenance), except that a call that would wait for a person is refused (a batch never
    waits; propose it alone)."""
    ruling = _decide_tool(state, action, tools, rules)
    if ruling.verdict == "needs_confirmation":
        return Ruling(
            "deny",
            f"{ruling.reason}; a call in a batch never waits for a person, so it did not run. "
            "Propose it alone to have it approved.",
            provenance=ruling.provenance,
            rule=ruling.rule,
        )
    return ruling


def _decide_tool(
    state: RunState, action: ToolAction, tools: Mapping[str, Tool], rules: Sequence[Rule]
) -> Ruling:
    name = action.tool
    in_scope = ", ".join(state.scope) or "(none)"
    tool = tools.get(name)
    if name not in state.scope or tool is None:
        return Ruling(
            "deny",
            f"tool {name!r} is not in this run's scope. Tools in scope: {in_scope}.",
        )
    changed = changed_since_pinned(state, tool)
    if changed is not None:
        return Ruling(
            "deny",
            f"tool {name!r} is refused: its definition changed since this run pinned it "
            f"({changed}). It cannot run in this run until a person accepts the change "
            "(resume, confirm or resolve with accept_tool_changes); use another tool or finish.",
        )
    refused = state.budget.refuses(name, state.turn_used())
    if refused is not None:
        return Ruling("deny", refused)
    refused = check_arguments(tool.policies, action.args)
    if refused is not None:  # before a plan is asked for or a person sees the call
        return Ruling("deny", f"tool {name!r} refused these arguments: {refused}.")
    asked: Ruling | None = None  # a rule's Confirm, applied after the built-in rules
    if rules:
        ruled = _judge_by_rules(state, action, tool, rules)
        if ruled is not None and ruled.verdict == "deny":
            return ruled
        asked = ruled
    effect = tool.spec.effect
    if tool.requires == "person_plan" and not state.person_plan_approved:
        return Ruling(
            "needs_plan",
            f"tool {name!r} runs only after a plan that a person approved; propose a plan with "
            "a plan action (it waits for a person's approval).",
        )
    if effect != "read" and state.policy.plan_before_writes and not state.plan_approved:
        return Ruling(
            "needs_plan",
            f"tool {name!r} changes things (effect {effect}); propose a plan with a plan action "
            "first. It can run once a plan is approved.",
        )
    trusted = state.trusted_text
    if state.confirmed_plan is not None and state.untrusted_text:  # a person's plan is theirs
        trusted = f"{trusted}\n{state.confirmed_plan}"
    judged = judge_arguments(action.args, trusted, state.untrusted_text, urls_only=effect == "read")
    origins = {path: origin for path, (origin, _) in judged.items()}
    ruling = replace(_stop_or_run(state, tool, action, judged, tools), provenance=origins)
    if asked is None or ruling.verdict == "deny":
        return ruling
    if ruling.verdict == "needs_confirmation":  # both ask: one approval answers both
        return replace(ruling, reason=f"{ruling.reason}; {asked.reason}", rule=asked.rule)
    return replace(asked, provenance=origins)


def _judge_by_rules(
    state: RunState, action: ToolAction, tool: Tool, rules: Sequence[Rule]
) -> Ruling | None:
    """Ask each rule about the call, in order: the first refusal (a rule that fails
    refuses), else the first rule's request for a person, else ``None``."""
    proposed = ProposedCall(action.tool, freeze(action.args), tool.spec.effect, tuple(tool.labels))
    view = run_view(state, proposed)
    asked: Ruling | None = None
    for check in rules:
        name = rule_name(check)
        try:
            said = check(view, proposed)
        except Exception as exc:  # fail-closed: any error refuses the call
            get_logger().warning(
                "rule_failed", run_id=state.run_id, rule=name, tool=action.tool, error=repr(exc)
            )
            error = f"{type(exc).__name__}: {exc}"[:300]
            return Ruling(
                "deny",
                f"tool {action.tool!r} is refused: the rule {name!r} failed ({error}), and a "
                "rule that fails refuses the call.",
                rule=name,
            )
        match said:
            case None:
                continue
            case str() | Refuse() if reason := said if isinstance(said, str) else said.reason:
                return Ruling(
                    "deny",
                    f"tool {action.tool!r} is refused by the rule {name!r}: {reason}",
                    rule=name,
                )
            case Confirm(reason=reason) if reason:
                if asked is None:
                    asked = Ruling(
                        "needs_confirmation",
                        f"the rule {name!r} puts tool {action.tool!r} to a person: {reason}",
                        rule=name,
                    )
            case _:
                if inspect.iscoroutine(said):
                    said.close()  # never awaited: rules are synchronous
                get_logger().warning(
                    "rule_failed",
                    run_id=state.run_id,
                    rule=name,
                    tool=action.tool,
                    error=f"returned {said!r}",
                )
                return Ruling(
                    "deny",
                    f"tool {action.tool!r} is refused: the rule {name!r} returned "
                    f"{type(said).__name__} {str(said)[:80]!r}, not None, a reason, Refuse or "
                    "Confirm (rules are synchronous; an empty reason is no reason), and a rule "
                    "that fails refuses the call.",
                    rule=name,
                )
    return asked


def run_view(state: RunState, proposed: ProposedCall) -> RunView:
    """What a rule sees of the run ``state`` describes, deciding ``proposed``."""
    trusted = state.trusted_text
    if state.confirmed_plan is not None:  # a person approved it: theirs
        trusted = f"{trusted}\n{state.confirmed_plan}"
    calls = tuple(state.past_calls)
    return RunView(
        run_id=state.run_id,
        tenant=state.tenant,
        metadata=MappingProxyType(dict(freeze(state.metadata))),
        turn=state.turn,
        calls=calls,
        untrusted_sources=tuple((call_id, tool) for _, call_id, tool in state.untrusted_reads),
        approvals=tuple((c.call_id, by) for c in calls for by in c.approved_by),
        person_plan_approved=state.person_plan_approved,
        proposed=proposed,
        trusted_text=trusted,
    )


def _stop_or_run(
    state: RunState,
    tool: Tool,
    action: ToolAction,
    judged: Mapping[str, tuple[str, int]],
    tools: Mapping[str, Tool],
) -> Ruling:
    """The last rules: arguments from untrusted output, a write no confirmed plan covers
    after untrusted output, approvers, destructive."""
    name, effect = tool.name, tool.spec.effect
    people = state.policy.approvals_needed(
        (f"tool:{name}", f"effect:{effect}", *(f"label:{label}" for label in tool.labels))
    )
    from_output = sorted(path for path, (origin, _) in judged.items() if origin == "untrusted")
    rule = state.policy.untrusted_arguments
    if from_output and rule != "allow":
        sources = ", ".join(
            f"{path} (from {_source(state, judged[path][1], tools)})" for path in from_output
        )
        why = (
            f"tool {name!r}: {sources} could only have come from untrusted tool output (text "
            "a third party wrote), not from the task or a person"
        )
        if rule == "deny":
            return Ruling("deny", f"{why}; refused (Policy.untrusted_arguments='deny').")
        return Ruling(
            "needs_confirmation",
            f"{why}: a person must approve it",
            approvals_needed=max(1, people),
        )
    if effect != "read" and _after_untrusted(state):
        plan = state.confirmed_plan
        missing = plan_misses(name, action.args, plan or "", state.trusted_text)
        if missing:
            what = (
                "no plan a person approved covers it"
                if plan is None
                else f"the plan a person approved does not hold {', '.join(missing)}"
            )
            return Ruling(
                "needs_confirmation",
                f"tool {name!r} changes things after the run read untrusted tool output, and "
                f"{what}: a person must approve it",
                approvals_needed=max(1, people),
            )
    if people > 1 or (people and effect != "destructive"):
        return _people(people, f"tool {name!r}")
    if effect == "destructive":
        return Ruling(
            "needs_confirmation", f"tool {name!r} is destructive: a person must approve it"
        )
    return Ruling("execute")


def _people(count: int, what: str) -> Ruling:
    who = "a person" if count == 1 else f"{count} different people"
    return Ruling(
        "needs_confirmation", f"{what} needs the approval of {who} (policy)", approvals_needed=count
    )


def _after_untrusted(state: RunState) -> bool:
    """The run has read untrusted output and ``Policy.writes_after_untrusted`` applies."""
    return bool(state.untrusted_text) and state.policy.writes_after_untrusted == "confirm"


def _writes_in_scope(state: RunState, tools: Mapping[str, Tool]) -> bool:
    return any((t := tools.get(n)) is not None and t.spec.effect != "read" for n in state.scope)


def _source(state: RunState, offset: int, tools: Mapping[str, Tool]) -> str:
    """``the result of get_mail [3]``: the untrusted result at ``offset``; a sub-agent's
    with what it reads (``the result of reader [c1], a sub-agent that reads get_mail``)."""
    found = state.untrusted_source(offset)
    if found is None:
        return "untrusted output"
    call_id, source = found
    if not call_id:
        return f"the context from {source}"
    reads: list[str] = getattr(tools.get(source), "untrusted_sources", [])  # a sub-agent's
    via = f", a sub-agent that reads {', '.join(reads)}" if reads else ""
    return f"the result of {source} [{call_id}]{via}"


def _person_plan_in_scope(state: RunState, tools: Mapping[str, Tool]) -> bool:
    return any((t := tools.get(n)) is not None and t.requires == "person_plan" for n in state.scope)
