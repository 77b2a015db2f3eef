"""examples/chat: the support chat service, served by uvicorn in a process of its own and
talked to over real HTTP (httpx; the server-sent events parsed as they arrive), and its page
in a real browser (Debian's Chromium driven by Playwright).

The servers listen on free loopback ports, over SQLite files in temporary folders, with the
example's scripted model (it answers from the messages it is shown: "refund it" in turn 2
refunds the order turn 1 was about only if turn 1 is shown). Restarting means killing the
process (SIGKILL) and starting another one on the same file.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcore.events import Event
from agentcore.stores import SQLiteStore

pytestmark = pytest.mark.subprocess

CHAT = Path(__file__).resolve().parents[2] / "examples" / "chat"
START_TIMEOUT_S = 15.0
TIMEOUT = httpx.Timeout(10.0)
"""Every request's own limit (connect, each read): a stream that stalls fails the test."""
CHROMIUM_NAMES = ("chromium", "chromium-browser")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChatServer:
    """``uvicorn app:app --app-dir examples/chat`` in a subprocess, over ``store``."""

    def __init__(self, store: Path, port: int, *, delay_s: float = 0.01) -> None:
        self.store = store
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.delay_s = delay_s
        self.log = store.with_name(f"server-{port}-{time.monotonic_ns()}.log")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ChatServer:
        env = {k: v for k, v in os.environ.items() if k != "AGENTCORE_MODEL"}  # scripted
        env |= {
            "AGENTCORE_STORE": f"sqlite:///{self.store}",
            "CHAT_STREAM_DELAY_S": str(self.delay_s),
        }
        command = [sys.executable, "-m", "uvicorn", "app:app", "--app-dir", str(CHAT)]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text()}")
            try:
                if httpx.get(f"{self.base}/", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the server did not start: {self.log.read_text()}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: a crash, nothing shut down cleanly."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChatServer]:
    """One server for the tests that each hold a conversation of their own (a run each)."""
    served = ChatServer(tmp_path_factory.mktemp("chat") / "chat.db", free_port()).start()
    try:
        yield served
    finally:
        served.kill()


@dataclass
class Streamed:
    """A POST's answer: its status, headers and the events (with when each arrived)."""

    status: int
    headers: httpx.Headers
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # Any: JSON
    arrived: list[float] = field(default_factory=list)
    body: dict[str, Any] | None = None  # Any: JSON; a refused request's error

    def named(self, name: str) -> list[dict[str, Any]]:  # Any: JSON
        return [data for event, data in self.events if event == name]

    def one(self, name: str) -> dict[str, Any]:  # Any: JSON
        found = self.named(name)
        assert len(found) == 1, (name, self.events)
        return found[0]

    @property
    def thought(self) -> str:
        return "".join(d["text"] for d in self.named("thought"))


def post(
    client: httpx.Client, path: str, body: object, headers: dict[str, str] | None = None
) -> Streamed:
    """POST ``body`` as JSON and read the server-sent events as they come."""
    with client.stream("POST", path, json=body, headers=headers or {}) as response:
        out = Streamed(response.status_code, response.headers)
        if response.headers.get("content-type", "").startswith("application/json"):
            response.read()
            out.body = response.json()
            return out
        assert response.headers["content-type"].startswith("text/event-stream")
        event, data = "", ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data += line.removeprefix("data: ")
            elif not line and event:
                out.events.append((event, json.loads(data)))
                out.arrived.append(time.monotonic())
                event, data = "", ""
    assert out.events[-1][0] == "done", out.events
    return out


def start(client: httpx.Client, message: str) -> tuple[str, Streamed]:
    first = post(client, "/conversations", {"message": message})
    assert first.status == 200, first.body
    run_id = first.one("conversation")["run_id"]
    assert first.events[0] == ("conversation", {"run_id": run_id})
    assert first.headers["location"] == f"/conversations/{run_id}"
    return run_id, first


def transcript(store: Path, run_id: str) -> list[Event]:
    async def load() -> list[Event]:
        opened = SQLiteStore(store)
        try:
            return await opened.load(run_id)
        finally:
            await opened.close()

    return asyncio.run(load())


def test_the_first_message_streams_the_thought_then_the_answer(server: ChatServer) -> None:
    with server.client() as client:
        run_id, first = start(client, "Where is order A1001?")
    names = [event for event, _ in first.events]
    assert names.index("thought") < names.index("tool") < names.index("answer")
    assert len(first.named("thought")) > 3  # written in pieces, as the model wrote it
    assert "order A1001; I look it up first." in first.thought
    assert first.named("tool") == [
        {"step": 1, "tool": "lookup_order", "args": {"order_id": "A1001"}, "status": "started"},
        {"step": 1, "tool": "lookup_order", "status": "ok"},
    ]
    assert first.one("answer") == {"text": "Order A1001 (Kettle, 25.00 EUR) is shipped."}
    assert first.events[-1] == ("done", {"run_id": run_id, "status": "completed", "turn": 1})
    # streamed: the first piece of the thought arrived well before the end (the scripted
    # model pauses 10 ms between chunks, over 30 of them), not all at once when it ended
    assert first.arrived[-1] - first.arrived[names.index("thought")] > 0.15


def test_the_next_message_sees_the_earlier_turns(server: ChatServer) -> None:
    with server.client() as client:
        run_id, _ = start(client, "Where is order A1001?")
        # no order number in it: the model finds A1001 in turn 1, which it is shown
        second = post(client, f"/conversations/{run_id}/messages", {"message": "Refund it."})
        shown = client.get(f"/conversations/{run_id}").json()
    assert second.status == 200
    assert "conversation" not in dict(second.events)
    approval = second.one("approval")
    assert approval["tool"] == "refund_order"
    assert approval["args"] == {"order_id": "A1001"}
    assert "destructive" in approval["reason"]
    assert second.events[-1][1] == {
        "run_id": run_id,
        "status": "awaiting_confirmation",
        "turn": 2,
    }
    assert [(t["number"], t["message"], t["status"]) for t in shown["turns"]] == [
        (1, "Where is order A1001?", "completed"),
        (2, "Refund it.", "awaiting_confirmation"),
    ]
    assert shown["turns"][0]["answer"] == "Order A1001 (Kettle, 25.00 EUR) is shipped."
    assert shown["pending"] == approval


def test_a_question_then_the_answer(server: ChatServer) -> None:
    with server.client() as client:
        run_id, first = start(client, "Where is my order?")
        assert first.one("question") == {
            "text": "Which order is it? Order numbers look like A1001."
        }
        assert first.events[-1][1]["status"] == "awaiting_input"
        assert "answer" not in dict(first.events)
        second = post(client, f"/conversations/{run_id}/messages", {"message": "A1003"})
        shown = client.get(f"/conversations/{run_id}").json()
    assert second.one("answer") == {"text": "Order A1003 (Teapot, 18.50 EUR) is processing."}
    assert second.events[-1][1]["status"] == "completed"
    assert [(t["status"], t["reason"], t["answer"]) for t in shown["turns"]] == [
        ("awaiting_input", "Which order is it? Order numbers look like A1001.", None),
        ("completed", None, "Order A1003 (Teapot, 18.50 EUR) is processing."),
    ]


def test_an_approved_refund_runs_once(server: ChatServer) -> None:
    with server.client() as client:
        run_id, first = start(client, "Please refund order A1002.")
        pending = first.one("approval")
        assert pending["args"] == {"order_id": "A1002"}
        path = f"/conversations/{run_id}/approvals"
        # bound to what was shown: another hash is refused and the call keeps waiting
        wrong = post(client, path, {"approve": True, "step": pending["step"], "args_hash": "0"})
        assert wrong.status == 409 and wrong.body is not None
        assert wrong.body["error"] == "ConfirmationMismatchError"
        decision = {"approve": True, "step": pending["step"], "args_hash": pending["args_hash"]}
        approved = post(client, path, {**decision, "by": "Ada"})
        again = post(client, path, decision)  # a double click
        shown = client.get(f"/conversations/{run_id}").json()
    assert approved.status == 200
    assert [d["status"] for d in approved.named("tool")] == ["started", "ok"]
    assert approved.one("answer")["text"].startswith("Done: I refunded 40.00 EUR for order A1002.")
    assert approved.events[-1][1] == {"run_id": run_id, "status": "completed", "turn": 1}
    assert again.status == 409 and again.body is not None
    assert again.body["error"] == "NotAwaitingConfirmationError"
    assert shown["status"] == "completed" and shown["pending"] is None
    events = transcript(server.store, run_id)
    started = [e for e in events if e.type == "tool_started" and e.tool == "refund_order"]
    confirmations = [e for e in events if e.type == "confirmation"]
    assert len(started) == 1
    assert [(c.approved, c.by) for c in confirmations] == [(True, "Ada")]


def test_a_denied_refund_does_not_run(server: ChatServer) -> None:
    with server.client() as client:
        run_id, first = start(client, "Refund A1001 please")
        pending = first.one("approval")
        denied = post(
            client,
            f"/conversations/{run_id}/approvals",
            {
                "approve": False,
                "step": pending["step"],
                "args_hash": pending["args_hash"],
                "reason": "already refunded by phone",
            },
        )
    assert "tool" not in dict(denied.events)
    assert denied.one("answer")["text"] == (
        "I'm sorry, our staff declined this refund (already refunded by phone). "
        "Is there anything else?"
    )
    assert not [e for e in transcript(server.store, run_id) if e.type == "tool_started"]


def test_a_retried_message_is_refused_and_not_appended(server: ChatServer) -> None:
    with server.client() as client:
        run_id, _ = start(client, "Where is order A1001?")
        path = f"/conversations/{run_id}/messages"
        key = {"Idempotency-Key": "req-7f3a"}
        second = post(client, path, {"message": "And order A1002?"}, key)
        retried = post(client, path, {"message": "And order A1002?"}, key)
        shown = client.get(f"/conversations/{run_id}").json()
    assert second.one("answer")["text"].startswith("Order A1002 (Desk lamp")
    assert retried.status == 409 and retried.body is not None
    assert retried.body["error"] == "DuplicateReplyError"
    assert retried.body["turn"] == 2  # the turn that key began
    assert [t["number"] for t in shown["turns"]] == [1, 2]
    messages = [e for e in transcript(server.store, run_id) if e.type == "user_message"]
    assert [(m.turn, m.key) for m in messages] == [(2, "req-7f3a")]


def test_a_turn_goes_on_when_the_client_goes_away(server: ChatServer) -> None:
    """A closed tab mid-turn does not stop the turn: the answer is recorded and shown."""
    with server.client() as client:
        with client.stream("POST", "/conversations", json={"message": "Where is A1002?"}) as r:
            lines = r.iter_lines()
            assert next(lines) == "event: conversation"
            run_id = json.loads(next(lines).removeprefix("data: "))["run_id"]
        # the connection is closed here, long before the scripted model's last chunk
        deadline = time.monotonic() + 10
        while (shown := client.get(f"/conversations/{run_id}").json())["status"] == "running":
            assert time.monotonic() < deadline, shown
            time.sleep(0.05)
    assert shown["status"] == "completed"
    assert shown["turns"][0]["answer"] == "Order A1002 (Desk lamp, 40.00 EUR) is delivered."


def test_bad_requests_are_refused_with_a_reason(server: ChatServer) -> None:
    with server.client() as client:
        run_id, _ = start(client, "hello")
        cases = [
            (client.get("/conversations/chat-nope"), 404, "RunNotFoundError"),
            (
                client.post("/conversations/chat-nope/messages", json={"message": "hi"}),
                404,
                "RunNotFoundError",
            ),
            (client.post("/conversations", json={"message": "  "}), 400, "non-empty"),
            (client.post("/conversations", content=b"hi"), 400, "JSON object"),
            (client.post("/conversations", json={"message": "x" * 4001}), 400, "4000"),
            (
                client.post(f"/conversations/{run_id}/approvals", json={"approve": True}),
                400,
                "args_hash",
            ),
            (
                client.post(
                    f"/conversations/{run_id}/approvals",
                    json={"approve": True, "step": 1, "args_hash": "x"},
                ),
                409,
                "not awaiting confirmation",
            ),
        ]
        shown = client.get(f"/conversations/{run_id}").json()
    for response, code, needle in cases:
        assert response.status_code == code, response.text
        assert needle in response.text, response.text
    assert len(shown["turns"]) == 1  # nothing refused was recorded


def test_a_restarted_server_continues_the_conversation(tmp_path: Path) -> None:
    store = tmp_path / "chat.db"
    first_server = ChatServer(store, free_port()).start()
    try:
        with first_server.client() as client:
            run_id, _ = start(client, "Where is order A1001?")
    finally:
        first_server.kill()  # SIGKILL: no shutdown, no goodbye
    assert first_server.proc is not None and first_server.proc.returncode == -signal.SIGKILL
    # a port of its own (the old one may be taken by now): the conversation is in the file
    second_server = ChatServer(store, free_port()).start()
    try:
        with second_server.client() as client:
            shown = client.get(f"/conversations/{run_id}").json()
            assert shown["status"] == "completed"
            assert [(t["message"], t["answer"]) for t in shown["turns"]] == [
                ("Where is order A1001?", "Order A1001 (Kettle, 25.00 EUR) is shipped."),
            ]
            # the new process's model is shown turn 1: "it" is A1001
            second = post(client, f"/conversations/{run_id}/messages", {"message": "Refund it"})
            assert second.one("approval")["args"] == {"order_id": "A1001"}
            assert second.events[-1][1]["turn"] == 2
    finally:
        second_server.kill()


def test_a_turn_cut_short_by_a_crash_is_finished_by_the_next_server(tmp_path: Path) -> None:
    store = tmp_path / "chat.db"
    crashing = ChatServer(store, free_port(), delay_s=0.05).start()  # a turn of over a second
    try:
        with (
            crashing.client() as client,
            client.stream("POST", "/conversations", json={"message": "Where is A1001?"}) as r,
        ):
            lines = r.iter_lines()
            assert next(lines) == "event: conversation"
            run_id = json.loads(next(lines).removeprefix("data: "))["run_id"]
            assert next(lines) == ""
            assert next(lines) == "event: thought"  # the model is writing: mid-turn
            crashing.kill()
    finally:
        crashing.kill()
    assert [e.type for e in transcript(store, run_id)][-1] != "run_finished"
    restarted = ChatServer(store, free_port()).start()
    try:
        with restarted.client() as client:
            deadline = time.monotonic() + 10
            while (shown := client.get(f"/conversations/{run_id}").json())["status"] != (
                "completed"
            ):
                assert time.monotonic() < deadline, shown
                time.sleep(0.05)
    finally:
        restarted.kill()
    assert shown["turns"][0]["answer"] == "Order A1001 (Kettle, 25.00 EUR) is shipped."
    assert "run_resumed" in [e.type for e in transcript(store, run_id)]


# -- the page in a real browser ---------------------------------------------------------------


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true, but the browser test cannot run: {reason}")
    pytest.skip(reason)


def chromium() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    _unavailable("no Chromium on PATH (Debian: apt-get install -y chromium)")
    raise AssertionError("unreachable")


@pytest.fixture
def browser_path() -> str:
    path = chromium()
    try:
        import playwright.sync_api  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc}): pip install -e '.[dev]'")
    return path


