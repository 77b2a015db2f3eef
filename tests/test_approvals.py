"""Approvals by more than one person (issue 22, part 4), through the public API.

A call can need N distinct approvers (by tool, effect, label or for plans), an application
hook says who may answer, a person counts once, a denial by anyone ends it, an expired
window denies or escalates, and the application hears of every call that waits (a hook, or
a signed webhook). Approvals from two processes at once are each counted once.
"""

from __future__ import annotations

import asyncio
import email.message
import http.server
import json
import shlex
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from stores.conftest import pg_schema, postgres_dsn
from test_cli import cli

from agentcore import Agent, Policy, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.approvals import ApprovalRequest, new_secret, verify_signature, webhook
from agentcore.errors import (
    AlreadyApprovedError,
    ApprovalExpiredError,
    ConfigurationError,
    NotAuthorizedError,
)
from agentcore.events import Approval, ApprovalExpired, Confirmation, Event, ToolFinished
from agentcore.stores import MemoryStore, SQLiteStore

__all__ = ["pg_schema", "postgres_dsn"]  # the PostgreSQL fixtures, for the two-process test

PAY = {"to": "acme", "amount": 120}


def of(events: Sequence[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def script() -> ScriptedModel:
    """Plan (when asked), call pay once, then finish saying how it went."""

    def next_action(messages: Sequence[Message]) -> dict[str, Any]:
        said = "\n".join(m.content for m in messages if m.role == "user")
        if "pay returned" in said:
            return {"type": "finish", "thought": "done", "answer": "paid"}
        if "Denied by" in said:
            return {"type": "finish", "thought": "denied", "answer": "not paid"}
        if "propose a plan" in said and "Approved by" not in said:
            return {"type": "plan", "thought": "plan", "steps": ["pay acme 120"]}
        return {"type": "tool", "thought": "pay", "tool": "pay", "args": PAY}

    return ScriptedModel(next_action)


def make_agent(
    ledger: list[dict[str, Any]], store: Any = None, **policy: Any
) -> Agent:  # Any: policy fields
    @tool(effect="write", labels=["payments"])
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        ledger.append({"to": to, "amount": amount})
        return f"paid {amount} to {to}"

    policy.setdefault("plan_before_writes", False)
    return Agent(tools=[pay], model=script(), store=store or MemoryStore(), policy=Policy(**policy))


@pytest.mark.parametrize("rule", [{"tool:pay": 2}, {"label:payments": 2}, {"effect:write": 2}])
async def test_a_call_runs_once_two_different_people_approved_it(rule: dict[str, int]) -> None:
    ledger: list[dict[str, Any]] = []
    agent = make_agent(ledger, approvals=rule)
    paused = await agent.run("pay acme", run_id="r1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    assert paused.pending is not None
    assert (paused.pending.approvals, paused.pending.approvals_needed) == ((), 2)

    first = await agent.confirm("r1", approve=True, by="alice")
    assert first.status is RunStatus.AWAITING_CONFIRMATION
    assert first.pending is not None and first.pending.approvals == ("alice",)
    assert ledger == []

    with pytest.raises(AlreadyApprovedError, match="alice"):
        await agent.confirm("r1", approve=True, by="alice")
    assert ledger == []

    done = await agent.confirm("r1", approve=True, by="bob")
    assert done.status is RunStatus.COMPLETED
    assert ledger == [PAY]
    events = await agent.transcript("r1")
    assert [a.by for a in of(events, Approval)] == ["alice"]
    (final,) = of(events, Confirmation)
    assert (final.by, final.approvers) == ("bob", ["alice", "bob"])


async def test_one_approval_is_enough_without_a_rule_and_records_as_before() -> None:
    ledger: list[dict[str, Any]] = []

    @tool(effect="destructive")
    def wipe() -> str:
        """Wipe."""
        ledger.append({"wiped": True})
        return "wiped"

    agent = Agent(
        tools=[wipe],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "w", "tool": "wipe", "args": {}},
                {"type": "finish", "thought": "d", "answer": "ok"},
            ]
        ),
        store=MemoryStore(),
        policy=Policy(plan_before_writes=False, approvals={"effect:read": 3}),  # not this call
    )
    paused = await agent.run("wipe")
    assert paused.pending is not None and paused.pending.approvals_needed == 1
    done = await agent.confirm(paused.run_id, approve=True, by="alice")
    assert done.status is RunStatus.COMPLETED
    events = await agent.transcript(paused.run_id)
    assert of(events, Approval) == []
    assert of(events, Confirmation)[0].approvers == []


