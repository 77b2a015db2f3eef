"""Streaming through litellm: partial actions from the deltas, the refusal a stream
carries, the usage of a stream that broke, and whether a reply's JSON ever closed.

How a streamed call runs is described in :mod:`._litellm`, whose flow is the same code
streamed or not; this module holds the pieces that read the stream.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic_core import from_json

from agentcore.contracts import ActionSchema, Usage

from ._litellm_lib import litellm
from ._native import NativeCall, native_partial
from ._protocol import PartialAction, partial_action
from ._wire import as_int, as_items, as_str, get_field

__all__ = ["PartialFeed", "RefusalTap", "read_chunks", "received_usage", "stops_inside_json"]

_FENCE_OPEN = re.compile(r"^\s*```(?:json)?\s*\n")


class PartialFeed:
    """Turns a streamed reply into partial actions, each shown once.

    Structured mode reads the growing JSON text (:func:`partial_action`). Native mode
    (``schema`` given) takes the thought from the text and the type and tool from the first
    tool call once its name is known (:func:`~agentcore.adapters._native.native_partial`).

    Args:
        on_partial: the request's callback; it only ever gets :class:`PartialAction`.
        schema: the step's schema in native mode (to map tool names back), else ``None``.
    """

    def __init__(
        self, on_partial: Callable[[PartialAction], None], schema: ActionSchema | None = None
    ) -> None:
        self._on_partial = on_partial
        self._schema = schema
        self._last: PartialAction | None = None
        self._text = ""
        self._call: NativeCall | None = None
        self.received = ""
        """What this attempt has received so far (text, else the first call's arguments)."""

    def restart(self) -> None:
        """A new attempt starts: its text starts from nothing."""
        self._last = None
        self._text = ""
        self._call = None
        self.received = ""

    def __call__(self, text: str) -> None:
        """The reply's text so far."""
        self.received = text
        if self._schema is None:
            self._show(partial_action(_FENCE_OPEN.sub("", text, count=1)))
        else:
            self._text = text
            self._show(native_partial(self._schema, text, self._call))

    def call(self, call: NativeCall) -> None:
        """The reply's first tool call so far (native mode; ignored in structured mode)."""
        self.received = self._text or f"{call.name} {call.arguments}"
        if self._schema is not None:
            self._call = call
            self._show(native_partial(self._schema, self._text, call))

    def _show(self, partial: PartialAction | None) -> None:
        if partial is not None and partial != self._last:
            self._last = partial
            self._on_partial(partial)


async def read_chunks(
    response: Any,  # Any: litellm's CustomStreamWrapper
    feed: PartialFeed,
) -> tuple[list[Any], str]:  # Any: litellm's ModelResponseStream chunks
    """Read a litellm Chat Completions stream to its end, giving ``feed`` the text so far as
    deltas arrive (and the first tool call so far, once its name is known).

    litellm turns every provider's stream (OpenAI chunks, Anthropic events, Gemini SSE,
    Ollama NDJSON) into Chat Completions chunks, tool calls as ``delta.tool_calls`` items
    (``index``, the name in the first, argument text in pieces).

    Returns:
        The chunks, for ``stream_chunk_builder``, and the refusal text the stream carried
        (empty when none; see :class:`RefusalTap`).
    """
    chunks: list[Any] = []  # Any: litellm's ModelResponseStream chunks
    text = ""
    calls: dict[int, tuple[str, str]] = {}  # index -> (name, arguments so far)
    refusal = RefusalTap.install(response)
    async for chunk in response:
        chunks.append(chunk)
        piece = ""
        for choice in as_items(get_field(chunk, "choices")):
            delta = get_field(choice, "delta")
            piece += as_str(get_field(delta, "content")) or ""
            for item in as_items(get_field(delta, "tool_calls")):
                index = as_int(get_field(item, "index"))
                function = get_field(item, "function")
                name, arguments = calls.get(index, ("", ""))
                name = as_str(get_field(function, "name")) or name
                arguments += as_str(get_field(function, "arguments")) or ""
                calls[index] = (name, arguments)
                if index == min(calls):
                    feed.call(NativeCall(name, arguments))
        if piece:
            text += piece
            feed(text)
    return chunks, refusal.text if refusal is not None else ""


def received_usage(
    model: str,
    params: dict[str, Any],  # Any: litellm keyword arguments
    received: str,
) -> Usage:
    """The tokens of a streamed attempt that broke after ``received`` arrived: the prompt and
    that text, counted with litellm's tokenizer for ``model`` (about four characters a
    token where it has none). Nothing when no text had arrived."""
    if not received:
        return Usage()
    messages: list[object] = list(as_items(params.get("messages")))
    if not messages:  # the Responses API: instructions and input items
        messages = [{"role": "system", "content": str(params.get("instructions") or "")}]
        messages += [
            {"role": "user", "content": str(get_field(item, "content") or "")}
            for item in as_items(params.get("input"))
        ]
    try:
        counter: Any = litellm().token_counter  # Any: litellm's untyped function
        prompt = int(counter(model=model, messages=messages))
        output = int(counter(model=model, text=received))
    except Exception:  # a tokenizer gap: about four characters a token
        prompt = len(str(messages)) // 4
        output = len(received) // 4
    return Usage(input_tokens=prompt, output_tokens=max(output, 1))


def stops_inside_json(text: str) -> bool:
    """Whether ``text`` is the start of a JSON object or array that never closed."""
    body = _FENCE_OPEN.sub("", text, count=1).strip()
    if not body.startswith(("{", "[")):
        return False
    try:
        from_json(body)
    except ValueError:
        try:
            from_json(body, allow_partial=True)
        except ValueError:
            return False  # not JSON at all: the parser reports it
        return True
    return False


class RefusalTap:
    """Reads ``delta.refusal`` from the raw chunks under litellm's stream wrapper.

    litellm's ``CustomStreamWrapper`` drops a Chat Completions chunk whose delta carries only
    ``refusal``, so a streamed refusal would arrive as an empty reply. The tap
    takes the wrapper's ``completion_stream`` (the openai SDK's chunk stream, which the
    wrapper iterates with ``async for``), passes every chunk on unchanged and keeps the
    refusal text. Where a wrapper has no such stream yet, nothing is tapped.
    """

    def __init__(self, inner: Any) -> None:  # Any: the SDK's async chunk stream
        self._inner = inner
        self._iterator: Any = None  # Any: its async iterator
        self.text = ""

    @classmethod
    def install(cls, wrapper: object) -> RefusalTap | None:
        inner: object = getattr(wrapper, "completion_stream", None)
        if inner is None or not hasattr(inner, "__aiter__"):
            return None
        tap = cls(inner)
        try:
            setattr(wrapper, "completion_stream", tap)  # noqa: B010  # untyped litellm field
        except AttributeError:  # pragma: no cover  # a wrapper that forbids it
            return None
        return tap

    def __aiter__(self) -> RefusalTap:
        return self

    async def __anext__(self) -> object:
        if self._iterator is None:
            self._iterator = self._inner.__aiter__()
        chunk: object = await self._iterator.__anext__()
        for choice in as_items(get_field(chunk, "choices")):
            self.text += as_str(get_field(get_field(choice, "delta"), "refusal")) or ""
        return chunk

    def __getattr__(self, name: str) -> Any:  # Any: whatever the wrapped stream offers
        return getattr(self._inner, name)  # close(), aclose(), response, ...
