"""Tool-selection evaluation: how well a model follows the action contract, measured.

Each case is a one-step decision: the model sees the conversation and the case's tools
(through the same contract, schema and validation path as a real run) and must return one
action. Nothing is executed. Scores: tool selection, argument accuracy, correct abstention
(``finish`` or ``plan`` when no tool fits or a plan should come first), invalid-action rate,
re-asks, tokens and latency.

Datasets: this project's JSON Lines format (see ``fixtures/evals/README.md``) and the
Berkeley Function Calling Leaderboard's published format (question files plus
``possible_answer`` files), loaded unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentcore.adapters import CompletionRequest, Message, ModelAdapter
from agentcore.contracts import (
    ContractDocument,
    Effect,
    NextAction,
    PlanAction,
    ToolAction,
    ToolSpec,
    compile_action_schema,
    load_contract,
    model_from_json_schema,
)
from agentcore.contracts.errors import (
    ConfigurationError,
    InvalidActionError,
    ModelError,
    ToolDefinitionError,
)

from ._render import reask_messages

__all__ = [
    "CaseResult",
    "EvalCase",
    "EvalTool",
    "Expected",
    "Mode",
    "Scorecard",
    "dataset_hash",
    "evaluate",
    "load_bfcl",
    "load_cases",
    "load_scorecard",
    "save_scorecard",
    "score_action",
]

Mode = Literal["structured", "native"]


@runtime_checkable
class _SwitchesMode(Protocol):
    """An adapter that can ask in either mode (the litellm-backed adapters)."""

    def with_mode(self, mode: Mode) -> ModelAdapter:
        """A copy of the adapter that asks in ``mode``."""
        ...


def _in_mode(model: ModelAdapter, mode: Mode) -> ModelAdapter:
    """``model`` asking in ``mode``, or a clear error when it cannot."""
    if mode not in ("structured", "native"):
        raise ConfigurationError(f"Unknown mode {mode!r}: use 'structured' or 'native'.")
    if isinstance(model, _SwitchesMode):
        return model.with_mode(mode)
    if mode == "native":
        raise ConfigurationError(
            f"Mode 'native' is not available for {model.name}: native tool calling needs an "
            "adapter with with_mode() (the OpenAI, Anthropic, Gemini, DeepSeek and local "
            "adapters); evaluate it in 'structured' mode."
        )
    return model


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


class Expected(_Data):
    """The right first action.

    ``type`` ``tool`` names the tool and, per argument, the acceptable values (``""`` in
    the list: the argument may be omitted). ``finish`` or ``plan`` (or both) mean abstaining.
    """

    type: Literal["tool", "finish", "plan"] | list[Literal["finish", "plan"]]
    tool: str | None = None
    args: dict[str, list[Any]] = {}  # Any: JSON values

    def types(self) -> tuple[str, ...]:
        """The acceptable action types."""
        return tuple(self.type) if isinstance(self.type, list) else (self.type,)


class EvalCase(_Data):
    """One evaluation case: messages, tools and the expected first action."""

    id: str
    category: str = "uncategorised"
    messages: list[dict[str, str]]
    tools: list[EvalTool]
    expected: Expected


@dataclass(frozen=True, slots=True)
class CaseResult:
    """How one case went.

    Attributes:
        id, category: the case.
        action: the valid action the model returned, as JSON, or ``None``.
        tool_correct: the expected tool was chosen (``None`` for abstention cases).
        args_correct: ...with acceptable arguments (``None`` for abstention cases).
        abstained_correctly: an acceptable abstention (``None`` for tool cases).
        correct: the case counts as solved.
        invalid: no valid action after the re-asks (or the model failed).
        reasks: invalid replies before the final one.
        input_tokens, output_tokens: summed over every attempt.
        latency_ms: wall time of every attempt.
        error: the last validation or model error, if any.
    """

    id: str
    category: str
    action: dict[str, Any] | None  # Any: JSON
    tool_correct: bool | None
    args_correct: bool | None
    abstained_correctly: bool | None
    correct: bool
    invalid: bool
    reasks: int
    input_tokens: int
    output_tokens: int
    latency_ms: float
    error: str | None = None


class Scorecard(_Data):
    """The result of evaluating one model in one mode on one dataset."""

    model: str
    mode: Mode
    contract_version: str
    contract_hash: str
    dataset: str
    dataset_hash: str
    created_at: float
    cases: int
    metrics: dict[str, float | None]
    """Rates are ``None`` where no case applies (no abstention cases, say)."""
    by_category: dict[str, dict[str, float | None]]
    results: list[dict[str, Any]]  # Any: JSON rows of CaseResult

    @property
    def score(self) -> float:
        """The headline score: the share of cases solved."""
        return self.metrics.get("accuracy") or 0.0


# -- loading -------------------------------------------------------------------------------


def dataset_hash(path: str | Path) -> str:
    """sha256 (16 hex digits) of a dataset file's bytes (or of every file under a folder)."""
    p = Path(path)
    digest = hashlib.sha256()
    for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
        if f.is_file():
            digest.update(f.read_bytes())
    return digest.hexdigest()[:16]


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


