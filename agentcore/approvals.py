"""Calls that wait for people: who is told, who may answer, and a signed webhook.

A call waits for people when the dispatcher says so (a destructive tool, a plan under
``confirm_plans``, or a rule of :attr:`Policy.approvals` that asks for N approvers). Three
hooks of the :class:`~agentcore.policy.Policy` let the application take part without
agentcore knowing its users:

- ``authorize(by, pending) -> bool`` says whether a person may answer this call (roles are
  the application's); a refusal raises :class:`NotAuthorizedError` and records nothing.
- ``on_pending(request)`` hears of every call that starts waiting, of every approval that
  leaves it waiting (so the remaining people can be asked) and of every escalation.
- :func:`webhook` builds an ``on_pending`` that posts the request as JSON, signed with
  HMAC-SHA256, and :func:`verify_signature` checks such a request on the receiving side.

Notifications are sent after the events are durable and at most once per occasion by the
process that recorded them: a process that dies in between sends none. The transcript is
the truth; ``agentcore runs --status awaiting_confirmation`` lists what waits.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import json
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from agentcore.contracts.errors import ConfigurationError

from ._observability import get_logger
from ._state import PendingCall

__all__ = [
    "SIGNATURE_HEADER",
    "ApprovalRequest",
    "Authorize",
    "OnPending",
    "verify_signature",
    "webhook",
]

SIGNATURE_HEADER = "Agentcore-Signature"
"""The webhook's signature header: ``t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">``."""

Occasion = Literal["waiting", "approved", "escalated"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What ``on_pending`` is told.

    Attributes:
        run_id: the run that waits.
        occasion: ``waiting`` (the call started waiting), ``approved`` (someone approved
            and more approvals are needed) or ``escalated`` (its approval window passed
            under ``Policy(approval_expiry="escalate")``).
        pending: the call, with who approved so far and how many are needed.
    """

    run_id: str
    occasion: Occasion
    pending: PendingCall

    def to_json(self) -> dict[str, Any]:  # Any: JSON values
        """The request as the webhook sends it."""
        data = asdict(self)
        data["pending"]["approvals"] = list(self.pending.approvals)
        data["pending"]["plan_steps"] = list(self.pending.plan_steps)
        return data


Authorize = Callable[[str, PendingCall], bool]
"""``authorize(by, pending)``: whether ``by`` may approve or deny ``pending``."""

OnPending = Callable[[ApprovalRequest], Awaitable[None] | None]
"""``on_pending(request)``: told when a call waits for people (sync or async)."""


async def notify(hook: OnPending | None, request: ApprovalRequest) -> None:
    """Call ``hook`` (awaited when async); its failure is logged, never raised: the wait
    is recorded whether or not anyone was told."""
    if hook is None:
        return
    try:
        outcome = hook(request)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception as exc:  # a notifier's failure must not undo or block the run
        get_logger().warning(
            "on_pending_failed",
            run_id=request.run_id,
            occasion=request.occasion,
            error=f"{type(exc).__name__}: {exc}",
        )


def _sign(secret: bytes, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def webhook(url: str, secret: str | bytes, *, timeout: float = 5.0) -> OnPending:
    """An ``on_pending`` hook that POSTs each request as JSON to ``url``, with the header
    :data:`SIGNATURE_HEADER` (HMAC-SHA256 of the timestamp and body, keyed by ``secret``)
    so the receiver can check it came from you and is recent (:func:`verify_signature`).

    The post runs in a thread (the event loop is not blocked); a non-2xx answer or a
    network error is logged as ``on_pending_failed``.

    Raises:
        ConfigurationError: ``url`` is not http(s), or ``secret`` is empty.
    """
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"webhook url must be http:// or https://, got {url!r}")
    key = secret.encode() if isinstance(secret, str) else secret
    if not key:
        raise ConfigurationError("webhook secret must not be empty")

    def post(request: ApprovalRequest) -> None:
        body = json.dumps(request.to_json(), separators=(",", ":")).encode()
        req = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                SIGNATURE_HEADER: _sign(key, int(time.time()), body),
            },
        )
        with urllib.request.urlopen(req, timeout=timeout):
            pass  # urlopen raises on a non-2xx answer

    async def send(request: ApprovalRequest) -> None:
        await asyncio.to_thread(post, request)

    return send


def verify_signature(
    body: bytes, header: str, secret: str | bytes, *, tolerance_s: float = 300.0
) -> bool:
    """Whether ``header`` (the :data:`SIGNATURE_HEADER` value) signs ``body`` with
    ``secret`` and is at most ``tolerance_s`` old (a replayed request is refused)."""
    key = secret.encode() if isinstance(secret, str) else secret
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > tolerance_s:
        return False
    return hmac.compare_digest(
        _sign(key, timestamp, body), f"t={timestamp},v1={parts.get('v1', '')}"
    )
