"""Rules over what a run has done: plain Python callables the dispatcher asks about every
tool call, with a read-only view of the run's history.

A rule is ``rule(view, call) -> None | str | Refuse | Confirm``: ``view`` is a
:class:`RunView` (the calls the run made, with their arguments as they ran, their outcomes
and who approved them; whether and where it read untrusted output; what people said), and
``call`` the :class:`ProposedCall` being decided. It returns ``None`` to let the call go on
to the other rules, a reason (``str`` or :class:`Refuse`) to refuse it (the model reads the
reason and can do something else), or :class:`Confirm` to put it to a person. Rules are
given to the policy (``Policy(rules=[...])``); they are code, not recorded with the run,
like ``authorize``.

Example:
    >>> from agentcore.rules import ProposedCall, RunView
    >>> def three_refunds_per_order(view: RunView, call: ProposedCall) -> str | None:
    ...     if call.tool != "refund":
    ...         return None
    ...     done = view.calls_of("refund", order_id=call.args["order_id"], ok=True)
    ...     return "at most three refunds per order" if len(done) >= 3 else None

Where rules run, what they see and what they decide (docs/governance.md, "Rules over what the
run has done"):

- After the scope, the pinned definition, the budgets and the argument policies, before
  plans, provenance, approvers and the destructive stop; in the order the policy lists
  them. A refusal ends the decision at once (the rules after it are not asked); a
  :class:`Confirm` is kept and applied after the built-in rules, so a plan is still asked
  for first, and a later refusal still wins.
- The view holds the run's tool calls that started (a refused call never ran and is not
  there), in every turn of a conversation; a sub-agent's calls are in its own run. A call
  a person approved with edited arguments is not asked about again: the person decided.
- A rule that raises, returns something else, or returns an empty reason refuses the call
  (fail-closed); the decision names the rule and the error, and it is logged
  (``rule_failed``).
- The decision records the rule's name (``decision.rule``): its ``__name__``, or the name
  given with :func:`rule`. Names are checked when the policy is made: each rule callable,
  named, and named once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, cast, overload

from agentcore.contracts.errors import ConfigurationError

from ._provenance import normalise

__all__ = [
    "Confirm",
    "PastCall",
    "ProposedCall",
    "Refuse",
    "Rule",
    "RuleResult",
    "RunView",
    "rule",
    "rule_name",
]

ERROR_CHARS = 500
"""Characters of a failed call's error a :class:`PastCall` keeps."""


