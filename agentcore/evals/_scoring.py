"""Scoring one action: this project's rules, or BFCL's (see :mod:`agentcore.evals._bfcl`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from agentcore.contracts import NextAction, PlanAction, ToolAction
from agentcore.contracts.errors import ConfigurationError

from ._bfcl import bfcl_score
from ._cases import (
    EvalCase,
    ExpectedCall,
    Score,
    Scoring,
    described,
    score_batch,
    score_call,
)

__all__ = ["score_action"]


def score_action(
    case: EvalCase, action: NextAction | None, scoring: Scoring | None = None
) -> Score:
    """Score one action (``None``: no valid action) by the rules named (by default the rules
    the case was written for: ``case.rules``).

    ``agentcore`` (this project's rules, ``fixtures/evals/README.md``): the expected tool
    with acceptable arguments (listed arguments must match one of their values: strings
    case-insensitively after trimming, numbers numerically, ``""`` meaning "may be
    omitted"; arguments not listed may be any optional parameter of the tool). When the
    expected tool changes things (effect write or destructive), a ``plan`` is also correct:
    the contract asks for a plan before writes; it is then left out of the tool-selection
    and argument rates. A ``batch`` case: a batch of calls that pair one to one, in any
    order, with the expected calls, each by the rule for one call. Abstention cases
    (``finish``, ``plan``, ``ask``): an action of an accepted type; a call, whatever its
    arguments, is wrong (for ``ask``: the model guessed the value it should have asked for).

    ``bfcl``: the Berkeley Function Calling Leaderboard's AST checker (see
    :func:`agentcore.evals._bfcl.bfcl_score`).

    In both, an argument sent as ``null`` counts as left out (strict schema dialects write
    a left-out optional argument as ``null``), unless ``null`` is an acceptable value.

    Raises:
        ConfigurationError: unknown rules.
    """
    rules = case.rules if scoring is None else scoring
    if rules == "bfcl":
        return bfcl_score(case, action)
    if rules != "agentcore":
        raise ConfigurationError(f"Unknown scoring {rules!r}: use 'agentcore' or 'bfcl'.")
    exp = case.expected
    if exp.type == "batch":
        return score_batch(exp.calls, action, lambda _, a, e: _call_problem(case, e, a))
    if exp.type == "tool":
        tool = next((t for t in case.tools if t.name == exp.tool), None)
        if isinstance(action, PlanAction) and tool is not None and tool.effect != "read":
            return Score(None, None, None, True)
        expected = ExpectedCall(tool=exp.tool or "", args=exp.args)
        return score_call(expected, action, lambda _, a, e: _call_problem(case, e, a))
    abstained = action is not None and action.type in exp.types()
    kind = f"a call of {action.tool!r}" if isinstance(action, ToolAction) else described(action)
    why = None if abstained else f"{kind} instead of {' or '.join(exp.types())}"
    return Score(None, None, abstained, abstained, why)


def _call_problem(
    case: EvalCase,
    exp: ExpectedCall,
    args: Mapping[str, Any],  # Any: JSON
) -> str | None:
    """Why a call of ``exp.tool`` with ``args`` does not meet ``exp`` (``None``: it does)."""
    tool = next((t for t in case.tools if t.name == exp.tool), None)
    props: Any = tool.parameters.get("properties") if tool else None  # Any: JSON Schema
    return _args_problem(
        args, exp.args, cast("dict[str, Any]", props) if isinstance(props, dict) else {}
    )


def _same(value: Any, acceptable: Any) -> bool:  # Any: JSON values
    if isinstance(acceptable, str) and isinstance(value, str):
        return value.strip().lower() == acceptable.strip().lower()
    if isinstance(acceptable, bool) or isinstance(value, bool):
        return value is acceptable
    if isinstance(acceptable, int | float) and isinstance(value, int | float):
        return abs(float(value) - float(acceptable)) < 1e-9
    if isinstance(acceptable, list) and isinstance(value, list | tuple):
        seq = cast("Sequence[Any]", value)  # JSON array
        wanted = cast("list[Any]", acceptable)  # JSON array
        return len(seq) == len(wanted) and all(
            _same(v, a) for v, a in zip(seq, wanted, strict=True)
        )
    if isinstance(acceptable, dict) and isinstance(value, dict):
        got = cast("dict[str, Any]", value)  # JSON object
        want = cast("dict[str, Any]", acceptable)  # JSON object
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    return bool(value == acceptable)


def _args_problem(
    args: Mapping[str, Any],  # Any: JSON values
    expected: Mapping[str, list[Any]],  # Any: JSON values
    params: Mapping[str, Any],  # Any: the tool's JSON Schema properties
) -> str | None:
    sent = {k: v for k, v in args.items() if v is not None or None in expected.get(k, ())}
    for name in sent:
        if name not in expected and name not in params:
            return f"{name!r} is not a parameter of the tool"
    for name, acceptable in expected.items():
        if name not in sent:
            if "" not in acceptable:
                return f"{name!r} is missing"
            continue
        if not any(_same(sent[name], a) for a in acceptable if a != ""):
            return f"{name!r}: {sent[name]!r} is not one of {acceptable!r}"
    return None
