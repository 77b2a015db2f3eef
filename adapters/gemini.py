"""Gemini (Google AI Studio): ``responseJsonSchema`` structured output.

Route: ``"gemini/<model>"`` (e.g. ``"gemini/gemini-2.5-flash"``); the key comes from
``GEMINI_API_KEY`` unless ``api_key`` is given (litellm reads ``GOOGLE_API_KEY`` first when
it is set, then ``GEMINI_API_KEY``, and sends the key as ``x-goog-api-key``).

Mechanism. Gemini takes a JSON Schema as ``generationConfig.responseJsonSchema`` with
``responseMimeType: "application/json"``
(https://ai.google.dev/api/generate-content#FIELDS.response_json_schema), unlike the older
``responseSchema``, an OpenAPI subset without ``additionalProperties``. litellm maps
``response_format`` to ``response_json_schema`` only for model names matching
``gemini-<digit>`` (``supports_response_json_schema``); any other name (``gemini-flash-latest``,
a future alias) gets ``response_schema`` with ``additionalProperties`` stripped, checked on
the captured request. It also sends the system text as ``system_instruction`` only for
models its price map marks as supporting system messages, else it prepends it to the first
user turn. So the adapter sends neither ``response_format`` nor a system message: it
passes both fields itself through litellm's ``extra_body``, which litellm's Gemini
transformation merges into the request body (``_pop_and_merge_extra_body``, dicts merged
one level deep). Through ``litellm.acompletion``
(``POST /v1beta/models/<model>:generateContent``)::

    {"contents": [{"role": "user", "parts": [{"text": ...}]},
                  {"role": "model", "parts": [...]}, ...],
     "generationConfig": {"max_output_tokens": 1024,
                          "responseMimeType": "application/json",
                          "responseJsonSchema": <gemini dialect>},
     "systemInstruction": {"parts": [{"text": <system>}]}}

``max_output_tokens`` is litellm's spelling; the proto3 JSON mapping lets a server accept
both a field's original name and its lowerCamelCase name
(https://protobuf.dev/programming-guides/json/). The schema is the ``gemini`` dialect (the
union at the root, ``const`` as one-value ``enum``, ``propertyOrdering`` with ``thought``
first). Consecutive messages of one role are merged into one turn.

Prompt caching: Gemini caches repeated prefixes implicitly (nothing to mark); the prefix
(``systemInstruction``, ``generationConfig``) is byte-identical across the steps of a run,
and ``usageMetadata.cachedContentTokenCount`` is reported as ``cached_input_tokens``.
Output tokens include ``thoughtsTokenCount`` (litellm adds them to ``completion_tokens``).

Stop reasons (``finishReason``): ``MAX_TOKENS`` is truncation, asked again once with twice
the tokens (on thinking models the thoughts count toward ``maxOutputTokens`` and can use it
up); ``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``,
``LANGUAGE`` and ``OTHER`` (which litellm maps to ``content_filter``) raise
:class:`ModelRefusedError`. ``finish_reason`` is Gemini's own name where litellm keeps it (a
non-streamed reply that was not flagged), else litellm's (``length``, ``content_filter``,
``stop``): litellm answers a flagged reason (``SAFETY``, ``RECITATION``, ``BLOCKLIST``,
``PROHIBITED_CONTENT``, ``SPII``) with ``content_filter`` and no content.

Errors: a 429 ``RESOURCE_EXHAUSTED`` that carries a ``google.rpc.RetryInfo`` detail is a
per-minute quota: it is retried, waiting at least its ``retryDelay`` (capped by
``RetryPolicy.max_retry_after``). Its message ("You exceeded your current quota, please
check your plan and billing details") is the same whether or not the quota resets soon, so
only a 429 without ``RetryInfo`` whose message names billing, credits or a spend limit is a
:class:`SpendLimitError` (not retried); a bare "Resource has been exhausted" is retried.

Streaming: ``POST .../models/<model>:streamGenerateContent?alt=sse``; each SSE event is a
``GenerateContentResponse`` chunk and the last carries ``finishReason`` and
``usageMetadata``. litellm's parser reads a chunk without ``finishReason`` as ``stop``, so a
stream that breaks off looks finished; the adapter treats a reply that stops inside its JSON
object as a broken stream and sends the request again.

Native tool calling (``mode="native"``; https://ai.google.dev/gemini-api/docs/function-calling).
No ``responseJsonSchema``: the step's functions go, through ``extra_body`` like the system
text, as ``tools: [{"functionDeclarations": [{"name", "description",
"parametersJsonSchema"}]}]`` with ``toolConfig: {"functionCallingConfig": {"mode":
"AUTO"}}`` (the model predicts a function call or text; never ``ANY``). The parameters are
JSON Schema in the ``gemini`` dialect: ``parametersJsonSchema`` is the v1beta
``FunctionDeclaration`` field for JSON Schema, mutually exclusive with the OpenAPI-subset
``parameters``, which litellm's own ``tools`` mapping would produce (dropping
``additionalProperties``). Gemini has no option to turn parallel calls off: several
``functionCall`` parts in one reply are answered as not executed, except the first.

The history is sent in OpenAI's chat format and litellm converts it: an action is a
``model`` turn with a ``functionCall`` part (``name``, ``args``; a tool call's thought as a
``text`` part before it); what became of it is a ``user`` turn with a ``functionResponse``
part (``name`` of that call, ``response: {"content": <text>}``). Gemini pairs them by name
and order; litellm adds our call id as ``id`` on both parts only for Gemini 3 and newer (it
says older models answer 400 to the field). Gemini 3 asks for the ``thoughtSignature`` of
replayed function calls (https://ai.google.dev/gemini-api/docs/thought-signatures); the
transcript keeps no provider data, so litellm puts its placeholder signature on those parts
(its source cites Google's FAQ for that placeholder; not checked against a live Gemini 3
here). The runner's notes that follow a result (the step counter) are appended to that
result's text, so the turns alternate (checked on the captured request).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar, Final

from agentcore.contracts import ActionSchema
from agentcore.contracts._dialects import Dialect, WireSchema, compile_parameters
from agentcore.contracts._schema_nodes import JsonSchema
from agentcore.contracts.errors import ModelError, RateLimitedError

from ._errors import ErrorContext
from ._litellm import (
    LiteLLMAdapter,
    RawReply,
    as_items,
    as_str,
    error_body,
    get_field,
    merge_messages,
)
from ._native import native_tool_specs
from ._protocol import CompletionRequest, Message

__all__ = ["GeminiAdapter", "make"]

_RETRY_INFO: Final = "type.googleapis.com/google.rpc.RetryInfo"
_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")
_REFUSALS: Final = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE", "OTHER"}
)


class GeminiAdapter(LiteLLMAdapter):
    """Gemini models through Google AI Studio with ``responseJsonSchema``.

    Takes the options of :class:`~agentcore.adapters._litellm.LiteLLMAdapter`: ``api_base``
    (default Google's ``generativelanguage.googleapis.com``), ``api_key`` (default
    ``$GEMINI_API_KEY``), ``timeout``, ``extra_headers``, ``max_output_tokens``, ``retry``
    and ``breaker``.

    Example:
        >>> agent = Agent(tools=[...], model=GeminiAdapter("gemini-2.5-flash"))
    """

    family: ClassVar[str] = "gemini"
    route_prefix = "gemini"
    litellm_prefix = "gemini"
    dialect: ClassVar[Dialect] = "gemini"
    key_env: ClassVar[str | None] = "GEMINI_API_KEY"
    key_env_fallbacks: ClassVar[tuple[str, ...]] = ("GOOGLE_API_KEY",)
    max_tokens_param: ClassVar[str] = "max_tokens"
    truncation_reasons: ClassVar[frozenset[str]] = frozenset({"length", "MAX_TOKENS"})
    refusal_reasons: ClassVar[frozenset[str]] = _REFUSALS | {"content_filter"}
    truncation_hint: ClassVar[str] = (
        "On Gemini thinking models the thoughts count toward the output tokens: raise "
        "max_output_tokens."
    )

    def request_params(
        self, request: CompletionRequest, wire: WireSchema, max_tokens: int
    ) -> dict[str, Any]:  # Any: litellm keyword arguments
        """The contents, and ``systemInstruction`` and the schema through ``extra_body``."""
        params = super().request_params(request, wire, max_tokens)
        params["extra_body"] = {
            "systemInstruction": {"parts": [{"text": self.system_text(request, wire)}]},
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseJsonSchema": wire.schema,
            },
        }
        return params

    def shape_messages(
        self, system: str, messages: Sequence[Message]
    ) -> list[dict[str, Any]]:  # Any: message objects (OpenAI shape; litellm maps to contents)
        """The conversation only: the system text travels as ``systemInstruction``."""
        del system
        return [{"role": m.role, "content": m.content} for m in merge_messages(messages)]

    def extraction_params(
        self, schema: JsonSchema, name: str
    ) -> dict[str, Any]:  # Any: litellm arguments
        """``responseJsonSchema`` through ``extra_body``, as for an action."""
        del name
        return {
            "extra_body": {
                "generationConfig": {
                    "responseMimeType": "application/json",
                    "responseJsonSchema": compile_parameters(schema, self.dialect),
                }
            }
        }

    def format_params(self, wire: WireSchema) -> dict[str, Any]:  # Any: litellm arguments
        """Nothing here: the schema goes in ``extra_body`` (see :meth:`request_params`)."""
        del wire
        return {}

    # -- native tool calling ---------------------------------------------------------------

    def native_request_params(
        self, request: CompletionRequest, max_tokens: int
    ) -> dict[str, Any]:  # Any: litellm keyword arguments
        """The contents, and ``systemInstruction``, the functions and ``toolConfig``
        through ``extra_body``."""
        params = super().native_request_params(request, max_tokens)
        params["extra_body"] = {
            "systemInstruction": {"parts": [{"text": self.native_system_text(request)}]},
            **params.pop("extra_body", {}),
        }
        return params

    def tool_params(self, schema: ActionSchema) -> dict[str, Any]:  # Any: litellm arguments
        """``functionDeclarations`` with ``parametersJsonSchema`` and mode ``AUTO``, as
        ``extra_body`` (merged into it by :meth:`native_request_params`)."""
        declarations = [
            {"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}
            for t in native_tool_specs(schema, self.native_tool_dialect(), strict=False)
        ]
        return {
            "extra_body": {
                "tools": [{"functionDeclarations": declarations}],
                "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
            }
        }

    def shape_native_messages(
        self, system: str, request: CompletionRequest
    ) -> list[dict[str, Any]]:  # Any: OpenAI-format messages (litellm maps them to contents)
        """The tool-call history without the system message (it travels as
        ``systemInstruction``), a user note right after a tool result joined to it."""
        shaped: list[dict[str, Any]] = []  # Any: JSON
        for message in super().shape_native_messages(system, request)[1:]:
            last = shaped[-1] if shaped else None
            if last is not None and last["role"] == "tool" and message["role"] == "user":
                last["content"] = f"{last['content']}\n\n{message['content']}"
            else:
                shaped.append(message)
        return shaped

    def read_reply(self, raw: Any) -> RawReply:  # Any: litellm's ModelResponse
        """A ``generateContent`` response as litellm maps it, with Gemini's own
        ``finishReason`` where litellm keeps it (non-streamed replies)."""
        reply = super().read_reply(raw)
        choices = as_items(get_field(raw, "choices"))
        fields = get_field(choices[0], "provider_specific_fields") if choices else None
        native = as_str(get_field(fields, "native_finish_reason"))
        return replace(reply, finish_reason=native) if native else reply

    def translate_error(self, exc: BaseException, context: ErrorContext) -> ModelError | None:
        """A 429 with ``RetryInfo`` is a rate limit whose ``retryDelay`` is the least wait."""
        delay = _retry_delay(error_body(exc))
        if delay is None:
            return super().translate_error(exc, context)
        mapped = super().translate_error(exc, replace(context, spend_limit=_never))
        if isinstance(mapped, RateLimitedError):
            mapped.retry_after = max(mapped.retry_after or 0.0, delay)
            mapped.args = (f"{mapped} Google asked to retry after {delay:g}s (RetryInfo).",)
        return mapped


def _retry_delay(body: object) -> float | None:
    """Seconds of the ``google.rpc.RetryInfo`` detail's ``retryDelay`` (``"47s"``)."""
    for detail in as_items(get_field(get_field(body, "error"), "details")):
        if get_field(detail, "@type") != _RETRY_INFO:
            continue
        match = _DURATION.match(as_str(get_field(detail, "retryDelay")) or "")
        if match:
            return float(match.group(1))
    return None


def _never(status: int, code: str | None, kind: str | None, text: str) -> bool:
    del status, code, kind, text
    return False


def make(route: str, **options: Any) -> GeminiAdapter:  # Any: GeminiAdapter's options
    """Registry factory: ``"gemini/<model>"`` with :class:`GeminiAdapter`'s options."""
    return GeminiAdapter(route, **options)
