"""Native tool calling as a second mode over the same transcript.

In native mode an adapter offers each in-scope tool as a native tool (strict where the
provider supports it) plus ``plan``, ``finish`` and (when offered) ``ask`` as tools, lets
the provider choose (its "auto" tool choice; never a forced choice), and maps the reply back
to the same :data:`NextAction` through the same validation path (:meth:`ActionSchema.parse`).

The history is rendered from our events in OpenAI's chat format (litellm translates it for
Anthropic and Gemini): an action becomes an assistant tool call whose id is our call id,
and what became of it (its result, a refusal, an approval, the calls that were not run)
becomes the one tool result for that id. Nothing provider-specific is stored, so a run can
switch mode or provider mid-run.

One action per step: when a reply holds several calls, the first is taken and the others
are reported (``Completion.dropped_calls``), recorded and told to the model with the
result of the call that ran. A reply with text and no call is the model answering: it
becomes a ``finish`` with that text.

Tool names: providers accept ``^[A-Za-z0-9_-]{1,64}$`` (OpenAI, Anthropic; Gemini also
allows dots and colons but wants a letter or underscore first), while our tool names may
contain dots (the Berkeley Function Calling Leaderboard's do). :func:`tool_name_map` maps
them one to one, and :func:`native_reply` maps the reply's names back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from pydantic import JsonValue
from pydantic_core import from_json

from agentcore.contracts import (
    MAX_PLAN_STEPS,
    MAX_QUESTION_CHARS,
    MAX_THOUGHT_CHARS,
    ActionSchema,
    AskAction,
    BatchAction,
    FinishAction,
    NextAction,
    OutputSpec,
    PlanAction,
    ToolAction,
)
from agentcore.contracts._dialects import Dialect, compile_parameters
from agentcore.contracts.errors import InvalidActionError

from ._protocol import Message, PartialAction

__all__ = [
    "ASK_TOOL",
    "FINISH_TOOL",
    "INVALID_HINT",
    "MODES",
    "PLAN_TOOL",
    "Mode",
    "NativeCall",
    "NativeReply",
    "NativeTool",
    "native_messages",
    "native_note",
    "native_partial",
    "native_reply",
    "native_tool_specs",
    "native_tools",
    "strict_compatible",
    "tool_name_map",
]

Mode = Literal["structured", "native"]
"""How an adapter asks for the next action: the structured contract, or native tool calling."""
MODES: Final[tuple[Mode, ...]] = ("structured", "native")

PLAN_TOOL: Final = "plan"
FINISH_TOOL: Final = "finish"
ASK_TOOL: Final = "ask"
_PROVIDER_NAME: Final = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME: Final = 64
_EMPTY_TEXT: Final = "(empty reply)"
"""Some providers reject empty text (Anthropic); an empty reply in the history shows this."""
_NO_RESULT: Final = "(no result yet)"

INVALID_HINT: Final = "Reply again with exactly one JSON object that matches the schema."
"""The last line of a re-ask as the transcript renders it (``agentcore._render``); in native
mode it is replaced by :data:`_NATIVE_HINT` (a test keeps the two modules in step)."""
_NATIVE_HINT: Final = (
    "Call exactly one of the offered functions again, with arguments that match its parameters."
)


@dataclass(frozen=True, slots=True)
class NativeCall:
    """One tool call as the provider returned it (name as sent on the wire)."""

    name: str
    arguments: str
    """The arguments as the JSON text the provider sent."""


@dataclass(frozen=True, slots=True)
class NativeReply:
    """What a native reply maps to: the action (or why not), its text, dropped calls.

    Attributes:
        action: the validated action, or ``None``.
        error: why the reply is not a valid action, or ``None``.
        text: the action as canonical JSON when it could be read (what a re-ask shows and
            what the runner classifies), else the call as the model wrote it.
        dropped: the further calls, not executed, as ``name(arguments JSON)`` with our
            tool names.
    """

    action: NextAction | None
    error: InvalidActionError | None
    text: str
    dropped: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NativeTool:
    """One native function offered at a step, before a provider's wire format.

    Attributes:
        name: the name on the wire (see :func:`tool_name_map`).
        description: what the function does.
        parameters: its argument schema, compiled for the adapter's dialect.
        strict: send it as a strict (schema-constrained) function.
    """

    name: str
    description: str
    parameters: dict[str, Any]  # Any: JSON Schema
    strict: bool


def tool_name_map(schema: ActionSchema) -> dict[str, str]:
    """Our tool names -> names every provider accepts.

    Characters outside ``[A-Za-z0-9_-]`` (dots) become ``_``; a collision gets a numeric
    suffix (``math_gcd_2``); ``plan``, ``finish`` and ``ask`` stay reserved for the actions
    (``ask`` even at steps that do not offer it, so a tool's name is the same at every
    step). Our names already start with a letter or an underscore and have at most 64
    characters.
    """
    taken = {PLAN_TOOL, FINISH_TOOL, ASK_TOOL}
    out: dict[str, str] = {}
    for name in schema.tool_names:
        wire = _PROVIDER_NAME.sub("_", name)[:_MAX_NAME]
        candidate, n = wire, 2
        while candidate in taken:
            suffix = f"_{n}"
            candidate = wire[: _MAX_NAME - len(suffix)] + suffix
            n += 1
        taken.add(candidate)
        out[name] = candidate
    return out


def _plan_parameters() -> dict[str, Any]:  # Any: JSON Schema
    return {
        "type": "object",
        "properties": {
            "thought": {
                "type": "string",
                "description": f"Why, at most {MAX_THOUGHT_CHARS} characters.",
            },
            "steps": {
                "type": "array",
                "items": {"type": "string"},
                "description": f"The steps you will take, 1 to {MAX_PLAN_STEPS}.",
            },
        },
        "required": ["thought", "steps"],
        "additionalProperties": False,
    }


def _ask_parameters() -> dict[str, Any]:  # Any: JSON Schema
    """``ask``'s parameters: the question, and an optional thought (else the reply's text)."""
    return {
        "type": "object",
        "properties": {
            "question": {
                "type": "string",
                "description": f"What you ask the user, at most {MAX_QUESTION_CHARS} characters.",
            },
            "thought": {
                "type": "string",
                "description": f"Why, at most {MAX_THOUGHT_CHARS} characters.",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    }


def _finish_parameters(output: OutputSpec | None) -> dict[str, Any]:  # Any: JSON Schema
    """``finish``'s parameters: the answer is text, or the run's output type (its
    definitions moved to the root, where its references point)."""
    answer: dict[str, Any] = {"type": "string", "description": "The answer for the user."}
    defs: dict[str, Any] = {}  # Any: JSON Schema
    if output is not None:
        answer = {k: v for k, v in output.json_schema.items() if k != "$defs"}
        defs = output.json_schema.get("$defs", {})
    parameters: dict[str, Any] = {  # Any: JSON Schema
        "type": "object",
        "properties": {
            "thought": {
                "type": "string",
                "description": f"Why, at most {MAX_THOUGHT_CHARS} characters.",
            },
            "answer": answer,
        },
        "required": ["thought", "answer"],
        "additionalProperties": False,
    }
    if defs:
        parameters["$defs"] = defs
    return parameters


def _schema_nodes(node: object) -> Iterator[dict[str, Any]]:  # Any: JSON Schema nodes
    """Every subschema of ``node`` (itself first), through the keywords that hold schemas."""
    if not isinstance(node, dict):
        return
    obj = cast("dict[str, Any]", node)  # Any: a JSON Schema object
    yield obj
    for key in ("properties", "$defs"):
        group: object = obj.get(key)
        if isinstance(group, dict):
            for child in cast("dict[str, object]", group).values():
                yield from _schema_nodes(child)
    for key in ("items", "additionalProperties", "not"):
        yield from _schema_nodes(obj.get(key))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        members: object = obj.get(key)
        if isinstance(members, list):
            for child in cast("list[object]", members):
                yield from _schema_nodes(child)


_TYPED: Final = ("type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const", "properties")


def strict_compatible(source: Mapping[str, Any]) -> bool:  # Any: JSON Schema
    """Whether a tool's argument schema (pydantic's JSON Schema, before any dialect) can be
    sent as a strict function without changing what it accepts.

    Strict functions need every object closed with its properties listed
    (https://platform.openai.com/docs/guides/structured-outputs#supported-schemas). An open
    object (``dict[str, X]``, or ``{"type": "object"}`` without properties) or an untyped
    value (``Any``, ``JsonValue``) cannot be closed without refusing values the tool
    accepts, so that tool is sent non-strict (its arguments are validated client-side, as
    always).
    """
    root = dict(source)
    for node in _schema_nodes(root):
        if node is not root and not any(key in node for key in _TYPED):
            return False
        if node.get("additionalProperties", False) is not False:
            return False
        if node.get("type") == "object" and "properties" not in node and node is not root:
            return False
    return True


def native_tool_specs(schema: ActionSchema, dialect: Dialect, *, strict: bool) -> list[NativeTool]:
    """The functions of one step: the offered tools, then ``plan``, ``ask`` and ``finish``
    when offered (a finish-only step offers ``finish`` alone).

    Args:
        schema: the step's action schema (its tools, and whether plan/ask are offered).
        dialect: how argument schemas are compiled (``openai_strict`` for strict tools).
        strict: ask for strict functions; a tool whose schema cannot be strict
            (:func:`strict_compatible`) is sent non-strict.
    """
    names = tool_name_map(schema)
    offered = schema.offered_types
    out: list[NativeTool] = []

    def add(name: str, description: str, source: dict[str, Any]) -> None:  # Any: JSON Schema
        parameters = compile_parameters(source, dialect)
        out.append(NativeTool(name, description, parameters, strict and strict_compatible(source)))

    if "tool" in offered:
        for spec in schema.tools:
            add(names[spec.name], f"{spec.description} (effect: {spec.effect})", spec.args_schema)
    if PLAN_TOOL in offered:
        add(
            PLAN_TOOL,
            "Propose the steps you will take. Tools that change things run only after a plan.",
            _plan_parameters(),
        )
    if ASK_TOOL in offered:
        add(
            ASK_TOOL,
            "Ask the user what only they know; the run waits for their answer.",
            _ask_parameters(),
        )
    add(
        FINISH_TOOL,
        "End the task with your answer for the user.",
        _finish_parameters(schema.output),
    )
    return out


def native_tools(
    schema: ActionSchema, dialect: Dialect, *, strict: bool
) -> list[dict[str, Any]]:  # Any: OpenAI-format tool definitions
    """:func:`native_tool_specs` in OpenAI's Chat Completions format
    (``{"type": "function", "function": {name, description, parameters, strict}}``,
    https://platform.openai.com/docs/guides/function-calling)."""
    tools: list[dict[str, Any]] = []  # Any: JSON
    for spec in native_tool_specs(schema, dialect, strict=strict):
        function: dict[str, Any] = {  # Any: JSON
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }
        if spec.strict:
            function["strict"] = True
        tools.append({"type": "function", "function": function})
    return tools


def native_note(schema: ActionSchema) -> str:
    """The paragraph added to the system text in native mode.

    The contract's text asks for a JSON object; in native mode the same action is a
    function call, and tools whose names providers reject appear renamed.
    """
    note = (
        "Native function calling is on: take each step by calling exactly one function "
        f"({PLAN_TOOL}, {FINISH_TOOL}, or one of the tools) instead of writing the JSON "
        "object described above. The function's arguments are the action's fields; say "
        "your short reason as text before a tool call."
    )
    renamed = [f"{ours} is {wire}" for ours, wire in tool_name_map(schema).items() if ours != wire]
    if renamed:
        note += "\nFunction names for the tools: " + "; ".join(renamed) + "."
    return note


def _call_of(
    action: NextAction, names: Mapping[str, str], typed: bool
) -> tuple[str, dict[str, Any]]:  # Any: JSON
    match action:
        case PlanAction(thought=thought, steps=steps):
            return PLAN_TOOL, {"thought": thought, "steps": list(steps)}
        case FinishAction(thought=thought, answer=answer):
            # A typed answer is its canonical JSON: sent back as the value it was.
            return FINISH_TOOL, {
                "thought": thought,
                "answer": json.loads(answer) if typed else answer,
            }
        case ToolAction(tool=tool, args=args):
            return names.get(tool, _PROVIDER_NAME.sub("_", tool)), dict(args)
        case AskAction(thought=thought, question=question):
            return ASK_TOOL, {"question": question, "thought": thought}
        case BatchAction():  # never one function call: native_messages makes it several
            raise ValueError("a batch is not one function call")


def native_messages(
    system: str, messages: Sequence[Message], schema: ActionSchema
) -> list[dict[str, Any]]:  # Any: OpenAI-format chat messages
    """The conversation in OpenAI's chat format with tool calls and tool results, using our
    call ids.

    An action becomes an assistant message with one tool call whose id is our call id (a
    tool call's thought as the message's text; ``plan``, ``ask`` and ``finish`` carry theirs
    as an argument), a ``batch`` one with a parallel call per call of it (ids ``c<step>.<i>``);
    every message about a call (``Message.call_id``) becomes its one tool result, joined
    in order, so each call has exactly one result right after its turn (a call with none
    yet gets a short placeholder before the next message). Other messages
    keep their role; consecutive user messages are joined. A re-ask's closing instruction
    (reply with a JSON object) is replaced by one for function calls.
    """
    names = tool_name_map(schema)
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]  # Any: JSON
    results: dict[str, list[str]] = {}  # the open calls' ids (in order) and their results

    def close() -> None:
        for call_id, said in results.items():
            content = "\n".join(said) if said else _NO_RESULT
            out.append({"role": "tool", "tool_call_id": call_id, "content": content})
        results.clear()

    for m in messages:
        if m.role == "assistant" and m.action is not None and m.call_id is not None:
            close()
            action = m.action
            if isinstance(action, BatchAction):  # parallel calls, one id per call of it
                wire = [
                    (f"{m.call_id}.{i}", names.get(c.tool, _PROVIDER_NAME.sub("_", c.tool)), c.args)
                    for i, c in enumerate(action.calls, 1)
                ]
            else:
                wire = [(m.call_id, *_call_of(action, names, schema.output is not None))]
            # A tool call's thought is the text before it; plan, ask and finish carry theirs.
            thought = action.thought if isinstance(action, ToolAction | BatchAction) else ""
            turn: dict[str, Any] = {"role": "assistant"}  # Any: JSON
            if thought:
                turn["content"] = thought  # content may be left out when there are tool_calls
            turn["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
                }
                for call_id, name, args in wire
            ]
            out.append(turn)
            results.update((call_id, []) for call_id, _, _ in wire)
        elif m.role == "user" and m.call_id is not None and m.call_id in results:
            results[m.call_id].append(m.content)
        else:
            close()
            text = m.content.replace(INVALID_HINT, _NATIVE_HINT) if m.role == "user" else m.content
            text = text or _EMPTY_TEXT
            last = out[-1]
            if m.role == "user" and last["role"] == "user":
                out[-1] = {"role": "user", "content": f"{last['content']}\n\n{text}"}
            else:
                out.append({"role": m.role, "content": text})
    close()
    return out


