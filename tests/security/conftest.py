"""The injection suite's outcomes, for the report at the end of any pytest run that ran it.

The tests fill :data:`OUTCOMES` in whichever process runs them (a pytest-xdist worker, or
pytest itself); each outcome travels as a plain summary on its test's report
(``user_properties``) to the process that prints the report (``tests/conftest.py``, the one
conftest the xdist controller loads), so the report is the same either way.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from ._suite import COUNTERS, Outcome

OUTCOMES: list[Outcome] = []
"""Filled by the injection tests, one entry per case; emptied onto each test's report."""

_PROPERTY = "agentcore_injection_outcome"
"""The name tests/conftest.py reads the summaries under."""


def _summary(o: Outcome) -> dict[str, Any]:  # Any: plain values a report can carry
    return {
        "id": o.case.id,
        "counts": dict(o.counts),
        "exfil_attempts": o.exfil_attempts,
        "exfil_blocked": o.exfil_blocked,
        "obeyed": o.obeyed,
        "counters": list(COUNTERS),
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
