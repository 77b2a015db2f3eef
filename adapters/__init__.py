"""Model adapters: one ``complete_structured`` per provider family, plus ScriptedModel.

Provider modules are imported lazily through the registry; importing this package loads
no provider SDK and no litellm.
"""

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
from .scripted import ScriptedModel, ScriptItem

__all__ = [
    "Completion",
    "CompletionRequest",
    "Message",
    "ModelAdapter",
    "PartialAction",
    "ScriptItem",
    "ScriptedModel",
    "parse_reply",
    "partial_action",
    "register_provider",
    "registered_providers",
    "resolve_model",
    "resolve_route",
]
