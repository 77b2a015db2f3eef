"""agentcore: tool-using agents on one structured next-action contract.

Every step asks a model for one action (``plan | tool | finish``); a dispatcher enforces
scope, plan-before-writes, confirmation of destructive tools and budgets; an append-only
transcript is the only state, so runs resume after a crash and move between providers.
"""

# first, for its side effect: a source checkout maps agentcore.contracts and .adapters
from . import _layout  # noqa: F401  # pyright: ignore[reportUnusedImport]

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers: True)
if TYPE_CHECKING:
    from ._integrity import check_transcript
    from ._observability import configure_logging, configure_telemetry
    from ._runner import ContextProvider, ContextRequest
    from ._signals import run_until_signalled
    from ._state import PendingCall, RunResult, RunStatus, RunUsage
    from .agent import Agent, ModelSpec
    from .guards import ArgumentPolicy, host_allowed, path_within, resolve_within
    from .policy import Budget, Policy
    from .routing import Route
    from .secrets import Secret, SecretResolver, env_secrets
    from .streaming import ActionDetected, RunEnded, StreamEvent, ThoughtDelta
    from .tools import Tool, ToolContext, tool

__all__ = [
    "ActionDetected",
    "Agent",
    "ArgumentPolicy",
    "Budget",
    "ContextProvider",
    "ContextRequest",
    "ModelSpec",
    "PendingCall",
    "Policy",
    "Route",
    "RunEnded",
    "RunResult",
    "RunStatus",
    "RunUsage",
    "Secret",
    "SecretResolver",
    "StreamEvent",
    "ThoughtDelta",
    "Tool",
    "ToolContext",
    "check_transcript",
    "configure_logging",
    "configure_telemetry",
    "env_secrets",
    "host_allowed",
    "path_within",
    "resolve_within",
    "run_until_signalled",
    "tool",
]

__version__ = "0.1.0"

# Every public name is imported from its module on first use (PEP 562), so `import agentcore`
# loads neither pydantic nor the contracts, stores and adapters (issue 15: start-up).
_EXPORTS = {
    "ActionDetected": "streaming",
    "Agent": "agent",
    "ArgumentPolicy": "guards",
    "Budget": "policy",
    "ContextProvider": "_runner",
    "ContextRequest": "_runner",
    "ModelSpec": "agent",
    "PendingCall": "_state",
    "Policy": "policy",
    "Route": "routing",
    "RunEnded": "streaming",
    "RunResult": "_state",
    "RunStatus": "_state",
    "RunUsage": "_state",
    "Secret": "secrets",
    "SecretResolver": "secrets",
    "StreamEvent": "streaming",
    "ThoughtDelta": "streaming",
    "Tool": "tools",
    "ToolContext": "tools",
    "check_transcript": "_integrity",
    "configure_logging": "_observability",
    "configure_telemetry": "_observability",
    "env_secrets": "secrets",
    "host_allowed": "guards",
    "path_within": "guards",
    "resolve_within": "guards",
    "run_until_signalled": "_signals",
    "tool": "tools",
}
# The public subpackages and modules that importing the package used to load as a side
# effect: `import agentcore` then `agentcore.stores.MemoryStore` still works.
_SUBMODULES = frozenset(
    {
        "adapters",
        "agent",
        "contracts",
        "errors",
        "events",
        "guards",
        "policy",
        "queue",
        "routing",
        "secrets",
        "streaming",
        "stores",
        "tools",
    }
)


def __getattr__(name: str) -> object:
    """A public name, imported from its module when first asked for (then kept here)."""
    module = _EXPORTS.get(name)
    if module is None and name not in _SUBMODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    if module is None:
        return importlib.import_module(f"{__name__}.{name}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
