"""Native tool calling as a second mode over the same transcript.

In native mode an adapter offers each in-scope tool as a native tool (strict where the
provider supports it) plus ``plan`` and ``finish`` as tools, lets the provider choose
(``tool_choice: auto``; never a forced choice), and maps the reply back to the same
:data:`NextAction` through the same validation path (:meth:`ActionSchema.parse`).

The history is rendered from our events in OpenAI's chat format (litellm translates it for
Anthropic and Gemini): an action becomes an assistant tool call whose id is our call id,
and what became of it (its result, a refusal, an approval) becomes the tool result for that
id. Nothing provider-specific is stored, so a run can switch mode or provider mid-run.

One action per step: when a reply holds several calls, the first is taken and the others
are reported (``Completion.dropped_calls``), recorded and told to the model. A reply with
text and no call is the model answering: it becomes a ``finish`` with that text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentcore.contracts import (
    MAX_PLAN_STEPS,
    MAX_THOUGHT_CHARS,
    ActionSchema,
    FinishAction,
    NextAction,
    PlanAction,
    ToolAction,
)
from agentcore.contracts._dialects import Dialect, compile_parameters
from agentcore.contracts.errors import InvalidActionError

from ._protocol import Message

__all__ = [
    "NativeCall",
    "NativeReply",
    "native_messages",
    "native_reply",
    "native_tools",
    "tool_name_map",
]

PLAN_TOOL = "plan"
FINISH_TOOL = "finish"
_PROVIDER_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class NativeCall:
    """One tool call as the provider returned it (name as sent on the wire)."""

    name: str
    arguments: str
    """The arguments as the JSON text the provider sent."""


@dataclass(frozen=True, slots=True)
class NativeReply:
    """What a native reply maps to: the action (or why not), its text, dropped calls."""

    action: NextAction | None
    error: InvalidActionError | None
    text: str
    dropped: tuple[str, ...]


def tool_name_map(schema: ActionSchema) -> dict[str, str]:
    """Our tool names -> names providers accept (``^[A-Za-z0-9_-]{1,64}$``: dots and other
    characters become ``_``, with a numeric suffix on a collision; ``plan`` and ``finish``
    stay reserved for the two actions)."""
    taken = {PLAN_TOOL, FINISH_TOOL}
    out: dict[str, str] = {}
    for name in schema.tool_names:
        wire = _PROVIDER_NAME.sub("_", name)[:60]
        candidate, n = wire, 2
        while candidate in taken:
            candidate = f"{wire}_{n}"
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


def _finish_parameters() -> dict[str, Any]:  # Any: JSON Schema
    return {
        "type": "object",
        "properties": {
            "thought": {
                "type": "string",
                "description": f"Why, at most {MAX_THOUGHT_CHARS} characters.",
            },
            "answer": {"type": "string", "description": "The answer for the user."},
        },
        "required": ["thought", "answer"],
        "additionalProperties": False,
    }


def native_tools(
    schema: ActionSchema, dialect: Dialect, *, strict: bool
) -> list[dict[str, Any]]:  # Any: OpenAI-format tool definitions
    """The tools of one step in OpenAI's function format (litellm converts them for other
    providers): the step's offered tools, then ``plan`` and ``finish`` when offered.

    Args:
        schema: the step's action schema (its tools, and whether plan/finish are offered).
        dialect: how argument schemas are compiled (``openai_strict`` for strict tools).
        strict: mark the functions strict (OpenAI); the schemas are then strict-compatible.
    """
    names = tool_name_map(schema)
    tools: list[dict[str, Any]] = []  # Any: JSON
    offered = schema.offered_types

    def add(name: str, description: str, parameters: dict[str, Any]) -> None:  # Any: JSON
        function: dict[str, Any] = {  # Any: JSON
            "name": name,
            "description": description,
            "parameters": compile_parameters(parameters, dialect),
        }
        if strict:
            function["strict"] = True
        tools.append({"type": "function", "function": function})

    if "tool" in offered:
        for spec in schema.tools:
            add(names[spec.name], f"{spec.description} (effect: {spec.effect})", spec.args_schema)
    if "plan" in offered:
        add(
            PLAN_TOOL,
            "Propose the steps you will take. Writes run only after a plan.",
            _plan_parameters(),
        )
    add(FINISH_TOOL, "End the task with your answer for the user.", _finish_parameters())
    return tools


def _call_of(
    action: NextAction, names: Mapping[str, str]
) -> tuple[str, dict[str, Any]]:  # Any: JSON
    match action:
        case PlanAction(thought=thought, steps=steps):
            return PLAN_TOOL, {"thought": thought, "steps": list(steps)}
        case FinishAction(thought=thought, answer=answer):
            return FINISH_TOOL, {"thought": thought, "answer": answer}
        case ToolAction(tool=tool, args=args):
            return names.get(tool, _PROVIDER_NAME.sub("_", tool)), dict(args)


def native_messages(
    system: str, messages: Sequence[Message], schema: ActionSchema
) -> list[dict[str, Any]]:  # Any: OpenAI-format chat messages
    """The conversation in OpenAI's chat format with tool calls and tool results, using our
    call ids. Every tool call gets exactly one tool result (several notes about one call are
    joined; a call with none yet gets a short placeholder before the next message)."""
    names = tool_name_map(schema)
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]  # Any: JSON
    open_call: str | None = None
    results: list[str] = []

    def close() -> None:
        nonlocal open_call, results
        if open_call is not None:
            content = "\n".join(results) if results else "(no result yet)"
            out.append({"role": "tool", "tool_call_id": open_call, "content": content})
        open_call, results = None, []

    for m in messages:
        if m.role == "assistant" and m.action is not None and m.call_id is not None:
            close()
            name, args = _call_of(m.action, names)
            thought = getattr(m.action, "thought", "")
            out.append(
                {
                    "role": "assistant",
                    "content": thought or None,
                    "tool_calls": [
                        {
                            "id": m.call_id,
                            "type": "function",
                            "function": {
                                "name": name,
                                "arguments": json.dumps(args, ensure_ascii=False),
                            },
                        }
                    ],
                }
            )
            open_call = m.call_id
        elif m.role == "user" and m.call_id is not None and m.call_id == open_call:
            results.append(m.content)
        else:
            close()
            if out[-1]["role"] == m.role and out[-1].get("tool_calls") is None and m.role == "user":
                out[-1] = {"role": "user", "content": f"{out[-1]['content']}\n\n{m.content}"}
            else:
                out.append({"role": m.role, "content": m.content})
    close()
    return out


def native_reply(
    schema: ActionSchema, text: str | None, calls: Sequence[NativeCall]
) -> NativeReply:
    """Map a native reply to one action, validated by ``schema.parse`` like any reply."""
    reverse = {wire: ours for ours, wire in tool_name_map(schema).items()}
    content = (text or "").strip()
    if not calls:
        if not content:
            return NativeReply(
                None, InvalidActionError("The reply had no tool call and no text."), "", ()
            )
        action_json = json.dumps(
            {"type": "finish", "thought": "", "answer": content}, ensure_ascii=False
        )
        return _parsed(schema, action_json, ())
    first, rest = calls[0], calls[1:]
    dropped = tuple(f"{reverse.get(c.name, c.name)}({c.arguments})" for c in rest)
    try:
        args: object = json.loads(first.arguments or "{}")
    except json.JSONDecodeError as exc:
        err = InvalidActionError(f"The arguments of {first.name!r} are not valid JSON ({exc}).")
        return NativeReply(None, err, first.arguments, dropped)
    if not isinstance(args, dict):
        err = InvalidActionError(f"The arguments of {first.name!r} must be a JSON object.")
        return NativeReply(None, err, first.arguments, dropped)
    fields: dict[str, Any] = dict(args)  # pyright: ignore[reportUnknownArgumentType]  # JSON object
    thought = str(fields.pop("thought", "") or content)[:MAX_THOUGHT_CHARS]
    if first.name == PLAN_TOOL:
        action: dict[str, Any] = {"type": "plan", "thought": thought, **fields}  # Any: JSON
    elif first.name == FINISH_TOOL:
        action = {"type": "finish", "thought": thought, **fields}
    else:
        action = {
            "type": "tool",
            "thought": thought,
            "tool": reverse.get(first.name, first.name),
            "args": fields,
        }
    return _parsed(schema, json.dumps(action, ensure_ascii=False), dropped)


def _parsed(schema: ActionSchema, action_json: str, dropped: tuple[str, ...]) -> NativeReply:
    typed = schema.with_form("typed")
    try:
        return NativeReply(typed.parse(action_json), None, action_json, dropped)
    except InvalidActionError as exc:
        return NativeReply(None, exc, action_json, dropped)
