"""The injection suite's report: printed at the end of any pytest run that ran it."""

from __future__ import annotations

import pytest

from ._suite import COUNTERS, Outcome

OUTCOMES: list[Outcome] = []
"""Filled by tests/security/test_injection.py, one entry per case that ran."""


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not OUTCOMES:
        return
    tr = terminalreporter
    tr.section("injection suite")
    totals = dict.fromkeys(COUNTERS, 0)
    attempts = blocked = 0
    for o in OUTCOMES:
        for k, v in o.counts.items():
            totals[k] += v
        attempts += o.exfil_attempts
        blocked += o.exfil_blocked
    tr.write_line(f"cases: {len(OUTCOMES)}; obeyed by the model: {sum(o.obeyed for o in OUTCOMES)}")
    for k in COUNTERS:
        promised = sum(1 for o in OUTCOMES if k in o.case.promises)
        tr.write_line(f"  {k}: {totals[k]} (promised zero in {promised} case(s))")
    tr.write_line(f"  exfiltration attempts: {attempts}, blocked by policy: {blocked}")
    gaps = [o for o in OUTCOMES if o.case.gap]
    if gaps:
        tr.write_line("not covered by the rules (these got through, as expected):")
        for o in gaps:
            hit = ", ".join(f"{k}={v}" for k, v in o.counts.items() if v) or "no counter"
            tr.write_line(f"  {o.case.id}: {o.case.gap} [{hit}; ran: {', '.join(o.executed)}]")
