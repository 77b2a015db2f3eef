"""Resolve model route entries (``"provider/model"`` strings or adapter objects) lazily.

Provider modules are imported only when a route names them, so ``import agentcore`` never
loads litellm or a provider SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from agentcore.contracts.errors import ConfigurationError

from ._protocol import ModelAdapter

__all__ = ["register_provider", "registered_providers", "resolve_model", "resolve_route"]

# provider prefix -> "module:factory"; the factory takes (route, **options). Each provider
# module owns its wire format; nothing here switches on providers. The prefixes are
# litellm's provider names.
_PROVIDERS: dict[str, str] = {
    "openai": "agentcore.adapters.openai:make",
    "anthropic": "agentcore.adapters.anthropic:make",
    "gemini": "agentcore.adapters.gemini:make",
    "deepseek": "agentcore.adapters.deepseek:make",
    "ollama_chat": "agentcore.adapters.local:make",
    "hosted_vllm": "agentcore.adapters.local:make",
    "local": "agentcore.adapters.local:make",
}


def register_provider(prefix: str, target: str) -> None:
    """Register a provider prefix, e.g. ``register_provider("acme", "acme_ai.agentcore:make")``.

    ``target`` is ``"module:callable"``; the callable gets the full route string and options
    and returns a :class:`ModelAdapter`. It is imported on first use.
    """
    if ":" not in target:
        raise ConfigurationError(f"Provider target {target!r} must look like 'module:callable'.")
    _PROVIDERS[prefix] = target


def registered_providers() -> list[str]:
    """Provider prefixes a ``"provider/model"`` string can use."""
    return sorted(_PROVIDERS)


def resolve_model(entry: object, **options: Any) -> ModelAdapter:  # Any: provider options
    """Turn one route entry into an adapter.

    Raises:
        ConfigurationError: an unknown provider prefix, or an object that is not an adapter.
    """
    if not isinstance(entry, str):
        if isinstance(entry, ModelAdapter):
            return entry
        raise ConfigurationError(
            f"{entry!r} is not a model: pass 'provider/model' or an object with "
            "complete_structured(request) and a name."
        )
    prefix, sep, _ = entry.partition("/")
    if not sep or prefix not in _PROVIDERS:
        valid = ", ".join(registered_providers()) or "(none installed)"
        raise ConfigurationError(
            f"Unknown model {entry!r}: expected 'provider/model' with a provider of: {valid}. "
            "Or pass an adapter object such as ScriptedModel([...])."
        )
    module_name, _, attr = _PROVIDERS[prefix].partition(":")
    factory: Callable[..., ModelAdapter] = getattr(importlib.import_module(module_name), attr)
    return factory(entry, **options)


def resolve_route(
    model: str | ModelAdapter | Sequence[str | ModelAdapter],
) -> tuple[ModelAdapter, ...]:
    """Resolve a model or a route (a list tried in order) into adapters."""
    entries: Sequence[str | ModelAdapter] = (
        [model] if isinstance(model, str) or not isinstance(model, Sequence) else model
    )
    if not entries:
        raise ConfigurationError("A model route needs at least one model.")
    return tuple(resolve_model(e) for e in entries)
