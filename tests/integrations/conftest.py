"""Celery test setup: real RabbitMQ and PostgreSQL, worker processes started per test.

The broker URL comes from ``AGENTCORE_TEST_AMQP_URL`` (CI sets it to
``amqp://guest:guest@127.0.0.1:5672//``), the database from ``AGENTCORE_TEST_POSTGRES_DSN``.
The rule of ``tests/stores/conftest.py``: a missing service skips with the reason locally and
fails under ``CI=true``. Each test gets its own Celery queue and PostgreSQL schema, both
removed afterwards, and its worker processes are stopped at the end (SIGKILL if a warm
shutdown takes too long).
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# The store tests' PostgreSQL fixtures and their skip-or-fail rule, shared.
from stores.conftest import pg_schema, pg_store, postgres_dsn, unavailable

__all__ = ["pg_schema", "pg_store", "postgres_dsn"]

HERE = Path(__file__).resolve().parent
AMQP_VARIABLE = "AGENTCORE_TEST_AMQP_URL"
LOCAL_AMQP = "amqp://guest:guest@127.0.0.1:5672//"
"""The documented local RabbitMQ, used when ``AGENTCORE_TEST_AMQP_URL`` is unset."""


def _unavailable(reason: str) -> None:
    unavailable(reason, "the Celery integration tests")


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """The test broker's URL; skips (fails under CI=true) when there is none."""
    given = os.environ.get(AMQP_VARIABLE, "")
    url = given or LOCAL_AMQP
    where = AMQP_VARIABLE if given else f"{LOCAL_AMQP} ({AMQP_VARIABLE} is not set)"
    try:
        from kombu import Connection
    except ImportError as exc:
        _unavailable(f"celery is not installed ({exc}): pip install -e '.[dev]'")
        raise  # unreachable: skip and fail raise
    try:
        with Connection(url, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:  # kombu raises the transport's own errors
        _unavailable(f"RabbitMQ: cannot connect to {where}: {exc}")
    return url


@pytest.fixture
def queue_name(amqp_url: str) -> Iterator[str]:
    """A Celery queue of this test only; deleted afterwards."""
    from kombu import Connection

    name = f"agentcore_t_{secrets.token_hex(6)}"
    try:
        yield name
    finally:
        with Connection(amqp_url) as conn:
            conn.default_channel.queue_delete(name)


@dataclass
class Workers:
    """Celery worker processes of one test (``service.py``), all stopped at the end."""

    env: dict[str, str]
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, *, concurrency: int = 8, **env: str) -> subprocess.Popen[bytes]:
        """Start worker ``name`` and wait until it consumes (its log says ``ready``)."""
        log = self.logs / f"{name}.log"
        cmd = [
            sys.executable, "-m", "celery", "-A", "service", "worker",
            "--pool", "threads", "--concurrency", str(concurrency),
            "-Q", self.env["AGENTCORE_TEST_QUEUE"], "-n", f"{name}@%h",
            "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(
                cmd, cwd=HERE, env={**os.environ, **self.env, **env}, stdout=out, stderr=out
            )
        self.procs[name] = proc
        deadline = time.monotonic() + 60
        while "ready." not in self.log(name):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"worker {name} did not start:\n{self.log(name)}")
            time.sleep(0.1)
        return proc

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def outcomes(self, name: str) -> list[tuple[str, str, bool]]:
        """``(run_id, outcome, redelivered)`` of every shift worker ``name`` logged."""
        found = re.findall(
            r"agentcore\.advance run=(\S+) agent=\S+ outcome=(\S+) redelivered=(\w+)",
            self.log(name),
        )
        return [(run, outcome, flag == "True") for run, outcome, flag in found]

    def cpu_seconds(self, name: str) -> float:
        """User + system CPU time the worker process has used so far (Linux /proc)."""
        fields = Path(f"/proc/{self.procs[name].pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def wait_for(self, name: str, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log(name):
            if time.monotonic() > deadline:
                raise AssertionError(f"worker {name} never logged {text!r}:\n{self.log(name)}")
            time.sleep(0.05)

    def stop(self, name: str, sig: signal.Signals = signal.SIGTERM, timeout: float = 30) -> int:
        """Send ``sig`` and wait for the exit (SIGKILL after ``timeout``); the exit code."""
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def stop_all(self) -> None:
        """At the end of a test: SIGKILL (an idle worker's warm shutdown can take seconds,
        and the test's queue and schema are deleted anyway)."""
        for name in self.procs:
            self.stop(name, signal.SIGKILL)


@pytest.fixture
def workers(
    amqp_url: str,
    postgres_dsn: str,
    pg_schema: str,
    queue_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Workers]:
    """Starts ``service.py`` workers on this test's queue, schema and effects file."""
    env = {
        "AGENTCORE_TEST_AMQP_URL": amqp_url,
        "AGENTCORE_TEST_POSTGRES_DSN": postgres_dsn,
        "AGENTCORE_TEST_PG_SCHEMA": pg_schema,
        "AGENTCORE_TEST_QUEUE": queue_name,
        "AGENTCORE_TEST_EFFECTS": str(tmp_path / "effects.txt"),
    }
    monkeypatch.setenv("AGENTCORE_TEST_EFFECTS", env["AGENTCORE_TEST_EFFECTS"])
    group = Workers(env=env, logs=tmp_path)
    try:
        yield group
    finally:
        group.stop_all()
