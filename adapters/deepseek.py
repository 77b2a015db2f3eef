"""DeepSeek: JSON mode with the schema in the prompt.

Route: ``"deepseek/deepseek-chat"``; the key comes from ``DEEPSEEK_API_KEY`` unless
``api_key`` is given. DeepSeek's API has no schema-constrained decoding, only JSON mode
(https://api-docs.deepseek.com/guides/json_mode), so the request is, through
``litellm.acompletion`` (``POST /chat/completions``)::

    {"model": "deepseek-chat",
     "messages": [{"role": "system", "content": <system>\\n\\n<json_prompt schema text>}, ...],
     "max_tokens": 1024,
     "response_format": {"type": "json_object"}}

The ``json_prompt`` dialect's text (the compact schema and one instruction) is appended to
the system message; DeepSeek requires the word "json" in the prompt, and the adapter checks
it is there. Nothing constrains decoding, so replies are validated client-side: an invalid
or blank reply (DeepSeek documents that JSON mode can answer empty content) comes back as
``Completion.error`` and the core asks again. HTTP 402 "Insufficient Balance" is a spend
limit (not retried); 503 "Server Overloaded" is retried.

Streaming sends the same request with ``"stream": true, "stream_options": {"include_usage":
true}`` (OpenAI's option; whether DeepSeek honours it was not checked against DeepSeek, only
on the captured request). Context caching is DeepSeek's own and automatic
(https://api-docs.deepseek.com/guides/kv_cache); litellm reports its
``prompt_cache_hit_tokens`` as cached tokens.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentcore.contracts._dialects import Dialect, WireSchema

from ._litellm import LiteLLMAdapter
from ._protocol import CompletionRequest

__all__ = ["DeepSeekAdapter", "make"]

_JSON_REMINDER = "Reply with one json object."


class DeepSeekAdapter(LiteLLMAdapter):
    """DeepSeek models in JSON mode (``response_format: {"type": "json_object"}``).

    Takes the options of :class:`~agentcore.adapters._litellm.LiteLLMAdapter`: ``api_base``,
    ``api_key`` (default ``$DEEPSEEK_API_KEY``), ``timeout``, ``extra_headers``,
    ``max_output_tokens``, ``retry`` and ``breaker``.

    Example:
        >>> agent = Agent(tools=[...], model=DeepSeekAdapter("deepseek-chat"))
    """

    family: ClassVar[str] = "deepseek"
    route_prefix = "deepseek"
    litellm_prefix = "deepseek"
    dialect: ClassVar[Dialect] = "json_prompt"
    key_env: ClassVar[str | None] = "DEEPSEEK_API_KEY"

    def system_text(self, request: CompletionRequest, wire: WireSchema) -> str:
        """The system text with the schema prompt; it always contains the word "json"."""
        text = super().system_text(request, wire)
        return text if "json" in text else f"{text}\n\n{_JSON_REMINDER}"

    def format_params(self, wire: WireSchema) -> dict[str, Any]:  # Any: litellm arguments
        """JSON mode: the only structured output DeepSeek offers."""
        del wire
        return {"response_format": {"type": "json_object"}}


def make(route: str, **options: Any) -> DeepSeekAdapter:  # Any: DeepSeekAdapter's options
    """Registry factory: ``"deepseek/<model>"`` with :class:`DeepSeekAdapter`'s options."""
    return DeepSeekAdapter(route, **options)
