"""The evaluation harness, scorecards, routing gates and contract statistics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentcore import Agent, Budget, Route, RunStatus, tool
from agentcore.adapters import Completion, CompletionRequest, Message, ScriptedModel
from agentcore.contracts import load_contract
from agentcore.errors import ConfigurationError
from agentcore.evals import (
    EvalCase,
    Score,
    evaluate,
    load_bfcl,
    load_cases,
    load_scorecard,
    save_scorecard,
    score_action,
)
from agentcore.stores import MemoryStore

ORDERS = {
    "name": "get_order",
    "description": "Look up one order by id.",
    "effect": "read",
    "parameters": {
        "type": "object",
        "properties": {
            "order_id": {"type": "string"},
            "verbose": {"type": "boolean"},
        },
        "required": ["order_id"],
    },
}
ORDERS_LIST = {
    "name": "get_orders",
    "description": "List a customer's orders.",
    "effect": "read",
    "parameters": {
        "type": "object",
        "properties": {"customer_id": {"type": "string"}},
        "required": ["customer_id"],
    },
}
REFUND = {
    "name": "refund",
    "description": "Refund an order.",
    "effect": "write",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["order_id", "amount"],
    },
}

CASES = [
    {
        "id": "t-1",
        "category": "straightforward",
        "messages": [{"role": "user", "content": "Where is order A-1?"}],
        "tools": [ORDERS, ORDERS_LIST],
        "expected": {
            "type": "tool",
            "tool": "get_order",
            "args": {"order_id": ["A-1"], "verbose": [""]},
        },
    },
    {
        "id": "t-2",
        "category": "similar_names",
        "messages": [{"role": "user", "content": "What has customer C-9 ordered?"}],
        "tools": [ORDERS, ORDERS_LIST],
        "expected": {"type": "tool", "tool": "get_orders", "args": {"customer_id": ["c-9"]}},
    },
    {
        "id": "t-3",
        "category": "no_tool",
        "messages": [{"role": "user", "content": "Tell me a joke."}],
        "tools": [ORDERS],
        "expected": {"type": "finish"},
    },
    {
        "id": "t-4",
        "category": "multi_step_plan",
        "messages": [{"role": "user", "content": "Refund A-1 and A-2 in full."}],
        "tools": [ORDERS, REFUND],
        "expected": {"type": ["plan", "finish"]},
    },
]

RIGHT: dict[str, dict[str, Any]] = {
    "Where is order A-1?": {
        "type": "tool",
        "thought": "t",
        "tool": "get_order",
        "args": {"order_id": " a-1 "},
    },
    "What has customer C-9 ordered?": {
        "type": "tool",
        "thought": "t",
        "tool": "get_orders",
        "args": {"customer_id": "C-9"},
    },
    "Tell me a joke.": {"type": "finish", "thought": "t", "answer": "No tool for that."},
    "Refund A-1 and A-2 in full.": {"type": "plan", "thought": "t", "steps": ["a", "b"]},
}
WRONG: dict[str, dict[str, Any]] = {
    "Where is order A-1?": {
        "type": "tool",
        "thought": "t",
        "tool": "get_orders",
        "args": {"customer_id": "A-1"},
    },
    "What has customer C-9 ordered?": {
        "type": "tool",
        "thought": "t",
        "tool": "get_orders",
        "args": {"customer_id": "C-8"},
    },
    "Tell me a joke.": {
        "type": "tool",
        "thought": "t",
        "tool": "get_order",
        "args": {"order_id": "x"},
    },
    "Refund A-1 and A-2 in full.": {
        "type": "tool",
        "thought": "t",
        "tool": "refund",
        "args": {"order_id": "A-1", "amount": 1},
    },
}


def answering(table: dict[str, Any], name: str) -> ScriptedModel:
    def reply(messages: Sequence[Message]) -> Any:
        return table[messages[0].content]

    return ScriptedModel(reply, name=name)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    return path


async def test_perfect_model_scores_one(dataset: Path) -> None:
    card = await evaluate(load_cases(dataset), answering(RIGHT, "perfect"), dataset="d")
    m = card.metrics
    assert m["accuracy"] == 1.0
    assert m["tool_selection"] == 1.0
    assert m["argument_accuracy"] == 1.0  # case-insensitive, trimmed string match
    assert m["abstention"] == 1.0
    assert m["invalid_rate"] == 0.0
    assert m["input_tokens_per_case"] == 50.0
    assert card.contract_hash == load_contract().hash
    assert card.by_category["no_tool"]["accuracy"] == 1.0


async def test_always_wrong_model_scores_zero_per_metric(dataset: Path) -> None:
    card = await evaluate(load_cases(dataset), answering(WRONG, "wrong"))
    m = card.metrics
    assert m["accuracy"] == 0.0
    assert m["tool_selection"] == 0.5  # t-2 picked the right tool with a wrong argument
    assert m["argument_accuracy"] == 0.0
    assert m["abstention"] == 0.0


async def test_abstaining_model(dataset: Path) -> None:
    always_finish = ScriptedModel(lambda _m: {"type": "finish", "thought": "t", "answer": "?"})
    card = await evaluate(load_cases(dataset), always_finish)
    m = card.metrics
    assert m["abstention"] == 1.0
    assert m["tool_selection"] == 0.0
    assert m["accuracy"] == 0.5


async def test_invalid_replies_are_reasked_and_counted(dataset: Path) -> None:
    attempts: dict[str, int] = {}

    def flaky(messages: Sequence[Message]) -> Any:
        key = messages[0].content
        attempts[key] = attempts.get(key, 0) + 1
        if key == "Tell me a joke.":
            return "not json"  # never valid
        if attempts[key] == 1:
            return '{"type": "tool"}'  # invalid first, then right
        return RIGHT[key]

    card = await evaluate(load_cases(dataset), ScriptedModel(flaky), max_reasks=2)
    rows = {r["id"]: r for r in card.results}
    assert rows["t-1"]["reasks"] == 1
    assert rows["t-1"]["correct"] is True
    assert rows["t-3"]["invalid"] is True
    assert rows["t-3"]["reasks"] == 2
    assert "not valid JSON" in rows["t-3"]["error"]
    assert card.metrics["invalid_rate"] == 0.25
    assert card.metrics["reasks_per_case"] == (1 + 1 + 2 + 1) / 4


def test_argument_rules() -> None:
    from agentcore.contracts import PlanAction, ToolAction

    case = EvalCase.model_validate(CASES[1])
    extra = ToolAction(thought="t", tool="get_orders", args={"customer_id": "C-9", "x": 1})
    score = score_action(case, extra)
    assert (score.tool_correct, score.args_correct, score.correct) == (True, False, False)
    assert score.reason == "'x' is not a parameter of the tool"
    optional = EvalCase.model_validate(
        dict(
            CASES[0], expected={"type": "tool", "tool": "get_order", "args": {"order_id": ["A-1"]}}
        )
    )
    unlisted = ToolAction(thought="t", tool="get_order", args={"order_id": "A-1", "verbose": True})
    assert score_action(optional, unlisted).correct  # an unlisted optional parameter
    forbidden = EvalCase.model_validate(CASES[0])  # verbose: [""] means leave it out
    assert not score_action(forbidden, unlisted).correct
    write = EvalCase.model_validate(
        dict(
            CASES[3],
            expected={
                "type": "tool",
                "tool": "refund",
                "args": {"order_id": ["A-1"], "amount": [5]},
            },
        )
    )
    plan = PlanAction(thought="t", steps=["refund"])
    assert score_action(write, plan) == Score(None, None, None, True)  # plan before a write
    read = EvalCase.model_validate(CASES[0])
    assert not score_action(read, plan).correct
    missing = score_action(read, ToolAction(thought="t", tool="get_order", args={}))
    assert (missing.tool_correct, missing.args_correct, missing.correct) == (True, False, False)
    assert missing.reason == "'order_id' is missing"


async def test_a_tool_schema_the_harness_cannot_compile_is_a_case_error(tmp_path: Path) -> None:
    broken = [
        dict(CASES[2], id="bad-1", tools=[dict(ORDERS, parameters={"type": "string"})]),
        dict(CASES[2], id="bad-2", tools=[dict(ORDERS, name="no spaces allowed")]),
        dict(CASES[2], id="bad-3", tools=[ORDERS, ORDERS]),  # two tools, one name
        dict(
            CASES[2],
            id="bad-4",
            tools=[dict(ORDERS, parameters={"type": "object", "properties": {"k": {"enum": []}}})],
        ),
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in [*CASES, *broken]))
    card = await evaluate(load_cases(path), answering(RIGHT, "perfect"))
    assert set(card.case_errors) == {"bad-1", "bad-2", "bad-3", "bad-4"}
    assert "object schema" in card.case_errors["bad-1"]
    assert "'no spaces allowed'" in card.case_errors["bad-2"]
    assert card.metrics["case_errors"] == 4.0
    assert card.metrics["cases"] == 8.0
    assert card.metrics["accuracy"] == 1.0  # the four scored cases
    assert card.by_category["no_tool"]["case_errors"] == 4.0
    rows = {r["id"]: r for r in card.results}
    assert rows["bad-1"]["correct"] is False
    assert rows["t-1"]["case_error"] is None


async def test_an_adapter_that_cannot_send_a_case_is_that_cases_error(dataset: Path) -> None:
    class Picky(ScriptedModel):  # a real adapter: a schema its dialect cannot express
        async def complete_structured(self, request: CompletionRequest) -> Completion:
            if request.messages[0].content == "Tell me a joke.":
                raise ValueError("this dialect cannot express that schema")
            return await super().complete_structured(request)

    card = await evaluate(load_cases(dataset), Picky(lambda m: RIGHT[m[0].content]))
    assert card.case_errors == {
        "t-3": "adapter: ValueError: this dialect cannot express that schema"
    }
    assert card.metrics["accuracy"] == 1.0


def test_load_cases_reports_bad_lines(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(CASES[0]) + "\n{not json\n")
    with pytest.raises(ConfigurationError, match=r"bad.jsonl:2"):
        load_cases(bad)
    wrong_tool = dict(CASES[0], expected={"type": "tool", "tool": "nope", "args": {}})
    bad.write_text(json.dumps(wrong_tool) + "\n")
    with pytest.raises(ConfigurationError, match="expected tool 'nope'"):
        load_cases(bad)
    with pytest.raises(ConfigurationError, match="Cannot read"):
        load_cases(tmp_path / "missing.jsonl")


def test_load_bfcl_format(tmp_path: Path) -> None:
    q = tmp_path / "BFCL_v3_simple.json"
    q.write_text(
        json.dumps(
            {
                "id": "simple_0",
                "question": [[{"role": "user", "content": "GCD of 12 and 18?"}]],
                "function": [
                    {
                        "name": "math.gcd",
                        "description": "Greatest common divisor.",
                        "parameters": {
                            "type": "dict",
                            "properties": {
                                "a": {"type": "integer"},
                                "b": {"type": "integer"},
                                "scale": {"type": "float"},
                                "pair": {"type": "tuple", "items": {"type": "integer"}},
                                "anything": {"type": "any"},
                            },
                            "required": ["a", "b"],
                        },
                    }
                ],
            }
        )
        + "\n"
    )
    answers = tmp_path / "possible_answer"
    answers.mkdir()
    (answers / q.name).write_text(
        json.dumps(
            {
                "id": "simple_0",
                "ground_truth": [{"math.gcd": {"a": [12], "b": [18], "scale": [""]}}],
            }
        )
        + "\n"
    )
    (case,) = load_bfcl(q, answers / q.name)
    assert case.tools[0].name == "math.gcd"
    props = case.tools[0].parameters["properties"]
    assert case.tools[0].parameters["type"] == "object"
    assert props["scale"]["type"] == ["number", "null"]  # optional: admits None, as in Python
    assert props["pair"]["type"] == ["array", "null"]
    assert "type" not in props["anything"]
    assert case.expected.tool == "math.gcd"
    assert case.expected.args == {"a": [12], "b": [18], "scale": [""]}
    assert case.rules == "bfcl"
    with pytest.raises(ConfigurationError, match="needs its answer file"):
        load_bfcl(q)


async def test_bfcl_case_runs_with_a_dotted_tool_name(tmp_path: Path) -> None:
    q = tmp_path / "BFCL_v3_simple.json"
    q.write_text(
        json.dumps(
            {
                "id": "simple_1",
                "question": [[{"role": "user", "content": "gcd 4 6"}]],
                "function": [
                    {
                        "name": "math.gcd",
                        "description": "gcd",
                        "parameters": {
                            "type": "dict",
                            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                            "required": ["a", "b"],
                        },
                    }
                ],
            }
        )
        + "\n"
    )
    (tmp_path / "possible_answer").mkdir()
    (tmp_path / "possible_answer" / q.name).write_text(
        json.dumps({"id": "simple_1", "ground_truth": [{"math.gcd": {"a": [4], "b": [6]}}]}) + "\n"
    )
    cases = load_bfcl(q, tmp_path / "possible_answer" / q.name)
    model = ScriptedModel(
        [{"type": "tool", "thought": "t", "tool": "math.gcd", "args": {"a": 4, "b": 6}}]
    )
    card = await evaluate(cases, model)
    assert card.metrics["accuracy"] == 1.0


async def test_native_mode_is_refused_clearly(dataset: Path) -> None:
    with pytest.raises(ConfigurationError, match="native"):
        await evaluate(load_cases(dataset), answering(RIGHT, "perfect"), mode="native")


async def test_route_min_score_gate(dataset: Path, tmp_path: Path) -> None:
    cards = tmp_path / "cards"
    good = answering(RIGHT, "good/model")
    bad = answering(WRONG, "bad/model")
    save_scorecard(await evaluate(load_cases(dataset), good, dataset="d"), cards)
    save_scorecard(await evaluate(load_cases(dataset), bad, dataset="d"), cards)
    assert load_scorecard(cards, "good/model") is not None
    Route(models=[good], min_score=0.9, scorecards=cards)  # accepted
    with pytest.raises(ConfigurationError, match=r"bad/model scored 0\.00"):
        Route(models=[good, bad], min_score=0.9, scorecards=cards)
    unknown = ScriptedModel([], name="never/evaluated")
    with pytest.raises(ConfigurationError, match="no structured scorecard"):
        Route(models=[unknown], min_score=0.5, scorecards=cards)
    with pytest.raises(ConfigurationError, match="min_score"):
        Route(models=[good], min_score=1.5)
    (cards / "good_model--structured.json").write_text("{broken")
    with pytest.raises(ConfigurationError, match="cannot be read"):
        Route(models=[good], min_score=0.5, scorecards=cards)


@tool(effect="read")
def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"id": order_id}


@tool(effect="write")
def change(order_id: str) -> str:
    """Change an order."""
    return "changed"


async def test_plan_steps_use_the_plan_route() -> None:
    planner = ScriptedModel(
        [
            {"type": "tool", "thought": "look", "tool": "lookup", "args": {"order_id": "A"}},
            {"type": "plan", "thought": "p", "steps": ["change A"]},
        ],
        name="cheap/planner",
    )
    actor = ScriptedModel(
        [
            {"type": "tool", "thought": "do", "tool": "change", "args": {"order_id": "A"}},
            {"type": "finish", "thought": "f", "answer": "done"},
        ],
        name="strong/actor",
    )
    agent = Agent(
        tools=[lookup, change], model=Route(models=[actor], plan=[planner]), store=MemoryStore()
    )
    result = await agent.run("change A", budget=Budget(max_steps=6))
    assert result.status is RunStatus.COMPLETED
    events = await agent.transcript(result.run_id)
    started = events[0]
    assert started.type == "run_started"
    assert started.route == ["strong/actor"]
    assert started.plan_route == ["cheap/planner"]
    calls = [(e.model, e.role) for e in events if e.type == "model_called"]
    assert calls == [
        ("cheap/planner", "plan"),
        ("cheap/planner", "plan"),
        ("strong/actor", "act"),
        ("strong/actor", "act"),
    ]


async def test_stats_show_a_drop_in_plan_share_between_contract_versions(tmp_path: Path) -> None:
    from agentcore._stats import contract_stats

    store = MemoryStore()
    v1 = load_contract("1")
    v2 = v1.model_copy(update={"version": "2", "system": v1.system + "\nNever plan."})
    plan_first = [
        {"type": "plan", "thought": "p", "steps": ["look"]},
        {"type": "tool", "thought": "t", "tool": "lookup", "args": {"order_id": "A"}},
        {"type": "finish", "thought": "f", "answer": "ok"},
    ]
    no_plan = ["garbage", *plan_first[1:]]
    for _ in range(2):
        a = Agent(tools=[lookup], model=ScriptedModel(plan_first), store=store, contract=v1)
        await a.run("look A")
    a = Agent(tools=[lookup], model=ScriptedModel(no_plan), store=store, contract=v2)
    await a.run("look A")
    b = Agent(tools=[lookup], model=ScriptedModel(plan_first[1:2] * 5), store=store, contract=v2)
    await b.run("look A", budget=Budget(max_steps=2))
    rows = {s.contract: s for s in await contract_stats(store)}
    s1, s2 = rows[f"v1:{v1.hash}"], rows[f"v2:{v2.hash}"]
    assert (s1.runs, s2.runs) == (2, 2)
    assert s1.share("plan") == pytest.approx(1 / 3)
    assert s2.share("plan") == 0.0
    assert s2.invalid_rate > 0
    assert s2.reask_rate > 0
    assert s2.budget_exhausted == 1
    assert s1.steps_per_run == 3.0


def test_cli_eval_and_stats(dataset: Path, tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(
        textwrap.dedent(
            f"""
            import json
            from agentcore.adapters import ScriptedModel
            RIGHT = json.loads({json.dumps(json.dumps(RIGHT))})
            def perfect():
                return ScriptedModel(lambda m: RIGHT[m[0].content], name="scripted/perfect")
            """
        )
    )
    env = {
        **os.environ,
        "AGENTCORE_STORE": f"sqlite:///{tmp_path / 'runs.db'}",
        "AGENTCORE_SCORECARDS": str(tmp_path / "cards"),
        "COLUMNS": "200",
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentcore.cli", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
            check=False,
        )

    res = cli("eval", str(dataset), "--model", "models:perfect", "--out", "card.json")
    assert res.returncode == 0, res.stderr
    assert "accuracy" in res.stdout
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["metrics"]["accuracy"] == 1.0
    assert card["model"] == "scripted/perfect"
    assert (tmp_path / "cards" / "scripted_perfect--structured.json").is_file()
    bad = cli("eval", str(dataset), "--model", "models:perfect", "--mode", "sideways")
    assert bad.returncode == 2
    assert cli("stats").returncode == 0
    assert cli("stats", "--since", "yesterday").returncode == 2


def test_cli_eval_on_bfcl_files_scores_by_bfcl_rules_and_hashes_the_answers(
    tmp_path: Path,
) -> None:
    question = tmp_path / "data" / "BFCL_v4_simple_python.json"
    answers = question.parent / "possible_answer" / question.name
    answers.parent.mkdir(parents=True)
    function = {
        "name": "trains.book",
        "description": "Book a train ticket.",
        "parameters": {
            "type": "dict",
            "properties": {
                "_class": {"type": "string"},
                "adults": {"type": "integer", "default": 1},
                "refundable": {"type": "boolean", "default": "false"},
            },
            "required": ["_class"],
        },
    }
    question.write_text(
        json.dumps(
            {
                "id": "simple_python_0",
                "question": [[{"role": "user", "content": "Business class, please."}]],
                "function": [function],
            }
        )
        + "\n"
    )

    def answer(fare: str) -> None:
        truth = {"_class": [fare], "adults": ["", 1], "refundable": ["", False]}
        answers.write_text(
            json.dumps({"id": "simple_python_0", "ground_truth": [{"trains.book": truth}]}) + "\n"
        )

    (tmp_path / "models.py").write_text(
        textwrap.dedent(
            """
            from agentcore.adapters import ScriptedModel
            CALL = {"type": "tool", "thought": "t", "tool": "trains.book",
                    "args": {"_class": "business"}}
            def booker():
                return ScriptedModel(lambda m: CALL, name="scripted/booker")
            """
        )
    )
    env = {**os.environ, "AGENTCORE_SCORECARDS": str(tmp_path / "cards"), "COLUMNS": "200"}

    def card(*extra: str) -> dict[str, Any]:
        command = [sys.executable, "-m", "agentcore.cli", "eval", str(question)]
        res = subprocess.run(
            [*command, "--model", "models:booker", "--out", "card.json", *extra],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        assert "bfcl rules" in res.stdout or "agentcore rules" in res.stdout
        return json.loads((tmp_path / "card.json").read_text())

    answer("Business")
    first = card()
    assert (first["scoring"], first["metrics"]["accuracy"]) == ("bfcl", 1.0)
    assert first["results"][0]["action"]["args"] == {"_class": "business"}  # no defaults
    answer("Economy")  # the questions are unchanged: only the answers
    second = card("--scoring", "agentcore")
    assert (second["scoring"], second["metrics"]["accuracy"]) == ("agentcore", 0.0)
    assert second["dataset_hash"] != first["dataset_hash"]


ROOT = Path(__file__).resolve().parent.parent


async def test_shipped_fixture_dataset_loads_and_compiles() -> None:
    from collections import Counter

    cases = load_cases(ROOT / "fixtures" / "evals" / "cases.jsonl")
    assert len(cases) >= 120
    counts = Counter(c.category for c in cases)
    for category in (
        "similar_names",
        "distractors",
        "missing_args",
        "no_tool",
        "multi_step_plan",
        "destructive_looking",
    ):
        assert counts[category] >= 15, category
    finish = ScriptedModel(lambda _m: {"type": "finish", "thought": "t", "answer": "?"})
    card = await evaluate(cases, finish)
    assert card.case_errors == {}  # every tool compiles
    assert card.scoring == "agentcore"


ASK_CASES = ROOT / "fixtures" / "evals" / "ask.jsonl"
KNOWN = {"O-": "order_id", "INV-": "invoice_id", "E-": "employee_id"}


def _said(messages: Sequence[Message]) -> str:
    """Everything the user said, for a scripted model that reads it."""
    return " ".join(m.content for m in messages if m.role == "user")


def _call(messages: Sequence[Message], guess: bool) -> dict[str, Any]:
    """The call the ask cases want, with the ids the user gave (or, ``guess``, made up)."""
    said = _said(messages)
    ids = {
        arg: next((w.strip(".,?") for w in said.split() if w.startswith(prefix)), None)
        for prefix, arg in KNOWN.items()
    }
    if "order" in said:
        tool, args = "get_order", {"order_id": ids["order_id"] or "O-10000"}
    elif "Refund" in said:
        args = {"invoice_id": ids["invoice_id"] or "INV-1000", "amount": 49.9}
        tool, args = "issue_refund", {**args, "reason": "duplicate"}
    else:
        tool = "request_leave"
        args = {
            "employee_id": ids["employee_id"] or "E-1000",
            "leave_type": "vacation",
            "start_date": "2025-07-14",
            "end_date": "2025-07-18",
        }
    if not guess and None in (ids[a] for a in args if a in KNOWN.values()):
        return {"type": "ask", "thought": "An id is missing.", "question": "Which one?"}
    return {"type": "tool", "thought": "t", "tool": tool, "args": args}


async def test_an_ask_case_scores_asking_right_and_guessing_wrong() -> None:
    cases = load_cases(ASK_CASES)
    asks = {c.id for c in cases if c.expected.types() == ("ask",)}
    assert len(asks) >= 3 and len(cases) - len(asks) >= 3  # both kinds of case ship
    careful = ScriptedModel(lambda m: _call(m, guess=False), name="careful")
    card = await evaluate(cases, careful)
    assert card.case_errors == {}
    assert card.metrics["accuracy"] == 1.0
    assert card.by_category["ask_missing_value"]["abstention"] == 1.0
    assert card.by_category["ask_value_given"]["argument_accuracy"] == 1.0

    guesser = ScriptedModel(lambda m: _call(m, guess=True), name="guesser")
    card = await evaluate(cases, guesser)
    rows = {r["id"]: r for r in card.results}
    assert {i for i, r in rows.items() if not r["correct"]} == asks
    assert rows["ask-004"]["reason"] == "a call of 'issue_refund' instead of ask"
    assert card.by_category["ask_missing_value"]["accuracy"] == 0.0
    assert card.by_category["ask_value_given"]["accuracy"] == 1.0

    always_asks = ScriptedModel(lambda _m: {"type": "ask", "thought": "t", "question": "Which?"})
    card = await evaluate(cases, always_asks)
    rows = {r["id"]: r for r in card.results}
    assert {i for i, r in rows.items() if r["correct"]} == asks  # asked what it was told
    assert rows["ask-002"]["reason"] == "an ask action, not a call of 'get_order'"
    assert rows["ask-002"]["tool_correct"] is False


async def test_ask_is_offered_only_to_a_case_that_offers_it() -> None:
    from agentcore.contracts._schema import ask_note

    offered = EvalCase.model_validate(
        dict(CASES[0], id="offers", ask=True, expected={"type": "ask"})
    )
    plain = EvalCase.model_validate(CASES[0])
    asker = ScriptedModel(lambda _m: {"type": "ask", "thought": "t", "question": "Which order?"})
    card = await evaluate([offered, plain], asker, max_reasks=1)
    rows = {r["id"]: r for r in card.results}
    assert rows["offers"]["correct"] is True
    assert rows["offers"]["action"]["question"] == "Which order?"
    assert rows["t-1"]["invalid"] is True  # not offered: refused and re-asked, as in a run
    assert "ask action is not allowed" in rows["t-1"]["error"]
    by_case = {r.run_id: r for r in asker.requests}
    with_ask, without = by_case["eval:offers"], by_case["eval:t-1"]
    assert "ask" in with_ask.schema.offered_types
    assert "ask" not in without.schema.offered_types
    assert with_ask.system.endswith(ask_note())
    assert (with_ask.native_system or "").endswith(ask_note())
    assert ask_note() not in without.system


def test_a_case_expecting_ask_must_offer_it(tmp_path: Path) -> None:
    unoffered = dict(CASES[0], expected={"type": ["ask", "finish"]})
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(CASES[0]) + "\n" + json.dumps(unoffered) + "\n")
    refused = r'(?s)cases.jsonl:2: .*expects an ask action but does not offer it: set "ask": true'
    with pytest.raises(ConfigurationError, match=refused):
        load_cases(path)
    path.write_text(json.dumps(dict(CASES[0], expected={"type": ["ask", "tool"]})) + "\n")
    with pytest.raises(ConfigurationError, match=r"cases\.jsonl:1"):  # a call is never abstaining
        load_cases(path)
    lenient = EvalCase.model_validate(dict(unoffered, ask=True))
    from agentcore.contracts import FinishAction

    assert score_action(lenient, FinishAction(thought="t", answer="Which order?")).correct


def test_shipped_bfcl_samples_load() -> None:
    folder = ROOT / "tests" / "fixtures" / "bfcl"
    simple = load_bfcl(
        folder / "BFCL_v3_simple.json", folder / "possible_answer" / "BFCL_v3_simple.json"
    )
    assert len(simple) == 5
    assert all("." in c.tools[0].name for c in simple)
    irrelevant = load_bfcl(folder / "BFCL_v3_irrelevance.json")
    assert {c.expected.types() for c in irrelevant} == {("finish", "plan")}
