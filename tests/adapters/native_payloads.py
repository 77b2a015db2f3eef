"""The providers' documented native tool-calling payloads, for the loopback fakes.

* OpenAI Chat Completions: ``choices[0].message.tool_calls`` = ``[{"id", "type": "function",
  "function": {"name", "arguments": <JSON text>}}]`` with ``finish_reason: "tool_calls"``;
  streamed, ``delta.tool_calls`` items carry ``index`` (the first also ``id``, ``type`` and
  the whole ``name``), then pieces of ``arguments``
  (https://platform.openai.com/docs/guides/function-calling, and the ``ChatCompletionChunk``
  delta types of OpenAI's SDKs).
* OpenAI Responses API: ``output`` items ``{"type": "function_call", "id", "call_id", "name",
  "arguments"}``; streamed as ``response.output_item.added`` (the item with its name) and
  ``response.function_call_arguments.delta`` events.
* Anthropic Messages: ``content`` = text blocks and ``{"type": "tool_use", "id": "toolu_...",
  "name", "input": {...}}`` blocks with ``stop_reason: "tool_use"``
  (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use);
  streamed, a ``content_block_start`` with the ``tool_use`` block (``input: {}``), then
  ``content_block_delta`` events with ``{"type": "input_json_delta", "partial_json"}``
  (https://platform.claude.com/docs/en/build-with-claude/streaming).
* Gemini ``generateContent``: ``candidates[0].content.parts`` = ``{"text"}`` and
  ``{"functionCall": {"name", "args"}}`` parts (an optional ``id``), ``finishReason:
  "STOP"`` (https://ai.google.dev/gemini-api/docs/function-calling); streamed, each SSE
  chunk is such a response, a function call arriving whole in one chunk.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .fakes import (
    anthropic_message,
    chat_chunk,
    chat_completion,
    gemini_response,
    responses_response,
    split,
)

Call = tuple[str, Mapping[str, Any] | str]  # Any: JSON arguments; (name, args or raw text)

_ids = itertools.count(1)


def _arguments(args: Mapping[str, Any] | str) -> str:  # Any: JSON
    return args if isinstance(args, str) else json.dumps(args)


def chat_tool_calls(
    calls: Sequence[Call],
    content: str | None = None,
    *,
    finish_reason: str = "tool_calls",
    **options: Any,  # Any: chat_completion options
) -> dict[str, Any]:  # Any: JSON
    """A ``chat.completion`` whose message holds ``tool_calls`` (and optional text)."""
    body = chat_completion(content, finish_reason=finish_reason, **options)
    message = body["choices"][0]["message"]
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_fake{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": _arguments(args)},
            }
            for name, args in calls
        ]
    return body


def chat_tool_stream(
    calls: Sequence[Call],
    content: str = "",
    *,
    pieces: int = 4,
    finish_reason: str = "tool_calls",
    prompt_tokens: int = 120,
    completion_tokens: int = 30,
) -> list[dict[str, Any]]:  # Any: JSON
    """A Chat Completions stream: text deltas, then per call a first delta with its id and
    name and argument pieces, the ``finish_reason`` chunk and the usage chunk."""
    chunks = [chat_chunk({"role": "assistant", "content": ""})]
    chunks += [chat_chunk({"content": p}) for p in (split(content, pieces) if content else [])]
    for index, (name, args) in enumerate(calls):
        head = {
            "index": index,
            "id": f"call_fake{next(_ids)}",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        chunks.append(chat_chunk({"tool_calls": [head]}))
        for piece in split(_arguments(args), pieces):
            chunks.append(
                chat_chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    chunks.append(chat_chunk({}, finish_reason=finish_reason))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    chunks.append(chat_chunk({}, usage=usage))
    return chunks


def responses_tool_calls(
    calls: Sequence[Call], content: str | None = None
) -> dict[str, Any]:  # Any: JSON
    """A Responses API ``response`` whose ``output`` holds ``function_call`` items."""
    body = responses_response(content)
    items: list[dict[str, Any]] = [] if content is None else list(body["output"])  # Any: JSON
    for name, args in calls:
        n = next(_ids)
        items.append(
            {
                "type": "function_call",
                "id": f"fc_fake{n}",
                "call_id": f"call_fake{n}",
                "name": name,
                "arguments": _arguments(args),
                "status": "completed",
            }
        )
    body["output"] = items
    return body


def anthropic_tool_use(
    calls: Sequence[Call],
    text: str | None = None,
    *,
    stop_reason: str = "tool_use",
    **options: Any,  # Any: anthropic_message options
) -> dict[str, Any]:  # Any: JSON
    """An Anthropic ``message`` with an optional text block, then ``tool_use`` blocks."""
    body = anthropic_message(text, stop_reason=stop_reason, **options)
    for name, args in calls:
        parsed: Any = json.loads(args) if isinstance(args, str) else dict(args)  # Any: JSON
        body["content"].append(
            {"type": "tool_use", "id": f"toolu_fake{next(_ids)}", "name": name, "input": parsed}
        )
    return body


def anthropic_tool_stream(
    call: Call,
    text: str = "",
    *,
    pieces: int = 4,
    stop_reason: str = "tool_use",
    input_tokens: int = 120,
    output_tokens: int = 30,
) -> list[dict[str, Any]]:  # Any: JSON
    """Anthropic's streaming events for a text block (if any) and one ``tool_use`` block
    whose input arrives as ``input_json_delta`` pieces."""
    start = anthropic_message(None, input_tokens=input_tokens, output_tokens=1)
    start.update(id="msg_stream_tool", stop_reason=None)
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]  # Any: JSON
    index = 0
    if text:
        events.append(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        )
        events += [
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
            for p in split(text, pieces)
        ]
        events.append({"type": "content_block_stop", "index": 0})
        index = 1
    name, args = call
    block = {"type": "tool_use", "id": f"toolu_fake{next(_ids)}", "name": name, "input": {}}
    events.append({"type": "content_block_start", "index": index, "content_block": block})
    events += [
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": p},
        }
        for p in split(_arguments(args), pieces)
    ]
    events += [
        {"type": "content_block_stop", "index": index},
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
        {"type": "message_stop"},
    ]
    return events


def gemini_function_calls(
    calls: Sequence[Call],
    text: str | None = None,
    *,
    ids: bool = False,
    finish_reason: str | None = "STOP",
    **options: Any,  # Any: gemini_response options
) -> dict[str, Any]:  # Any: JSON
    """A ``GenerateContentResponse`` with an optional text part, then ``functionCall`` parts
    (each with an ``id`` when ``ids``)."""
    body = gemini_response(text, finish_reason=finish_reason, **options)
    parts = body["candidates"][0]["content"]["parts"]
    for name, args in calls:
        parsed: Any = json.loads(args) if isinstance(args, str) else dict(args)  # Any: JSON
        function: dict[str, Any] = {"name": name, "args": parsed}  # Any: JSON
        if ids:
            function["id"] = f"fc-fake{next(_ids)}"
        parts.append({"functionCall": function})
    return body


def gemini_call_stream(
    call: Call, text: str = "", *, pieces: int = 4
) -> list[dict[str, Any]]:  # Any: JSON
    """``streamGenerateContent?alt=sse`` chunks: the text in pieces, then one chunk with the
    whole ``functionCall``, ``finishReason`` and the usage."""
    chunks = [
        gemini_response(p, finish_reason=None, usage=False)
        for p in (split(text, pieces) if text else [])
    ]
    chunks.append(gemini_function_calls([call]))
    return chunks
