"""Layering and import-cost rules (STYLE.md section 2), checked on the source."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("litellm", "instructor", "openai", "anthropic", "google")
# Nothing that only a feature needs loads at start-up (issue 15): provider SDKs, the
# Postgres and Celery backends, MCP, the console's web stack, OpenTelemetry, tokenizers.
STARTUP_FORBIDDEN = (
    *HEAVY,
    "psycopg",
    "psycopg_pool",
    "celery",
    "kombu",
    "mcp",
    "starlette",
    "fastapi",
    "uvicorn",
    "sse_starlette",
    "httpx",
    "opentelemetry",
    "tiktoken",
    "jinja2",
)


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module, line, at_top_level) for every import in a file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {id(n) for n in tree.body}
    found: list[tuple[str, int, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = ("." * node.level) + (node.module or "")
            found.append((mod, node.lineno, id(node) in top))
    return found


def _py_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


# The one exception: tools defined as data are validated by jsonschema (the reference
# implementation of JSON Schema), in the one module that builds their argument models and
# loads on first use.
JSON_SCHEMA_MODULE = ("contracts/_jsonschema.py", {"jsonschema", "referencing"})


def test_contracts_import_only_pydantic_and_stdlib() -> None:
    for path in _py_files("contracts"):
        allowed_third_party = {"pydantic", "pydantic_core"}
        if path.relative_to(ROOT).as_posix() == JSON_SCHEMA_MODULE[0]:
            allowed_third_party |= JSON_SCHEMA_MODULE[1]
        for mod, line, _ in _imports(path):
            root = mod.split(".")[0]
            if mod.startswith(".") or root == "__future__":
                continue
            assert root in allowed_third_party or root in sys.stdlib_module_names, (
                f"{path.relative_to(ROOT)}:{line} imports {mod}"
            )


def test_core_never_imports_provider_libraries() -> None:
    for path in _py_files("agentcore"):
        for mod, line, _ in _imports(path):
            assert mod.split(".")[0] not in HEAVY, f"{path.relative_to(ROOT)}:{line} imports {mod}"


def test_adapters_import_provider_libraries_only_lazily() -> None:
    for path in _py_files("adapters"):
        for mod, line, top in _imports(path):
            if mod.split(".")[0] in HEAVY:
                assert not top, f"{path.relative_to(ROOT)}:{line} imports {mod} at module level"


def test_adapters_do_not_import_the_core() -> None:
    """Adapters know nothing of governance: only contracts and their own modules."""
    for path in _py_files("adapters"):
        for mod, line, _ in _imports(path):
            if mod.startswith("agentcore"):
                allowed = ("agentcore.contracts", "agentcore.adapters")
                assert mod.startswith(allowed), f"{path.relative_to(ROOT)}:{line} imports {mod}"


def test_import_and_cli_startup_load_no_heavy_library(tmp_path: Path) -> None:
    code = (
        "import sys, agentcore, agentcore.cli, agentcore.adapters, agentcore.stores;"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "[]"


def _loaded_after(code: str, tmp_path: Path) -> set[str]:
    """The top-level packages a fresh interpreter has loaded after ``code`` (to stderr)."""
    tops = "sorted({m.split('.')[0] for m in sys.modules})"
    probe = f"{code}\nimport sys; print({tops}, file=sys.stderr)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    return set(ast.literal_eval(out.stderr.strip().splitlines()[-1]))


def test_import_agentcore_loads_no_feature_library(tmp_path: Path) -> None:
    """``import agentcore`` stays light: not even the CLI's own libraries."""
    loaded = _loaded_after("import agentcore", tmp_path)
    assert loaded.isdisjoint({*STARTUP_FORBIDDEN, "typer", "rich"}), sorted(
        loaded & {*STARTUP_FORBIDDEN, "typer", "rich"}
    )


