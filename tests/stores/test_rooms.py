"""The stores package's own rules, read from its source: its modules import one another
without a circle (every import counted: module level, in functions, under TYPE_CHECKING),
and URL schemes are switched on in the registry only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import agentcore

PACKAGE = Path(agentcore.__file__).parent
STORES = PACKAGE / "stores"


def store_imports(path: Path) -> set[str]:
    """The top-level store modules (``_chain``, ``sqlite``...) that ``path`` imports."""
    inside = path.parent != STORES  # sqlite/, postgres/, testing/: one level further down
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == (2 if inside else 1):
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif node.module and node.module.startswith("agentcore.stores."):
            found.add(node.module.split(".")[2])
    return found


def module_graph() -> dict[str, set[str]]:
    """Each top-level store module (a package counts as one) and what it imports."""
    graph: dict[str, set[str]] = {}
    for path in STORES.rglob("*.py"):
        rel = path.relative_to(STORES)
        name = rel.parts[0].removesuffix(".py")
        if name == "__init__":
            continue
        graph.setdefault(name, set()).update(store_imports(path) - {name})
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, each once, starting at its smallest module."""
    found: list[list[str]] = []

    def walk(start: str, node: str, path: list[str]) -> None:
        for dep in sorted(graph.get(node, ())):
            if dep == start:
                found.append([*path, start])
            elif dep > start and dep not in path:
                walk(start, dep, [*path, dep])

    for start in sorted(graph):
        walk(start, start, [start])
    return found


def test_the_store_modules_import_one_another_without_a_circle() -> None:
    graph = module_graph()
    assert {"_protocol", "_base", "_chain", "_batch", "sqlite", "postgres"} <= set(graph)
    assert graph["_chain"] == {"_batch", "_codec"}  # the reader of this test sees the edges
    assert cycles(graph) == []


def test_a_circle_is_found() -> None:
    """The check above would pass on a graph it misread: it finds a planted circle."""
    graph = module_graph()
    graph["_lease"] = {"_chain"}
    assert cycles(graph) == [["_batch", "_lease", "_chain", "_batch"]]


SCHEME_SWITCH = re.compile(
    r"""(startswith|removeprefix|==|!=)\(?\s*\(?["'](sqlite|memory|postgres(ql)?):"""
)


def test_only_the_registry_switches_on_url_schemes() -> None:
    """Outside ``stores/_registry.py`` and ``stores/_layout.py`` (the built-in schemes'
    factories and layouts), no module compares a URL with a scheme: a store of another
    package would be opened everywhere except there."""
    allowed = {STORES / "_registry.py", STORES / "_layout.py"}
    offenders = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in allowed
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if SCHEME_SWITCH.search(line)
    ]
    assert offenders == []
    assert SCHEME_SWITCH.search('if url.startswith("sqlite:///"):')
    assert SCHEME_SWITCH.search('if url != "memory://" and x:')
    assert SCHEME_SWITCH.search('url.startswith(("postgresql://", "postgres://"))')
