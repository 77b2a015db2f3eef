""" "Waiting for you" shows what waits (the tool, the approvals so far of those needed),
and a person who approved a call that needs more people is offered no second Approve: the
button is disabled and says why."""

from __future__ import annotations

import httpx

from agentcore import Policy
from agentcore.console import create_app
from agentcore.stores import MemoryStore

from ._support import make_agent
from .test_pages import csrf_of


async def test_waiting_for_you_shows_the_tool_and_the_count_and_no_second_approve() -> None:
    store = MemoryStore()
    agent = make_agent(store)
    agent.policy = Policy(plan_before_writes=False, approvals={"tool:refund": 2})
    paused = await agent.run("Please refund order A1")
    pending = paused.pending
    assert pending is not None
    app = create_app(store, agents=[agent], authenticate=lambda r: r.headers.get("x-user"))
    url = f"/runs/{paused.run_id}"
    waiting = "/runs?status=awaiting_confirmation"
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://console.test"
        ) as client,
    ):
        listed = await client.get(waiting, headers={"X-User": "ada"})
        assert "refund (step 1)" in listed.text and "0 of 2" in listed.text
        page = await client.get(url, headers={"X-User": "ada"})
        assert "Waiting for you: step 1, refund (0 of 2 approvals)" in page.text
        form = {
            "csrf": csrf_of(page.text),
            "step": str(pending.step),
            "args_hash": pending.args_hash or "",
            "decision": "approve",
            "args": "",
        }
        approved = await client.post(f"{url}/confirm", data=form, headers={"X-User": "ada"})
        assert approved.status_code == 303

        listed = await client.get(waiting, headers={"X-User": "ada"})
        assert "1 of 2 (so far: ada): you approved; it waits for another person" in listed.text
        mine = await client.get(url, headers={"X-User": "Ada"})  # the same person
        assert 'name="approve" disabled' in mine.text
        assert "You approved this call already (1 of 2)" in mine.text
        assert 'name="deny">Deny</button>' in mine.text  # a denial is still open to ada
        theirs = await client.get(url, headers={"X-User": "grace"})
        assert 'name="approve" disabled' not in theirs.text
        assert 'name="approve">Approve</button>' in theirs.text
        listed = await client.get(waiting, headers={"X-User": "grace"})
        assert "1 of 2 (so far: ada)" in listed.text and "you approved" not in listed.text