def test_import_agentcore_leaves_the_provider_machinery_for_first_use(tmp_path: Path) -> None:
    """The dialect compilers, the litellm adapter base, extraction, and the retry and breaker
    policies (tenacity) load when a provider model is first used, not with ``import
    agentcore`` nor with the ``Agent`` class (a scripted run never needs them); the JSON
    Schema tool models when a tool is given as data (an agent's contract lint, MCP)."""
    code = (
        "import sys, agentcore\n"
        "from agentcore import Agent\n"
        "lazy = ['agentcore.contracts._dialects', 'agentcore.contracts._dialect_compiler',\n"
        "        'agentcore.contracts._dialect_limits', 'agentcore.contracts._schema_nodes',\n"
        "        'agentcore.adapters._litellm', 'agentcore.adapters._litellm_lib',\n"
        "        'agentcore.adapters._litellm_stream',\n"
        "        'agentcore.adapters._extract', 'agentcore.adapters._retry',\n"
        "        'agentcore.adapters._breaker', 'agentcore.adapters.scripted', 'tenacity',\n"
        "        'agentcore.contracts._jsonschema']\n"
        "print([m for m in lazy if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "[]"


def _modules_after(code: str, tmp_path: Path) -> set[str]:
    """Every module a fresh interpreter has loaded after ``code`` (to stderr)."""
    probe = f"{code}\nimport sys; print(sorted(sys.modules), file=sys.stderr)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    return set(ast.literal_eval(out.stderr.strip().splitlines()[-1]))


# Left for first use by `import agentcore` and `agentcore --help` (issue 15: start-up): the
# package's names load from their modules when first asked for, so importing it loads
# none of these (pydantic, the contracts' models, the stores, the event loop, logging).
LAZY_AT_STARTUP = (
    "pydantic",
    "pydantic_core",
    "structlog",
    "tenacity",
    "typer",
    "rich",
    "asyncio",
    "sqlite3",
    "logging",
    "inspect",
    "dataclasses",
    "pathlib",
    "hashlib",
    "typing",
)


STARTUP_OURS = {"agentcore", "agentcore._layout", "agentcore._version"}
"""Ours that ``import agentcore`` loads: the package, its source-checkout finder, the version."""


def test_import_agentcore_loads_only_the_package(tmp_path: Path) -> None:
    """``import agentcore`` runs the package, its source-checkout finder and its version,
    nothing else of ours and none of the libraries its names need (``from agentcore import
    Agent`` loads those, on first use)."""
    loaded = _modules_after("import agentcore", tmp_path)
    ours = {m for m in loaded if m.split(".")[0] == "agentcore"}
    assert ours == STARTUP_OURS, sorted(ours)
    assert loaded.isdisjoint(LAZY_AT_STARTUP), sorted(loaded & set(LAZY_AT_STARTUP))
    names = _modules_after("import agentcore\nfrom agentcore import Agent", tmp_path)
    assert {"agentcore.agent", "pydantic"} <= names  # the name still brings its module


HELP_RUN = (
    "import sys; sys.argv = ['agentcore', '--help']\n"
    "from agentcore.cli import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass"
)
"""``agentcore --help`` as the console script runs it."""


def test_cli_help_loads_only_the_cli(tmp_path: Path) -> None:
    """``agentcore --help`` prints its help from the CLI package alone."""
    loaded = _modules_after(HELP_RUN, tmp_path)
    ours = {m for m in loaded if m.split(".")[0] == "agentcore"}
    assert ours == STARTUP_OURS | {"agentcore.cli"}, sorted(ours)
    assert loaded.isdisjoint(LAZY_AT_STARTUP), sorted(loaded & set(LAZY_AT_STARTUP))


def test_cli_version_loads_only_the_cli(tmp_path: Path) -> None:
    """``agentcore --version`` too: a newcomer's first command answers at once."""
    loaded = _modules_after(HELP_RUN.replace("--help", "--version"), tmp_path)
    ours = {m for m in loaded if m.split(".")[0] == "agentcore"}
    assert ours == STARTUP_OURS | {"agentcore.cli"}, sorted(ours)
    assert loaded.isdisjoint(LAZY_AT_STARTUP), sorted(loaded & set(LAZY_AT_STARTUP))


def test_cli_help_loads_no_feature_library(tmp_path: Path) -> None:
    """``agentcore --help`` (as the console script runs it) loads none of them either."""
    loaded = _loaded_after(HELP_RUN, tmp_path)
    assert loaded.isdisjoint(STARTUP_FORBIDDEN), sorted(loaded & set(STARTUP_FORBIDDEN))


def test_every_package_directory_is_packaged() -> None:
    """A subpackage missing from pyproject's package list is missing from every wheel."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    mapping = {
        "agentcore": "agentcore",
        "contracts": "agentcore.contracts",
        "adapters": "agentcore.adapters",
    }
    found = set()
    for top, name in mapping.items():
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top).parts
            found.add(".".join((name, *rel)))
    assert found == listed


# The services (the CLI, the console, the integrations, the MCP bridge) read the core through
# its public names only: a fact they need is made public, on purpose, in the package that
# owns it.
SERVICES = ("cli", "console", "integrations", "mcp")


def _private_imports(source: str, module: str, service: str) -> list[str]:
    """The imports in ``source`` (the text of module ``module``, in ``agentcore.<service>``)
    that reach a private module or name of another package."""
    own = f"agentcore.{service}"
    package = module.split(".")[:-1]  # a package's __init__ is in the package itself
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, *([node.module] if node.module else [])])
            targets = [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] != "agentcore" or target == own or target.startswith(own + "."):
                continue
            parts = target.split(".")[1:]
            if any(p.startswith("_") and not p.endswith("__") for p in parts):
                found.append(f"{module}:{node.lineno} imports {target}")
    return found


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_services_import_only_public_names_of_other_packages() -> None:
    problems = [
        problem
        for service in SERVICES
        for path in _py_files(f"agentcore/{service}")
        for problem in _private_imports(path.read_text(), _module_name(path), service)
    ]
    assert not problems, "\n".join(problems)


def test_a_planted_private_import_is_found() -> None:
    planted = {
        "from agentcore._run import PAUSE": "agentcore._run.PAUSE",
        "from agentcore._state import RunState": "agentcore._state.RunState",
        "from .._state import RunState": "agentcore._state.RunState",
        "from .. import _subagent": "agentcore._subagent",
        "import agentcore._stats": "agentcore._stats",
        "from agentcore.adapters._llama_server import serve_llama": (
            "agentcore.adapters._llama_server.serve_llama"
        ),
    }
    for line, target in planted.items():
        found = _private_imports(line, "agentcore.console._app", "console")
        assert found == [f"agentcore.console._app:1 imports {target}"], line
    allowed = (
        "from agentcore import RunState, __version__",
        "from ._common import app",
        "from agentcore.console._auth import Csrf",
        "from . import _timeline",
        "from agentcore.stores import open_store",
    )
    for line in allowed:
        assert _private_imports(line, "agentcore.console._app", "console") == [], line
    assert _private_imports("from . import _runs", "agentcore.cli.__init__", "cli") == []
    assert _private_imports("from .._run import PAUSE", "agentcore.cli.__init__", "cli") == [
        "agentcore.cli.__init__:1 imports agentcore._run.PAUSE"
    ]


# -- the import graph: no circles, and the layers -------------------------------------------
# Every import counts: at module level, inside a function and under TYPE_CHECKING (a circle
# a type checker or a lazy import hides is still a circle to the next reader). ``from p
# import m`` is an edge to the module ``p.m`` when there is one, else to ``p``: importing a
# package is an edge to its ``__init__``. The packages a submodule's import runs first are
# not edges (every module would then import the package root).

FOLDERS = {
    "agentcore": "agentcore",
    "contracts": "agentcore.contracts",
    "adapters": "agentcore.adapters",
}
"""Where each package's source is, by its name (pyproject's package-dir)."""

SERVICE_PACKAGES = tuple(f"agentcore.{s}.*" for s in SERVICES)
"""The services: built on the core, below nothing of ours."""

FOLD = (
    "agentcore.events",
    "agentcore.rules",
    "agentcore._status",
    "agentcore._pending",
    "agentcore._provenance",
    "agentcore._state",
    "agentcore.policy",
    "agentcore.approvals",
    "agentcore.tools",
    "agentcore._tool_context",
    "agentcore.guards",
    "agentcore.secrets",
    "agentcore.errors",
    "agentcore.limits",
    "agentcore._threads",
    "agentcore._faults",
    "agentcore._version",
    "agentcore._observability._log",
)
"""The ground floor: the events and their fold, the policy and the tools a step is judged
by, and the leaves they use (logging through ``_observability._log``, not the observability
package, which reads the fold)."""

RUN = (
    "agentcore._run.*",
    "agentcore._dispatch",
    "agentcore._manifest",
    "agentcore._render",
    "agentcore._snapshot",
    "agentcore._ownership",
    "agentcore._integrity",
    "agentcore._extract",
    "agentcore.streaming",
    "agentcore._observability.*",
)
"""The run's working set: the loop, the dispatcher, the renderer, snapshots, leases."""

