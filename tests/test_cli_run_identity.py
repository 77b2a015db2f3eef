"""``agentcore run --tenant T --metadata ...``: an agent whose tools take ``FromRun``
parameters starts from the command line, and bad metadata is a usage error that records
nothing."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from test_cli import cli

pytestmark = pytest.mark.subprocess

AGENT = textwrap.dedent(
    """
    from pathlib import Path
    from typing import Annotated

    from agentcore import Agent, FromRun, Policy, tool
    from agentcore.adapters import ScriptedModel


    @tool(effect="read")
    def whoami(
        customer_id: Annotated[str, FromRun("customer_id")],
        limit: Annotated[int, FromRun("limit")],
        tenant: Annotated[str, FromRun.tenant()],
    ) -> str:
        \"\"\"Say whose data this run reads.\"\"\"
        Path(__file__).with_name("seen.txt").write_text(f"{tenant} {customer_id} {limit}")
        return "ok"


    def make(model=None, store=None):
        return Agent(
            tools=[whoami],
            model=ScriptedModel([
                {"type": "tool", "thought": "w", "tool": "whoami", "args": {}},
                {"type": "finish", "thought": "d", "answer": "done"},
            ]),
            store=store,
            policy=Policy(plan_before_writes=False),
        )
    """
)


def test_a_run_with_from_run_parameters_starts_from_the_cli(tmp_path: Path) -> None:
    (tmp_path / "who.py").write_text(AGENT)
    started = cli(
        tmp_path,
        "run",
        "who:make",
        "who am I",
        "--run-id",
        "r1",
        "--tenant",
        "acme",
        "--metadata",
        "customer_id=c-42",
        "--metadata",
        '{"limit": 5}',
    )
    assert started.returncode == 0, started.stdout + started.stderr
    assert (tmp_path / "seen.txt").read_text() == "acme c-42 5"
    first = json.loads(cli(tmp_path, "export", "r1").stdout.splitlines()[0])
    assert first["tenant"] == "acme"
    assert first["metadata"] == {"customer_id": "c-42", "limit": 5, "agent": "who:make"}
    listed = cli(tmp_path, "runs", "--tenant", "acme", "--json")
    assert json.loads(listed.stdout)["run_id"] == "r1"


def test_without_them_the_run_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "who.py").write_text(AGENT)
    refused = cli(tmp_path, "run", "who:make", "who am I", "--tenant", "acme")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "customer_id" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "seen.txt").exists()


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["customer_id"], "neither KEY=VALUE nor a JSON object"),
        (["=x"], "empty key"),
        (["{not json"], "not a valid JSON object"),
        (["[1, 2]"], "neither KEY=VALUE nor a JSON object"),
        (["customer_id=a", '{"customer_id": "b"}'], "given twice"),
        (["agent=other:make"], "the CLI records 'agent' itself"),
    ],
)
def test_bad_metadata_is_a_usage_error_that_records_nothing(
    tmp_path: Path, given: list[str], said: str
) -> None:
    (tmp_path / "who.py").write_text(AGENT)
    args = [a for item in given for a in ("--metadata", item)]
    refused = cli(tmp_path, "run", "who:make", "who am I", "--tenant", "acme", *args)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert said in refused.stderr
    assert not (tmp_path / "runs.db").exists() and not (tmp_path / "seen.txt").exists()


def test_a_bad_tenant_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "who.py").write_text(AGENT)
    refused = cli(tmp_path, "run", "who:make", "who am I", "--tenant", "")
    assert refused.returncode == 2 and "tenant" in refused.stderr.lower()