@pytest.mark.slow
def test_the_page_streams_the_answer_in_a_real_browser(browser_path: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    served = ChatServer(tmp_path / "chat.db", free_port(), delay_s=0.02).start()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.set_default_timeout(10_000)
                page.goto(f"{served.base}/")
                page.fill("input[name=message]", "Where is order A1001?")
                page.click("button[type=submit]")
                bubble = page.locator(".msg.agent").last
                # the thought shows while it streams, before the answer
                expect(bubble.locator(".thought").first).to_contain_text("A1001")
                expect(bubble.locator(".text")).to_have_text(
                    "Order A1001 (Kettle, 25.00 EUR) is shipped."
                )
                expect(page.locator("#status")).to_have_text("completed")
                # the trail: a line per step's thought, the tool call between them
                expect(bubble.locator(".trail > *")).to_have_count(3)
                expect(bubble.locator(".trail .tool")).to_have_text(
                    'lookup_order {"order_id":"A1001"}'
                )
                run_id = page.evaluate("location.hash.slice(1)")
                assert run_id.startswith("chat-")
                # the next message, then an approval in the page
                page.fill("input[name=message]", "Refund it.")
                page.click("button[type=submit]")
                card = page.locator(".msg.approval")
                expect(card).to_contain_text("refund_order")
                expect(card).to_contain_text('{"order_id":"A1001"}')
                card.locator("button.approve").click()
                expect(page.locator(".msg.agent").last.locator(".text")).to_contain_text(
                    "Done: I refunded 25.00 EUR for order A1001."
                )
                # a reload shows the conversation again, from the server
                page.reload()
                expect(page.locator(".msg.user")).to_have_count(2)
                expect(page.locator(".msg.agent").first).to_contain_text("is shipped.")
                expect(page.locator(".msg.agent").last).to_contain_text("Done: I refunded")
            finally:
                browser.close()
    finally:
        served.kill()
