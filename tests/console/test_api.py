"""The console's JSON API, endpoint by endpoint, with the bad input each one must refuse."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

import httpx

from agentcore import RunStatus
from agentcore.events import Confirmation, ToolStarted

from .conftest import Console


async def settled(c: Console, run_id: str) -> dict[str, Any]:
    """The run once the console's background task stopped advancing it."""
    for _ in range(500):
        run = (await c.client.get(f"/api/runs/{quote(run_id, safe='')}")).json()
        if run["status"] != RunStatus.RUNNING.value:
            return run
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} is still running")


def bound(c: Console, which: str = "first", **extra: Any) -> dict[str, Any]:
    pending = getattr(c, which).pending
    assert pending is not None
    return {"step": pending.step, "args_hash": pending.args_hash, **extra}


async def confirm(c: Console, run_id: str, body: Any, **headers: str) -> httpx.Response:
    return await c.client.post(
        f"/api/runs/{run_id}/confirm",
        content=json.dumps(body),
        headers={"X-CSRF-Token": c.csrf, "Content-Type": "application/json", **headers},
    )


# ----------------------------------------------------------------------------- listing


async def test_runs_lists_newest_first_with_filters_search_and_pages(console: Console) -> None:
    c = console
    runs = (await c.client.get("/api/runs")).json()
    assert [r["run_id"] for r in runs["runs"]][:2] == [c.second.run_id, c.first.run_id]
    assert len(runs["runs"]) == 5 and runs["next"] is None
    waiting = (await c.client.get("/api/runs", params={"status": "awaiting_confirmation"})).json()
    assert {r["run_id"] for r in waiting["runs"]} == {c.first.run_id, c.second.run_id}
    acme = (await c.client.get("/api/runs", params={"tenant": "acme"})).json()["runs"]
    assert {r["tenant"] for r in acme} == {"acme"} and len(acme) == 2
    by_task = (await c.client.get("/api/runs", params={"q": "ORDER b2"})).json()["runs"]
    assert [r["run_id"] for r in by_task] == [c.second.run_id]
    by_metadata = (await c.client.get("/api/runs", params={"q": "T-1"})).json()["runs"]
    assert [r["run_id"] for r in by_metadata] == [c.first.run_id]
    by_id = (await c.client.get("/api/runs", params={"q": c.first.run_id[:12]})).json()["runs"]
    assert [r["run_id"] for r in by_id] == [c.first.run_id]
    seen: list[str] = []
    params = {"limit": "2"}
    while True:
        page = (await c.client.get("/api/runs", params=params)).json()
        seen += [r["run_id"] for r in page["runs"]]
        if page["next"] is None:
            break
        params["after"] = page["next"]
    assert seen == [r["run_id"] for r in runs["runs"]]


async def test_runs_refuses_bad_filters(console: Console) -> None:
    c = console
    for params in ({"status": "nope"}, {"limit": "x"}, {"after": "garbage"}, {"tenant": "a\nb"}):
        r = await c.client.get("/api/runs", params=params)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["error"]


async def test_every_endpoint_needs_a_user(console: Console) -> None:
    c = console
    anonymous = {"X-User": ""}
    for path in ("/api/runs", f"/api/runs/{c.first.run_id}", "/api/health", "/api/csrf"):
        assert (await c.client.get(path, headers=anonymous)).status_code == 401, path
    r = await confirm(c, c.first.run_id, bound(c, approve=True), **anonymous)
    assert r.status_code == 401
    assert (await c.client.get("/runs", headers=anonymous)).status_code == 401


# ----------------------------------------------------------------------------- one run


async def test_a_run_has_its_timeline_pending_call_and_verification(console: Console) -> None:
    c = console
    run = (await c.client.get(f"/api/runs/{c.first.run_id}")).json()
    assert run["status"] == "awaiting_confirmation"
    assert run["tenant"] == "acme" and run["metadata"] == {"ticket": "T-1"}
    assert run["pending"]["tool"] == "refund"
    assert run["pending"]["args"] == {"order_id": "A1", "amount": 30}
    assert c.first.pending is not None
    assert run["pending"]["args_hash"] == c.first.pending.args_hash
    assert (
        run["pending"]["reason"] == c.first.pending.reason and "refund" in run["pending"]["reason"]
    )
    assert run["verification"] == {"verified": True, "problems": []}
    kinds = [e["type"] for e in run["events"]]
    assert kinds[-3:] == ["action_proposed", "decision", "run_finished"]
    assert run["contract"]["version"] and run["usage"]["steps"] == 1


