"""The README's two commands, run as printed in a fresh venv on a copy of the checkout,
leave one working install: ``import agentcore`` works from the repository root (where the
source tree comes first on ``sys.path``) and from anywhere else, and a built wheel holds
``agentcore.contracts`` and ``agentcore.adapters``. The first command installs the core
only: the demo runs without the model libraries, and a provider model names the extra
that brings them (``providers``, which ``dev`` and ``local`` include).

pip's cache is reused (``$HOME``), so on a warm cache the whole test takes about a minute.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY")
# the providers extra's packages: not installed by the README's first command
_MODEL_LIBRARIES = ("litellm", "instructor", "openai", "jiter")


def readme_commands() -> tuple[str, str]:
    """The README's install-and-demo command and its test command (its first two sh blocks)."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.DOTALL)
    install, test = (b.strip() for b in blocks[:2])
    assert install.startswith("python3 -m venv .venv") and install.endswith("agentcore demo")
    assert test.endswith("&& pytest")
    return install, test


def copy_checkout(to: Path) -> Path:
    """The checkout's files (tracked and new, not ignored) copied to ``to``."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)
    return to


def sh(command: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    res = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert res.returncode == 0, f"{command}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout


@pytest.mark.slow
@pytest.mark.subprocess
def test_readme_commands_leave_one_working_install(tmp_path: Path) -> None:
    repo = copy_checkout(tmp_path / "repo")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_KEYS}
    env.pop("AGENTCORE_STORE", None)  # the demo uses its default store in the checkout
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(sys.prefix)
    )
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    install, test = readme_commands()

    started = time.perf_counter()
    out = sh(install, repo, env)
    install_s = time.perf_counter() - started
    assert "awaiting_confirmation" in out  # the demo ran, offline (no key in the environment)
    python = str(repo / ".venv" / "bin" / "python")
    installed = sh(f"{python} -m pip list --format=freeze", repo, env).lower()
    assert not [n for n in _MODEL_LIBRARIES if f"\n{n}==" in f"\n{installed}"], installed
    real = subprocess.run(
        [str(repo / ".venv" / "bin" / "agentcore"), "demo", "--model", "openai/gpt-4o"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (real.returncode, real.stderr.strip()) == (
        2,
        "error: Model 'openai/gpt-4o' needs litellm, which is not installed: "
        "pip install 'agentcore[providers]'",
    )
    # the test command as printed, on one small test file instead of the whole suite
    started = time.perf_counter()
    sh(f"{test} -q -p no:cacheprovider tests/test_public_api.py", repo, env)
    test_s = time.perf_counter() - started
    print(f"README install+demo: {install_s:.1f} s; test command's install: {test_s:.1f} s")

    probe = "import agentcore.contracts, agentcore.adapters.openai as o; print(o.__file__)"
    at_root = sh(f"{python} -c '{probe}'", repo, env).strip()
    assert Path(at_root) == repo / "adapters" / "openai.py"  # the checkout's own file, once
    elsewhere = sh(f"{python} -c '{probe}'", outside, env).strip()
    assert Path(elsewhere).resolve() == repo / "adapters" / "openai.py"  # the link tree's link
    sh(f"{python} -m pip check", repo, env)

    sh(f"{python} -m pip wheel -q --no-deps -w dist .", repo, env)
    (wheel,) = (repo / "dist").glob("agentcore-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "agentcore/__init__.py",
        "agentcore/contracts/__init__.py",
        "agentcore/contracts/documents/v1.json",
        "agentcore/schemas/events-v1.json",
        "agentcore/adapters/openai.py",
        "agentcore/py.typed",
    } <= names
    # the model libraries only through the providers extra, which dev and local include
    metadata = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py')[0]}.dist-info/METADATA")
    requires = [
        line.removeprefix("Requires-Dist: ")
        for line in metadata.decode().splitlines()
        if line.startswith("Requires-Dist: ")
    ]
    for library in _MODEL_LIBRARIES:
        (entry,) = (r for r in requires if re.match(rf"{library}\b", r))
        assert entry.endswith('extra == "providers"'), entry
    for extra in ("dev", "local"):
        assert f'agentcore[providers]; extra == "{extra}"' in requires, requires
