"""Real MCP servers for the tests, started by the tests.

The PyPI servers (``mcp-server-time``, ``mcp-server-fetch``) come with the ``dev`` extra;
the npm one (``@modelcontextprotocol/server-everything``) from ``tests/mcp_sources/node``
(``npm ci --prefix tests/mcp_sources/node``, run by ``.ci/run``). A server that is not installed
skips its tests with the reason; under ``CI=true`` it fails them instead.
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

from .mcp_helpers import EVERYTHING, free_port, unavailable, wait_for_port

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[mcp]'")


@pytest.fixture
def server_log(tmp_path: Path) -> Iterator[TextIO]:
    """Where the servers' stderr goes (kept out of the test output)."""
    with (tmp_path / "servers.log").open("w") as log:
        yield log


@pytest.fixture
def everything_js() -> str:
    node = shutil.which("node")
    if node is None:
        unavailable("node is not installed")
    if not EVERYTHING.exists():
        unavailable(
            "@modelcontextprotocol/server-everything is not installed: "
            "npm ci --prefix tests/mcp_sources/node"
        )
    return str(EVERYTHING)


@pytest.fixture
def everything_http(everything_js: str, tmp_path: Path) -> Iterator[str]:
    """server-everything over Streamable HTTP; its URL. It listens on every interface
    (FACTS.md), so the test only ever connects to 127.0.0.1."""
    port = free_port()
    env = {**os.environ, "PORT": str(port), "HOST": "127.0.0.1"}
    with (tmp_path / "everything-http.log").open("w") as log:
        proc = subprocess.Popen(
            ["node", everything_js, "streamableHttp"], env=env, stdout=log, stderr=log
        )
        try:
            wait_for_port(port, proc)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            proc.wait(10)


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body><h1>Loopback page</h1><p>The answer is 42.</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # the base's name
        pass


@pytest.fixture
def loopback_site() -> Iterator[str]:
    """A page served on 127.0.0.1 by the test itself: the only URL fetch is given."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/page"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def variant(tmp_path: Path) -> Callable[[str], dict[str, str]]:
    """Set the pinned server's variant for its next start; returns the env to start it."""
    path = tmp_path / "variant"

    def set_variant(value: str) -> dict[str, str]:
        path.write_text(value)
        return {"PINNED_VARIANT_FILE": str(path)}

    return set_variant
