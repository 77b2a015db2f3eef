"""The approval webhook as a receiver sees it: Standard Webhooks over a real loopback server.

The server answers as each test scripts it (200, 500 then 200, a redirect, a refusal) and
records every request as it arrived. Each delivery is checked twice: with the public
verifier, and with a check written here from the Standard Webhooks text (HMAC-SHA256 of
``"{webhook-id}.{webhook-timestamp}.{body}"``, base64, one ``v1,`` entry per key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

import pytest
import structlog
from test_approvals import make_agent

from agentcore import PendingCall, RunStatus
from agentcore.adapters import RetryPolicy
from agentcore.approvals import (
    WEBHOOK_HEADERS,
    ApprovalRequest,
    OnPending,
    WebhookDeliveryError,
    new_secret,
    sign,
    verify_signature,
    webhook,
)
from agentcore.errors import ConfigurationError

ID, TS, SIG = WEBHOOK_HEADERS


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A loopback HTTP server: ``answers[path]`` lists the answers to give in turn (the last
    one repeats): a status, or ``(status, headers)``."""

    url: str
    answers: dict[str, list[int | tuple[int, dict[str, str]]]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)

    def at(self, path: str) -> str:
        return self.url + path


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with lock:
                state.seen.append(Seen(self.command, self.path, dict(self.headers), body))
                queue = state.answers.get(self.path.partition("?")[0], [404])
                answer = queue.pop(0) if len(queue) > 1 else queue[0]
            status, headers = answer if isinstance(answer, tuple) else (answer, {})
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()


@dataclass
class Waits:
    """A RetryPolicy's sleep that records the waits instead of sleeping."""

    seconds: list[float] = field(default_factory=list)

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def _policy(waits: Waits, attempts: int = 3) -> RetryPolicy:
    return RetryPolicy(max_attempts=attempts, base_delay=0.0, sleep=waits)


def _request(occasion: str = "waiting", approvals: tuple[str, ...] = ()) -> ApprovalRequest:
    pending = PendingCall(
        step=2,
        call_id="c2",
        kind="tool",
        thought="pay the invoice",
        tool="pay",
        args={"to": "acme", "amount": 120},
        effect="destructive",
        args_hash="h",
        approvals=approvals,
        approvals_needed=2,
    )
    return ApprovalRequest("r1", occasion, pending)  # pyright: ignore[reportArgumentType]  # a literal


def _from_the_spec(body: bytes, headers: Mapping[str, str], whsec: str) -> bool:
    """The receiver's check as the Standard Webhooks text describes it, written here."""
    key = base64.b64decode(whsec.removeprefix("whsec_"))
    signed = f"{headers[ID]}.{headers[TS]}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    listed = [entry.split(",", 1) for entry in headers[SIG].split(" ")]
    fresh = abs(time.time() - int(headers[TS])) <= 300
    return fresh and any(v == "v1" and hmac.compare_digest(s, expected) for v, s in listed)


async def deliver(hook: OnPending, request: ApprovalRequest) -> None:
    """Call the hook as ``Policy.on_pending`` would, letting its failure through."""
    outcome = hook(request)
    assert outcome is not None
    await outcome


