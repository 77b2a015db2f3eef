"""OpenAI: strict Structured Outputs over Chat Completions or the Responses API.

Route: ``"openai/<model>"`` (e.g. ``"openai/gpt-4.1-mini"``); the key comes from
``OPENAI_API_KEY`` unless ``api_key`` is given. ``api_base`` points the adapter at any
server that speaks OpenAI's API and its strict ``json_schema`` (for servers that do not,
use :class:`~agentcore.adapters.local.LocalAdapter`); pass ``api_key`` with it, or
``$OPENAI_API_KEY`` is sent to that server.

What goes on the wire (checked by tests on the captured request):

* Chat Completions (``api="chat"``, the default), ``POST /v1/chat/completions`` through
  ``litellm.acompletion``::

      {"model": "gpt-4.1-mini",
       "messages": [{"role": "system", ...}, {"role": "user", ...}, ...],
       "max_completion_tokens": 1024,
       "response_format": {"type": "json_schema",
                           "json_schema": {"name": "next_action", "schema": <openai_strict>,
                                           "strict": true}}}

* Responses API (``api="responses"``), ``POST /v1/responses`` through
  ``litellm.aresponses``::

      {"model": "gpt-4.1-mini", "instructions": <system>, "input": [<messages>],
       "max_output_tokens": 1024, "store": false,
       "text": {"format": {"type": "json_schema", "name": "next_action",
                           "schema": <openai_strict>, "strict": true}}}

The schema is the ``openai_strict`` dialect: the action union wrapped as
``{"action": ...}`` (no union at the root), every object closed, every property required.

Streaming (``request.on_partial`` set): Chat Completions gets ``"stream": true,
"stream_options": {"include_usage": true}`` and reads ``chat.completion.chunk`` deltas, the
chunk with ``finish_reason`` and the final usage chunk
(https://platform.openai.com/docs/api-reference/chat-streaming); the Responses API gets
``"stream": true`` and reads ``response.output_text.delta`` events, then the terminal
``response.completed`` or ``response.incomplete`` event, whose ``response`` (with usage) is
read like a non-streamed one (https://platform.openai.com/docs/api-reference/responses-streaming).

Stop reasons: Chat ``finish_reason: "length"`` and Responses ``status: "incomplete"`` with
``incomplete_details.reason: "max_output_tokens"`` are truncation (asked again once with
twice the tokens, then :class:`ModelTruncatedError`); a ``message.refusal`` (Chat) or a
``refusal`` content part (Responses), or ``finish_reason: "content_filter"``, raises
:class:`ModelRefusedError`. A 429 with ``insufficient_quota`` is a spend limit (not retried).

Native tool calling (``mode="native"``; https://platform.openai.com/docs/guides/function-calling).
No ``response_format`` / ``text.format``: the step's functions (each offered tool, ``plan``,
``finish``) go as strict functions whose parameters are the ``openai_strict`` compilation of
the tool's argument schema (a tool with an open object or an untyped argument is sent
without ``strict``), with ``tool_choice: "auto"`` and ``parallel_tool_calls: false`` (the
guide warns that parallel calls may not match strict schemas, and one action runs per
step)::

    {"model": "gpt-4.1-mini", "messages": [...], "max_completion_tokens": 1024,
     "tools": [{"type": "function", "function": {"name": "get_order", "description": ...,
                "parameters": <openai_strict>, "strict": true}}, ..., <plan>, <finish>],
     "tool_choice": "auto", "parallel_tool_calls": false}

The history: an action is ``{"role": "assistant", "content": <a tool call's thought>,
"tool_calls": [{"id": "c2", "type": "function", "function": {"name", "arguments"}}]}``, and
what became of it ``{"role": "tool", "tool_call_id": "c2", "content": ...}``. The reply's
``message.tool_calls`` (``finish_reason: "tool_calls"``) is read back; its ``call_...`` ids
are not kept. The Responses API takes the flat function format (``{"type": "function",
"name", "description", "parameters", "strict"}``), the history as ``function_call`` and
``function_call_output`` input items with ``call_id`` = our call id, and answers with
``function_call`` output items; streamed, ``response.output_item.added`` names the function
and ``response.function_call_arguments.delta`` events carry its arguments.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from agentcore.contracts import ActionSchema, Usage
from agentcore.contracts._dialects import WireSchema
from agentcore.contracts.errors import ConfigurationError

from ._breaker import BreakerPolicy
from ._litellm import (
    LiteLLMAdapter,
    PartialFeed,
    RawReply,
    as_int,
    as_items,
    as_str,
    decode_response_id,
    get_field,
    litellm,
)
from ._native import Mode, NativeCall, native_tool_specs
from ._protocol import CompletionRequest, Message
from ._retry import RetryPolicy

__all__ = ["OpenAIAdapter", "make"]

OpenAIApi = Literal["chat", "responses"]


class OpenAIAdapter(LiteLLMAdapter):
    """OpenAI models with strict JSON-schema structured output.

    Args:
        model: ``"gpt-4.1-mini"`` or ``"openai/gpt-4.1-mini"``.
        api_base: another OpenAI-compatible endpoint (default: OpenAI's).
        api_key: the key (default: ``$OPENAI_API_KEY``).
        timeout: seconds per HTTP request.
        extra_headers: headers added to every request.
        max_output_tokens: the reply's token cap when the request sets none.
        retry: the retry policy.
        breaker: the circuit-breaker policy.
        api: ``"chat"`` (Chat Completions) or ``"responses"`` (the Responses API).
        mode: ``"structured"`` (strict ``json_schema``) or ``"native"`` (strict function
            calling; see the module docstring).

    Example:
        >>> route = [OpenAIAdapter("gpt-4.1-mini"), "deepseek/deepseek-chat"]
        >>> agent = Agent(tools=[...], model=route)
    """

    family: ClassVar[str] = "openai"
    route_prefix = "openai"
    litellm_prefix = "openai"
    key_env: ClassVar[str | None] = "OPENAI_API_KEY"
    max_tokens_param: ClassVar[str] = "max_completion_tokens"
    native_strict: ClassVar[bool] = True

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        extra_headers: Mapping[str, str] | None = None,
        max_output_tokens: int = 1024,
        retry: RetryPolicy | None = None,
        breaker: BreakerPolicy | None = None,
        api: OpenAIApi = "chat",
        mode: Mode = "structured",
    ) -> None:
        if api not in ("chat", "responses"):
            raise ConfigurationError(f"Invalid api {api!r} for OpenAI. Valid: 'chat', 'responses'.")
        self.api: OpenAIApi = api
        super().__init__(
            model,
            api_base=api_base,
            api_key=api_key,
            timeout=timeout,
            extra_headers=extra_headers,
            max_output_tokens=max_output_tokens,
            retry=retry,
            breaker=breaker,
            mode=mode,
        )

    def for_extraction(self) -> OpenAIAdapter:
        """Itself, or for the Responses API a Chat Completions twin (same model, key,
        endpoint, policies and breaker): extraction speaks Chat Completions."""
        if self.api == "chat":
            return self
        twin = copy.copy(self)
        twin.api = "chat"
        return twin

    # -- native tool calling ---------------------------------------------------------------

    def tool_params(self, schema: ActionSchema) -> dict[str, Any]:  # Any: litellm arguments
        """Strict functions, ``tool_choice: "auto"`` and ``parallel_tool_calls`` only when
        the step offers a ``batch`` (parallel calls of reads are then one batch action;
        otherwise one action runs per step); the Responses API takes its flat function
        format."""
        parallel = bool(schema.batch_names)
        if self.api == "chat":
            return {**super().tool_params(schema), "parallel_tool_calls": parallel}
        tools: list[dict[str, Any]] = []  # Any: JSON
        for spec in native_tool_specs(schema, self.native_tool_dialect(), strict=True):
            tool: dict[str, Any] = {  # Any: JSON
                "type": "function",
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
                "strict": spec.strict,
            }
            tools.append(tool)
        return {"tools": tools, "tool_choice": "auto", "parallel_tool_calls": parallel}

    def native_request_params(
        self, request: CompletionRequest, max_tokens: int
    ) -> dict[str, Any]:  # Any: litellm keyword arguments
        """Chat Completions with tools, or the Responses API with ``function_call`` and
        ``function_call_output`` input items carrying our call ids."""
        if self.api == "chat":
            return super().native_request_params(request, max_tokens)
        system = self.native_system_text(request)
        chat = self.shape_native_messages(system, request)[1:]  # the system text: instructions
        return {
            "model": self.model,
            "instructions": system,
            "input": responses_input(chat),
            "max_output_tokens": max_tokens,
            "store": False,
            **self.tool_params(request.schema),
            **self.transport_params(),
            **self.extra_params(request),
        }

    # -- Responses API ---------------------------------------------------------------------

    def request_params(
        self, request: CompletionRequest, wire: WireSchema, max_tokens: int
    ) -> dict[str, Any]:  # Any: litellm keyword arguments
        """Chat Completions parameters, or the Responses API's for ``api="responses"``."""
        if self.api == "chat":
            return super().request_params(request, wire, max_tokens)
        return {
            "model": self.model,
            "instructions": self.system_text(request, wire),
            "input": self.shape_input(request.messages),
            "max_output_tokens": max_tokens,
            "store": False,
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": wire.name,
                    "schema": wire.schema,
                    "strict": True,
                }
            },
            **self.transport_params(),
            **self.extra_params(request),
        }

    def shape_input(
        self, messages: Sequence[Message]
    ) -> list[dict[str, Any]]:  # Any: Responses input items
        """The Responses API ``input`` items (the system text travels as ``instructions``)."""
        return self.shape_messages("", messages)

    async def send(self, params: dict[str, Any]) -> Any:  # Any: litellm's response object
        """``litellm.acompletion``, or ``litellm.aresponses`` for the Responses API."""
        if self.api == "chat":
            return await super().send(params)
        return await litellm().aresponses(**params)

    def stream_params(self) -> dict[str, Any]:  # Any: litellm keyword arguments
        """Chat: usage in the stream; the Responses API's final event carries it anyway."""
        return super().stream_params() if self.api == "chat" else {"stream": True}

    async def stream(
        self,
        params: dict[str, Any],  # Any: litellm keyword arguments
        feed: PartialFeed,
    ) -> RawReply:
        """Chat Completions chunks, or the Responses API's events: text deltas (and a
        function call's name, then its argument deltas) until the terminal event, whose
        ``response`` is read like a non-streamed one."""
        if self.api == "chat":
            return await super().stream(params, feed)
        text = ""
        first: NativeCall | None = None
        first_index: int | None = None
        final: object = None
        events: Any = await self.send(params)  # Any: litellm's streaming iterator
        async for event in events:
            kind: object = get_field(event, "type")
            kind = getattr(kind, "value", kind)  # litellm's str enum of event types
            if kind == "response.output_text.delta":
                text += as_str(get_field(event, "delta")) or ""
                feed(text)
            elif kind == "response.output_item.added" and first is None:
                item = get_field(event, "item")
                if get_field(item, "type") == "function_call":
                    first = NativeCall(as_str(get_field(item, "name")) or "", "")
                    first_index = as_int(get_field(event, "output_index"))
                    feed.call(first)
            elif (
                kind == "response.function_call_arguments.delta"
                and first is not None
                and as_int(get_field(event, "output_index")) == first_index
            ):
                first = NativeCall(
                    first.name, first.arguments + (as_str(get_field(event, "delta")) or "")
                )
                feed.call(first)
            elif kind in ("response.completed", "response.incomplete"):
                final = get_field(event, "response")
            elif kind in ("response.failed", "error"):
                raise self._broken_stream(f"with a {kind} event")
        if final is None:
            raise self._broken_stream("before its response.completed event")
        return self.read_reply(final)

    def read_reply(self, raw: Any) -> RawReply:  # Any: litellm's response object
        """Read a Chat Completions response, or a Responses API ``response`` object."""
        if self.api == "chat":
            return super().read_reply(raw)
        texts: list[str] = []
        refusals: list[str] = []
        calls: list[NativeCall] = []
        for item in as_items(get_field(raw, "output")):
            if get_field(item, "type") == "function_call":
                name = as_str(get_field(item, "name"))
                if name:
                    calls.append(NativeCall(name, as_str(get_field(item, "arguments")) or ""))
                continue
            if get_field(item, "type") != "message":
                continue
            for part in as_items(get_field(item, "content")):
                kind = get_field(part, "type")
                if kind == "output_text" and isinstance(text := get_field(part, "text"), str):
                    texts.append(text)
                elif kind == "refusal" and isinstance(refusal := get_field(part, "refusal"), str):
                    refusals.append(refusal)
        status = get_field(raw, "status")
        reason = get_field(get_field(raw, "incomplete_details"), "reason")
        finish = (
            ("length" if reason == "max_output_tokens" else str(reason or "incomplete"))
            if status == "incomplete"
            else str(status)
            if isinstance(status, str)
            else None
        )
        usage: object = get_field(raw, "usage")
        raw_id = get_field(raw, "id")
        return RawReply(
            text="".join(texts) if texts else None,
            finish_reason=finish,
            refusal=" ".join(refusals) if refusals else None,
            usage=Usage(
                input_tokens=as_int(get_field(usage, "input_tokens")),
                output_tokens=as_int(get_field(usage, "output_tokens")),
                cached_input_tokens=as_int(
                    get_field(get_field(usage, "input_tokens_details"), "cached_tokens")
                ),
                cost=self.cost(raw),
            ),
            response_id=decode_response_id(raw_id if isinstance(raw_id, str) else None),
            calls=tuple(calls),
        )


def responses_input(
    messages: Sequence[dict[str, Any]],  # Any: OpenAI chat messages
) -> list[dict[str, Any]]:  # Any: Responses API input items
    """Chat messages (with tool calls and tool results) as Responses API input items: a
    tool call becomes a ``function_call`` item and its result a ``function_call_output``
    item, both with our call id as ``call_id``
    (https://platform.openai.com/docs/guides/function-calling)."""
    items: list[dict[str, Any]] = []  # Any: JSON
    for m in messages:
        if m["role"] == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m["tool_call_id"],
                    "output": m["content"],
                }
            )
            continue
        if m.get("content"):
            items.append({"role": m["role"], "content": m["content"]})
        for call in m.get("tool_calls") or ():
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                }
            )
    return items


def make(route: str, **options: Any) -> OpenAIAdapter:  # Any: OpenAIAdapter's keyword options
    """Registry factory: ``"openai/<model>"`` with :class:`OpenAIAdapter`'s options."""
    return OpenAIAdapter(route, **options)
