"""Model adapters: one ``complete_structured`` per provider family, plus ScriptedModel.

Provider modules are imported lazily through the registry; importing this package loads
no provider SDK and no litellm. The provider adapters live in their modules:
``agentcore.adapters.openai.OpenAIAdapter``, ``.anthropic.AnthropicAdapter``,
``.gemini.GeminiAdapter``, ``.deepseek.DeepSeekAdapter`` and ``.local.LocalAdapter``; each
takes a :class:`RetryPolicy` and a :class:`BreakerPolicy`.
"""

from typing import TYPE_CHECKING, Any

from ._protocol import (
    Completion,
    CompletionRequest,
    Message,
    ModelAdapter,
    PartialAction,
    parse_reply,
    partial_action,
)
from ._registry import register_provider, registered_providers, resolve_model, resolve_route

if TYPE_CHECKING:  # loaded on first use (see _LAZY)
    from ._breaker import BreakerPolicy
    from ._errors import parse_retry_after
    from ._extract import Extraction, extract
    from ._llama_server import SMOLLM2_ALIAS, ServerStartError, serve_llama, smollm2_model_path
    from ._retry import RetryPolicy
    from .scripted import ScriptedModel, ScriptItem

__all__ = [
    "SMOLLM2_ALIAS",
    "BreakerPolicy",
    "Completion",
    "CompletionRequest",
    "Extraction",
    "Message",
    "ModelAdapter",
    "PartialAction",
    "RetryPolicy",
    "ScriptItem",
    "ScriptedModel",
    "ServerStartError",
    "extract",
    "parse_reply",
    "parse_retry_after",
    "partial_action",
    "register_provider",
    "registered_providers",
    "resolve_model",
    "resolve_route",
    "serve_llama",
    "smollm2_model_path",
]


# Public names whose modules load on first use: extraction brings the litellm adapter
# modules; the retry and breaker policies (tenacity) and the scripted model are needed by
# the provider adapters and by tests, not by `from agentcore import Agent` (start-up time).
# The local llama-cpp server (a subprocess serving the bundled SmolLM2) is for
# `agentcore demo --local` and tests that run a real model offline.
_LAZY = {
    "SMOLLM2_ALIAS": "_llama_server",
    "ServerStartError": "_llama_server",
    "serve_llama": "_llama_server",
    "smollm2_model_path": "_llama_server",
    "BreakerPolicy": "_breaker",
    "Extraction": "_extract",
    "RetryPolicy": "_retry",
    "ScriptItem": "scripted",
    "ScriptedModel": "scripted",
    "extract": "_extract",
    "parse_retry_after": "_errors",
}


def __getattr__(name: str) -> Any:  # Any: one of the public names in _LAZY, or the module
    module = _LAZY.get(name)
    if module is None and name != "scripted":  # imported with the package before
        raise AttributeError(f"module 'agentcore.adapters' has no attribute {name!r}")
    import importlib

    if module is None:
        return importlib.import_module(f"{__name__}.{name}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