_GORILLA_TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "any": None,
    "integer": "integer",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
    "number": "number",
}


def _gorilla_schema(node: Any) -> Any:  # Any: JSON Schema in Gorilla's dialect
    """Rewrite Gorilla's parameter type names (dict, float, tuple, any) into JSON Schema."""
    if isinstance(node, list):
        return [_gorilla_schema(x) for x in node]  # pyright: ignore[reportUnknownVariableType]  # JSON
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}  # Any: JSON Schema
    for key, value in node.items():  # pyright: ignore[reportUnknownVariableType]  # JSON
        if key == "type" and isinstance(value, str):
            mapped = _GORILLA_TYPES.get(value, value)
            if mapped is not None:
                out["type"] = mapped
        else:
            out[str(key)] = _gorilla_schema(value)  # pyright: ignore[reportUnknownArgumentType]  # JSON
    return out


def _read_jsonl(path: Path) -> list[dict[str, Any]]:  # Any: JSON
    rows: list[dict[str, Any]] = []  # Any: JSON
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"Cannot read {path}: {exc}") from exc
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigurationError(f"{path}:{n}: not JSON: {exc}") from exc
    return rows


def load_bfcl(question_file: str | Path, answer_file: str | Path | None = None) -> list[EvalCase]:
    """Load a Berkeley Function Calling Leaderboard category, unchanged.

    Question lines are ``{"id", "question": [[messages]], "function": [tools]}`` (JSON Lines
    despite the ``.json`` name); answer lines ``{"id", "ground_truth": [{name: {arg:
    [values]}}]}``. Without an answer file (the irrelevance category) the right action is
    not to call a tool (``finish``). Dotted function names are kept: the contract's tool
    names allow dots, and adapters that need other names map them.
    """
    questions = _read_jsonl(Path(question_file))
    answers: dict[str, Any] = {}  # Any: JSON
    if answer_file is not None:
        answers = {str(a["id"]): a["ground_truth"] for a in _read_jsonl(Path(answer_file))}
    cases: list[EvalCase] = []
    for q in questions:
        qid = str(q["id"])
        turns: list[Any] = q["question"]  # Any: JSON
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in turns[0]]
        tools = [
            EvalTool(
                name=str(f["name"]),
                description=str(f.get("description", "")) or str(f["name"]),
                parameters=_gorilla_schema(f.get("parameters") or {"type": "dict"}),
            )
            for f in q["function"]
        ]
        if answer_file is None:
            expected = Expected(type="finish")
        else:
            truth = answers.get(qid)
            if not truth:
                raise ConfigurationError(f"{answer_file}: no ground truth for {qid!r}")
            ((name, args),) = truth[0].items()
            expected = Expected(type="tool", tool=str(name), args=dict(args))
        category = qid.rsplit("_", 1)[0]
        cases.append(
            EvalCase(id=qid, category=category, messages=messages, tools=tools, expected=expected)
        )
    return cases


# -- scoring -------------------------------------------------------------------------------


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