async def test_an_unknown_run_is_404_everywhere(console: Console) -> None:
    c = console
    for path in ("/api/runs/nope", "/api/runs/nope/stream", "/runs/nope", "/runs/nope/body"):
        r = await c.client.get(path)
        assert r.status_code == 404, path
    r = await confirm(c, "nope", bound(c, approve=True))
    assert r.status_code == 404 and "nope" in r.json()["error"]


# ----------------------------------------------------------------------------- confirm


async def test_approving_records_the_approver_and_the_run_finishes(console: Console) -> None:
    c = console
    r = await confirm(c, c.first.run_id, bound(c, approve=True))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "running"  # handed on; the console's task advances it
    run = await settled(c, c.first.run_id)
    assert (run["status"], run["answer"]) == ("completed", "refunded")
    events = await c.store.load(c.first.run_id)
    [confirmation] = [e for e in events if isinstance(e, Confirmation)]
    assert confirmation.approved and confirmation.by == "ada" and confirmation.args is None
    assert c.first.pending is not None and confirmation.step == c.first.pending.step


async def test_approving_with_edited_args_runs_them(console: Console) -> None:
    c = console
    body = bound(c, approve=True, args={"order_id": "A1", "amount": 12})
    assert (await confirm(c, c.first.run_id, body)).status_code == 200
    await settled(c, c.first.run_id)
    events = await c.store.load(c.first.run_id)
    [started] = [e for e in events if isinstance(e, ToolStarted)]
    assert started.args == {"order_id": "A1", "amount": 12}


async def test_edited_args_are_checked_against_the_recorded_schema_before_saving(
    console: Console,
) -> None:
    c = console
    before = len(await c.store.load(c.first.run_id))
    bad: list[Any] = [
        {"order_id": "A1", "amount": "twelve"},  # not an integer
        {"order_id": "A1"},  # amount missing
        {"order_id": "A1", "amount": 1, "extra": True},  # unknown argument
    ]
    for args in bad:
        r = await confirm(c, c.first.run_id, bound(c, approve=True, args=args))
        assert r.status_code == 422, (args, r.text)
        assert "schema" in r.json()["error"]
    for args in ("not json", [1, 2], 5):
        r = await confirm(c, c.first.run_id, bound(c, approve=True, args=args))
        assert r.status_code == 422, (args, r.text)
    assert len(await c.store.load(c.first.run_id)) == before  # nothing recorded


async def test_malformed_bodies_are_refused(console: Console) -> None:
    c = console
    url = f"/api/runs/{c.first.run_id}/confirm"
    headers = {"X-CSRF-Token": c.csrf}
    for content in (b"{not json", b"[]", b"null"):
        r = await c.client.post(url, content=content, headers=headers)
        assert r.status_code == 422, content
    for body in (
        bound(c),  # approve missing
        {"approve": True, "args_hash": "x"},  # step missing
        bound(c, approve="yes"),
        bound(c, approve=True, reason=5),
    ):
        assert (await confirm(c, c.first.run_id, body)).status_code == 422, body


async def test_a_stale_args_hash_or_step_is_refused(console: Console) -> None:
    c = console
    for body in (
        bound(c, approve=True) | {"args_hash": "0000000000000000"},
        bound(c, approve=True) | {"step": 7},
        bound(c, approve=False, reason="no") | {"args_hash": "0000000000000000"},
    ):
        r = await confirm(c, c.first.run_id, body)
        assert r.status_code == 409, r.text
        assert "Nothing was recorded" in r.json()["error"]
    assert (await c.client.get(f"/api/runs/{c.first.run_id}")).json()["pending"] is not None


async def test_approving_a_run_that_is_not_waiting_is_refused(console: Console) -> None:
    c = console
    assert (await confirm(c, c.first.run_id, bound(c, approve=True))).status_code == 200
    await settled(c, c.first.run_id)
    r = await confirm(c, c.first.run_id, bound(c, approve=True))
    assert r.status_code == 409 and "not waiting" in r.json()["error"]
    done = (await c.client.get("/api/runs", params={"status": "completed"})).json()["runs"][-1]
    r = await confirm(c, done["run_id"], {"approve": True, "step": 1, "args_hash": "x"})
    assert r.status_code == 409


