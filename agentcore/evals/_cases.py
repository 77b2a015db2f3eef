"""Evaluation cases as data: the case models, this project's JSON Lines format, scores."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentcore.contracts import BatchAction, Effect, NextAction, ToolAction
from agentcore.contracts.errors import ConfigurationError

__all__ = [
    "EvalCase",
    "EvalTool",
    "Expected",
    "ExpectedCall",
    "Score",
    "Scoring",
    "dataset_hash",
    "described",
    "load_cases",
    "match_calls",
    "read_jsonl",
    "score_batch",
    "score_call",
]

Scoring = Literal["agentcore", "bfcl"]
"""The rule set a case is scored by: this project's (``agentcore``, see
``fixtures/evals/README.md``) or the Berkeley Function Calling Leaderboard's AST checker
(``bfcl``)."""


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class EvalTool(_Data):
    """A tool of a case, defined as data (JSON Schema parameters)."""

    name: str
    description: str
    effect: Effect = "read"
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object"}
    )  # Any: JSON Schema


class ExpectedCall(_Data):
    """One call of an expected batch: the tool and, per argument, the acceptable values."""

    tool: str
    args: dict[str, list[Any]] = {}  # Any: JSON values


class Expected(_Data):
    """The right first action.

    ``type`` ``tool`` names the tool and, per argument, the acceptable values (``""`` in
    the list: the argument may be omitted). ``batch``: every call of ``calls``, in any
    order, and no other, in one ``batch`` action (the case's ``max_batch`` must allow them).
    ``finish``, ``plan`` or ``ask`` (or a list of them) mean not calling a tool: ``ask``, a
    question for the user, when a value only the user knows is missing (the case must offer
    it: ``EvalCase.ask``).
    """

    type: Literal["tool", "batch", "finish", "plan", "ask"] | list[Literal["finish", "plan", "ask"]]
    tool: str | None = None
    args: dict[str, list[Any]] = {}  # Any: JSON values
    calls: list[ExpectedCall] = []

    def types(self) -> tuple[str, ...]:
        """The acceptable action types."""
        return tuple(self.type) if isinstance(self.type, list) else (self.type,)


class EvalCase(_Data):
    """One evaluation case: messages, tools and the expected first action.

    Attributes:
        rules: the rule set the expectation was written for (``bfcl`` for cases loaded
            from the Berkeley Function Calling Leaderboard's files).
        max_batch: the most calls a ``batch`` may hold, as ``Policy(max_batch=...)`` in a
            run (0: no batch is offered).
        problem: why no action can be scored right (a defect of a published answer, found
            when the case was loaded); such a case is reported as a case error and no
            model is asked.
        ask: the step offers ``ask``, a question for the user, as ``Policy(ask=True)`` in a
            run (its schema and system text gain it). A case expecting ``ask`` must offer
            it; a case that offers it and expects a call scores asking as wrong (the value
            was given).
    """

    id: str
    category: str = "uncategorised"
    messages: list[dict[str, str]]
    tools: list[EvalTool]
    expected: Expected
    rules: Scoring = "agentcore"
    problem: str | None = None
    max_batch: int = Field(default=0, ge=0)
    ask: bool = False

    @model_validator(mode="after")
    def _ask_offered(self) -> EvalCase:
        if "ask" in self.expected.types() and not self.ask:
            raise ValueError(
                f"case {self.id!r} expects an ask action but does not offer it: "
                'set "ask": true (a step offers ask only when asked to)'
            )
        return self


@dataclass(frozen=True, slots=True)
class Score:
    """How one action scored.

    Attributes:
        tool_correct: the expected tool was chosen (``None`` for abstention cases, and for
            a plan accepted before a write).
        args_correct: ...with acceptable arguments (``None`` where ``tool_correct`` is).
        abstained_correctly: an acceptable abstention (``None`` for tool cases).
        correct: the case counts as solved.
        reason: why it does not, in words (``None`` when correct).
    """

    tool_correct: bool | None
    args_correct: bool | None
    abstained_correctly: bool | None
    correct: bool
    reason: str | None = None


def described(action: NextAction | None) -> str:
    """An action in a few words, for a reason: ``no valid action``, ``an ask action``."""
    if action is None:
        return "no valid action"
    return f"{'an' if action.type[0] in 'aeiou' else 'a'} {action.type} action"


def match_calls(
    sent: Sequence[tuple[str, Mapping[str, Any]]],  # Any: JSON values
    expected: Sequence[ExpectedCall],
    problem: Callable[[str, Mapping[str, Any], ExpectedCall], str | None],  # Any: JSON
) -> str | None:
    """Pair each sent call ``(tool, args)`` with a distinct expected call it meets, in any
    order (it calls the same tool, and ``problem(tool, args, expected)``, asked only then,
    is ``None``); ``None`` when every call is paired, else why not, in words."""
    if len(sent) != len(expected):
        return f"{len(sent)} calls, not the {len(expected)} expected"
    fits = [
        [j for j, e in enumerate(expected) if e.tool == tool and problem(tool, args, e) is None]
        for tool, args in sent
    ]
    for i, options in enumerate(fits):
        if not options:
            tool, args = sent[i]
            why = "; ".join(
                f"{e.tool}: {problem(tool, args, e)}" for e in expected if e.tool == tool
            )
            return f"call {i + 1} ({tool}) meets no expected call" + (f" ({why})" if why else "")
    taken: set[int] = set()

    def pair(i: int) -> bool:  # backtracking: a few calls, each with few options
        if i == len(fits):
            return True
        for j in fits[i]:
            if j not in taken:
                taken.add(j)
                if pair(i + 1):
                    return True
                taken.discard(j)
        return False

    return None if pair(0) else "the calls cannot be paired one to one with the expected ones"


def score_call(
    expected: ExpectedCall,
    action: NextAction | None,
    problem: Callable[[str, Mapping[str, Any], ExpectedCall], str | None],  # Any: JSON
) -> Score:
    """Score an action against one expected call: a ``tool`` action calling that tool, its
    arguments judged by ``problem`` (as :func:`match_calls` asks it)."""
    if not isinstance(action, ToolAction):
        return Score(
            False, False, None, False, f"{described(action)}, not a call of {expected.tool!r}"
        )
    if action.tool != expected.tool:
        return Score(False, False, None, False, f"called {action.tool!r}, not {expected.tool!r}")
    why = problem(action.tool, action.args, expected)
    return Score(True, why is None, None, why is None, why)


def score_batch(
    expected: Sequence[ExpectedCall],
    action: NextAction | None,
    problem: Callable[[str, Mapping[str, Any], ExpectedCall], str | None],  # Any: JSON
) -> Score:
    """Score an action against an expected batch: a ``batch`` whose calls pair one to one,
    in any order, with ``expected`` (each call judged by ``problem``)."""
    if not isinstance(action, BatchAction):
        why = f"{described(action)}, not a batch of {len(expected)}"
        return Score(False, False, None, False, why)
    sent = [(c.tool, c.args) for c in action.calls]
    tools_right = sorted(t for t, _ in sent) == sorted(c.tool for c in expected)
    why = match_calls(sent, expected, problem)
    return Score(tools_right, why is None, None, why is None, why)


def dataset_hash(*paths: str | Path) -> str:
    """sha256 (16 hex digits) of dataset files' bytes (a folder: every file under it).

    Give every file the scores depend on: a BFCL question file and its answer file.
    """
    digest = hashlib.sha256()
    for path in paths:
        p = Path(path)
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.is_file():
                digest.update(f.read_bytes())
    return digest.hexdigest()[:16]


def read_jsonl(path: Path) -> list[dict[str, Any]]:  # Any: JSON
    """The objects of a JSON Lines file.

    Raises:
        ConfigurationError: the file cannot be read, or a line is not a JSON object.
    """
    rows: list[dict[str, Any]] = []  # Any: JSON
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"Cannot read {path}: {exc}") from exc
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row: object = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"{path}:{n}: not JSON: {exc}") from exc
        if not isinstance(row, dict):
            raise ConfigurationError(f"{path}:{n}: not a JSON object")
        rows.append(row)  # pyright: ignore[reportUnknownArgumentType]  # a JSON object
    return rows


def load_cases(path: str | Path) -> list[EvalCase]:
    """Load this project's JSON Lines dataset.

    Raises:
        ConfigurationError: the file is missing, or a line is not a valid case (the line
            number says which).
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigurationError(f"Cannot read dataset {p}: {exc}") from exc
    cases: list[EvalCase] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            case = EvalCase.model_validate_json(line)
        except ValidationError as exc:
            raise ConfigurationError(f"{p}:{n}: not a valid case: {exc}") from exc
        _check_case(case, f"{p}:{n}")
        cases.append(case)
    if not cases:
        raise ConfigurationError(f"Dataset {p} has no cases.")
    return cases


def _check_case(case: EvalCase, where: str) -> None:
    names = {t.name for t in case.tools}
    exp = case.expected
    if exp.type == "tool" and exp.tool not in names:
        raise ConfigurationError(f"{where}: expected tool {exp.tool!r} is not among its tools")
    if exp.type == "batch":
        if len(exp.calls) < 2 or len(exp.calls) > case.max_batch:
            raise ConfigurationError(
                f"{where}: a batch expects 2 to max_batch ({case.max_batch}) calls, "
                f"not {len(exp.calls)}"
            )
        unknown = sorted({c.tool for c in exp.calls} - names)
        if unknown:
            raise ConfigurationError(f"{where}: expected tools {unknown} are not among its tools")