async def test_a_denial_by_anyone_ends_it_after_an_approval() -> None:
    ledger: list[dict[str, Any]] = []
    agent = make_agent(ledger, approvals={"tool:pay": 3})
    await agent.run("pay acme", run_id="r1")
    await agent.confirm("r1", approve=True, by="alice")
    denied = await agent.confirm("r1", approve=False, by="carol", reason="not this month")
    assert denied.status is RunStatus.COMPLETED
    assert denied.answer == "not paid"
    assert ledger == []


async def test_authorize_decides_who_may_answer_and_a_refusal_records_nothing() -> None:
    roles = {"alice": "finance", "bob": "finance", "mallory": "support"}
    asked: list[tuple[str, str | None]] = []

    def authorize(by: str, pending: Any) -> bool:  # Any: PendingCall
        asked.append((by, pending.tool))
        return roles.get(by) == "finance"

    ledger: list[dict[str, Any]] = []
    agent = make_agent(ledger, approvals={"tool:pay": 2}, authorize=authorize)
    await agent.run("pay acme", run_id="r1")
    before = len(await agent.transcript("r1"))
    with pytest.raises(NotAuthorizedError, match="mallory"):
        await agent.confirm("r1", approve=True, by="mallory")
    with pytest.raises(NotAuthorizedError):  # nor may she end it
        await agent.confirm("r1", approve=False, by="mallory", reason="no")
    assert len(await agent.transcript("r1")) == before
    await agent.confirm("r1", approve=True, by="alice")
    done = await agent.confirm("r1", approve=True, by="bob")
    assert done.status is RunStatus.COMPLETED and ledger == [PAY]
    assert asked[0] == ("mallory", "pay")


async def test_only_the_first_approver_may_edit_and_the_others_approve_the_edit() -> None:
    ledger: list[dict[str, Any]] = []
    agent = make_agent(ledger, approvals={"tool:pay": 2})
    await agent.run("pay acme", run_id="r1")
    edited = {"to": "acme", "amount": 100}
    first = await agent.confirm("r1", approve=True, by="alice", args=edited)
    assert first.pending is not None and first.pending.args == edited
    with pytest.raises(ConfigurationError, match="only the first approver"):
        await agent.confirm("r1", approve=True, by="bob", args={"to": "eve", "amount": 1})
    # bob approves what alice's edit made, bound to its hash
    done = await agent.confirm(
        "r1", approve=True, by="bob", step=first.pending.step, args_hash=first.pending.args_hash
    )
    assert done.status is RunStatus.COMPLETED
    assert ledger == [edited]


async def test_plans_can_need_several_people() -> None:
    ledger: list[dict[str, Any]] = []
    agent = make_agent(ledger, approvals={"plan": 2}, plan_before_writes=True)
    paused = await agent.run("pay acme", run_id="r1")
    assert paused.pending is not None and paused.pending.kind == "plan"
    assert paused.pending.approvals_needed == 2
    still = await agent.confirm("r1", approve=True, by="alice")
    assert still.pending is not None and still.pending.kind == "plan"
    done = await agent.confirm("r1", approve=True, by="bob")
    assert done.status is RunStatus.COMPLETED and ledger == [PAY]