@dataclass(frozen=True, slots=True)
class Refuse:
    """A rule's refusal: the call does not run; the model reads ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True)
class Confirm:
    """A rule asks a person: the call waits for an approval (``awaiting_confirmation``)
    with ``reason``. In a batch, where nothing waits, the call is refused instead."""

    reason: str


RuleResult = Refuse | Confirm | str | None
"""What a rule returns: ``None`` (no objection), a reason or :class:`Refuse` (refused),
or :class:`Confirm` (a person decides)."""


def freeze(value: Any) -> Any:  # Any: a JSON value
    """A JSON value that cannot be changed: objects as read-only mappings, arrays as
    tuples (scalars as they are)."""
    if isinstance(value, dict):
        items = cast("dict[str, Any]", value)  # Any: JSON values
        return MappingProxyType({str(k): freeze(v) for k, v in items.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in cast("list[Any]", value))  # Any: JSON values
    return value


def thaw(value: Any) -> Any:  # Any: a frozen JSON value
    """The JSON value :func:`freeze` froze (mappings as dicts, tuples as lists)."""
    if isinstance(value, Mapping):
        items = cast("Mapping[str, Any]", value)  # Any: JSON values
        return {str(k): thaw(v) for k, v in items.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in cast("tuple[Any, ...]", value)]  # Any: JSON values
    return value


class PastCall(NamedTuple):
    """A tool call the run started, as a rule sees it (a named tuple: the fold keeps one
    for every call, so it is cheap to make).

    Attributes:
        call_id: its id (``c3``; ``c3.2`` for a batch's second call).
        step: the step that proposed it.
        turn: the conversation's turn it ran in (1 for the task).
        tool: the tool's name.
        args: the arguments it ran with (a person's edits included), read-only: objects
            are mappings, arrays tuples.
        effect: the tool's effect as the run pinned it (``read``, ``write``,
            ``destructive``), or ``None`` if unknown.
        approved_by: the people who approved it, in order; empty when the policy let it
            run.
        ok: ``True`` when it returned, ``False`` when it failed, ``None`` while it has
            no recorded outcome (running, or lost in a crash and not yet settled).
        error: why it failed (its first 500 characters), else ``None``.
    """

    call_id: str
    step: int
    turn: int
    tool: str
    args: Mapping[str, Any]  # Any: JSON values
    effect: str | None
    approved_by: tuple[str, ...] = ()
    ok: bool | None = None
    error: str | None = None

    def matches(self, tool: str | None = None, **args: Any) -> bool:  # Any: JSON values
        """Whether this call is of ``tool`` (any, when ``None``) and ran with each of
        ``args`` (compared as given: a list argument as a tuple)."""
        if tool is not None and self.tool != tool:
            return False
        return all(name in self.args and self.args[name] == freeze(v) for name, v in args.items())


@dataclass(frozen=True, slots=True)
class ProposedCall:
    """The call being decided.

    Attributes:
        tool: the tool's name.
        args: the proposed arguments, read-only (objects as mappings, arrays as tuples).
        effect: the tool's effect (``read``, ``write``, ``destructive``).
        labels: the tool's labels.
    """

    tool: str
    args: Mapping[str, Any]  # Any: JSON values
    effect: str
    labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunView:
    """What a run has done, read-only: what a rule may look at.

    Attributes:
        run_id: the run's id.
        tenant: the run's tenant, or ``None``.
        metadata: the run's recorded metadata (read-only).
        turn: the conversation's current turn (1 for the task).
        calls: the tool calls the run started, in order (every turn's).
        untrusted_sources: where the untrusted output the run read came from, in order:
            ``(call id, tool)``, or ``("", name)`` for a context provider or imported
            history.
        approvals: ``(call id, person)`` for each approval of a call that ran, in order.
        person_plan_approved: a person approved a plan in the current turn.
        proposed: the call being decided (also a rule's second argument).
    """

    run_id: str
    tenant: str | None
    metadata: Mapping[str, Any]  # Any: JSON values
    turn: int
    calls: tuple[PastCall, ...]
    untrusted_sources: tuple[tuple[str, str], ...]
    approvals: tuple[tuple[str, str], ...]
    person_plan_approved: bool
    proposed: ProposedCall
    trusted_text: str = field(default="", repr=False)
    """The task and what people entered, normalised; see :meth:`said_by_people`."""

    @property
    def untrusted_read(self) -> bool:
        """Whether the run has read untrusted output (a tool's, a context provider's or
        imported history's)."""
        return bool(self.untrusted_sources)

    def calls_of(
        self, tool: str | None = None, *, ok: bool | Literal["any"] | None = "any", **args: Any
    ) -> tuple[PastCall, ...]:  # Any: JSON values
        """The past calls of ``tool`` (any tool when ``None``) that ran with each of
        ``args``; with ``ok=True`` only those that returned, ``ok=False`` those that failed,
        ``ok=None`` those with no outcome yet."""
        return tuple(
            c for c in self.calls if c.matches(tool, **args) and (ok == "any" or c.ok is ok)
        )

    def said_by_people(self, value: str | int | float) -> bool:
        """Whether ``value`` appears in what people said: the task, the user's later
        messages, what people entered when approving or resolving (edited arguments and
        reasons), and a plan a person approved. Compared normalised (case folded,
        whitespace collapsed), as a whole: ``ann@example.com`` is not in
        ``joann@example.com``.

        Raises:
            TypeError: ``value`` is not a string or a number.
        """
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):  # pyright: ignore[reportUnnecessaryIsInstance]  # user input
            raise TypeError(
                f"said_by_people takes a string or a number, got {type(value).__name__}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            return False
        wanted = normalise(value if isinstance(value, str) else repr(value))
        return bool(wanted) and _bounded_in(wanted, self.trusted_text)


_WORD_INSIDE = frozenset("_@+-")


def _bounded_in(value: str, text: str) -> bool:
    """``value`` occurs in ``text`` as a whole: not inside a longer word, address or
    number (a full stop after it ends a sentence; one before it or between it and a
    letter joins it to a host or number)."""
    at = text.find(value)
    while at >= 0:
        end = at + len(value)
        before = text[at - 1] if at else " "
        after = text[end] if end < len(text) else " "
        after_next = text[end + 1] if end + 1 < len(text) else " "
        joined_before = before.isalnum() or before in _WORD_INSIDE or before == "."
        joined_after = (
            after.isalnum() or after in _WORD_INSIDE or (after == "." and after_next.isalnum())
        )
        if not joined_before and not joined_after:
            return True
        at = text.find(value, at + 1)
    return False


Rule = Callable[[RunView, ProposedCall], RuleResult]
"""``rule(view, call)``: see the module's docstring."""


@dataclass(frozen=True, slots=True)
class NamedRule:
    """A rule with the name :func:`rule` gave it (recorded in the decisions it makes)."""

    name: str
    check: Rule

    def __call__(self, view: RunView, call: ProposedCall) -> RuleResult:
        return self.check(view, call)


@overload
def rule(check: Rule, /) -> NamedRule: ...
@overload
def rule(*, name: str) -> Callable[[Rule], NamedRule]: ...
def rule(check: Rule | None = None, /, *, name: str | None = None) -> Any:  # Any: either form
    """Name a rule: ``@rule(name="three_refunds")`` on a function, ``rule(name="x")(check)``
    for a lambda, a ``functools.partial`` or a callable object; plain ``@rule`` keeps the
    function's ``__name__``.

    Raises:
        ConfigurationError: the name is empty, too long, or not printable.
    """

    def named(fn: Rule) -> NamedRule:
        if not callable(fn):
            raise ConfigurationError(f"a rule must be callable, got {type(fn).__name__}")
        given = name if name is not None else getattr(fn, "__name__", None)
        return NamedRule(_checked_name(given, fn), fn)

    return named if check is None else named(check)


def rule_name(check: Rule) -> str:
    """The name the decisions of ``check`` record.

    Raises:
        ConfigurationError: it has none fit to record (a lambda, a partial, a callable
            object without ``__name__``): name it with :func:`rule`.
    """
    if isinstance(check, NamedRule):
        return check.name
    return _checked_name(getattr(check, "__name__", None), check)


def _checked_name(name: object, check: object) -> str:
    if not isinstance(name, str) or not name.strip() or name.startswith("<"):
        raise ConfigurationError(
            f"the rule {check!r} has no name to record in its decisions (a lambda, a "
            "partial or a callable object); name it: rule(name='...')(check)"
        )
    if len(name) > 100 or not name.isprintable():
        raise ConfigurationError(f"a rule's name must be printable and <= 100 characters: {name!r}")
    return name


def checked_rules(rules: Sequence[Rule]) -> tuple[Rule, ...]:
    """``rules`` as a tuple, each callable and named once.

    Raises:
        ConfigurationError: a rule is not callable, has no name, or two share a name.
    """
    if isinstance(rules, (str, bytes)) or not isinstance(rules, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]  # user input
        raise ConfigurationError(
            f"Policy(rules=...) takes a list of callables, got {type(rules).__name__}"
        )
    seen: set[str] = set()
    for check in rules:
        if not callable(check):
            raise ConfigurationError(
                f"Policy(rules=...) holds {check!r}, which is not callable: a rule is "
                "rule(view, call) -> None | str | Refuse | Confirm"
            )
        name = rule_name(check)
        if name in seen:
            raise ConfigurationError(
                f"two rules are named {name!r}: a decision names its rule, so each name must "
                "be unique; rename one with rule(name='...')"
            )
        seen.add(name)
    return tuple(rules)
