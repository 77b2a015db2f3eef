"""Helpers of the MCP tests, shared by their modules. The folder is ``mcp_sources``, not
``mcp``: as a package named ``mcp`` it would shadow the SDK."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
PINNED = HERE / "servers" / "pinned.py"
EVERYTHING = (
    HERE
    / "node"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-everything"
    / "dist"
    / "index.js"
)


def unavailable(reason: str) -> None:
    """Skip locally; fail under CI=true, where every server must be installed."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true, but an MCP test server is missing: {reason}")
    pytest.skip(reason)


def executable(name: str) -> str:
    """A console script installed next to this Python, or on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        unavailable(f"{name} is not installed (pip install -e '.[dev]')")
    assert found is not None
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, proc: subprocess.Popen[Any], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")
