"""The Berkeley Function Calling Leaderboard: its files, loaded unchanged, and its scoring.

Files: question lines ``{"id", "question": [[messages]], "function": [tools]}`` (JSON Lines
despite the ``.json`` name, Gorilla's parameter types ``dict``, ``float``, ``tuple``,
``any``), answer lines ``{"id", "ground_truth": [{name: {arg: [acceptable values]}}]}``
with ``""`` meaning "may be left out". The category is the id without its number.

Schemas: Gorilla's type names become JSON Schema's, an optional parameter admits ``null``
(Gorilla's functions are Python functions, ``mod: float = None``, and the answers list
``None`` as acceptable), and an enum whose values are not of the declared type (strings for
a ``boolean``) keeps the enum alone, as BFCL reads it. Arguments are then validated against
that schema by ``jsonschema``, as every tool defined as data is.

Scoring (``--scoring bfcl``) follows BFCL's AST checker, rule by rule; the code is ours:

* the function named in the answer, and no other;
* every parameter the function's schema requires, even one the answer marks optional;
* every argument sent must be a parameter of the function *and* listed in the answer;
* types are exact (``"5"`` is not a number, ``5.0`` is not an integer, ``true`` is not an
  integer); an integer is accepted for a ``float`` parameter; a value of the answer's own
  type is accepted where that differs from the declared one (BFCL's "variables");
* strings compare after dropping spaces and ``, . / - _ * ^``, in lower case, with ``'``
  read as ``"``; lists compare element by element in order, their strings the same way;
* an object (``dict``) is compared key by key: each acceptable object lists acceptable
  values per key (``""``: the key may be left out), keys not listed are wrong; a list of
  objects compares object by object, in order;
* anything else compares by value (``1 == 1.0``);
* an argument listed in the answer without ``""`` must be sent;
* on irrelevance categories anything that is not a tool call (``finish``, ``plan``, no
  valid reply at all) counts as abstaining, as BFCL counts any reply it cannot read as a
  call.

Where agentcore has to differ: an argument sent as ``null`` counts as left out unless
``null`` is acceptable (OpenAI's strict dialect writes a left-out argument as ``null``);
and the categories whose answers are several calls (``parallel``, ``parallel_multiple``
and their ``live_`` versions) are answered with one ``batch`` action: the case offers a
batch of up to :data:`BFCL_MAX_BATCH` calls (more where the answer has more), and the calls
are paired with the answer's in any order, each by the rules above, as BFCL's parallel
checker does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from agentcore.contracts import NextAction, ToolAction
from agentcore.contracts.errors import ConfigurationError

from ._cases import (
    EvalCase,
    EvalTool,
    Expected,
    ExpectedCall,
    Score,
    read_jsonl,
    score_batch,
    score_call,
)

__all__ = ["BFCL_CATEGORIES", "BFCL_MAX_BATCH", "bfcl_score", "load_bfcl"]

BFCL_CATEGORIES: Mapping[str, bool] = {
    "simple": True,
    "simple_python": True,
    "multiple": True,
    "live_simple": True,
    "live_multiple": True,
    "parallel": True,
    "parallel_multiple": True,
    "live_parallel": True,
    "live_parallel_multiple": True,
    "irrelevance": False,
    "live_irrelevance": False,
}
"""The BFCL categories :func:`load_bfcl` loads, and whether each needs an answer file
(``False``: irrelevance, where the right action is not to call a tool). ``simple`` is the
v3 name of ``simple_python``."""

BFCL_MAX_BATCH = 10
"""The most calls a parallel case's batch may hold (``Policy(max_batch=...)`` in a run):
above the published answers' largest (8), so the cap tells the model nothing."""

_UNSUPPORTED = {
    "simple_java": "its values are Java source text that BFCL converts before checking",
    "simple_javascript": "its values are JavaScript source text that BFCL converts first",
    "multi_turn": "it executes calls over several turns",
    "live_relevance": "it is scored by whether any call is made, not by an answer",
    "memory": "it needs BFCL's memory back ends",
    "web_search": "it needs a live web search",
    "format_sensitivity": "it varies the prompt format of other categories",
}

