"""Anthropic: Claude's native structured output, never a forced tool call.

Route: ``"anthropic/<model>"`` (e.g. ``"anthropic/claude-sonnet-4-5"``); the key comes from
``ANTHROPIC_API_KEY`` unless ``api_key`` is given (litellm sends it as ``x-api-key``).

Mechanism. Claude's structured outputs take the schema as ``output_config.format``
(https://platform.claude.com/docs/en/build-with-claude/structured-outputs: "JSON outputs
(``output_config.format``)"; the older beta parameter ``output_format`` "has moved to
``output_config.format``"). litellm's own ``response_format`` mapping cannot be trusted for
it: it emits ``output_format`` only when its bundled model map flags the model with
``supports_native_structured_output`` and the schema has no open object; otherwise it
silently turns the schema into a tool, ``json_tool_call``, forced with
``tool_choice: {"type": "tool"}`` for a model in its map (current models reject a forced
tool) and unforced for a model it does not know (both seen on the captured request
with litellm 1.110). So the adapter never sends ``response_format``: it passes
``output_config`` itself, which litellm's Anthropic transformation copies into the request
body (``AnthropicConfig._apply_output_config``) for any model name, and no ``tools`` or
``tool_choice`` ever leave. Through ``litellm.acompletion`` (``POST /v1/messages``)::

    {"model": "claude-sonnet-4-5",
     "system": [{"type": "text", "text": <system>, "cache_control": {"type": "ephemeral"}}],
     "messages": [{"role": "user", "content": [{"type": "text", "text": ...}, ...]},
                  {"role": "assistant", "content": [...]}, ...],
     "max_tokens": 1024,
     "output_config": {"format": {"type": "json_schema", "schema": <anthropic dialect>}}}

litellm also adds the header ``anthropic-beta: structured-outputs-2025-11-13`` whenever
``output_config`` has a ``format``; the documentation says beta headers are no longer
required and the old one "will continue working for a transition period".

The schema is the ``anthropic`` dialect (the action union wrapped as ``{"action": ...}``,
objects closed, unsupported bounds moved into descriptions and re-checked client-side);
:func:`choose_form` falls back to the generic form (``args_json``, and ``answer_json`` for
a typed output) when the typed form has more than 16 union-typed or 24 optional parameters,
an open object, or a recursive model.

Prompt caching (https://platform.claude.com/docs/en/build-with-claude/prompt-caching):
breakpoints (``cache_control: {"type": "ephemeral"}``) go on the system block (contract,
tools and examples: identical at every step of a run) and on the last two content blocks of
the conversation. Every message of ours is its own text block (consecutive messages of one
role share a turn), so the block before the last, the end of the transcript before the
runner's per-step status note, starts the next step's request unchanged, and that step
reads the cache written there. Three of the four breakpoints a request may hold are used.
``usage.cache_read_input_tokens`` is reported as ``cached_input_tokens``; input tokens are
litellm's ``prompt_tokens``, which include the cached and cache-written tokens.

Stop reasons: ``max_tokens`` (litellm: ``length``) is truncation, asked again once with
twice the tokens; ``refusal`` (litellm: ``content_filter``) raises
:class:`ModelRefusedError`. Errors (https://platform.claude.com/docs/en/api/errors):
529 ``overloaded_error`` is retried; a 429 whose ``error.details.error_code`` is
``enforced_spend_limit_reached`` or whose message names a spend limit is a
:class:`SpendLimitError` (not retried); other 429s honour ``retry-after``.

Streaming: ``stream: true``; litellm reads ``message_start`` (input usage),
``content_block_delta`` (``text_delta``), ``message_delta`` (stop reason, output usage) and
``message_stop`` (https://platform.claude.com/docs/en/build-with-claude/streaming).

litellm does not keep Anthropic's message id (``msg_...``) in the response it returns (it
sets its own ``chatcmpl-...`` id, streamed or not), so ``response_id`` is ``None`` here.

Native tool calling (``mode="native"``; https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use).
No ``output_config``: the step's functions go as Anthropic tool definitions (``name``
matching ``^[a-zA-Z0-9_-]{1,64}$``, ``description``, ``input_schema`` compiled in the
``anthropic`` dialect), which litellm passes through unchanged, with the tool choice
``{"type": "auto", "disable_parallel_tool_use": true}`` (the model may answer in text; at
most one tool call per reply; never ``any`` or ``tool``, which force a call and which the
documentation says are not supported with extended thinking). The functions are not sent
``strict``: Anthropic's strict tool use (structured outputs documentation) counts every
strict schema of a request against 16 union-typed and 24 optional parameters, so a
large tool set would be refused; arguments are validated client-side as in every mode.
The history is sent in OpenAI's chat format and litellm converts it: an action is an
assistant turn with a ``tool_use`` block whose ``id`` is our call id (a tool call's thought
as a ``text`` block before it); what became of it is a ``tool_result`` block with
``tool_use_id`` = our call id, first in the next user turn, followed by that turn's other
text (checked on the captured request)::

    {"role": "assistant", "content": [{"type": "text", "text": "Find the order."},
        {"type": "tool_use", "id": "c2", "name": "get_order", "input": {"order_id": "A1"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c2",
        "content": "[c2] get_order returned: {...}"}, {"type": "text", "text": "Step 3 ..."}]}

A reply's ``content`` of ``text`` and ``tool_use`` blocks with ``stop_reason: "tool_use"``
arrives from litellm as ``message.tool_calls`` (``finish_reason: "tool_calls"``); its
``toolu_...`` ids are not kept. Cache breakpoints: the system block and the last two
blocks of the conversation, as in structured mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar, Final

from agentcore.contracts import ActionSchema
from agentcore.contracts._dialects import Dialect, WireSchema
from agentcore.contracts.errors import ModelError

from ._errors import ErrorContext
from ._litellm import LiteLLMAdapter, RawReply, error_body, get_field
from ._native import native_tool_specs
from ._protocol import CompletionRequest, Message

__all__ = ["AnthropicAdapter", "make"]

_EPHEMERAL: Final = {"type": "ephemeral"}
_EMPTY_TEXT: Final = "(empty reply)"
"""Anthropic rejects empty text blocks; an empty reply in the history is shown as this."""
_SPEND_LIMIT_CODE: Final = "enforced_spend_limit_reached"


class AnthropicAdapter(LiteLLMAdapter):
    """Claude models with native structured output (``output_config.format``).

    Takes the options of :class:`~agentcore.adapters._litellm.LiteLLMAdapter`: ``api_base``
    (default Anthropic's), ``api_key`` (default ``$ANTHROPIC_API_KEY``), ``timeout``,
    ``extra_headers``, ``max_output_tokens`` (Anthropic requires a cap; default 1024),
    ``retry`` and ``breaker``.

    Example:
        >>> agent = Agent(tools=[...], model=AnthropicAdapter("claude-sonnet-4-5"))
    """

    family: ClassVar[str] = "anthropic"
    route_prefix = "anthropic"
    litellm_prefix = "anthropic"
    dialect: ClassVar[Dialect] = "anthropic"
    key_env: ClassVar[str | None] = "ANTHROPIC_API_KEY"
    max_tokens_param: ClassVar[str] = "max_tokens"

    def shape_messages(
        self, system: str, messages: Sequence[Message]
    ) -> list[dict[str, Any]]:  # Any: Anthropic message objects (OpenAI shape, litellm maps)
        """One text block per message, turns of alternating roles, cache breakpoints on the
        system block and the last two blocks."""
        turns: list[dict[str, Any]] = []  # Any: message objects
        blocks: list[dict[str, Any]] = []  # Any: content blocks
        for m in messages:
            block: dict[str, Any] = {"type": "text", "text": m.content or _EMPTY_TEXT}
            blocks.append(block)
            if turns and turns[-1]["role"] == m.role:
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": m.role, "content": [block]})
        for block in blocks[-2:]:
            block["cache_control"] = dict(_EPHEMERAL)
        if not system:
            return turns
        head = {"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}
        return [{"role": "system", "content": [head]}, *turns]

    def format_params(self, wire: WireSchema) -> dict[str, Any]:  # Any: litellm arguments
        """``output_config.format``, passed through by litellm for any model name."""
        return {"output_config": {"format": {"type": "json_schema", "schema": wire.schema}}}

    # -- native tool calling ---------------------------------------------------------------

    def tool_params(self, schema: ActionSchema) -> dict[str, Any]:  # Any: litellm arguments
        """Anthropic tool definitions and the "auto" choice, with parallel tool use off
        unless the step offers a ``batch`` (litellm: ``tool_choice="auto"`` and
        ``parallel_tool_calls=False`` become ``{"type": "auto",
        "disable_parallel_tool_use": true}``)."""
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in native_tool_specs(schema, self.native_tool_dialect(), strict=False)
        ]
        return {
            "tools": tools,
            "tool_choice": "auto",
            "parallel_tool_calls": bool(schema.batch_names),
        }

    def shape_native_messages(
        self, system: str, request: CompletionRequest
    ) -> list[dict[str, Any]]:  # Any: OpenAI-format messages (litellm maps them)
        """The tool-call history with cache breakpoints on the system block and on the last
        two messages (a tool result's breakpoint lands on its ``tool_result`` block)."""
        shaped = super().shape_native_messages(system, request)
        head = {"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}
        shaped[0] = {"role": "system", "content": [head]}
        for message in shaped[1:][-2:]:
            content = message.get("content")
            if message["role"] == "tool":
                message["cache_control"] = dict(_EPHEMERAL)
            elif isinstance(content, str) and not message.get("tool_calls"):
                block = {"type": "text", "text": content, "cache_control": dict(_EPHEMERAL)}
                message["content"] = [block]
        return shaped

    def read_reply(self, raw: Any) -> RawReply:  # Any: litellm's ModelResponse
        """A Messages response as litellm maps it, with Anthropic's name ``refusal`` for
        litellm's ``content_filter``; litellm's own response id is not reported as
        Anthropic's (only a ``msg_...`` id would be)."""
        reply = super().read_reply(raw)
        finish = "refusal" if reply.finish_reason == "content_filter" else reply.finish_reason
        response_id = reply.response_id
        if response_id is not None and not response_id.startswith("msg_"):
            response_id = None  # litellm's own id, not Anthropic's
        return replace(reply, finish_reason=finish, response_id=response_id)

    def translate_error(self, exc: BaseException, context: ErrorContext) -> ModelError | None:
        """Also a spend limit: a 429 whose ``error.details.error_code`` says so."""
        details = get_field(error_body(exc).get("error"), "details")
        if get_field(details, "error_code") == _SPEND_LIMIT_CODE:
            context = replace(context, spend_limit=_always)
        return super().translate_error(exc, context)


def _always(status: int, code: str | None, kind: str | None, text: str) -> bool:
    del status, code, kind, text
    return True


def make(route: str, **options: Any) -> AnthropicAdapter:  # Any: AnthropicAdapter's options
    """Registry factory: ``"anthropic/<model>"`` with :class:`AnthropicAdapter`'s options."""
    return AnthropicAdapter(route, **options)