def _args_ok(
    args: Mapping[str, Any],  # Any: JSON values
    expected: Mapping[str, list[Any]],  # Any: JSON values
    params: Mapping[str, Any],  # Any: the tool's JSON Schema properties
) -> bool:
    sent = {k: v for k, v in args.items() if v is not None}
    for name in sent:
        if name not in expected and name not in params:
            return False  # not a parameter of the tool at all
    for name, acceptable in expected.items():
        if name not in sent:
            if "" not in acceptable:
                return False
            continue
        if not any(_same(sent[name], a) for a in acceptable if a != ""):
            return False
    return True


def score_action(
    case: EvalCase, action: NextAction | None
) -> tuple[bool | None, bool | None, bool | None, bool]:
    """Score one action: ``(tool_correct, args_correct, abstained_correctly, correct)``.

    Tool cases: the expected tool with acceptable arguments (listed arguments must match one
    of their values, ``""`` meaning "may be omitted"; arguments not listed may be any
    optional parameter of the tool). When the expected tool changes things (effect write or
    destructive), a ``plan`` is also correct: the contract asks for a plan before writes;
    it is then left out of the tool-selection and argument rates. Abstention cases: an
    action of an accepted type.
    """
    exp = case.expected
    if exp.type == "tool":
        tool = next((t for t in case.tools if t.name == exp.tool), None)
        if isinstance(action, PlanAction) and tool is not None and tool.effect != "read":
            return None, None, None, True
        if not isinstance(action, ToolAction):
            return False, False, None, False
        props: Any = tool.parameters.get("properties") if tool else None  # Any: JSON Schema
        params = cast("dict[str, Any]", props) if isinstance(props, dict) else {}
        tool_ok = action.tool == exp.tool
        args_ok = tool_ok and _args_ok(action.args, exp.args, params)
        return tool_ok, args_ok, None, args_ok
    abstained = action is not None and action.type in exp.types()
    return None, None, abstained, abstained


# -- running ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Prepared:
    schema_tools: tuple[ToolSpec, ...]
    system: str


def _prepare(case: EvalCase, contract: ContractDocument) -> _Prepared:
    specs: list[ToolSpec] = []
    for t in case.tools:
        try:
            specs.append(
                ToolSpec(
                    name=t.name,
                    description=t.description,
                    args_model=model_from_json_schema(f"{t.name}_args", t.parameters),
                    effect=t.effect,
                )
            )
        except ToolDefinitionError as exc:
            raise ConfigurationError(f"case {case.id}: tool {t.name!r}: {exc}") from exc
    return _Prepared(tuple(specs), contract.render_system(specs))


async def _run_case(
    case: EvalCase, model: ModelAdapter, contract: ContractDocument, max_reasks: int
) -> CaseResult:
    prep = _prepare(case, contract)
    schema = compile_action_schema(prep.schema_tools)
    messages = [
        Message("assistant" if m.get("role") == "assistant" else "user", m.get("content", ""))
        for m in case.messages
    ]
    tokens_in = tokens_out = reasks = 0
    latency = 0.0
    error: str | None = None
    action: NextAction | None = None
    for attempt in range(max_reasks + 1):
        request = CompletionRequest(
            schema=schema,
            system=prep.system,
            messages=tuple(messages),
            run_id=f"eval:{case.id}",
            step=1,
        )
        started = time.perf_counter()
        try:
            completion = await model.complete_structured(request)
        except ModelError as exc:
            latency += (time.perf_counter() - started) * 1000
            tokens_in += exc.input_tokens
            tokens_out += exc.output_tokens
            error = f"{type(exc).__name__}: {exc}"
            break
        latency += completion.latency_ms or (time.perf_counter() - started) * 1000
        tokens_in += completion.usage.input_tokens
        tokens_out += completion.usage.output_tokens
        if completion.action is not None:
            action = completion.action
            error = None
            break
        error = str(completion.error or InvalidActionError("invalid reply"))
        if attempt < max_reasks:
            reasks += 1
            messages.extend(reask_messages(completion.text, error))
    tool_ok, args_ok, abstained, correct = score_action(case, action)
    return CaseResult(
        id=case.id,
        category=case.category,
        action=action.model_dump(mode="json") if action is not None else None,
        tool_correct=tool_ok,
        args_correct=args_ok,
        abstained_correctly=abstained,
        correct=correct,
        invalid=action is None,
        reasks=reasks,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        latency_ms=round(latency, 3),
        error=error,
    )


