"""Shared test setup: no real network, no store file in the repository, quiet logs, tools.

Tests replay, never call out (STYLE.md section 8): every socket connection to anything but
the loopback interface fails loudly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
import structlog

from agentcore import Tool, ToolContext, tool

pytest_plugins = ["pytester"]

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


class NetworkBlockedError(RuntimeError):
    """A test tried to reach the network."""


def _check_address(address: object) -> None:
    if isinstance(address, str | bytes):  # AF_UNIX paths: local by definition
        return
    if isinstance(address, tuple) and address and address[0] in _LOOPBACK:
        return
    raise NetworkBlockedError(f"tests must not use the network (tried to connect to {address!r})")


_INJECTION = "agentcore_injection_outcome"
"""What tests/security/conftest.py names each injection case's summary on its report."""
_injection: list[dict[str, Any]] = []  # Any: the summaries' JSON-like values


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == _INJECTION and isinstance(value, dict):
            _injection.append(cast("dict[str, Any]", value))  # Any: as above


def _injection_report(tr: pytest.TerminalReporter) -> None:
    """The injection suite's counters, summed over the cases that ran (docs/security.md)."""
    tr.section("injection suite")
    counters: list[str] = _injection[0]["counters"]
    totals = dict.fromkeys(counters, 0)
    attempts = blocked = 0
    for o in _injection:
        for k, v in o["counts"].items():
            totals[k] += v
        attempts += o["exfil_attempts"]
        blocked += o["exfil_blocked"]
    obeyed = sum(o["obeyed"] for o in _injection)
    tr.write_line(f"cases: {len(_injection)}; obeyed by the model: {obeyed}")
    for k in counters:
        promised = sum(1 for o in _injection if k in o["promises"])
        tr.write_line(f"  {k}: {totals[k]} (promised zero in {promised} case(s))")
    tr.write_line(f"  exfiltration attempts: {attempts}, blocked by policy: {blocked}")
    gaps = [o for o in _injection if o["gap"]]
    if gaps:
        tr.write_line("not covered by the rules (these got through, as expected):")
        for o in gaps:
            hit = ", ".join(f"{k}={v}" for k, v in o["counts"].items() if v) or "no counter"
            tr.write_line(f"  {o['id']}: {o['gap']} [{hit}; ran: {', '.join(o['executed'])}]")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per reason a test was skipped, with how many it skipped: a missing service
    shows as one line, not as hundreds of tests passing silently by. Then the injection
    suite's report, when its cases ran."""
    if _injection:
        _injection_report(terminalreporter)
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[str(text).removeprefix("Skipped: ")] += 1
    if reasons:
        terminalreporter.section("skipped tests, by reason")
        for reason, count in reasons.most_common():
            terminalreporter.write_line(f"{count:5d}  {reason}")


# -- In parallel: pytest-xdist (``-n auto``, pyproject.toml) -------------------------------------
#
# Every worker has its own tmp_path tree; PostgreSQL schemas, RabbitMQ queues, ports and
# SQLite lock folders are named per test (random names, port 0, files under tmp_path), so
# tests of different workers never meet. The tests of one group below run in one worker,
# one at a time, the largest group first; every other test goes to whichever worker is free.
ONE_WORKER: dict[str, str] = {
    # worker processes killed at crash points, judged on 1-2 s leases
    "tests/faults/": "faults",
    # Celery worker processes over RabbitMQ and PostgreSQL; the load test has a time limit
    "tests/integrations/": "celery",
    # a module-scoped fixture that is expensive to build: built once, in one worker
    "tests/test_agentdojo.py": "agentdojo",
    "tests/test_local_model.py": "local_model",
    "tests/test_light_install.py": "light_install",
    "tests/security/test_tamper.py": "tamper",
    "tests/stores/test_query_plans.py": "query_plans",
}


