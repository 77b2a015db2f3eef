"""The public API: __all__ matches what the packages export, and the documented names exist."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGES = [
    "agentcore",
    "agentcore.contracts",
    "agentcore.adapters",
    "agentcore.stores",
    "agentcore.errors",
    "agentcore.events",
    "agentcore.evals",
    "agentcore.testing",
]


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then functions, each alphabetical."""
    if name.isupper():
        return 0, name
    return (1 if name[0].isupper() else 2), name


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key), f"{name}.__all__ is not sorted"
    for item in exported:
        assert hasattr(module, item), f"{name}.__all__ lists {item!r} which does not exist"
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and (getattr(v, "__module__", "") + ".").startswith(name + ".")
        and not isinstance(v, type(importlib))
    }
    assert public <= set(exported) | {"annotations"}, (
        f"{name} exports unlisted {public - set(exported)}"
    )


def test_the_lazy_export_table_is_what_all_and_the_type_checkers_see() -> None:
    """``agentcore._EXPORTS`` is the one table; ``__all__`` and the TYPE_CHECKING imports
    (what type checkers read) name the same names from the same modules."""
    import agentcore

    home: dict[str, str] = agentcore._HOME  # pyright: ignore[reportPrivateUsage]  # the table under test
    assert sorted(home, key=_isort_key) == agentcore.__all__
    tree = ast.parse(Path(agentcore.__file__).read_text())
    guard = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    imported = {
        alias.name: node.module
        for node in guard.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported == home


def test_issue_api_names() -> None:
    from agentcore import Agent, Budget, Policy, RunResult, RunStatus, tool
    from agentcore.adapters import ScriptedModel
    from agentcore.stores import MemoryStore, SQLiteStore, open_store

    assert {s.value for s in RunStatus} >= {
        "completed",
        "awaiting_confirmation",
        "needs_attention",
        "budget_exhausted",
        "failed",
        "cancelled",
    }
    for method in (
        "run",
        "confirm",
        "resume",
        "transcript",
        "run_sync",
        "confirm_sync",
        "resume_sync",
    ):
        assert callable(getattr(Agent, method))
    assert {"run_id", "status", "answer", "pending", "usage"} <= set(RunResult.__dataclass_fields__)
    assert callable(tool) and callable(open_store)
    assert Budget().max_steps and Policy().plan_before_writes
    assert MemoryStore and SQLiteStore and ScriptedModel


def test_every_error_derives_from_the_root() -> None:
    from agentcore import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.AgentcoreError)