FACADE = (
    "agentcore.agent",
    "agentcore._configuration",
    "agentcore._operations",
    "agentcore._subagent",
    "agentcore._twins",
    "agentcore.testing",
    "agentcore._crashkit",
    "agentcore.demo",
)
"""What users hold (the Agent and its operations) and what is built on it."""


@dataclass(frozen=True)
class Rule:
    """What the modules ``modules`` may import of ours: only ``only`` (when given), and
    never ``never``. A name ``p.*`` stands for the module ``p`` and everything under it;
    any other name for that module alone. ``exempt``: modules the rule does not govern."""

    why: str
    modules: tuple[str, ...]
    only: tuple[str, ...] | None = None
    never: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()


# contracts/ and adapters/ are checked above on the import text (contracts import only
# themselves, pydantic and the standard library; adapters only themselves and contracts),
# and the services' reach into private modules by test_services_import_only_public_names.
RULES = (
    Rule(
        "The fold, the policy and the tools are below the run: they import each other, "
        "contracts and adapters only",
        modules=FOLD,
        only=(*FOLD, "agentcore.contracts.*", "agentcore.adapters.*"),
    ),
    Rule(
        "A store keeps events, not runs: it imports the events and their status, contracts "
        "and a few leaves, never the fold, the run or anything above",
        modules=("agentcore.stores.*",),
        only=(
            "agentcore.stores.*",
            "agentcore.contracts.*",
            "agentcore.events",
            "agentcore._status",
            "agentcore.limits",
            "agentcore._faults",
            "agentcore._observability._log",
        ),
    ),
    Rule(
        "The run does not reach up to the facade that drives it",
        modules=RUN,
        never=FACADE,
    ),
    Rule(
        "The services stand on the core: no module below them imports one",
        modules=("agentcore.*",),
        never=SERVICE_PACKAGES,
        exempt=SERVICE_PACKAGES,
    ),
    Rule(
        "The package root names every module (its public names load from them): only the "
        "services, which read those names, import it",
        modules=("agentcore.*",),
        never=("agentcore",),
        exempt=("agentcore", *SERVICE_PACKAGES),
    ),
)