# -- loading -------------------------------------------------------------------------------

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
        elif key == "enum" and node.get("type") in ("array", "tuple"):  # pyright: ignore[reportUnknownMemberType]  # JSON
            items = out.setdefault("items", {})  # Gorilla's enum of a list is its items'
            if isinstance(items, dict):
                items["enum"] = value
        elif key == "properties" and isinstance(value, dict):
            props = cast("dict[str, Any]", value)  # JSON Schema: name -> schema
            required = cast("list[Any]", node.get("required") or [])  # pyright: ignore[reportUnknownMemberType]  # JSON
            out["properties"] = {
                str(k): _gorilla_schema(v) if k in required else _nullable(_gorilla_schema(v))
                for k, v in props.items()
            }
        elif key == "items" and isinstance(out.get("items"), dict):
            out["items"] = {**_gorilla_schema(value), **out["items"]}
        else:
            out[str(key)] = _gorilla_schema(value)  # pyright: ignore[reportUnknownArgumentType]  # JSON
    enum: Any = out.get("enum")  # Any: JSON values
    kind: Any = out.get("type")  # Any: JSON Schema
    fits = _OF_TYPE.get(kind) if isinstance(kind, str) else None
    members = cast("list[Any]", enum) if isinstance(enum, list) else []
    if fits is not None and not all(fits(v) for v in members):
        del out["type"]  # an enum of strings for a "boolean": BFCL reads the enum
    return out