async def test_a_missing_or_foreign_csrf_token_is_refused(console: Console) -> None:
    c = console
    url = f"/api/runs/{c.first.run_id}/confirm"
    body = json.dumps(bound(c, approve=True))
    assert (await c.client.post(url, content=body)).status_code == 403
    forged = {"X-CSRF-Token": "abc.def"}
    assert (await c.client.post(url, content=body, headers=forged)).status_code == 403
    # a token issued to another user is not this user's
    other = (await c.client.get("/api/csrf", headers={"X-User": "mallory"})).json()["csrf"]
    r = await c.client.post(url, content=body, headers={"X-CSRF-Token": other})
    assert r.status_code == 403
    form = await c.client.post(
        f"/runs/{c.first.run_id}/confirm", data={"decision": "approve", **bound(c)}
    )
    assert form.status_code == 403
    assert (await c.client.get(f"/api/runs/{c.first.run_id}")).json()["pending"] is not None


async def test_denying_needs_a_reason_the_model_then_reads(console: Console) -> None:
    c = console
    r = await confirm(c, c.second.run_id, bound(c, "second", approve=False))
    assert r.status_code == 422 and "reason" in r.json()["error"]
    r = await confirm(c, c.second.run_id, bound(c, "second", approve=False, reason="Too late."))
    assert r.status_code == 200
    run = await settled(c, c.second.run_id)
    assert (run["status"], run["answer"]) == ("completed", "not refunded")
    actions = [e["action"] for e in run["events"] if e["type"] == "action_proposed"]
    steps = [(a["type"], a.get("tool")) for a in actions]
    assert steps == [("tool", "refund"), ("tool", "lookup"), ("finish", None)]  # after the denial
    [denial] = [e for e in run["events"] if e["type"] == "confirmation"]
    assert (denial["approved"], denial["by"], denial["reason"]) == (False, "ada", "Too late.")


async def test_a_console_without_the_runs_agent_refuses_to_confirm(console: Console) -> None:
    from agentcore.console import create_app

    from .conftest import header_user

    app = create_app(console.store, authenticate=header_user)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://t", headers={"X-User": "ada"}
    ) as client:
        csrf = (await client.get("/api/csrf")).json()["csrf"]
        r = await client.post(
            f"/api/runs/{console.first.run_id}/confirm",
            json=bound(console, approve=True),
            headers={"X-CSRF-Token": csrf},
        )
    assert r.status_code == 409 and "agent" in r.json()["error"]


async def test_an_agent_with_a_queue_gets_the_run_enqueued(console: Console) -> None:
    from agentcore.console import create_app
    from agentcore.queue import InProcessQueue

    from ._support import make_agent
    from .conftest import header_user

    queue = InProcessQueue()
    queued = make_agent(console.store, name="refunds", queue=queue)
    app = create_app(console.store, agents=[queued], authenticate=header_user)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://t", headers={"X-User": "ada"}
    ) as client:
        csrf = (await client.get("/api/csrf")).json()["csrf"]
        r = await client.post(
            f"/api/runs/{console.first.run_id}/confirm",
            json=bound(console, approve=True),
            headers={"X-CSRF-Token": csrf},
        )
    assert r.status_code == 200 and r.json()["status"] == "running"
    assert queue.sent == [("refunds", console.first.run_id)]  # the workers advance it


# ----------------------------------------------------------------------------- live, health


async def test_the_stream_sends_each_event_with_its_seq(console: Console) -> None:
    c = console
    r = await c.client.get(
        f"/api/runs/{c.first.run_id}/stream", params={"after": "2", "max_seconds": "0"}
    )
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in r.text.split("\n\n") if f.startswith("id:")]
    seqs = [int(f.split("\n")[0].removeprefix("id: ")) for f in frames]
    total = len(await c.store.load(c.first.run_id))
    assert seqs == list(range(3, total))
    data = json.loads(frames[0].split("data: ", 1)[1])
    assert data["seq"] == 3 and data["run_id"] == c.first.run_id
    resumed = await c.client.get(
        f"/api/runs/{c.first.run_id}/stream",
        params={"max_seconds": "0"},
        headers={"Last-Event-ID": str(total - 2)},
    )
    assert resumed.text.count("id: ") == 1  # the browser reconnects where it left off
    assert (await c.client.get(f"/api/runs/{c.first.run_id}/stream?after=x")).status_code == 422


