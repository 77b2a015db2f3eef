"""Every published case of every BFCL category the loader supports, scored by BFCL's rules.

The data is the Berkeley Function Calling Leaderboard's own, from the ``bfcl-eval`` wheel
(Apache-2.0), found with importlib.resources; nothing is copied into this repository. The
wheel's requirements pull in torch and CUDA, so it is installed with ``--no-deps`` (its data
and checker need none of them): ``pip install --no-deps 'bfcl-eval==2026.3.23'``; .ci/run
does, and fails if it is missing.

An oracle built from the possible answers must score 100% of the scored cases under the BFCL
rules, and a model that always abstains 100% on irrelevance and 0% elsewhere. The cases
whose published answer no schema-valid call can meet are case errors, named here one by one,
so a new wheel that fixes or adds such defects shows up as a failure to look at.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from agentcore.adapters import Completion, CompletionRequest, parse_reply
from agentcore.contracts import Usage
from agentcore.evals import BFCL_CATEGORIES, EvalCase, evaluate, load_bfcl

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("bfcl_eval") is None,
        reason="needs the BFCL data: pip install --no-deps 'bfcl-eval==2026.3.23'",
    ),
]

# Published answers a call that follows the published schema cannot meet (checked by hand
# against the files): a value outside the parameter's enum or of another type than
# declared, an argument the function does not have, a required list with no acceptable
# value at all, object keys the object's schema does not define.
KNOWN_DEFECTS = {
    "live_simple": {"live_simple_106-63-0", "live_simple_112-68-0"},
    "live_multiple": {
        "live_multiple_87-38-4",  # 'openai' for an enum of 'openapi', ...
        "live_multiple_189-83-0",  # object keys outside its properties
        "live_multiple_552-153-1",  # true for a string parameter
        "live_multiple_595-158-1",  # 2 for a string parameter
        "live_multiple_596-158-2",
        "live_multiple_731-167-2",
        "live_multiple_733-167-4",
        "live_multiple_735-167-6",
        "live_multiple_750-169-5",  # a genre outside the enum
        "live_multiple_835-178-10",
        "live_multiple_862-181-3",  # an argument the function does not have
        "live_multiple_871-182-8",
        "live_multiple_947-197-0",
        "live_multiple_964-207-0",
    },
    "parallel_multiple": {
        "parallel_multiple_12",  # 'permeability' for a function that has no such parameter
        "parallel_multiple_21",  # "data['sales']" (source text) for an array of numbers
        "parallel_multiple_26",  # 'type' for a function that has no such parameter
        "parallel_multiple_94",  # fruit names for an array of integers
    },
    "live_parallel_multiple": {
        "live_parallel_multiple_2-2-0",  # a command outside the enum
    },
}


def _data() -> Path:
    return Path(str(files("bfcl_eval") / "data"))


def _published(category: str) -> list[EvalCase]:
    pattern = re.compile(rf"BFCL_v\d+_{category}\.json")
    question = next(p for p in _data().iterdir() if pattern.fullmatch(p.name))
    answer = question.parent / "possible_answer" / question.name
    return load_bfcl(question, answer if BFCL_CATEGORIES[category] else None)


# -- the oracle: the first acceptable value the tool's schema admits ------------------------

_OMIT = object()
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def _norm(text: str) -> str:
    return re.sub(r"[ ,./\-_*^]", "", text).lower()


def _fit(value: Any, schema: Mapping[str, Any], per_key: bool) -> Any:
    """``value`` as the schema admits it, or ValueError. ``per_key``: an object's keys hold
    lists of acceptable values (BFCL's form one level down), not values."""
    if "enum" in schema:
        for member in schema["enum"]:
            if member == value or (
                isinstance(member, str) and isinstance(value, str) and _norm(member) == _norm(value)
            ):
                return member
        raise ValueError(value)
    kind = schema.get("type")
    if isinstance(kind, list):  # [type, "null"]: a parameter whose default is None
        kind = next(k for k in kind if k != "null")
    if kind is None:
        return value
    if type(value) not in _TYPES[kind]:
        raise ValueError(value)
    if kind == "array":
        return [_fit(v, schema.get("items") or {}, per_key) for v in value]
    if kind == "object" and (per_key or "properties" in schema):
        props = schema.get("properties")
        required = schema.get("required", [])
        out: dict[str, Any] = {}
        for key, options in value.items():
            if props is not None and key not in props:
                raise ValueError(key)
            sub = props[key] if props is not None else {}
            if per_key:
                chosen = _choose(options, sub, key in required, per_key=False)
            else:
                chosen = _fit(options, sub, per_key=False)
            if chosen is not _OMIT:
                out[key] = chosen
        return out
    return value


def _choose(acceptable: list[Any], schema: Mapping[str, Any], required: bool, per_key: bool) -> Any:
    for value in acceptable:
        if value == "":
            continue
        if value is None and not required:
            return None
        try:
            return _fit(value, schema, per_key)
        except ValueError:
            continue
    if "" in acceptable:
        return "" if required else _OMIT
    raise ValueError(acceptable)


def _oracle_args(case: EvalCase, tool_name: str, answer: Mapping[str, list[Any]]) -> dict[str, Any]:
    tool = next(t for t in case.tools if t.name == tool_name)
    props: dict[str, Any] = tool.parameters.get("properties", {})
    required: list[str] = tool.parameters.get("required", [])
    args: dict[str, Any] = {}
    for name, acceptable in answer.items():
        chosen = _choose(acceptable, props[name], name in required, per_key=True)
        if chosen is not _OMIT:
            args[name] = chosen
    return args


def oracle(case: EvalCase) -> dict[str, Any]:
    """The right action from the possible answer (finish where no call is right; a batch
    of the answer's calls, last first, where it has several: the order must not matter)."""
    expected = case.expected
    if expected.type == "batch":
        calls = [
            {"tool": c.tool, "args": _oracle_args(case, c.tool, c.args)} for c in expected.calls
        ]
        return {"type": "batch", "thought": "From the answer.", "calls": calls[::-1]}
    if expected.type != "tool":
        return {"type": "finish", "thought": "No tool fits.", "answer": "I cannot do that."}
    assert expected.tool is not None
    args = _oracle_args(case, expected.tool, expected.args)
    return {"type": "tool", "thought": "From the answer.", "tool": expected.tool, "args": args}


def abstain(_case: EvalCase) -> dict[str, Any]:
    return {"type": "finish", "thought": "No call.", "answer": "No."}


class ByCase:
    """A scripted model answering each case by its id (user texts repeat across cases)."""

    def __init__(
        self, name: str, cases: list[EvalCase], reply: Callable[[EvalCase], dict[str, Any]]
    ) -> None:
        self.name = name
        self.replies = {c.id: json.dumps(reply(c)) for c in cases if c.problem is None}

    async def complete_structured(self, request: CompletionRequest) -> Completion:
        text = self.replies[request.run_id.removeprefix("eval:")]
        action, error = parse_reply(request, text)
        return Completion(text=text, action=action, error=error, usage=Usage(), model=self.name)


def test_the_loader_claims_the_categories_tested_here() -> None:
    published = {p.stem.split("_", 2)[2] for p in _data().glob("BFCL_v*_*.json")}
    assert set(BFCL_CATEGORIES) - {"simple"} <= published  # "simple": the v3 name


@pytest.mark.parametrize("category", sorted(set(BFCL_CATEGORIES) - {"simple"}))
async def test_every_published_case_scores_right_for_the_oracle_and_abstaining(
    category: str,
) -> None:
    cases = _published(category)
    assert len(cases) >= (16 if category.startswith("live_parallel") else 100)
    assert {c.category for c in cases} == {category}

    card = await evaluate(cases, ByCase("oracle", cases, oracle), concurrency=1)
    assert card.scoring == "bfcl"
    assert set(card.case_errors) == KNOWN_DEFECTS.get(category, set())
    wrong = [(r["id"], r["reason"] or r["error"]) for r in card.results if not r["correct"]]
    assert len(wrong) == len(card.case_errors), wrong[:5]
    assert card.metrics["accuracy"] == 1.0
    assert card.metrics["invalid_rate"] == 0.0

    silent = await evaluate(cases, ByCase("abstain", cases, abstain), concurrency=1)
    irrelevance = not BFCL_CATEGORIES[category]
    assert silent.metrics["accuracy"] == (1.0 if irrelevance else 0.0)


def test_parallel_answers_pair_in_any_order_and_all_or_nothing() -> None:
    case = next(c for c in _published("parallel_multiple") if c.problem is None)
    right = oracle(case)  # its calls in the reverse of the answer's order
    scored = _score(case, right)
    assert scored.correct and scored.tool_correct, scored
    calls = right["calls"]
    for wrong, why in [
        ({**right, "calls": calls[:-1]}, "calls, not the"),  # one missing
        ({**right, "calls": [*calls[:-1], calls[0]]}, "paired"),  # one twice, one missing
        ({"type": "tool", "thought": "t", **calls[0]}, "a tool action, not a batch"),
    ]:
        scored = _score(case, wrong)
        assert not scored.correct and why in (scored.reason or ""), (why, scored)


def _score(case: EvalCase, reply: dict[str, Any]) -> Any:
    from agentcore.contracts import ToolSpec, compile_action_schema, model_from_json_schema
    from agentcore.evals import score_action

    specs = [
        ToolSpec(t.name, t.description, model_from_json_schema(f"{t.name}_args", t.parameters))
        for t in case.tools
    ]
    schema = compile_action_schema(specs, max_batch=case.max_batch)
    return score_action(case, schema.parse(json.dumps(reply)))


def test_cli_eval_scores_a_parallel_category_by_bfcl_rules(tmp_path: Path) -> None:
    """``agentcore eval`` on BFCL's published parallel file (its first 30 cases whose user
    text is unique), as a user runs it: the oracle scores 100%, one call instead of the
    batch 0%."""
    source = next(p for p in _data().iterdir() if re.fullmatch(r"BFCL_v\d+_parallel\.json", p.name))
    lines = source.read_text().splitlines()
    answers = {
        json.loads(a)["id"]: a
        for a in (source.parent / "possible_answer" / source.name).read_text().splitlines()
    }
    chosen: dict[str, str] = {}
    for line in lines:
        q = json.loads(line)
        text = q["question"][0][-1]["content"]
        if text not in {json.loads(c)["question"][0][-1]["content"] for c in chosen.values()}:
            chosen[q["id"]] = line
        if len(chosen) == 30:
            break
    question = tmp_path / "data" / source.name
    (question.parent / "possible_answer").mkdir(parents=True)
    question.write_text("\n".join(chosen.values()) + "\n")
    (question.parent / "possible_answer" / source.name).write_text(
        "\n".join(answers[i] for i in chosen) + "\n"
    )
    cases = load_bfcl(question, question.parent / "possible_answer" / source.name)
    replies = {c.messages[-1]["content"]: oracle(c) for c in cases}
    (tmp_path / "models.py").write_text(
        textwrap.dedent(
            f"""
            import json
            from agentcore.adapters import ScriptedModel
            REPLIES = json.loads({json.dumps(json.dumps(replies))})
            def first_of(reply):
                return {{"type": "tool", "thought": "t", **reply["calls"][0]}}
            def oracle():
                return ScriptedModel(lambda m: REPLIES[m[-1].content], name="scripted/oracle")
            def one_call():
                return ScriptedModel(lambda m: first_of(REPLIES[m[-1].content]), name="one")
            """
        )
    )
    env = {**os.environ, "AGENTCORE_SCORECARDS": str(tmp_path / "cards"), "COLUMNS": "200"}
    for model, accuracy in (("oracle", 1.0), ("one_call", 0.0)):
        command = [sys.executable, "-m", "agentcore.cli", "eval", str(question)]
        res = subprocess.run(
            [*command, "--model", f"models:{model}", "--out", f"{model}.json"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        assert "bfcl rules" in res.stdout
        card = json.loads((tmp_path / f"{model}.json").read_text())
        assert card["scoring"] == "bfcl" and len(card["results"]) == 30
        assert card["metrics"]["accuracy"] == accuracy, card["results"][:2]