_OF_TYPE: dict[str, Callable[[Any], bool]] = {  # Any: a JSON value
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _nullable(schema: Any) -> Any:  # Any: JSON Schema
    """An optional parameter admits ``null``: its type and enum gain it. Gorilla's functions
    are Python functions (``mod: float = None``), the answers list ``None`` as acceptable
    for optional parameters, and BFCL's checker reads ``null`` as left out; JSON Schema
    would refuse a ``null`` for ``type: number``."""
    if not isinstance(schema, dict):
        return schema
    node = cast("dict[str, Any]", schema)  # JSON Schema
    kind: Any = node.get("type")  # Any: a type name or a list of them
    if isinstance(kind, str) and kind != "null":
        node = {**node, "type": [kind, "null"]}
    elif isinstance(kind, list) and "null" not in kind:
        node = {**node, "type": [*cast("list[Any]", kind), "null"]}
    enum: Any = node.get("enum")  # Any: JSON values
    if isinstance(enum, list) and None not in enum:
        node = {**node, "enum": [*cast("list[Any]", enum), None]}
    return node


def _category_of(case_id: str) -> str:
    """The BFCL category of a case id (``live_simple_3-2-0`` -> ``live_simple``)."""
    return case_id.rsplit("_", 1)[0]


def _needs_answers(category: str, where: Path) -> bool:
    if category in BFCL_CATEGORIES:
        return BFCL_CATEGORIES[category]
    why = next((w for k, w in _UNSUPPORTED.items() if k in category), "it is not known here")
    known = ", ".join(BFCL_CATEGORIES)
    raise ConfigurationError(
        f"{where}: BFCL category {category!r} is not supported: {why}. "
        f"Supported categories: {known}."
    )


def load_bfcl(question_file: str | Path, answer_file: str | Path | None = None) -> list[EvalCase]:
    """Load a Berkeley Function Calling Leaderboard category, unchanged.

    The cases are marked for BFCL's rules (``rules="bfcl"``). Irrelevance categories need no
    answer file: the right action is not to call a tool. Dotted function names are kept:
    the contract's tool names allow dots, and adapters that need other names map them.

    A case whose published answer no schema-valid call can meet (it names a function that
    is not offered, lists an argument the function does not have, or gives a required or
    non-optional argument no value of its declared type) is loaded with ``problem`` saying
    so, and is reported as a case error rather than scored.

    Raises:
        ConfigurationError: a file cannot be read, a line is not a BFCL case, the category
            is not supported (see :data:`BFCL_CATEGORIES`), or an answer is missing.
    """
    qpath = Path(question_file)
    questions = read_jsonl(qpath)
    answers: dict[str, Any] = {}  # Any: JSON
    if answer_file is not None:
        apath = Path(answer_file)
        try:
            answers = {str(a["id"]): a["ground_truth"] for a in read_jsonl(apath)}
        except KeyError as exc:
            raise ConfigurationError(f"{apath}: an answer line has no {exc}") from exc
    cases: list[EvalCase] = []
    for n, q in enumerate(questions, 1):
        try:
            cases.append(_case(q, answers, answer_file is not None, qpath))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigurationError(
                f"{qpath}:{n}: not a BFCL question ({type(exc).__name__}: {exc})"
            ) from exc
    if not cases:
        raise ConfigurationError(f"Dataset {qpath} has no cases.")
    return cases


def _case(
    q: dict[str, Any],  # Any: JSON
    answers: Mapping[str, Any],  # Any: JSON
    have_answers: bool,
    where: Path,
) -> EvalCase:
    qid = str(q["id"])
    category = _category_of(qid)
    turns: list[Any] = q["question"]  # Any: JSON
    messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in turns[0]]
    functions: list[dict[str, Any]] = q["function"]  # Any: JSON
    tools = [
        EvalTool(
            name=str(f["name"]),
            description=str(f.get("description", "")) or str(f["name"]),
            parameters=_gorilla_schema(f.get("parameters") or {"type": "dict"}),
        )
        for f in functions
    ]
    max_batch = 0
    if not _needs_answers(category, where):
        expected = Expected(type=["finish", "plan"])
        problem = None
    else:
        if not have_answers:
            raise ConfigurationError(
                f"{where}: category {category!r} needs its answer file "
                "(possible_answer/<same name> beside the question file)"
            )
        truth: Any = answers.get(qid)  # Any: JSON
        if not truth:
            raise ConfigurationError(f"{where}: no ground truth for {qid!r}")
        calls = [_expected_call(entry) for entry in truth]
        if "parallel" in category:
            expected = Expected(type="batch", calls=calls)
            max_batch = max(BFCL_MAX_BATCH, len(calls))
        elif len(calls) != 1:
            raise ConfigurationError(f"{where}: {qid!r} expects {len(truth)} calls, not one")
        else:
            expected = Expected(type="tool", tool=calls[0].tool, args=calls[0].args)
        problem = next((p for c in calls if (p := _answer_problem(tools, c)) is not None), None)
    return EvalCase(
        id=qid,
        category=category,
        messages=messages,
        tools=tools,
        expected=expected,
        rules="bfcl",
        problem=problem,
        max_batch=max_batch,
    )


def _expected_call(entry: Mapping[str, Any]) -> ExpectedCall:  # Any: JSON
    ((name, args),) = entry.items()
    return ExpectedCall(tool=str(name), args=dict(args))


def _answer_problem(tools: Sequence[EvalTool], expected: ExpectedCall) -> str | None:
    """Why no schema-valid call can meet this answer, or ``None``."""
    tool = next((t for t in tools if t.name == expected.tool), None)
    if tool is None:
        return f"the answer calls {expected.tool!r}, which is not offered"
    props, required = _params(tool)
    for name in expected.args:
        if name not in props:
            return f"the answer lists {name!r}, which is not a parameter of {tool.name!r}"
    for name in required:
        if name not in expected.args:
            return f"required parameter {name!r} has no acceptable value in the answer"
    for name, acceptable in expected.args.items():
        schema = props[name]
        may_omit = "" in acceptable and name not in required
        sendable = [v for v in acceptable if v != "" and _fits(v, schema)]
        if None in acceptable and name not in required:
            sendable.append(None)  # an optional argument may be sent as null
        if "" in acceptable and _kind(schema) == "string" and _fits("", schema):
            sendable.append("")  # an empty string sent matches "" (BFCL compares strings)
        if not may_omit and not sendable:
            enum: Any = schema.get("enum")  # Any: JSON
            allowed = f"{_kind(schema)}, one of {enum!r}" if enum else _kind(schema)
            return f"no acceptable value of {name!r} fits its schema ({allowed}): {acceptable!r}"
    return None


