"""Model adapters: one ``complete_structured`` per provider family, plus ScriptedModel.

Provider modules are imported lazily through the registry; importing this package loads
no provider SDK and no litellm. The provider adapters live in their modules:
``agentcore.adapters.openai.OpenAIAdapter``, ``.anthropic.AnthropicAdapter``,
``.gemini.GeminiAdapter``, ``.deepseek.DeepSeekAdapter`` and ``.local.LocalAdapter``; each
takes a :class:`RetryPolicy` and a :class:`BreakerPolicy`.
"""

from typing import TYPE_CHECKING, Any

from ._breaker import BreakerPolicy
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
from ._retry import RetryPolicy
from .scripted import ScriptedModel, ScriptItem

if TYPE_CHECKING:  # extraction loads on first use: it brings the litellm adapter modules
    from ._extract import Extraction, extract

__all__ = [
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
    "extract",
    "parse_reply",
    "partial_action",
    "register_provider",
    "registered_providers",
    "resolve_model",
    "resolve_route",
]


def __getattr__(name: str) -> Any:  # Any: one of the extraction module's public names
    if name in ("Extraction", "extract"):
        from . import _extract

        return getattr(_extract, name)
    raise AttributeError(f"module 'agentcore.adapters' has no attribute {name!r}")
