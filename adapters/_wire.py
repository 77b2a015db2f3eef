"""Reading provider payloads at the boundary: litellm objects and JSON into plain types.

Shared by the litellm-backed adapters (and re-exported by :mod:`._litellm`): attribute-or-key
access that tolerates missing fields (providers add fields over time; unknown ones are
ignored), error bodies wherever litellm keeps them, tool calls, message merging, and
:class:`RawReply`, what one response said.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from agentcore.contracts import Usage

from ._errors import json_object_in_text
from ._native import NativeCall
from ._protocol import Message

__all__ = [
    "RawReply",
    "as_int",
    "as_items",
    "as_str",
    "decode_response_id",
    "error_body",
    "get_field",
    "merge_messages",
    "read_tool_calls",
]


@dataclass(frozen=True, slots=True)
class RawReply:
    """What one provider response said, read at the boundary into plain types.

    Attributes:
        text: the reply text, or ``None`` when there was none.
        finish_reason: the stop reason as reported (``stop``, ``length``, ...).
        refusal: the provider's refusal text, when it refused.
        usage: tokens (and cost) of this response.
        response_id: the provider's id of the response.
        calls: the reply's tool calls, in order (native mode).
    """

    text: str | None
    finish_reason: str | None
    refusal: str | None
    usage: Usage
    response_id: str | None
    calls: tuple[NativeCall, ...] = ()
    unreadable: str | None = None
    """Set when litellm could not convert the response (it decodes tool-call arguments
    itself, and a reply nested past Python's recursion limit breaks that): an invalid
    reply, re-asked like any other, not a provider failure to retry."""


def error_body(exc: BaseException) -> Mapping[str, object]:
    """The JSON error body of a provider error, as far as it can be found.

    litellm keeps it in different places per provider: the openai SDK's ``exc.body``, the
    response (``exc.response.json()``), or pasted into the message (Anthropic and Gemini
    errors: ``"...Exception - {...}"``, for streams as the ``b'{...}'`` of the raw bytes).
    Returns an empty mapping when none is found.
    """
    current: BaseException | None = exc
    for _ in range(8):
        if current is None:
            break
        for candidate in _body_candidates(current):
            if isinstance(candidate, Mapping) and candidate:
                return cast("Mapping[str, object]", candidate)  # a JSON object
        current = current.__cause__ or current.__context__
    return {}


def _body_candidates(exc: BaseException) -> Iterator[object]:
    yield getattr(exc, "body", None)
    response: object = getattr(exc, "response", None)
    reader: object = getattr(response, "json", None)
    if callable(reader):
        yield _read_json(cast("Callable[[], object]", reader))  # httpx.Response.json
    message: object = getattr(exc, "message", None)
    yield json_object_in_text(message if isinstance(message, str) and message else str(exc))


def _read_json(reader: Callable[[], object]) -> object:
    try:
        return reader()
    except Exception:  # an empty or non-JSON body: the message is looked at next
        return None


def read_tool_calls(value: object) -> tuple[NativeCall, ...]:
    """Chat Completions ``message.tool_calls`` (``[{"id", "type": "function", "function":
    {"name", "arguments"}}]``, https://platform.openai.com/docs/guides/function-calling; litellm
    returns every provider's calls in this shape) as :class:`NativeCall` items; the
    provider's call ids are not kept (ours are used)."""
    calls: list[NativeCall] = []
    for item in as_items(value):
        function = get_field(item, "function")
        name = as_str(get_field(function, "name"))
        if name:
            calls.append(NativeCall(name, as_str(get_field(function, "arguments")) or ""))
    return tuple(calls)


def merge_messages(messages: Sequence[Message]) -> list[Message]:
    """Join consecutive messages of one role (blank line between): every provider accepts
    alternating roles, and Anthropic requires them."""
    merged: list[Message] = []
    for m in messages:
        if merged and merged[-1].role == m.role:
            merged[-1] = Message(m.role, f"{merged[-1].content}\n\n{m.content}")
        else:
            merged.append(m)
    return merged


def decode_response_id(response_id: str | None) -> str | None:
    """The provider's id inside litellm's encoded Responses API id (``resp_<base64>`` of
    ``litellm:custom_llm_provider:...;model_id:...;response_id:<id>``), else the id as is."""
    if response_id is None or not response_id.startswith("resp_"):
        return response_id
    try:
        decoded = base64.b64decode(response_id.removeprefix("resp_"), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return response_id
    _, sep, inner = decoded.rpartition("response_id:")
    return inner if sep and inner else response_id


def get_field(obj: object, name: str) -> object:
    """An attribute of a litellm object, or a key of a dict; ``None`` if absent."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return cast("Mapping[str, object]", obj).get(name)  # a JSON object
    return getattr(obj, name, None)


def as_items(value: object) -> Sequence[object]:
    """A JSON array (list or tuple) as a sequence; anything else as an empty one."""
    return value if isinstance(value, list | tuple) else ()  # pyright: ignore[reportUnknownVariableType]  # JSON array


def as_str(value: object) -> str | None:
    """A string, or ``None`` for anything else."""
    return value if isinstance(value, str) else None


def as_int(value: object) -> int:
    """A token count: an int (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
