"""Budgets and policy: the limits and rules the dispatcher applies to every model alike."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agentcore.contracts import DEFAULT_MAX_REPLY_BYTES, SchemaForm, Usage
from agentcore.contracts.errors import ConfigurationError

from .rules import Rule, checked_rules

if TYPE_CHECKING:
    from .approvals import Authorize, OnPending

__all__ = ["DEFAULT_MAX_TOOL_RESULT_BYTES", "Budget", "Consumption", "Policy"]

DEFAULT_MAX_TOOL_RESULT_BYTES = 256 * 1024
"""The default cap on a tool result as recorded (:attr:`Policy.max_tool_result_bytes`)."""


class Consumption(Protocol):
    """What a run has used so far, as a budget reads it (the run state provides it)."""

    @property
    def steps(self) -> int: ...
    @property
    def tool_calls(self) -> int: ...
    @property
    def child_steps(self) -> int:
        """Steps of the sub-agents' runs during this run's calls."""
        ...

    @property
    def child_tool_calls(self) -> int:
        """Tool calls of the sub-agents' runs during this run's calls."""
        ...

    @property
    def per_tool(self) -> Mapping[str, int]: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def last_call_tokens(self) -> int:
        """Input plus output tokens of the last model call (to foresee the next one)."""
        ...


def _positive(name: str, value: float | None) -> None:
    if value is not None and value <= 0:
        raise ConfigurationError(f"{name} must be > 0 (or None for no limit), got {value!r}")


@dataclass(frozen=True)
class Budget:
    """Limits of one run. ``None`` means no limit. Exhaustion stops the run with status
    ``budget_exhausted``; ``resume(run_id, budget=...)`` continues it with a larger one.

    Attributes:
        max_steps: actions the model may propose (re-asks of invalid replies are not steps).
            When one step is left, that step's schema offers only ``finish``.
        max_tool_calls: tool runs in total.
        max_calls_per_tool: tool runs per tool name.
        max_tokens: input plus output tokens of every model call, failed attempts and
            re-asks included.
        max_cost: US dollars, where the adapter reports cost.
        deadline: a wall-clock time (``time.time()`` seconds) after which no step starts.
        max_request_tokens: the most tokens one request to the model may hold (estimated
            from its characters); set it to the model's context window less its output cap.
            Over it, the results of older steps are shown as a short stub (the window rule,
            :mod:`agentcore._window`; the transcript keeps them whole), and a request that
            does not fit even so stops the run as ``budget_exhausted``. ``None``: no limit.
    """

    max_steps: int | None = 25
    max_tool_calls: int | None = None
    max_calls_per_tool: Mapping[str, int] = field(default_factory=dict[str, int])
    max_tokens: int | None = None
    max_cost: float | None = None
    deadline: float | None = None
    max_request_tokens: int | None = None

    def __post_init__(self) -> None:
        _positive("max_steps", self.max_steps)
        cap = self.max_request_tokens
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):  # pyright: ignore[reportUnnecessaryIsInstance]  # user input
            raise ConfigurationError(
                f"max_request_tokens must be a whole number of tokens > 0 (or None for no "
                f"limit), got {cap!r}"
            )
        _positive("max_tool_calls", self.max_tool_calls)
        _positive("max_tokens", self.max_tokens)
        _positive("max_cost", self.max_cost)
        for name, cap in self.max_calls_per_tool.items():
            _positive(f"max_calls_per_tool[{name!r}]", cap)

    def exhausted(self, used: Consumption, now: float) -> str | None:
        """Why the run must stop now (steps, tokens, cost or deadline), or ``None``."""
        tokens = used.usage.total_tokens
        if self.max_steps is not None and used.steps + used.child_steps >= self.max_steps:
            return f"step budget of {self.max_steps} used up"
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"token budget of {self.max_tokens} used up ({tokens} used)"
        if self.max_cost is not None and (used.usage.cost or 0.0) >= self.max_cost:
            return f"cost budget of ${self.max_cost:g} used up"
        if self.deadline is not None and now >= self.deadline:
            return "the run's deadline has passed"
        return None

    def refuses(self, tool: str, used: Consumption) -> str | None:
        """Why the budget refuses one more call of ``tool`` (words the model reads), or
        ``None`` when it allows it."""
        calls = used.tool_calls + used.child_tool_calls
        if self.max_tool_calls is not None and calls >= self.max_tool_calls:
            return (
                f"the tool-call budget ({self.max_tool_calls}) is used up; "
                "finish with what you have."
            )
        cap = self.max_calls_per_tool.get(tool)
        if cap is not None and used.per_tool.get(tool, 0) >= cap:
            return (
                f"tool {tool!r} may be called {cap} time(s) in this run and was; use another way."
            )
        return None

    def finish_only(self, used: Consumption) -> bool:
        """Whether the next step must be the last: one step left, or too few tokens left
        for two more calls the size of the last one (the graceful end)."""
        if self.max_steps is not None and self.max_steps - used.steps - used.child_steps <= 1:
            return True
        if self.max_tokens is None or used.last_call_tokens <= 0:
            return False
        return self.max_tokens - used.usage.total_tokens < 2 * used.last_call_tokens

    def note(self, used: Consumption, *, finish_only: bool) -> str:
        """What the model is told about the budget before its next step."""
        step = used.steps + used.child_steps + 1
        parts = [f"Step {step}" + (f" of {self.max_steps}." if self.max_steps else ".")]
        if self.max_tokens is not None:
            parts.append(f"Tokens left: {max(0, self.max_tokens - used.usage.total_tokens)}.")
        if self.max_tool_calls is not None:
            calls = used.tool_calls + used.child_tool_calls
            parts.append(f"Tool calls left: {max(0, self.max_tool_calls - calls)}.")
        if finish_only:
            parts.append("This is your last step: reply with a finish action.")
        return " ".join(parts)

    def remaining(self, used: Consumption) -> Budget:
        """What is left of this budget after ``used``, as a budget for other work (a
        sub-agent's run): tokens, cost and tool calls left (at least one of each, since a
        budget of zero is not a budget), the same deadline, steps unlimited (they are the
        other run's own)."""

        def left(cap: float | None, spent: float) -> float | None:
            return None if cap is None else cap - spent

        tokens = left(self.max_tokens, used.usage.total_tokens)
        calls = left(self.max_tool_calls, used.tool_calls + used.child_tool_calls)
        cost = left(self.max_cost, used.usage.cost or 0.0)
        return Budget(
            max_steps=None,
            max_tool_calls=None if calls is None else max(1, int(calls)),
            max_tokens=None if tokens is None else max(1, int(tokens)),
            max_cost=None if cost is None else max(1e-9, cost),
            deadline=self.deadline,
            max_request_tokens=self.max_request_tokens,  # the same model's window
        )

    def to_json(self) -> dict[str, Any]:  # Any: JSON values
        """A JSON-ready dict (recorded in ``run_started`` and ``run_resumed``)."""
        data = asdict(self)
        data["max_calls_per_tool"] = dict(self.max_calls_per_tool)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Budget:  # Any: JSON values
        """Rebuild a budget recorded by :meth:`to_json`."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


@dataclass(frozen=True)
class Policy:
    """Governance rules; the same for every model.

    Attributes:
        plan_before_writes: a ``write`` or ``destructive`` tool runs only after a plan was
            approved in this run; an unplanned write gets an observation asking for a plan.
        confirm_plans: a plan waits for a person's approval (otherwise the policy approves
            it when it is proposed).
        max_reasks: how many times one step re-asks after an invalid reply before the run
            fails.
        max_repeated_failures: the same call (tool and arguments) failing or refused this
            many times stops the run.
        max_observation_chars: tool results longer than this are cut when shown to the
            model (the transcript keeps them whole).
        schema_form: ``typed`` (one variant per tool) or ``generic`` (``args_json``).
        max_reply_bytes: replies larger than this are refused before parsing.
        max_tool_result_bytes: a tool result whose JSON is larger than this is stored
            truncated (the first bytes as a string) with its full size and sha256 in the
            ``tool_finished`` event; the model sees the truncated form.
        dead_letter_after: a run whose worker died this many times in a row without
            progress is stopped as ``failed`` instead of being resumed again; a person can
            still resume it with ``resume(run_id, by=...)``.
        approval_ttl: seconds an approval stays possible after a call starts waiting for
            one (``None``: no limit). A later approval is refused; a denial is always
            accepted.
        approval_expiry: what :meth:`Agent.expire_approvals` does with a call whose
            window passed: ``wait`` (nothing: it keeps waiting, approvals refused),
            ``deny`` (denied by ``agentcore``; the model is told and proposes again) or
            ``escalate`` (an ``approval_expired`` event, :attr:`on_pending` is told, and
            the window starts again).
        approvals: how many distinct people must approve a call, by rule: keys
            ``"tool:<name>"``, ``"label:<label>"``, ``"effect:<effect>"`` and ``"plan"``;
            the largest count among the rules a call matches applies. A call a rule
            matches waits for people even if the policy would otherwise run it; one that
            waits and matches none needs one person.
        authorize: ``authorize(by, pending) -> bool``: whether this person may approve or
            deny this call (roles come from the application). Not recorded: the process
            that records the answer applies its own.
        untrusted_arguments: what happens to a ``write`` or ``destructive`` call with an
            argument that could only have come from untrusted tool output (an IBAN, an
            address, a URL, an account number read from a mail or a web page; see
            ``agentcore._provenance``), and to a read with such a URL or host:
            ``confirm`` (the default: a person approves it), ``deny`` (the model is told)
            or ``allow``. A value that appears in a plan a person approved counts as the
            person's.
        writes_after_untrusted: once the run has read untrusted output, ``confirm`` (the
            default): a plan proposed from then on waits for a person (when a write is in
            scope), and a ``write`` or ``destructive`` call that the latest plan a person
            approved does not cover (its tool's name and every argument value in the plan,
            the task or what people entered) waits for a person. An approval covers that
            plan, not the rest of the run. ``allow``: plans and writes are judged as before
            the run read untrusted output.
        compensate_on: run endings after which the run's committed effects are undone
            at once (``Agent.compensate`` by ``policy``): any of ``failed``, ``cancelled``,
            ``budget_exhausted``, ``needs_attention``. Default: none (a person decides).
        compensate_completed: ``Agent.compensate`` may undo a ``completed`` run (it then
            ends ``cancelled`` and its answer is no longer its result). Default ``False``:
            a completed run's compensation is refused. Read from the agent that compensates,
            not from the run's recorded policy.
        max_batch: the most calls one ``batch`` action may hold (0, the default: the model
            is offered no batch). With 2 or more, and a read-only, idempotent tool in
            scope, the model may make several calls of such tools in one step; they run
            concurrently, each decided, budgeted and recorded as a call of its own. A batch
            holding any other tool is refused whole. See docs/tools.md, "Batches of reads".
        ask: offer the model the ``ask`` action, a question for the user: the run then
            waits ``awaiting_input`` until ``Agent.reply`` answers it (docs/conversations.md).
            Default ``False``: a run nobody converses with has no one to answer, and the
            offer costs about 45 tokens a request; turn it on for chat agents.
        on_pending: called (sync or async) with an :class:`~agentcore.approvals.ApprovalRequest`
            after a call starts waiting for people, after each approval that leaves it
            waiting, and on an escalation; a failure is logged, never raised. Not
            recorded. :func:`agentcore.approvals.webhook` makes one that posts a signed
            request.
        rules: rules over what the run has done (:mod:`agentcore.rules`): callables
            ``rule(view, call)`` asked about every tool call after the scope, budgets and
            argument policies, before plans, provenance and approvers, in this order; each
            returns ``None``, a reason to refuse, or ``Confirm`` to ask a person. A rule that
            raises refuses the call. Each must have a name (``__name__`` or
            ``agentcore.rules.rule(name=...)``), unique among them: decisions record it. Not
            recorded; the agent that advances the run applies its own.
    """

    plan_before_writes: bool = True
    confirm_plans: bool = False
    max_reasks: int = 2
    max_repeated_failures: int = 3
    max_observation_chars: int = 8_000
    schema_form: SchemaForm = "typed"
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    max_tool_result_bytes: int = DEFAULT_MAX_TOOL_RESULT_BYTES
    dead_letter_after: int = 5
    approval_ttl: float | None = None
    approval_expiry: Literal["wait", "deny", "escalate"] = "wait"
    approvals: Mapping[str, int] = field(default_factory=dict[str, int])
    compensate_on: tuple[str, ...] = ()
    compensate_completed: bool = False
    untrusted_arguments: Literal["confirm", "deny", "allow"] = "confirm"
    writes_after_untrusted: Literal["confirm", "allow"] = "confirm"
    max_batch: int = 0
    ask: bool = False
    authorize: Authorize | None = field(default=None, compare=False, repr=False)
    on_pending: OnPending | None = field(default=None, compare=False, repr=False)
    rules: Sequence[Rule] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", checked_rules(self.rules))
        if self.max_reasks < 0:
            raise ConfigurationError(f"max_reasks must be >= 0, got {self.max_reasks}")
        _positive("max_repeated_failures", self.max_repeated_failures)
        _positive("max_observation_chars", self.max_observation_chars)
        _positive("max_reply_bytes", self.max_reply_bytes)
        _positive("max_tool_result_bytes", self.max_tool_result_bytes)
        _positive("dead_letter_after", self.dead_letter_after)
        _positive("approval_ttl", self.approval_ttl)
        if self.approval_expiry not in ("wait", "deny", "escalate"):
            raise ConfigurationError(
                f"Invalid approval_expiry {self.approval_expiry!r}. Valid: 'wait', 'deny', "
                "'escalate'."
            )
        for key, count in self.approvals.items():
            kind, _, name = key.partition(":")
            if not (key == "plan" or (kind in ("tool", "label", "effect") and name)):
                raise ConfigurationError(
                    f"Invalid approvals rule {key!r}: use 'tool:<name>', 'label:<label>', "
                    "'effect:<effect>' or 'plan'."
                )
            if kind == "effect" and name not in ("read", "write", "destructive"):
                raise ConfigurationError(  # a misspelt effect would never require anyone
                    f"Invalid approvals rule {key!r}: the effects are 'read', 'write' and "
                    "'destructive'."
                )
            if type(count) is not int or count < 1:
                raise ConfigurationError(
                    f"approvals[{key!r}] must be a whole number of people >= 1, got {count!r}"
                )
        if self.untrusted_arguments not in ("confirm", "deny", "allow"):
            raise ConfigurationError(
                f"Invalid untrusted_arguments {self.untrusted_arguments!r}. Valid: 'confirm', "
                "'deny', 'allow'."
            )
        if self.writes_after_untrusted not in ("confirm", "allow"):
            raise ConfigurationError(
                f"Invalid writes_after_untrusted {self.writes_after_untrusted!r}. Valid: "
                "'confirm', 'allow'."
            )
        unknown = set(self.compensate_on) - _COMPENSABLE_ENDINGS
        if unknown or isinstance(self.compensate_on, str):
            raise ConfigurationError(
                f"Invalid compensate_on {self.compensate_on!r}: a tuple of "
                f"{', '.join(sorted(_COMPENSABLE_ENDINGS))}."
            )
        if type(self.compensate_completed) is not bool:
            raise ConfigurationError(
                f"compensate_completed must be True or False, got {self.compensate_completed!r}"
            )
        if type(self.max_batch) is not int or self.max_batch < 0 or self.max_batch == 1:
            raise ConfigurationError(
                f"max_batch must be 0 (no batches) or a whole number >= 2, got {self.max_batch!r}"
            )
        if self.schema_form not in ("typed", "generic"):
            raise ConfigurationError(
                f"Invalid schema_form {self.schema_form!r}. Valid forms: 'typed', 'generic'."
            )

    def check_rules(self, tools: Collection[str], labels: Collection[str]) -> None:
        """Check that each ``tool:`` and ``label:`` rule of :attr:`approvals` names one of
        ``tools`` or ``labels`` (an agent's, its sub-agents' included), exactly: a rule that
        names nothing never applies, and the call it was meant for would run without it.

        Raises:
            ConfigurationError: a rule names no tool or label; the message suggests the
                closest name.
        """
        problems: list[str] = []
        for key in self.approvals:
            kind, _, name = key.partition(":")
            known = tools if kind == "tool" else labels if kind == "label" else None
            if known is None or name in known:
                continue
            close = _closest(name, known)
            hint = f": did you mean '{kind}:{close}'?" if close else ""
            listed = ", ".join(sorted(known)[:20]) or "none"
            problems.append(
                f"{key!r} names no {kind} of this agent or its sub-agents{hint} "
                f"(its {kind}s: {listed})"
            )
        if problems:
            raise ConfigurationError(
                f"Policy(approvals=...) has a rule that would never apply, so the call it was "
                f"meant for would run without the approvals: {'; '.join(problems)}. Rules "
                "name a tool or label exactly (case and spaces count)."
            )

    def approvals_needed(self, keys: Sequence[str]) -> int:
        """People a call matching these rule keys needs (0: no rule names it)."""
        return max((self.approvals.get(k, 0) for k in keys), default=0)

    def to_json(self) -> dict[str, Any]:  # Any: JSON values
        """A JSON-ready dict (recorded in ``run_started``); the hooks are code, not data,
        and are left out."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _HOOKS}
        data["approvals"] = dict(self.approvals)
        data["compensate_on"] = list(self.compensate_on)
        unused: dict[str, object] = {
            "approvals": {},
            "approval_expiry": "wait",
            "compensate_on": [],
            "compensate_completed": False,
            "untrusted_arguments": "confirm",
            "writes_after_untrusted": "confirm",
            "max_batch": 0,
            "ask": False,
        }
        for name, value in unused.items():
            if data[name] == value:  # recorded as before these existed
                del data[name]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Policy:  # Any: JSON values
        """Rebuild a policy recorded by :meth:`to_json` (without hooks)."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k not in _HOOKS}
        if "untrusted_args" in data and "untrusted_arguments" not in data:  # its earlier name
            rule = data["untrusted_args"]
            known["untrusted_arguments"] = _RENAMED_RULE.get(rule, rule)
        if "compensate_on" in known:
            known["compensate_on"] = tuple(known["compensate_on"])
        return cls(**known)


def _closest(name: str, known: Collection[str]) -> str | None:
    """The name in ``known`` that ``name`` most likely meant: the same once spaces and
    case are ignored, else the closest spelling; ``None`` when none is close."""
    folded = {k.strip().casefold(): k for k in known}
    exact = folded.get(name.strip().casefold())
    if exact is not None:
        return exact
    near = difflib.get_close_matches(name.strip().casefold(), list(folded), n=1, cutoff=0.6)
    return folded[near[0]] if near else None


_HOOKS = frozenset({"authorize", "on_pending", "rules"})
_RENAMED_RULE = {"ask": "confirm", "deny": "deny", "allow": "allow"}
_COMPENSABLE_ENDINGS = frozenset({"failed", "cancelled", "budget_exhausted", "needs_attention"})