def _covers(patterns: Sequence[str], module: str) -> bool:
    return any(
        module == p[:-2] or module.startswith(p[:-1]) if p.endswith(".*") else module == p
        for p in patterns
    )


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of ours under ``root``: name -> (file, is a package's ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = [package, *path.relative_to(root / folder).with_suffix("").parts]
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: line of the first such import}, for the modules of
    ours under ``root`` (see the rules above for what counts)."""
    modules = _modules(root)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_package) in modules.items():
        edges = graph.setdefault(name, {})
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")[: None if is_package else -1]
                    base = base[: len(base) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                targets = [
                    f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                    for a in node.names
                ]
            else:
                continue
            for target in targets:
                found = known(target)
                if found is not None and found != name:
                    edges.setdefault(found, node.lineno)
    return graph


def circles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """One circle in each group of modules that import each other (a strongly connected
    component of two or more), as the modules met going round it, shortest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(start: str) -> None:  # Tarjan's, with an explicit stack (no recursion limit)
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group: set[str] = set()
                    while node not in group:
                        group.add(stack.pop())
                    if len(group) > 1:
                        groups.append(group)
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in stack:
                low[node] = min(low[node], index[target])

    for module in sorted(graph):
        if module not in index:
            visit(module)
    found: list[list[str]] = []
    for group in groups:
        start = min(group)
        paths = {start: [start]}
        queue = [start]
        while queue:  # the shortest way back to start, inside the group
            node = queue.pop(0)
            for target in sorted(graph[node]):
                if target == start:
                    found.append([*paths[node], start])
                    queue = []
                    break
                if target in group and target not in paths:
                    paths[target] = [*paths[node], target]
                    queue.append(target)
    return sorted(found, key=len)


