"""The core installs and runs without the model libraries; a provider model names the extra.

Each test runs Python in a subprocess that sees this environment's packages except the ones
hidden: ``site-packages`` is replaced (``python -S`` and ``site.addsitedir``) by a directory
of links to every entry but the hidden packages and their ``.dist-info``, so to that
interpreter they are not installed (``find_spec`` finds nothing, ``import`` fails).
``tests/test_install.py`` checks the same in a fresh venv made by the README's command.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

# the providers extra's packages (pyproject.toml)
PROVIDER_LIBRARIES = ("litellm", "instructor", "openai", "jiter")
INSTALL = "pip install 'agentcore[providers]'"

Run = Callable[..., subprocess.CompletedProcess[str]]


def _hidden(entry: str, hidden: tuple[str, ...]) -> bool:
    top = entry.split("-", 1)[0].split(".", 1)[0].lower()
    return any(top == name or top.startswith(f"{name}_") for name in hidden)


def _site_without(hidden: tuple[str, ...], at: Path) -> Path:
    """A site directory holding links to this environment's packages except ``hidden``."""
    at.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not _hidden(entry.name, hidden):
            (at / entry.name).symlink_to(entry)
    return at


def _runner(site_dir: Path, cwd: Path) -> Run:
    prelude = f"import site, sys; site.addsitedir({str(site_dir)!r})\n"

    def run(code: str, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.pop("AGENTCORE_MODEL", None)
        return subprocess.run(
            [sys.executable, "-S", "-c", prelude + textwrap.dedent(code), *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    return run


@pytest.fixture(scope="module")
def without_providers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _site_without(PROVIDER_LIBRARIES, tmp_path_factory.mktemp("site") / "site-packages")


@pytest.fixture
def light(without_providers: Path, tmp_path: Path) -> Run:
    """Run Python where the providers extra is not installed."""
    return _runner(without_providers, tmp_path)


CLI = "from agentcore.cli import main; sys.argv[0] = 'agentcore'; main()"


def test_the_model_libraries_are_really_hidden(light: Run) -> None:
    res = light(
        """
        import importlib.util, importlib.metadata as md
        for name in ("litellm", "instructor", "openai", "jiter"):
            assert importlib.util.find_spec(name) is None, name
            try:
                md.distribution(name)
            except md.PackageNotFoundError:
                pass
            else:
                raise AssertionError(name)
        import pydantic, typer, agentcore.contracts, agentcore.adapters  # the rest is there
        print("hidden")
        """
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "hidden"


def test_the_readme_demo_runs_without_the_model_libraries(light: Run) -> None:
    res = light(CLI, "demo")
    assert res.returncode == 0, res.stderr
    assert "model: scripted" in res.stdout
    assert "awaiting_confirmation" in res.stdout
    # the printed approve command continues the run to its end, still without them
    (approve,) = (line for line in res.stdout.splitlines() if line.startswith("approve: "))
    argv = approve.removeprefix("approve: agentcore ").split()
    confirmed = light(CLI, *argv)
    assert confirmed.returncode == 0, confirmed.stdout + confirmed.stderr
    assert "completed" in confirmed.stdout


def test_a_provider_model_without_the_extra_names_it_in_one_line(light: Run) -> None:
    res = light(
        """
        from agentcore import Agent
        from agentcore.errors import ConfigurationError
        from agentcore.adapters import ScriptedModel
        for route in ("openai/gpt-4o", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash",
                      "deepseek/deepseek-chat", "ollama_chat/qwen2.5"):
            try:
                Agent(tools=[], model=route)
            except ConfigurationError as exc:
                print(exc)
            else:
                print("built", route)
        try:  # a route whose fallback needs the extra fails when it is built, not later
            Agent(tools=[], model=[ScriptedModel([]), "openai/gpt-4o-mini"])
        except ConfigurationError as exc:
            print(exc)
        """
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        f"Model {route!r} needs litellm, which is not installed: {INSTALL}"
        for route in (
            "openai/gpt-4o",
            "anthropic/claude-sonnet-4-5",
            "gemini/gemini-2.5-flash",
            "deepseek/deepseek-chat",
            "ollama_chat/qwen2.5",
            "openai/gpt-4o-mini",
        )
    ]


def test_the_cli_names_the_extra_and_records_nothing(light: Run, default_store_path: Path) -> None:
    res = light(CLI, "demo", "--model", "openai/gpt-4o")
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip() == (
        f"error: Model 'openai/gpt-4o' needs litellm, which is not installed: {INSTALL}"
    )
    assert "Traceback" not in res.stderr
    listed = light(CLI, "runs")
    assert listed.returncode == 0, listed.stderr
    assert [row for row in listed.stdout.splitlines()[1:] if row.strip()] == []
    assert "no runs yet" in listed.stderr


def test_extraction_without_the_extra_names_it(light: Run) -> None:
    res = light(
        """
        from pydantic import BaseModel
        from agentcore import Agent
        from agentcore.errors import ConfigurationError
        from agentcore.adapters import ScriptedModel

        class Order(BaseModel):
            order_id: str

        agent = Agent(tools=[], model=ScriptedModel([]))
        try:
            agent.extract_sync(Order, "order A-1", model="openai/gpt-4o")
        except ConfigurationError as exc:
            print(exc)
        """
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (
        f"Model 'openai/gpt-4o' needs litellm, which is not installed: {INSTALL}"
    )


def test_extraction_with_litellm_but_not_instructor_names_instructor(tmp_path: Path) -> None:
    run = _runner(_site_without(("instructor",), tmp_path / "site-packages"), tmp_path)
    res = run(
        """
        import asyncio
        from pydantic import BaseModel
        from agentcore.errors import ConfigurationError
        from agentcore.adapters import extract
        from agentcore.adapters.openai import OpenAIAdapter

        class Order(BaseModel):
            order_id: str

        # a loopback endpoint that nothing is asked of: the error comes before any request
        adapter = OpenAIAdapter("gpt-4o", api_base="http://127.0.0.1:9/v1", api_key="sk-test")
        try:
            asyncio.run(extract(adapter, Order, "order A-1"))
        except ConfigurationError as exc:
            print(exc)
        """
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (
        f"Model 'openai/gpt-4o' needs instructor, which is not installed: {INSTALL}"
    )


def test_the_extra_installed_while_the_process_runs_is_seen(tmp_path: Path) -> None:
    site_dir = _site_without(PROVIDER_LIBRARIES, tmp_path / "site-packages")
    purelib = Path(sysconfig.get_paths()["purelib"])
    run = _runner(site_dir, tmp_path)
    res = run(
        """
        from pathlib import Path
        from agentcore import Agent
        from agentcore.errors import ConfigurationError
        try:
            Agent(tools=[], model="openai/gpt-4o")
        except ConfigurationError as exc:
            print(exc)
        for entry in Path(sys.argv[2]).iterdir():  # the extra arrives, as pip would put it
            if entry.name.split("-")[0] in ("litellm", "instructor", "openai", "jiter"):
                (Path(sys.argv[1]) / entry.name).symlink_to(entry)
        print(Agent(tools=[], model="openai/gpt-4o").route[0].name)
        """,
        str(site_dir),
        str(purelib),
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        f"Model 'openai/gpt-4o' needs litellm, which is not installed: {INSTALL}",
        "openai/gpt-4o",
    ]