def _fits(value: object, schema: Mapping[str, Any]) -> bool:  # Any: JSON Schema
    """Whether ``value`` can be sent for a parameter of this schema."""
    actual = type(value)
    enum: Any = schema.get("enum")  # Any: JSON
    if isinstance(enum, list):
        members = cast("list[Any]", enum)  # JSON values
        if type(value) is str:  # BFCL compares strings in a standard form
            return any(type(e) is str and _standard(e) == _standard(value) for e in members)
        return value in members
    python = _PYTHON.get(_kind(schema))
    if python is float:
        return actual in (int, float)
    items: Any = schema.get("items")  # Any: JSON Schema
    if python is list and isinstance(value, list) and isinstance(items, dict):
        item_schema = cast("dict[str, Any]", items)  # JSON Schema
        return all(_fits(v, item_schema) for v in cast("list[Any]", value))
    props: Any = schema.get("properties")  # Any: JSON Schema
    if python is dict and isinstance(value, dict) and isinstance(props, dict):
        return set(cast("dict[str, Any]", value)) <= set(cast("dict[str, Any]", props))
    return python is None or actual is python


# -- scoring ---------------------------------------------------------------------------------

_PYTHON: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "dict": dict,
}
_STRIPPED = re.compile(r"[ ,./\-_*^]")