@pytest.hookimpl(optionalhook=True)  # an xdist hook: no error without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:  # Any: xdist's types
    """``--dist load`` (what ``-n`` implies) with the groups of :data:`ONE_WORKER`.

    xdist's own ``loadgroup`` marks a test's group in its node id, which pytest 9 no longer
    lets a plugin change; a scheduler that reads the groups from the node ids does the same.
    """
    if config.getvalue("dist") != "load":
        return None  # --dist loadfile, loadscope, ...: as asked
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((g for p, g in ONE_WORKER.items() if nodeid.startswith(p)), nodeid)

    return OneWorkerScheduling(config, log)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: no error without xdist
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: for the whole suite, two workers a core, as most tests wait (on worker
    processes, servers, PostgreSQL, leases) rather than compute; for named tests, files or
    folders, none (they run in pytest's own process). ``PYTEST_XDIST_AUTO_NUM_WORKERS``
    overrides."""
    given = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if given.isdigit():
        return int(given)
    if config.args_source is pytest.Config.ArgsSource.ARGS:
        return 0
    return 2 * (os.cpu_count() or 1)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection

    def connect(self: socket.socket, address: Any) -> None:  # Any: socket address forms
        _check_address(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:  # Any: socket address forms
        _check_address(address)
        return real_connect_ex(self, address)

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        _check_address(address)
        return real_create_connection(address, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)


@pytest.fixture(autouse=True)
def default_store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default store is a file in the test's tmp dir, never agentcore.db in the repo."""
    path = tmp_path / "default-store.db"
    monkeypatch.setenv("AGENTCORE_STORE", f"sqlite:///{path}")
    return path


@dataclass
class Toolbox:
    """A small set of tools that record how they were called.

    Attributes:
        calls: ``(tool name, kwargs)`` for every call that reached a function body.
    """

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    contexts: list[ToolContext] = field(default_factory=list)
    lookup: Tool = field(init=False)
    update_note: Tool = field(init=False)
    delete_order: Tool = field(init=False)
    fetch_status: Tool = field(init=False)
    explode: Tool = field(init=False)
    slow: Tool = field(init=False)

    def count(self, name: str) -> int:
        """How many times the tool named ``name`` ran."""
        return sum(1 for n, _ in self.calls if n == name)

    def args_of(self, name: str) -> list[dict[str, Any]]:
        """The arguments of each call of ``name``, in order."""
        return [a for n, a in self.calls if n == name]

    @property
    def all(self) -> list[Tool]:
        """Every tool of the box."""
        return [
            self.lookup,
            self.update_note,
            self.delete_order,
            self.fetch_status,
            self.explode,
            self.slow,
        ]


SLOW_TIMEOUT_S = 0.05
SLOW_SLEEP_S = 0.3


def make_toolbox() -> Toolbox:
    """Fresh tools with their own call log."""
    box = Toolbox()

    @tool(effect="read", labels=["orders"])
    def lookup(order_id: str) -> dict[str, str]:
        """Look up one order by id.

        Args:
            order_id: the order's id, e.g. "A1".
        """
        box.calls.append(("lookup", {"order_id": order_id}))
        return {"order_id": order_id, "status": "shipped"}

    @tool(effect="write", labels=["orders"])
    def update_note(order_id: str, note: str) -> dict[str, bool]:
        """Add a note to an order.

        Args:
            order_id: the order's id.
            note: the note's text.
        """
        box.calls.append(("update_note", {"order_id": order_id, "note": note}))
        return {"saved": True}

    @tool(effect="destructive")
    def delete_order(order_id: str, ctx: ToolContext) -> dict[str, str]:
        """Delete an order for good.

        Args:
            order_id: the order to delete.
        """
        box.calls.append(("delete_order", {"order_id": order_id}))
        box.contexts.append(ctx)
        return {"deleted": order_id}

    @tool(effect="read")
    async def fetch_status(service: str) -> str:
        """Check whether a service is up (async).

        Args:
            service: the service name.
        """
        await asyncio.sleep(0)
        box.calls.append(("fetch_status", {"service": service}))
        return f"{service}: up"

    @tool(effect="read")
    def explode(reason: str) -> str:
        """A tool that always fails.

        Args:
            reason: what to complain about.
        """
        box.calls.append(("explode", {"reason": reason}))
        raise ValueError(f"cannot do it: {reason}")

    @tool(effect="read", timeout=SLOW_TIMEOUT_S)
    async def slow(seconds: float = SLOW_SLEEP_S) -> str:
        """A tool that sleeps past its timeout.

        Args:
            seconds: how long to sleep.
        """
        box.calls.append(("slow", {"seconds": seconds}))
        await asyncio.sleep(seconds)
        return "finally"

    box.lookup = lookup
    box.update_note = update_note
    box.delete_order = delete_order
    box.fetch_status = fetch_status
    box.explode = explode
    box.slow = slow
    return box


@pytest.fixture
def tools() -> Toolbox:
    """A fresh :class:`Toolbox` per test."""
    return make_toolbox()
