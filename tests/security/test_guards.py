"""Argument policies: the built-ins, and their place in the dispatcher (before a plan is
asked for and before a person sees the call; a refusal is a decision the model reads)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agentcore import (
    Agent,
    Policy,
    RunStatus,
    host_allowed,
    path_within,
    resolve_within,
    tool,
)
from agentcore.adapters import ScriptedModel
from agentcore.errors import ConfigurationError
from agentcore.events import Decision, ToolStarted
from agentcore.testing import call


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "notes" / "sub").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("s")
    (tmp_path / "notes" / "out").symlink_to(tmp_path)  # a link that leaves the root
    (tmp_path / "notes" / "inside").symlink_to(tmp_path / "notes" / "sub")
    return tmp_path / "notes"


@pytest.mark.parametrize(
    "value",
    ["a.txt", "sub/a.txt", "sub/../a.txt", "./sub", "inside/new.txt", "sub/new/deeper.txt"],
)
def test_path_within_allows_paths_inside(root: Path, value: str) -> None:
    assert path_within("path", root)({"path": value}) is None
    assert root in resolve_within(root, value).parents


@pytest.mark.parametrize(
    "value",
    ["../secret.txt", "sub/../../secret.txt", "/etc/passwd", "out/secret.txt", "out", "", "a\x00b"],
)
def test_path_within_refuses_escapes(root: Path, value: str) -> None:
    refused = path_within("path", root)({"path": value})
    assert refused is not None and "'path'" in refused
    with pytest.raises(ValueError, match=r"outside|empty"):
        resolve_within(root, value)


def test_path_within_through_a_root_that_is_a_link(tmp_path: Path, root: Path) -> None:
    link = tmp_path / "link-to-notes"
    link.symlink_to(root)
    assert path_within("p", link)({"p": "sub/x"}) is None
    assert path_within("p", link)({"p": "../secret.txt"}) is not None


def test_path_within_needs_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not an existing directory"):
        path_within("p", tmp_path / "missing")
    assert path_within("p", tmp_path)({}) is None  # absent: the schema decides
    assert path_within("p", tmp_path)({"p": 3}) is not None


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://docs.example.com/a", True),
        ("https://DOCS.example.com./a", True),
        ("https://api.example.org/x", True),
        ("https://example.org/x", False),  # *.example.org: subdomains only
        ("http://docs.example.com/a", False),  # scheme
        ("https://docs.example.com@evil.example/", False),  # userinfo trick
        ("https://docs.example.com.evil.example/", False),
        ("https://evil.example/?u=https://docs.example.com", False),
        ("file:///etc/passwd", False),
        ("docs.example.com", False),
        ("https://[::1]/", False),
        ("https://docs.example.com:99999/", False),  # an invalid port: not a valid URL
        ("https://docs.example.com\\@evil.example/", False),  # parsers disagree on "\\"
        ("https://docs.example.com /", False),
    ],
)
def test_host_allowed(url: str, ok: bool) -> None:
    policy = host_allowed("url", ["docs.example.com", "*.example.org"])
    assert (policy({"url": url}) is None) is ok


def test_host_allowed_needs_hosts() -> None:
    with pytest.raises(ConfigurationError):
        host_allowed("url", [])


def _agent(root: Path, script: list[Any], policy: Policy | None = None) -> tuple[Agent, list[str]]:
    ran: list[str] = []

    @tool(effect="destructive", policies=[path_within("path", root)])
    def remove(path: str) -> str:
        """Remove a file."""
        ran.append(path)
        return "removed"

    def boom(args: Mapping[str, Any]) -> str | None:
        raise RuntimeError("policy bug")

    @tool(effect="read", policies=[boom])
    def broken(x: int) -> int:
        """A tool whose policy raises."""
        ran.append(f"broken {x}")
        return x

    return Agent([remove, broken], ScriptedModel(script), store="memory://", policy=policy), ran


PLAN = {"type": "plan", "thought": "t", "steps": ["remove"]}
FINISH = {"type": "finish", "thought": "t", "answer": "done"}


async def test_refusal_is_a_decision_before_a_person_is_asked(root: Path) -> None:
    agent, ran = _agent(
        root,
        [PLAN, call("remove", path="../secret.txt"), call("remove", path="a.txt")],
    )
    result = await agent.run("tidy up")
    assert result.status is RunStatus.AWAITING_CONFIRMATION  # the second call, not the first
    assert result.pending is not None and result.pending.args == {"path": "a.txt"}
    events = await agent.transcript(result.run_id)
    denied = [e for e in events if isinstance(e, Decision) and e.verdict == "deny"]
    assert len(denied) == 1 and denied[0].reason is not None
    assert "refused these arguments" in denied[0].reason and "outside" in denied[0].reason
    assert ran == []


async def test_refusal_comes_before_the_plan_request(root: Path) -> None:
    agent, _ = _agent(root, [call("remove", path="/etc/passwd"), FINISH])
    result = await agent.run("tidy up")
    assert result.status is RunStatus.COMPLETED
    verdicts = [e.verdict for e in await agent.transcript(result.run_id) if isinstance(e, Decision)]
    assert verdicts[0] == "deny"


async def test_a_person_edit_passes_the_same_policies(root: Path) -> None:
    agent, ran = _agent(root, [PLAN, call("remove", path="a.txt"), FINISH])
    result = await agent.run("tidy up")
    assert result.pending is not None
    with pytest.raises(ConfigurationError, match="refused"):
        await agent.confirm(result.run_id, approve=True, by="ann", args={"path": "../secret.txt"})
    result = await agent.confirm(result.run_id, approve=True, by="ann", args={"path": "sub/b"})
    assert result.status is RunStatus.COMPLETED and ran == ["sub/b"]


async def test_a_policy_that_raises_refuses(root: Path) -> None:
    agent, ran = _agent(root, [call("broken", x=1), FINISH])
    result = await agent.run("go")
    events = await agent.transcript(result.run_id)
    reasons = [e.reason or "" for e in events if isinstance(e, Decision)]
    assert any("policy bug" in r and "refused" in r for r in reasons)
    assert not any(isinstance(e, ToolStarted) for e in events) and ran == []


def test_symlink_fixture_is_real(root: Path) -> None:
    assert os.path.islink(root / "out")