def _arguments_of(arguments: str) -> object:
    return json.loads(arguments) if arguments.strip() else {}


def native_reply(
    schema: ActionSchema, text: str | None, calls: Sequence[NativeCall]
) -> NativeReply:
    """Map a native reply to one action, validated by ``schema.parse`` like any reply.

    Parallel calls all of tools a batch may hold, when the step offers a ``batch`` and
    they are at most ``max_batch``, are that batch. Otherwise the first call is the
    action (``plan``, ``ask`` and ``finish`` by name, anything else a tool
    call with its arguments as ``args``, the name mapped back to ours); its thought is the
    reply's text (for those three, their ``thought`` argument when given). The
    other calls are returned in ``dropped``. A reply with no call and some text is a
    ``finish`` whose answer is that text; with neither it is invalid.
    """
    reverse = {wire: ours for ours, wire in tool_name_map(schema).items()}
    content = (text or "").strip()
    if not calls:
        if not content:
            err = InvalidActionError("The reply had no function call and no text.")
            return NativeReply(None, err, "", ())
        answer: object = content
        if schema.output is not None:  # a typed answer written as text: JSON, or re-asked
            try:
                answer = json.loads(content)
            except (ValueError, RecursionError):
                answer = content
        action_json = json.dumps(
            {"type": "finish", "thought": "", "answer": answer}, ensure_ascii=False
        )
        return _parsed(schema, action_json, ())
    batched = _as_batch(schema, content, calls, reverse)
    if batched is not None:
        return _parsed(schema, batched, ())
    first, rest = calls[0], calls[1:]
    dropped = tuple(f"{reverse.get(c.name, c.name)}({c.arguments})" for c in rest)
    written = f"{first.name}({first.arguments})"
    try:
        args = _arguments_of(first.arguments)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError; too deep for the parser
        err = InvalidActionError(f"The arguments of {first.name!r} are not valid JSON ({exc}).")
        return NativeReply(None, err, written, dropped)
    if not isinstance(args, dict):
        err = InvalidActionError(f"The arguments of {first.name!r} must be a JSON object.")
        return NativeReply(None, err, written, dropped)
    fields = dict(cast("dict[str, Any]", args))  # Any: a JSON object
    thought = content[:MAX_THOUGHT_CHARS]
    if first.name in (PLAN_TOOL, FINISH_TOOL, ASK_TOOL):
        given = fields.pop("thought", None)
        thought = str(given or content)[:MAX_THOUGHT_CHARS]
        action: dict[str, Any] = {"type": first.name, "thought": thought, **fields}  # Any: JSON
    else:
        action = {
            "type": "tool",
            "thought": thought,
            "tool": reverse.get(first.name, first.name),
            "args": fields,
        }
    return _parsed(schema, json.dumps(action, ensure_ascii=False), dropped)


