"""Importing AgentDojo's suites, tasks and attacks without its model clients.

``agentdojo.agent_pipeline/__init__`` imports every provider SDK AgentDojo can drive
(anthropic, cohere, google-genai, openai). The benchmark runs no model of AgentDojo's, so
when those SDKs are absent the package is entered as a bare package (its submodules load,
its ``__init__`` does not) and the one constant the tool executor takes from the Gemini
client is supplied here. With the SDKs installed, AgentDojo loads as it is.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

AGENTDOJO_VERSION = "0.1.35"
"""The ``agentdojo`` release the benchmark is pinned to (it ships the suites v1.2.2)."""
SUITES_VERSION = "v1.2.2"
SUITES = ("workspace", "travel", "banking", "slack")


def available() -> bool:
    """Whether the ``agentdojo`` package is installed."""
    return importlib.util.find_spec("agentdojo") is not None


def prepare() -> None:
    """Make ``agentdojo``'s suites importable (idempotent)."""
    if "agentdojo.agent_pipeline" in sys.modules:
        return
    sdks = ("anthropic", "cohere", "google.genai")
    try:
        missing = any(importlib.util.find_spec(name) is None for name in sdks)
    except ModuleNotFoundError:  # "google" itself is absent
        missing = True
    if not missing:
        return
    import agentdojo

    root = Path(agentdojo.__file__).parent
    for name in ("agentdojo.agent_pipeline", "agentdojo.agent_pipeline.llms"):
        package = types.ModuleType(name)
        package.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
        sys.modules[name] = package
    google = types.ModuleType("agentdojo.agent_pipeline.llms.google_llm")
    google.EMPTY_FUNCTION_NAME = "<empty-function-name>"  # type: ignore[attr-defined]
    sys.modules[google.__name__] = google