@pytest.mark.parametrize(
    ("rule", "match"),
    [
        ({"pay": 2}, "Invalid approvals rule"),
        ({"tool:": 2}, "Invalid approvals rule"),
        ({"tool:pay": 0}, "whole number"),
        ({"tool:pay": 1.5}, "whole number"),
    ],
)
def test_bad_rules_are_refused_when_the_policy_is_made(rule: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Policy(approvals=rule)


def test_the_policy_records_rules_and_expiry_but_not_hooks() -> None:
    policy = Policy(approvals={"tool:pay": 2}, approval_expiry="deny", authorize=lambda b, p: True)
    data = policy.to_json()
    assert data["approvals"] == {"tool:pay": 2} and data["approval_expiry"] == "deny"
    assert "authorize" not in data and "on_pending" not in data
    json.dumps(data)
    assert Policy.from_json(data) == policy
    assert "approvals" not in Policy().to_json()  # recorded as before when unused


async def test_the_quorum_survives_a_restart_from_a_snapshot(tmp_path: Path) -> None:
    ledger: list[dict[str, Any]] = []
    path = tmp_path / "runs.db"
    agent = make_agent(ledger, SQLiteStore(path), approvals={"tool:pay": 2})
    agent.snapshot_every = 1
    await agent.run("pay acme", run_id="r1")
    await agent.confirm("r1", approve=True, by="alice")
    await agent.close()
    again = make_agent(ledger, SQLiteStore(path), approvals={"tool:pay": 2})
    pending = (await again.result("r1")).pending
    assert pending is not None and pending.approvals == ("alice",)
    with pytest.raises(AlreadyApprovedError):
        await again.confirm("r1", approve=True, by="alice")
    assert (await again.confirm("r1", approve=True, by="bob")).status is RunStatus.COMPLETED
    assert ledger == [PAY]
    await again.close()


# --------------------------------------------------------------------------- expiry


async def test_an_expired_call_is_denied_when_the_policy_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger: list[dict[str, Any]] = []
    agent = make_agent(ledger, approvals={"tool:pay": 2}, approval_ttl=60, approval_expiry="deny")
    await agent.run("pay acme", run_id="r1")
    await agent.confirm("r1", approve=True, by="alice")
    assert await agent.expire_approvals() == []  # the window is open
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    (changed,) = await agent.expire_approvals()
    assert changed.status is RunStatus.COMPLETED and changed.answer == "not paid"
    assert ledger == []
    events = await agent.transcript("r1")
    (expired,) = of(events, ApprovalExpired)
    assert expired.action == "deny" and expired.waited_s > 60
    (denial,) = of(events, Confirmation)
    assert (denial.approved, denial.by) == (False, "agentcore")
    assert await agent.expire_approvals() == []  # nothing waits any more


async def test_expiry_leaves_other_agents_runs_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    mine = make_agent([], store, approvals={"tool:pay": 2}, approval_ttl=60, approval_expiry="deny")
    await mine.run("pay acme", run_id="r1")

    @tool(effect="destructive")
    def wipe() -> str:
        """Wipe."""
        return "wiped"

    other = Agent(
        tools=[wipe],
        model=ScriptedModel([{"type": "tool", "thought": "w", "tool": "wipe", "args": {}}]),
        store=store,
        policy=Policy(plan_before_writes=False, approval_ttl=60, approval_expiry="deny"),
    )
    await other.run("wipe", run_id="r2")
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    assert [r.run_id for r in await mine.expire_approvals()] == ["r1"]
    assert (await other.result("r2")).status is RunStatus.AWAITING_CONFIRMATION


async def test_wait_keeps_refusing_late_approvals_and_records_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = make_agent([], approvals={"tool:pay": 2}, approval_ttl=60)
    await agent.run("pay acme", run_id="r1")
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    n = len(await agent.transcript("r1"))
    assert await agent.expire_approvals() == []
    assert len(await agent.transcript("r1")) == n
    with pytest.raises(ApprovalExpiredError):
        await agent.confirm("r1", approve=True, by="alice")


async def test_escalation_tells_the_application_and_opens_the_window_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    heard: list[ApprovalRequest] = []
    ledger: list[dict[str, Any]] = []
    agent = make_agent(
        ledger,
        approvals={"tool:pay": 2},
        approval_ttl=60,
        approval_expiry="escalate",
        on_pending=heard.append,
    )
    await agent.run("pay acme", run_id="r1")
    await agent.confirm("r1", approve=True, by="alice")
    assert [h.occasion for h in heard] == ["waiting", "approved"]
    assert heard[1].pending.approvals == ("alice",)

    start = time.time()
    monkeypatch.setattr(time, "time", lambda: start + 61)
    (changed,) = await agent.expire_approvals()
    assert changed.status is RunStatus.AWAITING_CONFIRMATION
    assert [h.occasion for h in heard][-1] == "escalated"
    assert changed.pending is not None and changed.pending.approvals == ("alice",)
    assert changed.pending.expires_at == pytest.approx(start + 121, abs=1)
    # within the new window bob's approval counts
    monkeypatch.setattr(time, "time", lambda: start + 100)
    assert await agent.expire_approvals() == []
    done = await agent.confirm("r1", approve=True, by="bob")
    assert done.status is RunStatus.COMPLETED and ledger == [PAY]
    # and a second expiry escalates again, counted
    events = await agent.transcript("r1")
    assert [e.escalations for e in of(events, ApprovalExpired)] == [1]


async def test_a_failing_notifier_never_breaks_the_run() -> None:
    def broken(request: ApprovalRequest) -> None:
        raise RuntimeError("mail server down")

    ledger: list[dict[str, Any]] = []
    agent = make_agent(ledger, approvals={"tool:pay": 2}, on_pending=broken)
    paused = await agent.run("pay acme", run_id="r1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    await agent.confirm("r1", approve=True, by="alice")
    assert (await agent.confirm("r1", approve=True, by="bob")).status is RunStatus.COMPLETED


async def test_an_async_notifier_is_awaited_once_per_occasion() -> None:
    heard: list[str] = []

    async def notify(request: ApprovalRequest) -> None:
        await asyncio.sleep(0)
        heard.append(f"{request.occasion}:{len(request.pending.approvals)}")

    agent = make_agent([], approvals={"tool:pay": 3}, on_pending=notify)
    await agent.run("pay acme", run_id="r1")
    await agent.result("r1")  # reading tells no one
    await agent.confirm("r1", approve=True, by="a")
    await agent.confirm("r1", approve=True, by="b")
    await agent.confirm("r1", approve=True, by="c")
    assert heard == ["waiting:0", "approved:1", "approved:2"]


# --------------------------------------------------------------------------- webhook


class _Receiver(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[bytes, email.message.Message]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((body, self.headers))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[bytes, email.message.Message]]]]:
    _Receiver.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", _Receiver.received
    server.shutdown()
    server.server_close()


