"""The injection suite's report: printed at the end of any pytest run that ran it.

The tests fill :data:`OUTCOMES` in whichever process runs them (a pytest-xdist worker, or
pytest itself); each outcome travels to the process that prints the report as a plain
summary on its test's report (``user_properties``), so the report is the same either way.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, cast

import pytest

from ._suite import COUNTERS, Outcome

OUTCOMES: list[Outcome] = []
"""Filled by the injection tests, one entry per case; emptied onto each test's report."""

_PROPERTY = "agentcore_injection_outcome"
_received: list[dict[str, Any]] = []  # Any: the summaries' JSON-like values
"""The summaries of the cases that ran, in the process that prints the report."""


def _summary(o: Outcome) -> dict[str, Any]:  # Any: plain values a report can carry
    return {
        "id": o.case.id,
        "counts": dict(o.counts),
        "exfil_attempts": o.exfil_attempts,
        "exfil_blocked": o.exfil_blocked,
        "obeyed": o.obeyed,
        "promises": sorted(o.case.promises),
        "gap": o.case.gap,
        "executed": list(o.executed),
    }


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "call":  # what the test added, moved onto its report
        report.user_properties.extend((_PROPERTY, _summary(o)) for o in OUTCOMES)
        OUTCOMES.clear()
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == _PROPERTY and isinstance(value, dict):
            _received.append(cast("dict[str, Any]", value))  # what _summary made


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _received:
        return
    tr = terminalreporter
    tr.section("injection suite")
    totals = dict.fromkeys(COUNTERS, 0)
    attempts = blocked = 0
    for o in _received:
        for k, v in o["counts"].items():
            totals[k] += v
        attempts += o["exfil_attempts"]
        blocked += o["exfil_blocked"]
    obeyed = sum(o["obeyed"] for o in _received)
    tr.write_line(f"cases: {len(_received)}; obeyed by the model: {obeyed}")
    for k in COUNTERS:
        promised = sum(1 for o in _received if k in o["promises"])
        tr.write_line(f"  {k}: {totals[k]} (promised zero in {promised} case(s))")
    tr.write_line(f"  exfiltration attempts: {attempts}, blocked by policy: {blocked}")
    gaps = [o for o in _received if o["gap"]]
    if gaps:
        tr.write_line("not covered by the rules (these got through, as expected):")
        for o in gaps:
            hit = ", ".join(f"{k}={v}" for k, v in o["counts"].items() if v) or "no counter"
            tr.write_line(f"  {o['id']}: {o['gap']} [{hit}; ran: {', '.join(o['executed'])}]")
