"""The test suite's own setup, as a contributor meets it: skipped tests are summarised by
reason, and the service tests find the documented local services without configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def test_the_run_ends_with_one_line_per_skip_reason(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((HERE / "conftest.py").read_text())
    pytester.makepyfile(
        test_some="""
        import pytest

        @pytest.mark.parametrize("i", range(3))
        def test_needs_a_database(i):
            pytest.skip("PostgreSQL: cannot connect")

        def test_needs_a_broker():
            pytest.skip("RabbitMQ: cannot connect")

        def test_runs():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=4)
    result.stdout.fnmatch_lines(
        [
            "*skipped tests, by reason*",
            "    3  PostgreSQL: cannot connect",
            "    1  RabbitMQ: cannot connect",
        ]
    )


def test_postgres_tests_use_the_local_database_when_no_dsn_is_set(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without AGENTCORE_TEST_POSTGRES_DSN the fixture tries the documented local database
    and names it in the reason when it does not answer (it may or may not run here)."""
    monkeypatch.delenv("AGENTCORE_TEST_POSTGRES_DSN", raising=False)
    monkeypatch.delenv("CI", raising=False)
    pytester.makeconftest((HERE / "stores" / "conftest.py").read_text())
    pytester.makepyfile(
        test_dsn="""
        def test_dsn(postgres_dsn):
            print("DSN=" + postgres_dsn)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "-rs")
    outcomes = result.parseoutcomes()
    if outcomes.get("passed"):
        result.stdout.fnmatch_lines(["*DSN=postgresql://postgres@127.0.0.1:5432/test*"])
    else:
        result.stdout.fnmatch_lines(
            ["*cannot connect to postgresql://postgres@127.0.0.1:5432/test*is not set*"]
        )