def _as_batch(
    schema: ActionSchema, content: str, calls: Sequence[NativeCall], reverse: Mapping[str, str]
) -> str | None:
    """Parallel calls as one ``batch`` action's JSON, when the step offers batches and every
    call is of a tool a batch may hold, at most ``max_batch`` of them; else ``None`` (the
    first call is the action, as without batches)."""
    allowed = schema.batch_names
    if len(calls) < 2 or not allowed or len(calls) > schema.max_batch:
        return None
    items: list[dict[str, Any]] = []  # Any: JSON
    for c in calls:
        name = reverse.get(c.name, c.name)
        if name not in allowed:
            return None
        try:
            args = _arguments_of(c.arguments)
        except (ValueError, RecursionError):
            return None
        if not isinstance(args, dict):
            return None
        items.append({"tool": name, "args": args})
    thought = content[:MAX_THOUGHT_CHARS]
    return json.dumps({"type": "batch", "thought": thought, "calls": items}, ensure_ascii=False)


def _parsed(schema: ActionSchema, action_json: str, dropped: tuple[str, ...]) -> NativeReply:
    typed = schema.with_form("typed")
    try:
        return NativeReply(typed.parse(action_json), None, action_json, dropped)
    except InvalidActionError as exc:
        return NativeReply(None, exc, action_json, dropped)


def native_partial(schema: ActionSchema, text: str, call: NativeCall | None) -> PartialAction:
    """What is known of a native action while it streams: the thought from the text so far,
    and the type and tool once the first call's name is known (for ``plan``, ``ask`` and
    ``finish`` with no text, the thought from their partial ``thought`` argument)."""
    if call is None or not call.name:
        return PartialAction(thought=text)
    if call.name in (PLAN_TOOL, FINISH_TOOL, ASK_TOOL):
        thought, answer = text, None
        try:
            partial: object = from_json(call.arguments, allow_partial="trailing-strings")
        except ValueError:
            partial = None
        if isinstance(partial, dict):
            fields = cast("dict[str, JsonValue]", partial)
            value = fields.get("thought")
            if not thought.strip():
                thought = value if isinstance(value, str) else ""
            answer = fields.get("answer") if call.name == FINISH_TOOL else None
        return PartialAction(type=call.name, thought=thought, answer=answer)
    reverse = {wire: ours for ours, wire in tool_name_map(schema).items()}
    return PartialAction(type="tool", tool=reverse.get(call.name, call.name), thought=text)