def _kind(schema: Mapping[str, Any]) -> str:  # Any: JSON Schema
    """The Gorilla type of a JSON Schema node (``any`` when it has no single type)."""
    kind: Any = schema.get("type")  # Any: a string or a list of them
    if isinstance(kind, list):
        kinds = [k for k in cast("list[Any]", kind) if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    return {"number": "float", "object": "dict"}.get(str(kind), str(kind)) if kind else "any"


def _params(tool: EvalTool) -> tuple[dict[str, dict[str, Any]], list[str]]:  # Any: JSON Schema
    props: Any = tool.parameters.get("properties")  # Any: JSON Schema
    required: Any = tool.parameters.get("required")  # Any: JSON Schema
    return (
        cast("dict[str, dict[str, Any]]", props) if isinstance(props, dict) else {},
        [str(r) for r in cast("list[Any]", required)] if isinstance(required, list) else [],
    )


def _standard(text: str) -> str:
    return _STRIPPED.sub("", text).lower().replace("'", '"')


def _std(value: Any) -> Any:  # Any: JSON
    return _standard(value) if type(value) is str else value


def _answer_type(acceptable: Sequence[Any]) -> type[object] | None:  # Any: JSON
    """The type of the first acceptable value that is not ``""`` (BFCL's "answer type")."""
    for a in acceptable:
        if a != "":
            return cast("type[object]", type(a))  # the class of a JSON value
    return None


def _type_ok(value: Any, acceptable: Sequence[Any], expected: type, nested: type | None) -> bool:
    """BFCL's type check: the declared type (a list's items too), or the answer's type."""
    if type(value) is expected:
        if nested is None:
            return True
        items = cast("list[Any]", value)  # JSON array
        return any(
            not isinstance(option, list) or all(_type_ok(v, option, nested, None) for v in items)  # pyright: ignore[reportUnknownArgumentType]  # JSON
            for option in acceptable
        )
    answer_type = _answer_type(acceptable)
    return answer_type is not None and type(value) is answer_type


def _dict_ok(value: Mapping[str, Any], option: Any) -> bool:  # Any: JSON
    """One object against one acceptable object (acceptable values per key)."""
    if not isinstance(option, dict):
        return False
    per_key = cast("dict[str, list[Any]]", option)  # JSON: key -> acceptable values
    sent = {k: v for k, v in value.items() if v is not None or None in per_key.get(k, ())}
    for key, v in sent.items():
        if key not in per_key or _std(v) not in [_std(a) for a in per_key[key]]:
            return False
    return all(key in sent or "" in values for key, values in per_key.items())


def _std_list(option: Any) -> list[Any] | None:  # Any: JSON
    if isinstance(option, list | str):  # "" (optional) reads as the empty list, as in BFCL
        return [_std(x) for x in cast("Sequence[Any]", option)]
    return None


def _value_problem(  # Any: JSON values and JSON Schema
    name: str, value: Any, schema: Mapping[str, Any], acceptable: list[Any]
) -> str | None:
    kind = _kind(schema)
    expected = _PYTHON.get(kind, str)  # BFCL reads "any" as a string
    items: Any = schema.get("items")  # Any: JSON Schema
    nested = (
        _PYTHON.get(_kind(cast("dict[str, Any]", items)), str)
        if kind == "array" and isinstance(items, dict)
        else None
    )
    if kind == "float" and type(value) is int:
        value = float(value)
    if not _type_ok(value, acceptable, expected, nested):
        return f"{name!r}: {value!r} is not of type {kind}"
    answer_type = _answer_type(acceptable)
    variable = answer_type is not None and answer_type is not expected
    if not variable:
        if expected is dict:
            if any(_dict_ok(value, option) for option in acceptable if option != ""):
                return None
            return f"{name!r}: {value!r} matches no acceptable object in {acceptable!r}"
        if expected is list and nested is dict:
            objects = cast("list[Any]", value)  # JSON array
            for option in acceptable:
                wanted = cast("Sequence[Any]", option) if isinstance(option, list | str) else None
                if (
                    wanted is not None
                    and len(wanted) == len(objects)
                    and all(
                        isinstance(o, dict) and _dict_ok(cast("dict[str, Any]", o), w)
                        for o, w in zip(objects, wanted, strict=True)
                    )
                ):
                    return None
            return f"{name!r}: {value!r} matches no acceptable list of objects"
        if expected is str:
            if _standard(value) in [_standard(a) for a in acceptable if type(a) is str]:
                return None
            return f"{name!r}: {value!r} is not one of {acceptable!r}"
        if expected is list:
            options = [o for o in (_std_list(a) for a in acceptable) if o is not None]
            if [_std(x) for x in cast("list[Any]", value)] in options:
                return None
            return f"{name!r}: {value!r} is not one of {acceptable!r}"
    if value in acceptable:
        return None
    return f"{name!r}: {value!r} is not one of {acceptable!r}"


def bfcl_score(case: EvalCase, action: NextAction | None) -> Score:
    """Score one action by BFCL's AST checker (see this module's docstring for the rules)."""
    exp = case.expected
    if exp.type == "batch":
        return score_batch(exp.calls, action, lambda _, a, e: _call_problem(case, e, a))
    if exp.type != "tool":
        if isinstance(action, ToolAction):
            return Score(None, None, False, False, f"called {action.tool!r}: no call was right")
        return Score(None, None, True, True)
    expected = ExpectedCall(tool=exp.tool or "", args=exp.args)
    return score_call(expected, action, lambda _, a, e: _call_problem(case, e, a))


def _call_problem(
    case: EvalCase,
    exp: ExpectedCall,
    args: Mapping[str, Any],  # Any: JSON
) -> str | None:
    """Why a call of ``exp.tool`` with ``args`` does not meet ``exp`` (``None``: it does)."""
    tool = next(t for t in case.tools if t.name == exp.tool)
    props, required = _params(tool)
    answer = exp.args
    sent = {k: v for k, v in args.items() if v is not None or None in answer.get(k, ())}
    for name in required:
        if name not in sent:
            return f"required parameter {name!r} is missing"
    for name, value in sent.items():
        if name not in props or name not in answer:
            return f"{name!r} is not an argument of the answer"
        problem = _value_problem(name, value, props[name], answer[name])
        if problem is not None:
            return problem
    for name, acceptable in answer.items():
        if name not in sent and "" not in acceptable:
            return f"{name!r} is missing (the answer does not mark it optional)"
    return None
