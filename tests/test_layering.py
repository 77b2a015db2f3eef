"""Layering and import-cost rules (STYLE.md section 2), checked on the source."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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


# The services (the CLI, the console, the integrations) read the core through its public
# names only: a fact they need is made public, on purpose, in the package that owns it.
SERVICES = ("cli", "console", "integrations")


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
