"""litellm itself: its lazy import and configuration, and the quirks of its code that every
call works around (the pydantic warnings it emits, a reply nested too deep to convert).

litellm is imported on the first model call (:func:`litellm`): it costs seconds and by
default downloads a price list at import, so the loader sets
``LITELLM_LOCAL_MODEL_COST_MAP=True`` first (and ``LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS=True``:
otherwise its first Anthropic call fetches a beta-header table from GitHub). This is the
one module that imports litellm.

litellm, instructor and the openai SDK come with the ``providers`` extra; the core runs
without them. :func:`require_providers` checks, without importing anything, that litellm
is installed when a provider adapter is made, so a missing extra fails at
``Agent(model="openai/...")`` with the command that installs it, not at the first call.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import warnings
from collections.abc import Generator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from pydantic.warnings import PydanticDeprecatedSince211

from agentcore.contracts.errors import ConfigurationError

__all__ = [
    "INSTALL_PROVIDERS",
    "litellm",
    "litellm_warnings_ignored",
    "missing_providers",
    "require_providers",
    "too_deep",
]

INSTALL_PROVIDERS = "pip install 'agentcore[providers]'"
"""The command that installs the provider adapters' libraries (litellm, instructor, openai)."""

_module: ModuleType | None = None
_module_lock = threading.Lock()


def litellm() -> Any:  # Any: litellm's module namespace is untyped where we use it
    """The litellm module, imported and configured on first use."""
    global _module  # noqa: PLW0603  # one lazily imported module per process
    if _module is None:
        with _module_lock:
            if _module is None:
                # Never fetch the price list over the network at import, nor the
                # Anthropic beta-header table on the first Anthropic call (litellm's
                # anthropic_beta_headers_manager reads this variable at call time).
                os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
                os.environ["LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS"] = "True"
                import litellm as module  # noqa: TID251  # the one lazy import point

                module.suppress_debug_info = True  # no "Give Feedback / Get Help" prints
                if hasattr(module, "telemetry"):  # older releases phone home unless told not to
                    setattr(module, "telemetry", False)  # noqa: B010  # absent from its stubs
                _module = module
    return _module


_found: set[str] = set()  # only what was found: a library installed later is seen then


def _installed(name: str) -> bool:
    if name not in _found and importlib.util.find_spec(name) is not None:
        _found.add(name)
    return name in _found


def missing_providers(model: str, library: str) -> str:
    """The one-line message for a model that needs ``library`` of the providers extra."""
    return f"Model {model!r} needs {library}, which is not installed: {INSTALL_PROVIDERS}"


def require_providers(model: str) -> None:
    """Check that litellm is installed, without importing it (that waits for the first call).

    Raises:
        ConfigurationError: litellm is not installed; the message names the extra.
    """
    if not _installed("litellm"):
        raise ConfigurationError(missing_providers(model, "litellm"))


_LITELLM_STREAM_WARNINGS = r"Items? .* (is|are) using the `ReadOnly` qualifier"


@contextmanager
def litellm_warnings_ignored() -> Generator[None]:
    """Silence the warnings litellm's code makes pydantic emit while it serves a call.

    litellm's types include TypedDicts with ``ReadOnly`` items, whose pydantic schemas it
    builds on first use (its stream chunks, Gemini's cached-content types), and its chunk
    code reads ``model_fields`` on instances; pydantic warns about both (``UserWarning``
    and ``PydanticDeprecatedSince211``). They are litellm's, not the caller's, and where
    warnings are errors (``pytest -W error``) litellm turns them into a failed call (a
    ``MidStreamFallbackError`` for a stream). Only these two are ignored, only around
    litellm's calls. ``warnings.catch_warnings`` swaps the process-wide filter list, so two
    overlapping calls may restore each other's filters early; the worst case is that one
    of these warnings is shown.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LITELLM_STREAM_WARNINGS, category=UserWarning)
        warnings.filterwarnings("ignore", category=PydanticDeprecatedSince211)
        yield


def too_deep(exc: BaseException) -> bool:
    """Whether litellm failed because a reply nested past Python's recursion limit."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(seen) < 16 and current not in seen:
        seen.append(current)
        text = str(current)[:20_000]
        if isinstance(current, RecursionError) or (
            "Invalid response object" in text and "RecursionError" in text
        ):
            return True
        current = current.__cause__ or current.__context__
    return False
