"""The harness: run each case through a model (:func:`evaluate`) and keep the result as a
scorecard (:func:`save_scorecard`, :func:`load_scorecard`)."""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError

from agentcore._render import reask_messages
from agentcore.adapters import CompletionRequest, Message, ModelAdapter
from agentcore.contracts import (
    ActionSchema,
    ContractDocument,
    NextAction,
    ToolSpec,
    compile_action_schema,
    load_contract,
    model_from_json_schema,
)
from agentcore.contracts._schema import ask_note, batch_note
from agentcore.contracts.errors import ConfigurationError, InvalidActionError, ModelError

from ._cases import EvalCase, Scoring
from ._scoring import score_action

__all__ = ["CaseResult", "Mode", "Scorecard", "evaluate", "load_scorecard", "save_scorecard"]

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
        reason: why the action was scored wrong (``None`` when it was right).
        case_error: why the case could not be run or scored (a tool schema the harness
            cannot compile, a published answer no call can meet); such a case is left out
            of every rate and counted as ``case_errors``.
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
    reason: str | None = None
    case_error: str | None = None


class Scorecard(BaseModel):
    """The result of evaluating one model in one mode on one dataset.

    Attributes:
        scoring: the rules the cases were scored by (``agentcore`` or ``bfcl``).
        dataset_hash: of every file the cases and their answers came from.
        case_errors: id -> why, for the cases that could not be run or scored.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    model: str
    mode: Mode
    scoring: Scoring = "agentcore"
    contract_version: str
    contract_hash: str
    dataset: str
    dataset_hash: str
    created_at: float
    cases: int
    metrics: dict[str, float | None]
    """Rates are ``None`` where no case applies (no abstention cases, say)."""
    by_category: dict[str, dict[str, float | None]]
    case_errors: dict[str, str] = {}
    results: list[dict[str, Any]]  # Any: JSON rows of CaseResult

    @property
    def score(self) -> float:
        """The headline score: the share of cases solved."""
        return self.metrics.get("accuracy") or 0.0


# -- running ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Prepared:
    schema: ActionSchema
    system: str
    native_system: str


def _prepare(
    case: EvalCase, contract: ContractDocument, compiled: dict[str, ToolSpec]
) -> _Prepared:
    """The case's action schema and system text, compiled as a run compiles them.

    ``compiled`` holds the tools compiled so far (by definition): cases that offer the same
    tools share their models, and so their action schema.

    Raises:
        Exception: whatever a tool schema the harness cannot compile raises (the caller
            turns it into this case's error).
    """
    specs: list[ToolSpec] = []
    for t in case.tools:
        key = t.model_dump_json()
        if key not in compiled:
            try:
                args_model = model_from_json_schema(f"{t.name}_args", t.parameters)
                compiled[key] = ToolSpec(t.name, t.description, args_model, effect=t.effect)
            except Exception as exc:
                exc.add_note(f"tool {t.name!r}")
                raise
        specs.append(compiled[key])
    schema = compile_action_schema(
        specs,
        thought_first=contract.thought_first,
        tool_args=contract.tool_args,
        max_batch=case.max_batch,
        ask=case.ask,
    )
    schema.root_type  # noqa: B018  # build the union now: a failure is this case's, not a reply's
    system = contract.render_system(specs)
    native = contract.render_system(specs, native=True)
    notes: list[str] = []  # as a run tells its model, in the same order
    if schema.batch_names:
        notes.append(batch_note(case.max_batch, schema.batch_names))
    if case.ask:
        notes.append(ask_note())
    for note in notes:
        system, native = f"{system}\n\n{note}", f"{native}\n\n{note}"
    return _Prepared(schema, system, native)


def _case_error(case: EvalCase, why: str) -> CaseResult:
    return CaseResult(
        id=case.id,
        category=case.category,
        action=None,
        tool_correct=None,
        args_correct=None,
        abstained_correctly=None,
        correct=False,
        invalid=False,
        reasks=0,
        input_tokens=0,
        output_tokens=0,
        latency_ms=0.0,
        case_error=why,
    )


def _describe(exc: BaseException) -> str:
    notes = "; ".join(getattr(exc, "__notes__", ()))
    text = f"{type(exc).__name__}: {exc}"[:500]
    return f"{notes}: {text}" if notes else text


async def _run_case(
    case: EvalCase,
    model: ModelAdapter,
    contract: ContractDocument,
    max_reasks: int,
    scoring: Scoring,
    compiled: dict[str, ToolSpec],
) -> CaseResult:
    if case.problem is not None:
        return _case_error(case, f"published answer: {case.problem}")
    try:
        prep = _prepare(case, contract, compiled)
    except Exception as exc:  # any schema the harness cannot compile: this case's error
        return _case_error(case, f"tool schema: {_describe(exc)}")
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
            schema=prep.schema,
            system=prep.system,
            native_system=prep.native_system,
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
        except Exception as exc:  # an adapter that cannot send this case (its schema, say)
            return _case_error(case, f"adapter: {_describe(exc)}")
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
    score = score_action(case, action, scoring)
    return CaseResult(
        id=case.id,
        category=case.category,
        action=action.model_dump(mode="json") if action is not None else None,
        tool_correct=score.tool_correct,
        args_correct=score.args_correct,
        abstained_correctly=score.abstained_correctly,
        correct=score.correct,
        invalid=action is None,
        reasks=reasks,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        latency_ms=round(latency, 3),
        error=error,
        reason=score.reason,
    )


def _rate(values: Iterable[bool | None]) -> float | None:
    counted = [v for v in values if v is not None]
    return round(sum(counted) / len(counted), 4) if counted else None


def _metrics(results: Sequence[CaseResult]) -> dict[str, float | None]:
    scored = [r for r in results if r.case_error is None]
    n = len(scored)
    return {
        "cases": float(len(results)),
        "case_errors": float(len(results) - n),
        "accuracy": round(sum(r.correct for r in scored) / n, 4) if n else None,
        "tool_selection": _rate(r.tool_correct for r in scored),
        "argument_accuracy": _rate(r.args_correct for r in scored),
        "abstention": _rate(r.abstained_correctly for r in scored),
        "invalid_rate": round(sum(r.invalid for r in scored) / n, 4) if n else None,
        "reasks_per_case": round(sum(r.reasks for r in scored) / n, 4) if n else None,
        "input_tokens_per_case": round(sum(r.input_tokens for r in scored) / n, 1) if n else 0.0,
        "output_tokens_per_case": round(sum(r.output_tokens for r in scored) / n, 1) if n else 0.0,
        "latency_ms_median": round(statistics.median(r.latency_ms for r in scored), 3)
        if n
        else 0.0,
    }


def _rules_of(cases: Sequence[EvalCase], scoring: Scoring | None) -> Scoring:
    if scoring is not None:
        if scoring not in ("agentcore", "bfcl"):
            raise ConfigurationError(f"Unknown scoring {scoring!r}: use 'agentcore' or 'bfcl'.")
        return scoring
    written: set[Scoring] = {c.rules for c in cases}
    if len(written) > 1:
        raise ConfigurationError(
            "The cases were written for different rules (agentcore and bfcl): "
            "choose one with scoring=..."
        )
    return written.pop() if written else "agentcore"


async def evaluate(
    cases: Sequence[EvalCase],
    model: ModelAdapter,
    *,
    mode: Mode = "structured",
    scoring: Scoring | None = None,
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
        scoring: ``agentcore`` or ``bfcl`` (see :func:`score_action`); by default the
            rules the cases were written for (``bfcl`` for :func:`load_bfcl`'s cases). The
            scorecard records the rules used.
        dataset: recorded in the scorecard.
        dataset_digest: recorded in the scorecard (see :func:`dataset_hash`).
        contract: the contract document (default: the built-in current one).
        concurrency: cases in flight at once.
        max_reasks: re-asks after an invalid reply, as in a run.
        on_result: called after each case (progress display).

    Raises:
        ConfigurationError: ``native`` for an adapter without ``with_mode``, an unknown
            mode or rule set, cases written for different rules with no ``scoring`` given,
            or ``concurrency`` below 1.
    """
    asked = _in_mode(model, mode)
    rules = _rules_of(cases, scoring)
    if concurrency < 1:
        raise ConfigurationError(f"concurrency must be >= 1, got {concurrency}")
    doc = contract or load_contract()
    gate = asyncio.Semaphore(concurrency)
    compiled: dict[str, ToolSpec] = {}

    async def one(case: EvalCase) -> CaseResult:
        async with gate:
            result = await _run_case(case, asked, doc, max_reasks, rules, compiled)
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
        scoring=rules,
        contract_version=doc.version,
        contract_hash=doc.hash,
        dataset=dataset,
        dataset_hash=dataset_digest,
        created_at=time.time(),
        cases=len(results),
        metrics=_metrics(results),
        by_category={k: _metrics(v) for k, v in sorted(by_cat.items())},
        case_errors={r.id: r.case_error for r in results if r.case_error is not None},
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
