"""BFCL's files and BFCL's scoring rules (``--scoring bfcl``), one rule at a time.

Each case is written in BFCL's published format and loaded by ``load_bfcl``, so the
loader's reading of Gorilla's types is part of every test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentcore.adapters import ScriptedModel
from agentcore.contracts import FinishAction, PlanAction, ToolAction
from agentcore.errors import ConfigurationError
from agentcore.evals import EvalCase, evaluate, load_bfcl, load_cases, score_action


def bfcl_case(
    tmp_path: Path,
    properties: dict[str, Any],
    answer: dict[str, list[Any]] | None,
    *,
    required: list[str] | None = None,
    category: str = "simple_python",
    name: str = "trains.book",
) -> EvalCase:
    """One BFCL case: a function with these Gorilla-typed parameters and this answer."""
    question = tmp_path / f"BFCL_v4_{category}.json"
    function = {
        "name": name,
        "description": "Book a train.",
        "parameters": {"type": "dict", "properties": properties, "required": required or []},
    }
    line = {
        "id": f"{category}_0",
        "question": [[{"role": "user", "content": "Book it."}]],
        "function": [function],
    }
    question.write_text(json.dumps(line) + "\n")
    if answer is None:
        (case,) = load_bfcl(question)
        return case
    answers = tmp_path / "possible_answer" / question.name
    answers.parent.mkdir(exist_ok=True)
    answers.write_text(json.dumps({"id": line["id"], "ground_truth": [{name: answer}]}) + "\n")
    (case,) = load_bfcl(question, answers)
    return case


def call(args: dict[str, Any], tool: str = "trains.book") -> ToolAction:
    return ToolAction(thought="t", tool=tool, args=args)


def bfcl(case: EvalCase, action: ToolAction | PlanAction | FinishAction | None) -> bool:
    return score_action(case, action, "bfcl").correct


def agentcore(case: EvalCase, action: ToolAction | PlanAction | FinishAction | None) -> bool:
    return score_action(case, action, "agentcore").correct


def reply(args: dict[str, Any], tool: str = "trains.book") -> dict[str, Any]:
    return {"type": "tool", "thought": "t", "tool": tool, "args": args}


# -- names pydantic refuses ---------------------------------------------------------------


async def test_a_parameter_named_like_class_is_offered_under_its_name_and_scored(
    tmp_path: Path,
) -> None:
    case = bfcl_case(
        tmp_path,
        {
            "_class": {"type": "string", "description": "Fare class."},
            "_from": {"type": "string"},
            "Content-Type": {"type": "string"},
            "json": {"type": "integer"},
        },
        {"_class": ["Business"], "_from": ["New York, NY"], "Content-Type": [""], "json": [""]},
        required=["_class", "_from"],
    )
    model = ScriptedModel([reply({"_class": "business", "_from": "new york ny"})])
    card = await evaluate([case], model)
    assert card.case_errors == {}
    assert card.results[0]["correct"] is True, card.results[0]
    assert card.results[0]["action"]["args"] == {"_class": "business", "_from": "new york ny"}
    offered = json.dumps(model.requests[0].schema.json_schema())
    assert '"_class"' in offered and '"Content-Type"' in offered and "class_" not in offered


# -- dictionaries --------------------------------------------------------------------------


def test_dictionary_answers_are_scored_key_by_key(tmp_path: Path) -> None:
    case = bfcl_case(
        tmp_path,
        {"grades": {"type": "dict", "description": "Subject to grade."}},
        {"grades": [{"math": [90], "science": [75, 76], "note": ["", "Good job"]}]},
        required=["grades"],
    )
    assert bfcl(case, call({"grades": {"math": 90, "science": 76}}))
    assert bfcl(case, call({"grades": {"math": 90, "science": 75, "note": "good-job"}}))
    assert not bfcl(case, call({"grades": {"math": 90}}))  # science is not optional
    assert not bfcl(case, call({"grades": {"math": 90, "science": 75, "art": 1}}))
    assert not bfcl(case, call({"grades": {"math": 91, "science": 75}}))


def test_a_list_of_objects_is_scored_object_by_object_in_order(tmp_path: Path) -> None:
    case = bfcl_case(
        tmp_path,
        {"people": {"type": "array", "items": {"type": "dict"}}},
        {"people": [[{"name": ["Li Lei"], "age": [18]}, {"name": ["Li Li"], "age": [21]}]]},
        required=["people"],
    )
    first, second = {"name": "li lei", "age": 18}, {"name": "Li Li", "age": 21}
    assert bfcl(case, call({"people": [first, second]}))
    assert not bfcl(case, call({"people": [second, first]}))
    assert not bfcl(case, call({"people": [first]}))


# -- defaults ------------------------------------------------------------------------------


async def test_defaults_are_never_filled_into_the_scored_action(tmp_path: Path) -> None:
    case = bfcl_case(
        tmp_path,
        {
            "city": {"type": "string"},
            "refundable": {"type": "boolean", "default": "false"},  # a string, as published
            "seats": {"type": "integer", "default": 1},
        },
        {"city": ["Paris"], "refundable": ["", False], "seats": ["", 1]},
        required=["city"],
    )
    for rules in ("bfcl", "agentcore"):
        card = await evaluate([case], ScriptedModel([reply({"city": "Paris"})]), scoring=rules)
        row = card.results[0]
        assert row["action"]["args"] == {"city": "Paris"}  # left out, not "false" and 1
        assert row["correct"] is True, (rules, row)
    sent = ScriptedModel([reply({"city": "Paris", "refundable": True})])
    assert (await evaluate([case], sent)).results[0]["correct"] is False  # sent: scored


# -- BFCL's rules ----------------------------------------------------------------------------


def test_strings_compare_in_bfcls_standard_form(tmp_path: Path) -> None:
    case = bfcl_case(
        tmp_path,
        {"date": {"type": "string"}, "teams": {"type": "array", "items": {"type": "string"}}},
        {"date": ["April 1, 2024"], "teams": [["L.A. Lakers", "Clippers"]]},
        required=["date", "teams"],
    )
    right = {"date": "april 1 2024", "teams": ["la_lakers", "CLIPPERS"]}
    assert bfcl(case, call(right))
    assert not bfcl(case, call({**right, "date": "2024-04-01"}))
    assert not bfcl(case, call({**right, "teams": ["Clippers", "L.A. Lakers"]}))  # in order
    quoted = bfcl_case(tmp_path, {"q": {"type": "string"}}, {"q": ['say "hi"']}, required=["q"])
    assert bfcl(quoted, call({"q": "Say 'hi'"}))  # ' reads as "


def test_types_are_strict_but_an_integer_is_a_float(tmp_path: Path) -> None:
    case = bfcl_case(
        tmp_path,
        {"n": {"type": "integer"}, "x": {"type": "float"}, "ok": {"type": "boolean"}},
        {"n": [5], "x": [2.0], "ok": ["", True]},
        required=["n", "x"],
    )
    assert bfcl(case, call({"n": 5, "x": 2}))  # BFCL reads an int as a float
    assert bfcl(case, call({"n": 5, "x": 2.0, "ok": True}))
    assert not bfcl(case, call({"n": "5", "x": 2.0}))
    assert not bfcl(case, call({"n": 5.0, "x": 2.0}))
    assert not bfcl(case, call({"n": 5, "x": "2.0"}))
    assert not bfcl(case, call({"n": 5, "x": 2.0, "ok": 1}))
    assert not bfcl(case, call({"n": True, "x": 2.0}))
    assert agentcore(case, call({"n": 5.0, "x": 2.0}))  # the project's rules: numerically


async def test_a_value_of_another_type_is_not_coerced_on_the_way_to_the_scorer(
    tmp_path: Path,
) -> None:
    case = bfcl_case(tmp_path, {"n": {"type": "integer"}}, {"n": [5]}, required=["n"])
    card = await evaluate([case], ScriptedModel([reply({"n": "5"})] * 3))
    row = card.results[0]
    assert (row["correct"], row["invalid"], row["reasks"]) == (False, True, 2)
    assert "is not of type 'integer'" in row["error"]


def test_an_argument_the_answer_does_not_list_is_wrong(tmp_path: Path) -> None:
    case = bfcl_case(
        tmp_path,
        {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        {"city": ["Paris"]},
        required=["city"],
    )
    extra = call({"city": "Paris", "unit": "c"})
    assert not bfcl(case, extra)
    assert agentcore(case, extra)  # the project's rules accept an unlisted optional one
    assert not bfcl(case, call({"city": "Paris", "nope": 1}))


def test_a_required_argument_marked_optional_in_the_answer_is_still_required(
    tmp_path: Path,
) -> None:
    case = bfcl_case(
        tmp_path,
        {"city": {"type": "string"}, "day": {"type": "string"}},
        {"city": ["Paris"], "day": ["", "today"]},
        required=["city", "day"],
    )
    assert not bfcl(case, call({"city": "Paris"}))
    assert bfcl(case, call({"city": "Paris", "day": "Today"}))
    assert agentcore(case, call({"city": "Paris"}))  # "" alone decides there


def test_an_answer_argument_left_out_is_wrong_unless_marked_optional(tmp_path: Path) -> None:
    case = bfcl_case(
        tmp_path,
        {"city": {"type": "string"}, "day": {"type": "string"}},
        {"city": ["Paris"], "day": ["today"]},
    )
    assert not bfcl(case, call({"city": "Paris"}))
    assert bfcl(case, call({"city": "Paris", "day": "today"}))


def test_null_counts_as_left_out_unless_the_answer_accepts_null(tmp_path: Path) -> None:
    case = bfcl_case(
        tmp_path,
        {"city": {"type": "string"}, "day": {"type": "string"}, "note": {"type": "string"}},
        {"city": ["Paris"], "day": ["", "today"], "note": [None]},
        required=["city"],
    )
    assert bfcl(case, call({"city": "Paris", "day": None, "note": None}))
    assert not bfcl(case, call({"city": "Paris", "note": "x"}))


def test_on_irrelevance_anything_but_a_call_abstains(tmp_path: Path) -> None:
    case = bfcl_case(tmp_path, {"city": {"type": "string"}}, None, category="irrelevance")
    assert case.rules == "bfcl"
    for action in (
        FinishAction(thought="t", answer="No tool fits."),
        PlanAction(thought="t", steps=["ask the user"]),
        None,  # no valid reply at all: BFCL cannot read a call either
    ):
        assert bfcl(case, action), action
    assert not bfcl(case, call({"city": "Paris"}))
    assert agentcore(case, PlanAction(thought="t", steps=["ask"]))
    assert score_action(case, None).correct  # by default, the case's own rules: BFCL's


async def test_the_scorecard_says_which_rules_scored_it(tmp_path: Path) -> None:
    case = bfcl_case(tmp_path, {"n": {"type": "integer"}}, {"n": [5]}, required=["n"])
    model = ScriptedModel([reply({"n": 5})] * 2)
    assert (await evaluate([case], model)).scoring == "bfcl"  # the cases' own rules
    assert (await evaluate([case], model, scoring="agentcore")).scoring == "agentcore"
    ours = EvalCase.model_validate(
        {
            "id": "o-1",
            "messages": [{"role": "user", "content": "x"}],
            "tools": [],
            "expected": {"type": "finish"},
        }
    )
    with pytest.raises(ConfigurationError, match="different rules"):
        await evaluate([case, ours], model)
    unknown: Any = "strict"  # Any: a value the type would refuse, checked at run time
    with pytest.raises(ConfigurationError, match="Unknown scoring"):
        await evaluate([case], model, scoring=unknown)


# -- loading ---------------------------------------------------------------------------------


def test_unsupported_categories_and_missing_answers_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"'simple_java' is not supported: its values"):
        bfcl_case(tmp_path, {"n": {"type": "integer"}}, {"n": [1]}, category="simple_java")
    parallel = bfcl_case(tmp_path, {"n": {"type": "integer"}}, {"n": [1]}, category="parallel")
    assert parallel.expected.type == "batch" and parallel.max_batch == 10  # supported now
    with pytest.raises(ConfigurationError, match=r"simple_python.*needs its answer file"):
        bfcl_case(tmp_path, {"n": {"type": "integer"}}, None)


async def test_an_answer_no_valid_call_can_meet_is_a_named_case_error(tmp_path: Path) -> None:
    case = bfcl_case(
        tmp_path,
        {"genre": {"type": "string", "enum": ["Horror", "Comedy"]}},
        {"genre": ["Any"]},
        required=["genre"],
    )
    assert case.problem is not None and "'genre'" in case.problem
    card = await evaluate([case], ScriptedModel([]))  # no model is asked
    assert card.metrics["case_errors"] == 1.0
    assert card.metrics["accuracy"] is None
    assert "genre" in card.case_errors[case.id]


def test_gorillas_list_enum_constrains_the_items(tmp_path: Path) -> None:
    case = bfcl_case(
        tmp_path,
        {"metrics": {"type": "array", "items": {"type": "string"}, "enum": ["temp", "co2"]}},
        {"metrics": [["temp", "co2"]]},
        required=["metrics"],
    )
    schema = case.tools[0].parameters["properties"]["metrics"]
    assert schema == {"type": "array", "items": {"type": "string", "enum": ["temp", "co2"]}}
    assert case.problem is None


def test_the_projects_own_fixtures_keep_the_projects_rules() -> None:
    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "evals" / "cases.jsonl"
    assert {c.rules for c in load_cases(fixtures)} == {"agentcore"}
