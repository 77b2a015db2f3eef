"""Local model servers: llama-cpp-python, llama.cpp's llama-server, vLLM and Ollama.

Every kind gets the ``openai_strict`` dialect (the union wrapped as ``{"action": ...}``,
objects closed, every property required): these servers compile the JSON Schema into a
grammar and constrain decoding with it, and a closed, fully required schema leaves the
smallest grammar. Replies are validated client-side as for every provider. What each
server kind is sent, through ``litellm.acompletion``:

``llama_cpp_python`` (route ``"local/<model>"``; ``python -m llama_cpp.server``)
    litellm provider ``openai`` with ``api_base`` (``POST <api_base>/chat/completions``),
    ``response_format: {"type": "json_object", "schema": <schema>}``, ``max_tokens``.
    Its server answers HTTP 500 to ``{"type": "json_schema"}`` and accepts a schema inside
    ``json_object`` (observed on llama-cpp-python's server; here a test checks the request
    shape on the captured request, not the server).
``llama_cpp`` (llama.cpp's ``llama-server``; an adapter object with ``server="llama_cpp"``)
    litellm provider ``openai`` with ``api_base``, ``response_format:
    {"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}``. Read in
    llama.cpp's source, the ``response_format`` handling of the OpenAI-compatible chat
    endpoint (``tools/server/server-common.cpp``; ``examples/server/utils.hpp`` in older
    releases): type ``json_schema`` reads ``response_format.json_schema.schema`` only (a
    flat ``schema`` key is ignored there), type ``json_object`` reads
    ``response_format.schema``; either becomes its grammar.
``vllm`` (route ``"hosted_vllm/<model>"``)
    litellm provider ``hosted_vllm`` (``POST <api_base>/chat/completions``),
    ``response_format: {"type": "json_schema", "json_schema": {...}}``. vLLM's structured
    outputs documentation (docs/features/structured_outputs.md) shows this
    ``response_format``; its older ``guided_json`` extra parameter was removed in v0.12.0
    and is not used. ``api_base`` defaults to litellm's ``$HOSTED_VLLM_API_BASE``.
``ollama`` (route ``"ollama_chat/<model>"``)
    litellm provider ``ollama_chat``, which calls Ollama's native ``POST /api/chat``
    (not its OpenAI-compatible ``/v1``): litellm turns the ``json_schema`` response format
    into ``"format": <schema>`` and ``max_tokens`` into ``options.num_predict`` (checked
    on the captured request). Ollama's API documentation: "format: the format to return a
    response in. Format can be ``json`` or a JSON schema" (schemas since Ollama 0.5); its
    ``done_reason: "length"`` arrives as ``finish_reason: "length"``. ``api_base`` defaults
    to ``http://localhost:11434``. After an answer litellm also asks ``POST /api/show`` for
    the model's details, in the background (for its cost bookkeeping). Ollama's
    OpenAI-compatible ``/v1`` endpoint also takes ``response_format`` ``json_schema``
    (Ollama 0.5+): :class:`~agentcore.adapters.openai.OpenAIAdapter` with
    ``api_base="http://localhost:11434/v1"`` uses that instead.

Keys: a local server usually needs none. The adapter never sends ``$OPENAI_API_KEY`` to a
local server: it sends ``api_key``, else ``$AGENTCORE_LOCAL_API_KEY``, else for the
llama.cpp kinds a placeholder (the openai client requires one) and for vLLM and Ollama
whatever litellm reads (``$HOSTED_VLLM_API_KEY``, ``$OLLAMA_API_KEY``; checked: with
neither set, vLLM gets ``Bearer fake-api-key`` and Ollama no Authorization header).

Cost is ``None``: litellm's price map would otherwise price a local model by whatever name
the server reports.

Streaming (``request.on_partial`` set): ``"stream": true`` with ``"stream_options":
{"include_usage": true}`` to the OpenAI-compatible servers (llama-cpp-python's request model
has no such field and ignores it, read in ``llama_cpp/server/types.py`` 0.3.36; vLLM and
llama-server were not checked), and ``"stream": true`` to Ollama's ``/api/chat``, which
streams NDJSON and ends with a ``done: true`` line carrying the token counts (checked on the
captured request). Where a server sends no usage in its stream, the counts are litellm's own
tokenizer estimates.

Not verified here against a running server: vLLM and llama-server (no package on this
machine; their request shapes come from their documentation and source as cited), Ollama
(no Debian package). llama-cpp-python is: ``tests/test_local_model.py`` (extra ``local``)
runs SmolLM2-135M on its server, started by :func:`._llama_server.serve_llama`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from agentcore.contracts._dialects import WireSchema
from agentcore.contracts.errors import ConfigurationError

from ._breaker import BreakerPolicy
from ._litellm import LiteLLMAdapter, Mode
from ._retry import RetryPolicy

__all__ = ["LOCAL_API_BASE_ENV", "LOCAL_API_KEY_ENV", "LocalAdapter", "LocalServer", "make"]

LocalServer = Literal["llama_cpp_python", "llama_cpp", "vllm", "ollama"]
LOCAL_API_BASE_ENV = "AGENTCORE_LOCAL_API_BASE"
"""Where ``"local/<model>"`` routes find their server when no ``api_base`` is given."""
LOCAL_API_KEY_ENV = "AGENTCORE_LOCAL_API_KEY"
"""The key sent to local servers when no ``api_key`` is given."""

_PLACEHOLDER_KEY = "sk-no-key-required"
# server kind -> (route prefix, litellm provider prefix)
_KINDS: dict[str, tuple[str, str]] = {
    "llama_cpp_python": ("local", "openai"),
    "llama_cpp": ("local", "openai"),
    "vllm": ("hosted_vllm", "hosted_vllm"),
    "ollama": ("ollama_chat", "ollama_chat"),
}
_ROUTE_SERVERS: dict[str, LocalServer] = {
    "local": "llama_cpp_python",
    "hosted_vllm": "vllm",
    "ollama_chat": "ollama",
}
_OLLAMA_DEFAULT = "http://localhost:11434"


class LocalAdapter(LiteLLMAdapter):
    """A model served on your own machine or network through an OpenAI-style API.

    Args:
        model: the model name the server knows (with or without the route prefix).
        api_base: the server's URL (``http://127.0.0.1:8000/v1`` for llama-cpp-python).
            Required for ``llama_cpp_python`` and ``llama_cpp`` unless
            ``$AGENTCORE_LOCAL_API_BASE`` is set.
        server: which server it is; decides the structured-output parameters.
        api_key: a key if the server wants one (default ``$AGENTCORE_LOCAL_API_KEY``).
        timeout: seconds per HTTP request (local generation can be slow).
        extra_headers: headers added to every request.
        max_output_tokens: the reply's token cap when the request sets none.
        retry: the retry policy.
        breaker: the circuit-breaker policy.

    Example:
        >>> model = LocalAdapter("smollm2", api_base="http://127.0.0.1:8000/v1")
    """

    family: ClassVar[str] = "local"
    key_env: ClassVar[str | None] = LOCAL_API_KEY_ENV
    key_required: ClassVar[bool] = False

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        server: LocalServer = "llama_cpp_python",
        api_key: str | None = None,
        timeout: float = 300.0,
        extra_headers: Mapping[str, str] | None = None,
        max_output_tokens: int = 1024,
        retry: RetryPolicy | None = None,
        breaker: BreakerPolicy | None = None,
        mode: Mode = "structured",
    ) -> None:
        if server not in _KINDS:
            valid = ", ".join(repr(k) for k in _KINDS)
            raise ConfigurationError(f"Invalid server {server!r} for LocalAdapter. Valid: {valid}.")
        self.server: LocalServer = server
        self.route_prefix, self.litellm_prefix = _KINDS[server]
        if api_base is None:
            api_base = self._default_api_base()
        if api_key is None:
            api_key = os.environ.get(LOCAL_API_KEY_ENV) or (
                _PLACEHOLDER_KEY if self.litellm_prefix == "openai" else None
            )
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

    def _default_api_base(self) -> str | None:
        if self.server == "ollama":
            return _OLLAMA_DEFAULT
        if self.server == "vllm":
            return None  # litellm reads $HOSTED_VLLM_API_BASE
        found = os.environ.get(LOCAL_API_BASE_ENV)
        if not found:
            raise ConfigurationError(
                f"LocalAdapter(server={self.server!r}) needs api_base, the server's URL "
                f"(e.g. 'http://127.0.0.1:8000/v1'); pass api_base=... or set "
                f"${LOCAL_API_BASE_ENV}."
            )
        return found

    def format_params(self, wire: WireSchema) -> dict[str, Any]:  # Any: litellm arguments
        """``json_object`` with the schema for llama-cpp-python, ``json_schema`` otherwise."""
        if self.server == "llama_cpp_python":
            return {"response_format": {"type": "json_object", "schema": wire.schema}}
        return super().format_params(wire)

    def cost(self, raw: Any) -> float | None:  # Any: litellm's response object
        """Local models have no price: ``None``."""
        del raw
        return None


def make(route: str, **options: Any) -> LocalAdapter:  # Any: LocalAdapter's keyword options
    """Registry factory for ``"local/<m>"``, ``"hosted_vllm/<m>"`` and ``"ollama_chat/<m>"``."""
    prefix, _, name = route.partition("/")
    if prefix not in _ROUTE_SERVERS:
        return LocalAdapter(route, **options)
    options.setdefault("server", _ROUTE_SERVERS[prefix])
    return LocalAdapter(name, **options)
