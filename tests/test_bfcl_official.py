"""agentcore's BFCL scorer against BFCL's own AST checker, on the same cases and calls.

For every published case of three categories, the right call (the oracle of
``tests/test_bfcl.py``) and calls made wrong one way each (an argument left out, a string
changed, a number or a boolean changed, a number sent as a string, a list cut short) are
scored by ``agentcore.evals`` and by ``simple_function_checker`` from the ``bfcl-eval``
wheel: the two verdicts must agree on every call. The wheel's checker imports its model
registry, which needs every provider's SDK; a stand-in registry (no model renames dotted
function names) is put in its place while the checker is imported, and taken out after.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import re
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest
from test_bfcl import _data, _published, oracle

from agentcore.contracts import ToolAction
from agentcore.evals import EvalCase, score_action

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("bfcl_eval") is None,
        reason="needs the BFCL data: pip install --no-deps 'bfcl-eval==2026.3.23'",
    ),
]

Checker = Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], bool]


@pytest.fixture(scope="module")
def official() -> Checker:
    name = "bfcl_eval.constants.model_config"
    registry = types.ModuleType(name)
    registry.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]  # a stand-in module
        "agentcore": types.SimpleNamespace(underscore_to_dot=False)
    }
    saved = sys.modules.get(name)
    sys.modules[name] = registry
    try:
        ast = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
        enums = importlib.import_module("bfcl_eval.constants.enums")
    finally:
        if saved is None:
            del sys.modules[name]
        else:
            sys.modules[name] = saved

    def check(function: dict[str, Any], call: dict[str, Any], answer: dict[str, Any]) -> bool:
        verdict = ast.simple_function_checker(
            copy.deepcopy(function), copy.deepcopy(call), answer, enums.Language.PYTHON, "agentcore"
        )
        return bool(verdict["valid"])

    return check


def _wrong_ways(args: dict[str, Any]) -> list[dict[str, Any]]:
    """The right arguments, and each way of making one of them wrong."""
    out = [args]
    for key, value in args.items():
        out.append({k: v for k, v in args.items() if k != key})
        if isinstance(value, str):
            out.append({**args, key: value + " zz"})
        elif isinstance(value, bool):
            out.append({**args, key: not value})
        elif isinstance(value, int | float):
            out.extend(({**args, key: value + 1}, {**args, key: str(value)}))
        elif isinstance(value, list) and value:
            out.append({**args, key: value[:-1]})
    return out


def _rows(category: str, what: str) -> dict[str, dict[str, Any]]:
    pattern = re.compile(rf"BFCL_v\d+_{category}\.json")
    question = next(p for p in _data().iterdir() if pattern.fullmatch(p.name))
    path = question if what == "question" else question.parent / "possible_answer" / question.name
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}


@pytest.mark.parametrize("category", ["simple_python", "live_simple", "multiple"])
def test_our_scorer_agrees_with_bfcls_checker_on_every_call(
    category: str, official: Checker
) -> None:
    questions, answers = _rows(category, "question"), _rows(category, "answer")
    compared, disagreements = 0, list[tuple[str, dict[str, Any], bool, bool]]()
    for case in _published(category):
        try:
            right = oracle(case)
        except ValueError:  # a published answer no schema-valid call meets (a case error)
            continue
        function = next(f for f in questions[case.id]["function"] if f["name"] == right["tool"])
        answer = answers[case.id]["ground_truth"][0]
        for args in _wrong_ways(right["args"]):
            ours = _ours(case, right["tool"], args)
            theirs = official(function, {right["tool"]: args}, answer)
            compared += 1
            if ours != theirs:
                disagreements.append((case.id, args, ours, theirs))
    assert compared > 1000, compared
    assert disagreements == [], disagreements[:5]


def _ours(case: EvalCase, tool: str, args: dict[str, Any]) -> bool:
    action = ToolAction(type="tool", thought="scored", tool=tool, args=args)
    return bool(score_action(case, action, "bfcl").correct)
