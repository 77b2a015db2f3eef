"""The server-rendered pages, the one-time login, and what the console's absence costs:
``import agentcore`` and ``agentcore --help`` load none of it."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from markupsafe import escape

from agentcore.console import TokenLogin, create_app
from agentcore.events import Confirmation, ModelCalled, RunStarted

from .conftest import Console
from .test_api import settled

CONSOLE_MODULES = ("agentcore.console", "starlette", "uvicorn", "jinja2")


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the page carries no CSRF token"
    return found.group(1)


async def test_the_runs_page_lists_filters_and_links_runs(console: Console) -> None:
    c = console
    page = await c.client.get("/runs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f'href="/runs/{c.first.run_id}"' in page.text
    assert "awaiting_confirmation" in page.text
    searched = await c.client.get("/runs", params={"q": "order B2"})
    assert c.second.run_id in searched.text and c.first.run_id not in searched.text
    paged = await c.client.get("/runs", params={"limit": "2"})
    assert 'rel="next"' in paged.text
    assert (await c.client.get("/runs", params={"status": "bogus"})).status_code == 422
    assert (await c.client.get("/")).status_code == 303
    for asset in ("console.css", "console.js"):  # the pages' only assets, no build step
        assert (await c.client.get(f"/static/{asset}")).status_code == 200


async def test_the_runs_page_follows_the_listing_live(console: Console) -> None:
    c = console
    page = await c.client.get("/runs", params={"status": "awaiting_confirmation"})
    assert "<h1>Waiting for you</h1>" in page.text  # the view says what it is
    assert 'data-stream="/api/stream/runs?status=awaiting_confirmation&amp;version=' in page.text
    body = await c.client.get("/fragments/runs", params={"status": "awaiting_confirmation"})
    assert body.status_code == 200 and "<html" not in body.text
    assert c.first.run_id in body.text and "Say hello" not in body.text
    everything = await c.client.get("/runs")
    assert (
        "<h1>Runs</h1>" in everything.text
        and 'data-stream="/api/stream/runs?version=' in everything.text
    )
    later = await c.client.get("/runs", params={"limit": "2", "after": "1:x"})
    assert "data-stream" not in later.text  # a later page stays put


async def test_the_run_page_shows_the_call_bound_to_its_step_and_hash(console: Console) -> None:
    c = console
    page = await c.client.get(f"/runs/{c.first.run_id}")
    assert page.status_code == 200
    pending = c.first.pending
    assert pending is not None and pending.args_hash is not None
    assert pending.args_hash in page.text and "Waiting for you: step 1" in page.text
    assert "The customer asked for a refund." in page.text  # the thought
    assert "dispatcher: needs_confirmation" in page.text
    assert pending.reason and f"Why it waits: {escape(pending.reason)}" in page.text
    assert "verified" in page.text
    body = await c.client.get(f"/runs/{c.first.run_id}/body")
    assert body.status_code == 200 and "<html" not in body.text and "Timeline" in body.text


async def test_the_forms_approve_and_deny_with_the_pages_token(console: Console) -> None:
    c = console
    pending = c.first.pending
    assert pending is not None
    page = await c.client.get(f"/runs/{c.first.run_id}")
    token = csrf_of(page.text)
    form = {"csrf": token, "step": str(pending.step), "args_hash": pending.args_hash or ""}
    bad = await c.client.post(
        f"/runs/{c.first.run_id}/confirm",
        data=form | {"decision": "approve", "args": '{"order_id": "A1", "amount": "x"}'},
    )
    assert bad.status_code == 422 and "schema" in bad.text and 'role="alert"' in bad.text
    new = len(await c.store.load(c.first.run_id))  # the seq the approval is recorded at
    ok = await c.client.post(
        f"/runs/{c.first.run_id}/confirm", data=form | {"decision": "approve", "args": ""}
    )
    # back on the run's page, at the approval (the browser scrolls to it, CSS marks it)
    assert ok.status_code == 303
    assert ok.headers["location"] == f"/runs/{c.first.run_id}#seq-{new}"
    assert (await settled(c, c.first.run_id))["status"] == "completed"
    page = await c.client.get(f"/runs/{c.first.run_id}")
    assert re.search(f'id="seq-{new}"[^>]*>\\s*<div class="title">.*approved by ada', page.text)
    stale = await c.client.post(f"/runs/{c.first.run_id}/confirm", data=form | {"decision": "deny"})
    assert stale.status_code == 409


async def test_the_health_page_draws_a_chart_per_metric(console: Console) -> None:
    page = await console.client.get("/health")
    assert page.status_code == 200
    assert page.text.count("<svg") == 7
    assert "steps per run" in page.text and "share of plan actions" in page.text
    assert 'class="mark"' in page.text  # the contract version's first appearance


async def test_a_one_time_login_names_the_approver(console: Console) -> None:
    c = console
    login = TokenLogin()
    app = create_app(c.store, agents=[c.agent], login=login, poll_s=0.01)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client,
    ):
        assert (await client.get("/api/runs")).status_code == 401
        assert (await client.get("/runs")).status_code == 401  # the sign-in page
        form = await client.get("/login", params={"token": login.token})
        assert 'name="name"' in form.text
        wrong = await client.post("/login", data={"token": "guess", "name": "eve"})
        assert wrong.status_code == 403
        signed = await client.post("/login", data={"token": login.token, "name": "Grace H"})
        assert signed.status_code == 303
        again = await client.post("/login", data={"token": login.token, "name": "eve"})
        assert again.status_code == 403  # the link works once
        page = await client.get(f"/runs/{c.first.run_id}")
        assert "Grace H" in page.text
        pending = c.first.pending
        assert pending is not None
        r = await client.post(
            f"/runs/{c.first.run_id}/confirm",
            data={
                "csrf": csrf_of(page.text),
                "decision": "approve",
                "step": str(pending.step),
                "args_hash": pending.args_hash or "",
            },
        )
        assert r.status_code == 303
        await settled_with(client, c.first.run_id)
    [confirmation] = [e for e in await c.store.load(c.first.run_id) if isinstance(e, Confirmation)]
    assert confirmation.by == "Grace H"


async def settled_with(client: httpx.AsyncClient, run_id: str) -> None:
    import asyncio

    for _ in range(500):
        if (await client.get(f"/api/runs/{run_id}")).json()["status"] != "running":
            return
        await asyncio.sleep(0.01)
    raise AssertionError("still running")


@pytest.mark.subprocess
def test_import_and_help_load_none_of_the_console(tmp_path: Path) -> None:
    code = (
        "import sys, agentcore, agentcore.cli, agentcore.stores;"
        f"print([m for m in sys.modules if m.startswith({CONSOLE_MODULES!r})])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "[]"
    helped = (
        "import sys; from agentcore.cli import main; sys.argv = ['agentcore', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', [m for m in sys.modules if m.startswith({CONSOLE_MODULES!r})])"
    )
    out = subprocess.run(
        [sys.executable, "-c", helped], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert "serve" in out.stdout
    assert out.stdout.strip().endswith("LOADED []")


@pytest.mark.subprocess
def test_serve_refuses_other_interfaces_without_auth(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentcore.cli", "serve", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 2 and "loopback" in out.stderr


@pytest.mark.subprocess
def test_serve_prints_a_one_time_login_url_that_signs_in(tmp_path: Path) -> None:
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    command = [
        *(sys.executable, "-m", "agentcore.cli", "serve"),
        *("--store", f"sqlite:///{tmp_path / 'runs.db'}", "--port", str(port)),
    ]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path
    ) as server:
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            found = re.search(r"(http://127\.0\.0\.1:\d+/login\?token=(\S+))", line)
            assert found, line
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(timeout=10) as client:
                for _ in range(200):
                    try:
                        form = client.get(found.group(1))
                        break
                    except httpx.TransportError:
                        time.sleep(0.05)
                else:
                    raise AssertionError("the console did not start")
                assert form.status_code == 200 and 'name="name"' in form.text
                login = {"token": found.group(2), "name": "Ada"}
                assert client.post(f"{base}/login", data=login).status_code == 303
                runs = client.get(f"{base}/runs")
                assert runs.status_code == 200 and "signed in as <b>Ada</b>" in runs.text
                again = client.post(f"{base}/login", data=login | {"name": "Eve"})
                assert again.status_code == 403  # the link works once
        finally:
            server.terminate()


async def test_run_ids_with_url_characters_link_and_confirm(console: Console) -> None:
    import html

    c = console
    odd = "a b?c#d/e%2F é&x"
    waiting = await c.agent.run("Please refund order Z9", run_id=odd)
    assert waiting.pending is not None
    page = await c.client.get("/runs", params={"q": "order Z9"})
    [link] = re.findall(r'class="run-link" href="([^"]+)"', page.text)
    run = await c.client.get(html.unescape(link))
    assert run.status_code == 200 and html.escape(odd) in run.text
    action = re.search(r'form method="post" action="([^"]+)"', run.text)
    assert action
    posted = await c.client.post(
        html.unescape(action.group(1)),
        data={
            "csrf": csrf_of(run.text),
            "decision": "approve",
            "step": str(waiting.pending.step),
            "args_hash": waiting.pending.args_hash or "",
        },
    )
    assert posted.status_code == 303
    assert posted.headers["location"].partition("#")[0] == html.unescape(link)
    assert (await settled(c, odd))["status"] == "completed"


async def test_a_call_that_needs_two_people_shows_its_count_and_takes_each_once() -> None:
    from agentcore import Policy
    from agentcore.stores import MemoryStore

    from ._support import make_agent

    store = MemoryStore()
    agent = make_agent(store)
    agent.policy = Policy(
        plan_before_writes=False,
        approvals={"tool:refund": 2},
        authorize=lambda by, pending: by != "eve",
    )
    paused = await agent.run("Please refund order A1")
    pending = paused.pending
    assert pending is not None
    app = create_app(store, agents=[agent], authenticate=lambda r: r.headers.get("x-user"))
    url = f"/runs/{paused.run_id}"
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://console.test"
        ) as client,
    ):

        async def post(user: str) -> httpx.Response:
            page = await client.get(url, headers={"X-User": user})
            form = {
                "csrf": csrf_of(page.text),
                "step": str(pending.step),
                "args_hash": pending.args_hash or "",
                "decision": "approve",
                "args": "",
            }
            return await client.post(f"{url}/confirm", data=form, headers={"X-User": user})

        page = await client.get(url, headers={"X-User": "ada"})
        assert "Approvals 0 of 2" in page.text
        assert (await post("ada")).status_code == 303
        page = await client.get(url, headers={"X-User": "grace"})
        assert "Approvals 1 of 2 (so far: ada)" in page.text
        assert "approved by ada; more approvals needed" in page.text
        again = await post("ada")
        assert again.status_code == 409 and "already" in again.text
        refused = await post("eve")
        assert refused.status_code == 403 and "may not approve" in refused.text
        assert (await post("grace")).status_code == 303
        for _ in range(500):
            if (await agent.result(paused.run_id)).status.value != "running":
                break
            await asyncio.sleep(0.01)
        assert (await agent.result(paused.run_id)).answer == "refunded"


async def test_the_run_page_compensates_a_stopped_run_once() -> None:
    from agentcore import Agent, Policy, tool
    from agentcore.adapters import ScriptedModel
    from agentcore.stores import MemoryStore

    undone: list[str] = []

    @tool(effect="write", compensate=lambda call: undone.append(call.args["to"]))
    def pay(to: str) -> str:
        """Pay."""
        return "paid"

    @tool(effect="destructive")
    def close() -> str:
        """Close."""
        return "closed"

    store = MemoryStore()
    agent = Agent(
        tools=[pay, close],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "p", "tool": "pay", "args": {"to": "acme"}},
                {"type": "tool", "thought": "c", "tool": "close", "args": {}},
            ]
        ),
        store=store,
        policy=Policy(plan_before_writes=False),
    )
    paused = await agent.run("pay, then close")
    app = create_app(store, agents=[agent], authenticate=lambda r: r.headers.get("x-user"))
    url = f"/runs/{paused.run_id}"
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://console.test",
            headers={"X-User": "ada"},
        ) as client,
    ):
        waiting = await client.get(url)
        assert "Undo this run" not in waiting.text  # a waiting run is cancelled first
        await agent.cancel(paused.run_id, by="ada")
        page = await client.get(url)
        assert "Undo this run" in page.text
        forged = await client.post(f"{url}/compensate", data={"csrf": "forged"})
        assert forged.status_code == 403 and undone == []
        done = await client.post(f"{url}/compensate", data={"csrf": csrf_of(page.text)})
        assert done.status_code == 303 and undone == ["acme"]
        after = await client.get(url)
        assert "Undo this run" not in after.text
        assert "compensated by ada: undid pay at step 1" in after.text
        assert "pay undone" in after.text


async def test_a_parent_and_its_sub_agent_runs_link_each_other() -> None:
    """The tree of runs: a parent's page lists the sub-agent runs its calls started, each
    linked; a child's page links back to its parent and the call that started it."""
    from test_subagents import ask, child_agent, finishing

    from agentcore import Agent
    from agentcore.stores import MemoryStore

    from .conftest import header_user

    store = MemoryStore()
    research = child_agent(store).as_tool("research", "Research an order and report.")
    parent = Agent(
        tools=[research], model=finishing("done", ask("research", "Where is A-1?")), store=store
    )
    await parent.run("Find A-1", run_id="p1")
    app = create_app(store, agents=[parent], authenticate=header_user, poll_s=0.01)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://console.test",
            headers={"X-User": "ada"},
        ) as client,
    ):
        page = (await client.get("/runs/p1")).text
        children = re.search(r'<dd id="child-runs">(.*?)</dd>', page, re.S)
        assert children, page
        assert 'href="/runs/p1%3A1%2Fresearch"' in children.group(1)
        assert "research, step 1" in children.group(1)
        assert 'id="parent-run"' not in page
        child = (await client.get("/runs/p1:1/research")).text
        up = re.search(r'<dd id="parent-run">(.*?)</dd>', child, re.S)
        assert up and 'href="/runs/p1"' in up.group(1), child
        assert "call c1 at step 1" in up.group(1)


async def test_the_health_charts_escape_what_runs_recorded(console: Console) -> None:
    """A contract version and a model name are recorded text: the charts are drawn by an
    autoescaped template (no ``|safe``), so markup in them is shown, never run."""
    hostile_contract = '"><img src=x onerror=alert(1)>'
    hostile_model = "</svg><script>alert(2)</script>"
    events = await console.store.load(console.first.run_id)
    copied = []
    for ev in events:
        update: dict[str, object] = {"run_id": "hostile-run"}
        if isinstance(ev, RunStarted):
            update["contract"] = {**ev.contract, "version": hostile_contract}
        if isinstance(ev, ModelCalled):
            update["model"] = hostile_model
        copied.append(ev.model_copy(update=update))
    await console.store.append("hostile-run", 0, copied)
    page = await console.client.get("/health")
    assert page.status_code == 200
    assert "<script>" not in page.text and "<img" not in page.text
    assert str(escape(hostile_model)) in page.text
    assert page.text.count("<svg") == 7
    templates = Path(__file__).parents[2] / "agentcore" / "console" / "templates"
    assert not [p.name for p in templates.iterdir() if re.search(r"\|\s*safe", p.read_text())]
