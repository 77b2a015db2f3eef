"""A run as a conversation on its page: the turns in order (the user's messages, the
agent's answers and questions, the approvals between them), a question shown as what the
run waits for, and the same turns in the JSON API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from markupsafe import escape

from agentcore import Agent, Policy, RunResult, RunStatus
from agentcore.adapters import Message, ScriptedModel
from agentcore.console import create_app
from agentcore.stores import MemoryStore

from ._support import lookup, refund
from .conftest import header_user


def _next(messages: Sequence[Message]) -> dict[str, Any]:  # Any: an action as JSON
    said = [m.content for m in messages if m.role == "user" and "Step " not in m.content]
    if "refund returned" in said[-1]:
        return {"type": "finish", "thought": "Done.", "answer": "Refunded order A1 & closed it."}
    if "A1" in said[-1]:
        args = {"order_id": "A1", "amount": 30}
        return {"type": "tool", "thought": "Refund it.", "tool": "refund", "args": args}
    return {"type": "ask", "thought": "No order named.", "question": "Which order <is> it?"}


@dataclass
class Chat:
    client: httpx.AsyncClient
    talked: RunResult  # asked, answered, approved, completed: two turns
    asking: RunResult  # waits for the user's answer
    plain: RunResult  # one turn, no question


@pytest.fixture
async def chat() -> AsyncIterator[Chat]:
    store = MemoryStore()
    agent = Agent(
        tools=[refund, lookup],
        model=ScriptedModel(_next),
        store=store,
        policy=Policy(ask=True, plan_before_writes=False),
    )
    first = await agent.run("I want my money back", run_id="talk-1")
    assert first.status is RunStatus.AWAITING_INPUT
    waiting = await agent.reply(first.run_id, "It is order A1")
    pending = waiting.pending
    assert waiting.status is RunStatus.AWAITING_CONFIRMATION and pending is not None
    talked = await agent.confirm(
        first.run_id, approve=True, by="ada", step=pending.step, args_hash=pending.args_hash
    )
    assert talked.status is RunStatus.COMPLETED and len(talked.turns) == 2
    asking = await agent.run("Refund please", run_id="ask-1")
    plain = await agent.run("Refund order A1 now", run_id="plain-1")
    assert plain.status is RunStatus.AWAITING_CONFIRMATION and len(plain.turns) == 1
    app = create_app(store, agents=[agent], authenticate=header_user, poll_s=0.01)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://console.test",
            headers={"X-User": "ada"},
        ) as client,
    ):
        yield Chat(client, talked, asking, plain)


def _between(text: str, start: str, end: str) -> str:
    assert start in text, f"{start!r} not on the page"
    return text.split(start, 1)[1].split(end, 1)[0]


async def test_the_run_page_shows_the_turns_in_order_with_the_approval(chat: Chat) -> None:
    page = await chat.client.get("/runs/talk-1")
    assert page.status_code == 200
    turns = _between(page.text, '<section class="conversation" id="conversation">', "</section>")
    said = [
        "I want my money back",
        escape("Which order <is> it?"),  # the model's text is escaped
        "It is order A1",
        "ada approved step 2 (refund)",
        escape("Refunded order A1 & closed it."),
    ]
    at = [turns.find(text) for text in said]
    assert -1 not in at and at == sorted(at), list(zip(said, at, strict=True))
    assert 'id="turn-1"' in turns and 'id="turn-2"' in turns
    assert "Which order <is>" not in page.text
    # each turn and decision links to its event in the timeline below
    assert turns.count('href="#seq-') == 3 and page.text.index("Timeline") > page.text.index(turns)
    assert 'id="question"' not in page.text  # nothing asked now


async def test_a_run_awaiting_input_shows_the_question_first(chat: Chat) -> None:
    page = await chat.client.get("/runs/ask-1")
    assert 'class="status awaiting_input"' in page.text
    asked = _between(page.text, '<section class="pending question" id="question">', "</section>")
    assert "The model asks the user" in asked and escape("Which order <is> it?") in asked
    assert "agentcore reply ask-1 'the answer'" in asked
    assert page.text.index('id="question"') < page.text.index('id="conversation"')
    facts = _between(page.text, '<dl class="facts">', "</dl>")
    assert "<dt>reason</dt>" not in facts  # the question is not repeated as a reason
    turns = _between(page.text, 'id="conversation">', "</section>")
    assert "the agent asks" in turns and "Refund please" in turns
    body = await chat.client.get("/runs/ask-1/body")  # the live fragment shows it too
    assert body.status_code == 200 and 'id="question"' in body.text


async def test_a_run_of_one_turn_has_no_conversation_section(chat: Chat) -> None:
    page = await chat.client.get("/runs/plain-1")
    assert page.status_code == 200 and "Waiting for you: step 1" in page.text
    assert 'id="conversation"' not in page.text and 'id="question"' not in page.text


async def test_the_api_gives_the_turns_and_the_question(chat: Chat) -> None:
    talked = (await chat.client.get("/api/runs/talk-1")).json()
    assert talked["question"] is None
    assert [(t["turn"], t["status"], t["message"]) for t in talked["turns"]] == [
        (1, "awaiting_input", "I want my money back"),
        (2, "completed", "It is order A1"),
    ]
    first, second = talked["turns"]
    assert first["question"] == "Which order <is> it?" and first["answer"] is None
    assert second["answer"] == "Refunded order A1 & closed it."
    assert [d["text"] for d in second["decisions"]] == ["ada approved step 2 (refund)"]
    assert second["seq"] == next(e["seq"] for e in talked["events"] if e["type"] == "user_message")
    asking = (await chat.client.get("/api/runs/ask-1")).json()
    assert asking["status"] == "awaiting_input" and asking["question"] == "Which order <is> it?"
    assert asking["turns"][0]["status"] == "awaiting_input"