def _lowered(headers: Mapping[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


async def test_a_2xx_is_one_delivery_signed_by_the_standard(receiver: Receiver) -> None:
    receiver.answers["/hook"] = [200]
    secret, waits = new_secret(), Waits()
    request = _request()
    await deliver(webhook(receiver.at("/hook"), secret, retry=_policy(waits)), request)

    (seen,) = receiver.seen
    headers = _lowered(seen.headers)
    assert (seen.method, seen.path) == ("POST", "/hook")
    assert headers["content-type"] == "application/json"
    assert json.loads(seen.body) == request.to_json()
    assert headers[ID] == request.message_id
    assert headers[ID].startswith("msg_") and "." not in headers[ID]
    assert abs(int(headers[TS]) - time.time()) < 5
    assert verify_signature(seen.body, seen.headers, secret)
    assert _from_the_spec(seen.body, headers, secret)
    assert not _from_the_spec(seen.body, headers, new_secret())
    assert waits.seconds == []


async def test_a_500_is_retried_with_the_same_id_and_each_attempt_signed(
    receiver: Receiver,
) -> None:
    receiver.answers["/hook"] = [500, 200]
    secret, waits = new_secret(), Waits()
    with structlog.testing.capture_logs() as logs:
        await deliver(webhook(receiver.at("/hook"), secret, retry=_policy(waits)), _request())

    first, second = receiver.seen
    assert [s.method for s in receiver.seen] == ["POST", "POST"]
    assert _lowered(first.headers)[ID] == _lowered(second.headers)[ID]  # deduplicate by it
    assert first.body == second.body
    for seen in (first, second):
        assert verify_signature(seen.body, seen.headers, secret)
        assert _from_the_spec(seen.body, _lowered(seen.headers), secret)
    (failed,) = [log for log in logs if log["event"] == "webhook_attempt_failed"]
    assert failed["status"] == 500 and failed["attempt"] == 1
    assert failed["webhook_id"] == _lowered(first.headers)[ID]
    assert len(waits.seconds) == 1


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_is_a_failure_never_followed(receiver: Receiver, status: int) -> None:
    receiver.answers["/old"] = [(status, {"Location": "/new"})]
    receiver.answers["/new"] = [200]
    waits = Waits()
    hook = webhook(receiver.at("/old?token=t0k3n"), new_secret(), retry=_policy(waits))
    with pytest.raises(WebhookDeliveryError, match="redirect") as failed:
        await deliver(hook, _request())

    # retried like a 5xx, always at the configured address, never as a GET, never at /new
    assert [(s.method, s.path) for s in receiver.seen] == [("POST", "/old?token=t0k3n")] * 3
    assert all(s.body for s in receiver.seen)
    assert failed.value.status == status and failed.value.attempts == 3
    assert "set the webhook url" in str(failed.value)
    assert "t0k3n" not in str(failed.value)  # a token in the query is not logged
    assert len(waits.seconds) == 2


async def test_a_redirect_through_an_agent_is_logged_and_the_run_waits(
    receiver: Receiver,
) -> None:
    receiver.answers["/old"] = [(301, {"Location": "/new"})]
    hook = webhook(receiver.at("/old"), new_secret(), retry=_policy(Waits(), attempts=1))
    agent = make_agent([], approvals={"tool:pay": 2}, on_pending=hook)
    with structlog.testing.capture_logs() as logs:
        result = await agent.run("pay acme", run_id="r1")

    assert result.status is RunStatus.AWAITING_CONFIRMATION
    assert [(s.method, s.path) for s in receiver.seen] == [("POST", "/old")]
    (failed,) = [log for log in logs if log["event"] == "on_pending_failed"]
    assert "WebhookDeliveryError" in failed["error"] and "301" in failed["error"]


@pytest.mark.parametrize("status", [400, 401, 404, 410])
async def test_a_4xx_refusal_is_not_retried(receiver: Receiver, status: int) -> None:
    receiver.answers["/hook"] = [status]
    waits = Waits()
    with pytest.raises(WebhookDeliveryError, match=f"answered {status}") as failed:
        await deliver(webhook(receiver.at("/hook"), new_secret(), retry=_policy(waits)), _request())
    assert len(receiver.seen) == 1 and failed.value.attempts == 1
    assert waits.seconds == []


async def test_a_429_waits_at_least_its_retry_after_up_to_the_cap(receiver: Receiver) -> None:
    receiver.answers["/hook"] = [(429, {"Retry-After": "7"}), (503, {"Retry-After": "999"}), 200]
    waits = Waits()
    policy = replace(_policy(waits), max_retry_after=30.0)
    await deliver(webhook(receiver.at("/hook"), new_secret(), retry=policy), _request())
    assert len(receiver.seen) == 3
    assert waits.seconds == [7.0, 30.0]


async def test_a_receiver_that_cannot_be_reached_is_retried_then_reported() -> None:
    waits = Waits()
    hook = webhook("http://127.0.0.1:9/hook", new_secret(), timeout=1, retry=_policy(waits))
    with pytest.raises(WebhookDeliveryError, match="attempt 3 of 3") as failed:
        await deliver(hook, _request())
    assert failed.value.status is None and failed.value.attempts == 3
    assert failed.value.__cause__ is not None  # the network error, kept
    assert len(waits.seconds) == 2


async def test_rotation_signs_with_every_key_and_any_key_verifies(receiver: Receiver) -> None:
    receiver.answers["/hook"] = [200]
    old, new = new_secret(), new_secret()
    await deliver(webhook(receiver.at("/hook"), [new, old], retry=_policy(Waits())), _request())

    (seen,) = receiver.seen
    assert len(_lowered(seen.headers)[SIG].split(" ")) == 2
    for receivers_keys in (old, new, [old, new], [new_secret(), old]):
        assert verify_signature(seen.body, seen.headers, receivers_keys)
    for key in (old, new):
        assert _from_the_spec(seen.body, _lowered(seen.headers), key)
    assert not verify_signature(seen.body, seen.headers, new_secret())
    assert not verify_signature(seen.body, seen.headers, [new_secret(), new_secret()])


def test_the_message_id_is_the_requests_own() -> None:
    assert _request().message_id == _request().message_id  # another process, the same id
    ids = {
        _request().message_id,
        _request("approved", ("alice",)).message_id,
        _request("approved", ("alice", "bob")).message_id,
        _request("escalated").message_id,
    }
    assert len(ids) == 4


def test_sign_makes_what_a_receiver_tests_with() -> None:
    secret = new_secret()
    headers = sign(b"{}", secret, msg_id="msg_1", timestamp=int(time.time()))
    assert headers[ID] == "msg_1" and headers[SIG].startswith("v1,")
    assert verify_signature(b"{}", headers, secret)
    assert _from_the_spec(b"{}", headers, secret)
    with pytest.raises(ConfigurationError, match="message id"):
        sign(b"{}", secret, msg_id="msg.1")
    with pytest.raises(ConfigurationError, match="timestamp"):
        sign(b"{}", secret, timestamp=-1)
    with pytest.raises(ConfigurationError, match="bytes"):
        sign("{}", secret)  # pyright: ignore[reportArgumentType]  # text, not the bytes sent


def test_secrets_of_other_standard_webhooks_tools_are_read() -> None:
    key = b"k" * 24
    unpadded = "whsec_" + base64.b64encode(key).decode().rstrip("=")
    headers = sign(b"{}", key)
    assert verify_signature(b"{}", headers, unpadded)
    assert new_secret().startswith("whsec_")
    assert len(base64.b64decode(new_secret().removeprefix("whsec_"))) == 32