def broken_rules(graph: Mapping[str, Mapping[str, int]], rules: Sequence[Rule]) -> list[str]:
    """Each import that breaks a rule, as ``module:line imports target (the rule)``."""
    problems: list[str] = []
    for rule in rules:
        for module in sorted(graph):
            if not _covers(rule.modules, module) or _covers(rule.exempt, module):
                continue
            for target, line in sorted(graph[module].items()):
                allowed = rule.only is None or _covers(rule.only, target)
                if not allowed or _covers(rule.never, target):
                    problems.append(f"{module}:{line} imports {target} ({rule.why})")
    return problems


def test_no_module_imports_itself_in_a_circle() -> None:
    found = circles(import_graph(ROOT))
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_layers_hold() -> None:
    problems = broken_rules(import_graph(ROOT), RULES)
    assert not problems, "\n".join(problems)


def _plant(root: Path, files: Mapping[str, str]) -> None:
    """Write modules under ``root``: module name (``p/`` for a package) -> source."""
    folders = {package: folder for folder, package in FOLDERS.items()}
    for name, text in files.items():
        module = name.rstrip("/")
        top = max((p for p in folders if _covers([f"{p}.*"], module)), key=len)
        parts = [folders[top], *module.removeprefix(top).split(".")[1:]]
        if name.endswith("/") or module == top:
            path = root.joinpath(*parts, "__init__.py")
        else:
            path = root.joinpath(*parts[:-1], f"{parts[-1]}.py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_finds_a_circle_through_any_kind_of_import(tmp_path: Path) -> None:
    """In a function, under TYPE_CHECKING, relative, through a package's ``__init__``."""
    _plant(
        tmp_path,
        {
            "agentcore/": "",
            "agentcore.a": "from agentcore.b import x\n",
            "agentcore.b": "def f():\n    from . import a\n",
            "agentcore.c": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from agentcore.pkg import Thing\n"
            ),
            "agentcore.pkg/": "from .inner import Thing\n",
            "agentcore.pkg.inner": "import agentcore.c\n",
            "agentcore.d": "from agentcore import a, c\n",  # into circles, not part of one
            "agentcore.contracts/": "",
            "agentcore.contracts._x": "from ._y import z\n",
            "agentcore.contracts._y": "from agentcore.contracts._x import w\n",
        },
    )
    assert circles(import_graph(tmp_path)) == [
        ["agentcore.a", "agentcore.b", "agentcore.a"],
        ["agentcore.contracts._x", "agentcore.contracts._y", "agentcore.contracts._x"],
        ["agentcore.c", "agentcore.pkg", "agentcore.pkg.inner", "agentcore.c"],
    ]


def _example(patterns: Sequence[str], avoid: Sequence[str] = ()) -> str:
    """A module the patterns cover (``p.*``: a module planted under ``p``) and ``avoid``
    does not."""
    for p in patterns:
        name = f"{p[:-2]}.planted" if p.endswith(".*") else p
        if not _covers(avoid, name):
            return name
    raise AssertionError(f"no module in {patterns} outside {avoid}")


@pytest.mark.parametrize("rule", RULES, ids=[r.why[:40] for r in RULES])
def test_the_checker_finds_each_rule_broken(tmp_path: Path, rule: Rule) -> None:
    """Each rule, broken in a planted tree by one import, is reported, and only that one."""
    module = _example(rule.modules, rule.exempt)
    if rule.never:
        target = _example(rule.never)
    else:
        assert rule.only is not None
        target = _example(["agentcore.agent", "agentcore._run._loop", "agentcore.cli.*"], rule.only)
    _plant(tmp_path, {"agentcore/": "", target: "thing = 1\n", module: "import json\n"})
    assert broken_rules(import_graph(tmp_path), [rule]) == []
    _plant(tmp_path, {module: f"import json\nfrom {target} import thing\n"})
    assert broken_rules(import_graph(tmp_path), [rule]) == [
        f"{module}:2 imports {target} ({rule.why})"
    ]