async def test_health_has_a_series_per_contract_and_model(console: Console) -> None:
    c = console
    h = (await c.client.get("/api/health")).json()
    assert h["runs"] == 5
    [series] = h["series"]
    assert series["model"] == "scripted" and series["contract"].startswith("v")
    [point] = series["points"]
    assert point["runs"] == 5 and point["steps_per_run"] == 1.0
    assert point["tool_share"] == 0.4 and point["finish_share"] == 0.6
    assert set(h["contracts"]) == {series["contract"]}
    assert (await c.client.get("/api/health", params={"runs": "x"})).status_code == 422


async def test_the_stream_of_a_finished_run_ends(console: Console) -> None:
    c = console
    assert (await confirm(c, c.first.run_id, bound(c, approve=True))).status_code == 200
    await settled(c, c.first.run_id)
    total = len(await c.store.load(c.first.run_id))
    r = await c.client.get(f"/api/runs/{c.first.run_id}/stream", params={"after": "3"})
    assert r.text.count("id: ") == total - 4  # no max_seconds: it ends by itself
    assert r.text.rstrip().endswith("event: end\ndata: {}")
    waiting = await c.client.get(f"/api/runs/{c.second.run_id}/stream", params={"max_seconds": "0"})
    assert "event: end" not in waiting.text  # a waiting run goes on: a person may answer


async def test_the_runs_stream_sends_the_listing_when_it_changes(console: Console) -> None:
    c = console
    waiting = {"status": "awaiting_confirmation", "max_seconds": "0"}
    first = await c.client.get("/api/stream/runs", params=waiting)
    assert first.headers["content-type"].startswith("text/event-stream")
    [frame] = [f for f in first.text.split("\n\n") if f.startswith("id:")]
    version = frame.split("\n")[0].removeprefix("id: ")
    listed = json.loads(frame.split("data: ", 1)[1])
    assert {r["run_id"] for r in listed["runs"]} == {c.first.run_id, c.second.run_id}
    unchanged = await c.client.get(
        "/api/stream/runs", params=waiting, headers={"Last-Event-ID": version}
    )
    assert "id: " not in unchanged.text  # the page already shows this listing
    assert (await confirm(c, c.first.run_id, bound(c, approve=True))).status_code == 200
    await settled(c, c.first.run_id)
    changed = await c.client.get(
        "/api/stream/runs", params=waiting, headers={"Last-Event-ID": version}
    )
    listed = json.loads(changed.text.split("data: ", 1)[1].split("\n")[0])
    assert [r["run_id"] for r in listed["runs"]] == [c.second.run_id]
    assert (await c.client.get("/api/stream/runs?status=bogus")).status_code == 422


# ----------------------------------------------------------------------------- other sites


async def test_a_request_from_another_site_is_refused_with_a_valid_token(console: Console) -> None:
    """A valid session and CSRF token are not enough when the browser says the request
    comes from another site (a page elsewhere that obtained a token cannot use it):
    refused, nothing recorded, and the same approval from the console itself goes through."""
    c = console
    before = len(await c.store.load(c.first.run_id))
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "http://console.test.evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://console.test", "Sec-Fetch-Site": "cross-site"},
    ):
        r = await confirm(c, c.first.run_id, {"approve": True, **bound(c)}, **headers)
        assert r.status_code == 403, (headers, r.text)
        assert "Refused" in r.json()["error"], r.text
    assert len(await c.store.load(c.first.run_id)) == before  # nothing recorded
    page = await c.client.post(
        f"/runs/{c.first.run_id}/confirm",
        data={"csrf": c.csrf, "decision": "approve", **bound(c)},
        headers={"Origin": "https://evil.example"},
    )
    assert page.status_code == 403 and "Refused" in page.text
    ok = await confirm(
        c,
        c.first.run_id,
        {"approve": True, **bound(c)},
        Origin="http://console.test",
        **{"Sec-Fetch-Site": "same-origin"},
    )
    assert ok.status_code == 200, ok.text
    assert any(isinstance(e, Confirmation) for e in await c.store.load(c.first.run_id))
