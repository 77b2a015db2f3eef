"""Tool-selection evaluation: how well a model follows the action contract, measured.

Each case is a one-step decision: the model sees the conversation and the case's tools
(through the same contract, schema and validation path as a real run) and must return one
action. Nothing is executed. Scores: tool selection, argument accuracy, correct abstention
(``finish`` or ``plan`` when no tool fits or a plan should come first, ``ask`` when a
value only the user knows is missing and the case offers it), invalid-action rate,
re-asks, tokens and latency.

Datasets: this project's JSON Lines format (see ``fixtures/evals/README.md``) and the
Berkeley Function Calling Leaderboard's published format (question files plus
``possible_answer`` files), loaded unchanged. Two rule sets score them (see
:func:`score_action`): this project's own, and BFCL's AST checker.

A case the harness cannot run (a tool schema it cannot compile, a published answer no
call can meet, an adapter that cannot send it) is a case error: counted and named in the
scorecard, left out of the rates, never a crash of the whole evaluation.
"""

from ._bfcl import BFCL_CATEGORIES, BFCL_MAX_BATCH, load_bfcl
from ._cases import (
    EvalCase,
    EvalTool,
    Expected,
    ExpectedCall,
    Score,
    Scoring,
    dataset_hash,
    load_cases,
)
from ._harness import CaseResult, Mode, Scorecard, evaluate, load_scorecard, save_scorecard
from ._scoring import score_action
from ._stats import Interval, bootstrap_interval, paired_difference, split_halves

__all__ = [
    "BFCL_CATEGORIES",
    "BFCL_MAX_BATCH",
    "CaseResult",
    "EvalCase",
    "EvalTool",
    "Expected",
    "ExpectedCall",
    "Interval",
    "Mode",
    "Score",
    "Scorecard",
    "Scoring",
    "bootstrap_interval",
    "dataset_hash",
    "evaluate",
    "load_bfcl",
    "load_cases",
    "load_scorecard",
    "paired_difference",
    "save_scorecard",
    "score_action",
    "split_halves",
]