async def test_the_webhook_posts_a_signed_request_a_receiver_can_check(
    receiver: tuple[str, list[tuple[bytes, email.message.Message]]],
) -> None:
    url, received = receiver
    secret = new_secret()
    agent = make_agent([], approvals={"tool:pay": 2}, on_pending=webhook(url, secret))
    await agent.run("pay acme", run_id="r1")
    (body, headers) = received[0]
    payload = json.loads(body)
    assert payload["run_id"] == "r1" and payload["occasion"] == "waiting"
    assert payload["pending"]["tool"] == "pay" and payload["pending"]["approvals_needed"] == 2
    assert verify_signature(body, headers, secret)
    assert not verify_signature(body, headers, new_secret())
    assert not verify_signature(body.replace(b"acme", b"evil"), headers, secret)
    assert not verify_signature(body, headers, secret, tolerance_s=-1)  # too old
    assert not verify_signature(body, {"webhook-signature": "garbage"}, secret)


async def test_a_webhook_that_cannot_be_reached_is_logged_not_raised() -> None:
    hook = webhook("http://127.0.0.1:9/x", new_secret(), timeout=1)
    agent = make_agent([], approvals={"tool:pay": 2}, on_pending=hook)
    assert (await agent.run("pay acme")).status is RunStatus.AWAITING_CONFIRMATION


def test_a_webhook_needs_an_http_url_and_a_secret() -> None:
    for url in ("file:///etc/passwd", "http://", "https://[::1/x", "127.0.0.1/hook"):
        with pytest.raises(ConfigurationError, match="http"):
            webhook(url, new_secret())
    with pytest.raises(ConfigurationError, match="secret"):
        webhook("http://127.0.0.1/x", "")


# --------------------------------------------------------------------------- two processes

