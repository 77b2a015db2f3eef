"""agentcore: tool-using agents on one structured next-action contract.

Every step asks a model for one action (``plan | tool | finish``); a dispatcher enforces
scope, plan-before-writes, confirmation of destructive tools and budgets; an append-only
transcript is the only state, so runs resume after a crash and move between providers.
"""

# first, for its side effect: a source checkout maps agentcore.contracts and .adapters
from . import _layout  # noqa: F401  # pyright: ignore[reportUnusedImport]
from ._version import __version__ as __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers: True)
if TYPE_CHECKING:
    from ._gc import tune_gc
    from ._integrity import check_transcript
    from ._observability import configure_logging, configure_telemetry, get_logger
    from ._run import PAUSE, ContextProvider, ContextRequest, Settle, UntrustedContext
    from ._signals import run_until_signalled
    from ._state import (
        COMPENSATION_ENDINGS,
        UNDO_SUFFIX,
        PendingCall,
        RunResult,
        RunState,
        RunStatus,
        RunUsage,
        Turn,
    )
    from ._stats import ContractStats, collect_stats, contract_stats
    from ._subagent import PARENT_KEY, child_run_id
    from .agent import Agent, ModelSpec
    from .guards import ArgumentPolicy, host_allowed, path_within, resolve_within
    from .policy import Budget, Policy
    from .quotas import Quota
    from .routing import Route
    from .secrets import Secret, SecretResolver, env_secrets
    from .streaming import ActionDetected, PartialOutput, RunEnded, StreamEvent, ThoughtDelta
    from .tools import (
        CommittedCall,
        Compensation,
        FromRun,
        RunIdentity,
        Tool,
        ToolContext,
        tool,
    )

__all__ = [
    "COMPENSATION_ENDINGS",
    "PARENT_KEY",
    "PAUSE",
    "UNDO_SUFFIX",
    "ActionDetected",
    "Agent",
    "ArgumentPolicy",
    "Budget",
    "CommittedCall",
    "Compensation",
    "ContextProvider",
    "ContextRequest",
    "ContractStats",
    "FromRun",
    "ModelSpec",
    "PartialOutput",
    "PendingCall",
    "Policy",
    "Quota",
    "Route",
    "RunEnded",
    "RunIdentity",
    "RunResult",
    "RunState",
    "RunStatus",
    "RunUsage",
    "Secret",
    "SecretResolver",
    "Settle",
    "StreamEvent",
    "ThoughtDelta",
    "Tool",
    "ToolContext",
    "Turn",
    "UntrustedContext",
    "check_transcript",
    "child_run_id",
    "collect_stats",
    "configure_logging",
    "configure_telemetry",
    "contract_stats",
    "env_secrets",
    "get_logger",
    "host_allowed",
    "path_within",
    "resolve_within",
    "run_until_signalled",
    "tool",
    "tune_gc",
]


# The public names, by the module each is imported from on first use (PEP 562), so
# `import agentcore` loads neither pydantic nor the contracts, stores and adapters. Type
# checkers read neither this table nor `__getattr__`: `__all__` and the TYPE_CHECKING imports
# above are the same names written the way they read, and tests/test_public_api.py checks
# that both agree with this table.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "_gc": ("tune_gc",),
    "_integrity": ("check_transcript",),
    "_observability": ("configure_logging", "configure_telemetry", "get_logger"),
    "_run": ("PAUSE", "ContextProvider", "ContextRequest", "Settle", "UntrustedContext"),
    "_signals": ("run_until_signalled",),
    # the run's fold and the facts of a transcript the CLI and the console read
    "_state": (
        "COMPENSATION_ENDINGS",
        "UNDO_SUFFIX",
        "PendingCall",
        "RunResult",
        "RunState",
        "RunStatus",
        "RunUsage",
        "Turn",
    ),
    "_stats": ("ContractStats", "collect_stats", "contract_stats"),
    "_subagent": ("PARENT_KEY", "child_run_id"),
    "agent": ("Agent", "ModelSpec"),
    "guards": ("ArgumentPolicy", "host_allowed", "path_within", "resolve_within"),
    "policy": ("Budget", "Policy"),
    "quotas": ("Quota",),
    "routing": ("Route",),
    "secrets": ("Secret", "SecretResolver", "env_secrets"),
    "streaming": ("ActionDetected", "PartialOutput", "RunEnded", "StreamEvent", "ThoughtDelta"),
    "tools": (
        "CommittedCall",
        "Compensation",
        "FromRun",
        "RunIdentity",
        "Tool",
        "ToolContext",
        "tool",
    ),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

# The public subpackages and modules reachable as attributes of the package:
# `import agentcore` then `agentcore.stores.MemoryStore` works.
_SUBMODULES = frozenset(
    {
        "adapters",
        "agent",
        "approvals",
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
        "testing",
        "tools",
    }
)


def __getattr__(name: str) -> object:
    """A public name, imported from its module when first asked for (then kept here)."""
    module = _HOME.get(name)
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