def _rate(values: Iterable[bool | None]) -> float | None:
    counted = [v for v in values if v is not None]
    return round(sum(counted) / len(counted), 4) if counted else None


def _metrics(results: Sequence[CaseResult]) -> dict[str, float | None]:
    n = len(results)
    return {
        "cases": float(n),
        "accuracy": round(sum(r.correct for r in results) / n, 4) if n else None,
        "tool_selection": _rate(r.tool_correct for r in results),
        "argument_accuracy": _rate(r.args_correct for r in results),
        "abstention": _rate(r.abstained_correctly for r in results),
        "invalid_rate": round(sum(r.invalid for r in results) / n, 4) if n else None,
        "reasks_per_case": round(sum(r.reasks for r in results) / n, 4) if n else None,
        "input_tokens_per_case": round(sum(r.input_tokens for r in results) / n, 1) if n else 0.0,
        "output_tokens_per_case": round(sum(r.output_tokens for r in results) / n, 1) if n else 0.0,
        "latency_ms_median": round(statistics.median(r.latency_ms for r in results), 3)
        if n
        else 0.0,
    }


async def evaluate(
    cases: Sequence[EvalCase],
    model: ModelAdapter,
    *,
    mode: Mode = "structured",
    dataset: str = "",
    dataset_digest: str = "",
    contract: ContractDocument | None = None,
    concurrency: int = 4,
    max_reasks: int = 2,
    on_result: Callable[[CaseResult], None] | None = None,
) -> Scorecard:
    """Run every case as a one-step decision and score it.

    Args:
        cases: the cases (see :func:`load_cases`, :func:`load_bfcl`).
        model: the adapter to evaluate.
        mode: ``structured`` (the next-action contract) or ``native`` (the provider's tool
            calling: ``model.with_mode("native")``; an adapter without ``with_mode`` is
            refused). The scorecard records the mode.
        dataset, dataset_digest: recorded in the scorecard.
        contract: the contract document (default: the built-in current one).
        concurrency: cases in flight at once.
        max_reasks: re-asks after an invalid reply, as in a run.
        on_result: called after each case (progress display).

    Raises:
        ConfigurationError: ``native`` for an adapter without ``with_mode``, an unknown
            mode, or ``concurrency`` below 1.
    """
    asked = _in_mode(model, mode)
    if concurrency < 1:
        raise ConfigurationError(f"concurrency must be >= 1, got {concurrency}")
    doc = contract or load_contract()
    gate = asyncio.Semaphore(concurrency)

    async def one(case: EvalCase) -> CaseResult:
        async with gate:
            result = await _run_case(case, asked, doc, max_reasks)
        if on_result is not None:
            on_result(result)
        return result

    results = list(await asyncio.gather(*(one(c) for c in cases)))
    by_cat: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_cat[r.category].append(r)
    return Scorecard(
        model=model.name,
        mode=mode,
        contract_version=doc.version,
        contract_hash=doc.hash,
        dataset=dataset,
        dataset_hash=dataset_digest,
        created_at=time.time(),
        cases=len(results),
        metrics=_metrics(results),
        by_category={k: _metrics(v) for k, v in sorted(by_cat.items())},
        results=[_row(r) for r in results],
    )


def _row(r: CaseResult) -> dict[str, Any]:  # Any: JSON
    return {name: getattr(r, name) for name in CaseResult.__dataclass_fields__}


# -- storing ----------------------------------------------------------------------------------


def _slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", model)


def save_scorecard(card: Scorecard, directory: str | Path) -> Path:
    """Write ``<dir>/<model>--<mode>.json`` (the latest scorecard for that model and mode)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{_slug(card.model)}--{card.mode}.json"
    path.write_text(card.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def load_scorecard(
    directory: str | Path, model: str, mode: Mode = "structured"
) -> Scorecard | None:
    """The stored scorecard of ``model`` in ``mode``, or ``None`` if it was never evaluated.

    Raises:
        ConfigurationError: the file exists but is not a scorecard.
    """
    path = Path(directory) / f"{_slug(model)}--{mode}.json"
    if not path.is_file():
        return None
    try:
        return Scorecard.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        raise ConfigurationError(f"Scorecard {path} cannot be read: {exc}") from exc
