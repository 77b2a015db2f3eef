"""agentcore: tool-using agents on one structured next-action contract.

Every step asks a model for one action (``plan | tool | finish``); a dispatcher enforces
scope, plan-before-writes, confirmation of destructive tools and budgets; an append-only
transcript is the only state, so runs resume after a crash and move between providers.
"""

# first, for its side effect: a source checkout maps agentcore.contracts and .adapters
from . import _layout  # noqa: F401  # pyright: ignore[reportUnusedImport]
from ._integrity import check_transcript
from ._log import configure_logging
from ._observe import configure_telemetry
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