APPROVER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from agentcore import Agent, Policy, tool
    from agentcore.adapters import ScriptedModel
    from agentcore.stores import SQLiteStore

    url, schema, run_id, by, start_at, ledger = sys.argv[1:7]

    @tool(effect="write")
    def pay(to: str, amount: int) -> str:
        \"\"\"Pay someone.\"\"\"
        with open(ledger, "a") as f:
            f.write(json.dumps({"to": to, "amount": amount}) + "\\n")
        return "paid"

    if url.startswith("sqlite:///"):
        store = SQLiteStore(url[len("sqlite:///"):])
    else:
        from agentcore.stores.postgres import PostgresStore
        store = PostgresStore(url, schema=schema)
    agent = Agent(
        tools=[pay],
        model=ScriptedModel(lambda messages: {"type": "finish", "thought": "d", "answer": "paid"}),
        store=store,
        policy=Policy(plan_before_writes=False, approvals={"tool:pay": 2}),
    )

    async def main():
        while time.time() < float(start_at):
            await asyncio.sleep(0.001)
        result = await agent.confirm(run_id, approve=True, by=by)
        print(result.status.value)
        await agent.close()

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_two_processes_approving_at_once_are_each_counted_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        from agentcore.stores.postgres import PostgresStore

        url = str(request.getfixturevalue("postgres_dsn"))
        schema = str(request.getfixturevalue("pg_schema"))

        def store() -> Any:  # Any: a TranscriptStore
            return PostgresStore(url, schema=schema)
    else:
        url, schema = f"sqlite:///{tmp_path / 'runs.db'}", ""

        def store() -> Any:  # Any: a TranscriptStore
            return SQLiteStore(tmp_path / "runs.db")

    ledger = tmp_path / "ledger.jsonl"
    agent = make_agent([], store(), approvals={"tool:pay": 2})
    paused = await agent.run("pay acme", run_id="r1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    await agent.close()
    script_path = tmp_path / "approver.py"
    script_path.write_text(APPROVER)
    start_at = str(time.time() + 3.0)  # both interpreters are up by then
    procs = [
        subprocess.Popen(  # noqa: ASYNC220 - two real processes, waited for below
            [sys.executable, str(script_path), url, schema, "r1", who, start_at, str(ledger)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("alice", "bob")
    ]
    outs = await asyncio.to_thread(lambda: [p.communicate(timeout=90) for p in procs])
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    assert sorted(o.strip() for o, _ in outs) == ["awaiting_confirmation", "completed"]
    assert ledger.read_text().splitlines() == [json.dumps(PAY)]
    check = make_agent([], store())
    events = await check.transcript("r1")
    (approval,) = of(events, Approval)
    (final,) = of(events, Confirmation)
    assert sorted([approval.by, final.by]) == ["alice", "bob"]
    assert final.approvers == [approval.by, final.by]
    assert len(of(events, ToolFinished)) == 1
    await check.close()


# --------------------------------------------------------------------------- the command line

CLI_AGENT = textwrap.dedent(
    '''
    from agentcore import Agent, Policy, tool
    from agentcore.adapters import ScriptedModel

    @tool(effect="write")
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        return f"paid {amount} to {to}"

    def step(messages):
        said = "\\n".join(m.content for m in messages if m.role == "user")
        if "pay returned" in said or "Denied by" in said:
            return {"type": "finish", "thought": "d", "answer": "over"}
        args = {"to": "acme", "amount": 120}
        return {"type": "tool", "thought": "p", "tool": "pay", "args": args}

    def make(model=None, store=None, ttl=None):
        return Agent(
            tools=[pay],
            model=model or ScriptedModel(step),
            store=store,
            policy=Policy(
                plan_before_writes=False,
                approvals={"tool:pay": 2},
                approval_ttl=ttl,
                approval_expiry="deny",
            ),
        )

    def expiring(model=None, store=None):
        return make(model, store, ttl=0.5)
    '''
)


_cli = cli  # the CLI as a user runs it (tests/test_cli.py)


def _printed_approval(stdout: str) -> list[str]:
    """The bound approve command the CLI printed, as arguments (without ``agentcore``)."""
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("approve: ")]
    return shlex.split(line.removeprefix("approve: "))[1:]


def test_the_cli_shows_how_many_approvals_a_call_has_and_needs(tmp_path: Path) -> None:
    (tmp_path / "payagent.py").write_text(CLI_AGENT)
    started = _cli(tmp_path, "run", "payagent:make", "pay acme")
    assert "awaiting_confirmation" in started.stdout, started.stderr
    assert "(approvals 0 of 2)" in started.stdout
    approve = _printed_approval(started.stdout)
    run_id = approve[1]
    first = _cli(tmp_path, *approve, "--by", "alice")
    assert first.returncode == 3, first.stderr  # still awaiting confirmation
    assert "(approvals 1 of 2: alice)" in first.stdout
    twice = _cli(tmp_path, *_printed_approval(first.stdout), "--by", "alice")
    assert twice.returncode == 1 and "approved the call at step 1 already" in twice.stderr
    assert "Traceback" not in twice.stderr
    shown = _cli(tmp_path, "show", run_id)
    assert "approved by alice" in shown.stdout and "more needed" in shown.stdout
    done = _cli(tmp_path, *_printed_approval(first.stdout), "--by", "bob")
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout


def test_the_expire_command_denies_what_waited_too_long(tmp_path: Path) -> None:
    (tmp_path / "payagent.py").write_text(CLI_AGENT)
    started = _cli(tmp_path, "run", "payagent:expiring", "pay acme")
    assert "awaiting_confirmation" in started.stdout, started.stderr
    time.sleep(0.6)
    expired = _cli(tmp_path, "expire", "--agent", "payagent:expiring")
    assert expired.returncode == 0, expired.stderr
    assert expired.stdout.startswith("completed  run "), expired.stdout
    again = _cli(tmp_path, "expire", "--agent", "payagent:expiring")
    assert again.returncode == 0 and again.stdout.strip() == ""
