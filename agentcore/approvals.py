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
import re
import time
import unicodedata
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
    "person_key",
    "person_name",
    "sign",
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


def person_name(by: str) -> str:
    """A person's name as it is recorded (``by`` of every answer: approve, deny, resolve,
    cancel, compensate, resume): NFKC-normalised (full-width and other compatibility forms
    become their plain letters), invisible format characters (zero-width spaces, direction
    marks) removed, surrounding whitespace stripped; case kept as given."""
    normal = unicodedata.normalize("NFKC", by)
    return "".join(c for c in normal if unicodedata.category(c) != "Cf").strip()


def person_key(by: str) -> str:
    """What names are compared by (two approvals by one person, who approved already): the
    recorded name (:func:`person_name`) case-folded, with each run of whitespace as one
    space. ``"Alice"``, ``"alice "``, full-width ``"\uff41lice"`` and ``"ali\u200bce"`` are
    one person; letters of different scripts that only look alike (Latin ``a``, Cyrillic
    ``\u0430``) are not: map names to accounts in ``authorize``."""
    folded = unicodedata.normalize("NFKC", person_name(by).casefold())
    return " ".join(folded.split())


Authorize = Callable[[str, PendingCall], bool]
"""``authorize(by, pending)``: whether ``by`` (as recorded: :func:`person_name`) may approve
or deny ``pending``."""

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


def _key(secret: str | bytes) -> bytes:
    """The HMAC key of ``secret``.

    Raises:
        ConfigurationError: ``secret`` is empty, or neither text nor bytes (an unset
            setting): an empty key signs what anyone can sign.
    """
    if isinstance(secret, str):
        secret = secret.encode()
    if not isinstance(secret, bytes | bytearray) or not secret:  # pyright: ignore[reportUnnecessaryIsInstance]  # a caller's setting
        raise ConfigurationError(
            "The webhook secret must be a non-empty string or bytes (the same on both sides)."
        )
    return bytes(secret)


def _mac(key: bytes, timestamp: int, body: bytes) -> str:
    return hmac.new(key, str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def sign(body: bytes, secret: str | bytes, *, timestamp: int | None = None) -> str:
    """The :data:`SIGNATURE_HEADER` value :func:`webhook` sends with ``body``
    (``t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">``); ``timestamp`` defaults to now.
    For a receiver's own tests.

    Raises:
        ConfigurationError: an empty ``secret``.
    """
    at = int(time.time()) if timestamp is None else timestamp
    return f"t={at},v1={_mac(_key(secret), at, body)}"


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
    key = _key(secret)

    def post(request: ApprovalRequest) -> None:
        body = json.dumps(request.to_json(), separators=(",", ":")).encode()
        req = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                SIGNATURE_HEADER: sign(body, key),
            },
        )
        with urllib.request.urlopen(req, timeout=timeout):
            pass  # urlopen raises on a non-2xx answer

    async def send(request: ApprovalRequest) -> None:
        await asyncio.to_thread(post, request)

    return send


def verify_signature(
    body: bytes, header: str | None, secret: str | bytes, *, tolerance_s: float = 300.0
) -> bool:
    """Whether ``header`` (the :data:`SIGNATURE_HEADER` value) signs ``body`` with
    ``secret`` and is at most ``tolerance_s`` old (a replayed request is refused).

    It fails closed: anything that is not exactly a header :func:`webhook` could have sent
    (a missing or non-text header, a repeated or missing ``t`` or ``v1``, a timestamp that
    is not a short decimal number, a ``v1`` that is not 64 lowercase hex digits, a body
    that is not bytes, a ``tolerance_s`` that is not a number >= 0) is ``False``, never an
    exception.

    Raises:
        ConfigurationError: an empty ``secret`` (the receiver's setting, not the request's).
    """
    key = _key(secret)
    if not isinstance(body, bytes | bytearray | memoryview) or not isinstance(header, str):  # pyright: ignore[reportUnnecessaryIsInstance]  # a request's data
        return False
    if len(header) > _MAX_HEADER_CHARS:
        return False
    fields: dict[str, str] = {}
    for part in header.split(","):
        name, equals, value = part.partition("=")
        if not equals or name in fields:
            return False  # a part without a value, or a repeated one: not what was sent
        fields[name] = value
    t, v1 = fields.get("t"), fields.get("v1")
    if t is None or v1 is None or not _TIMESTAMP.fullmatch(t) or not _HEX_MAC.fullmatch(v1):
        return False
    timestamp = int(t)
    if not abs(time.time() - timestamp) <= tolerance_s:  # also False for a NaN tolerance
        return False
    return hmac.compare_digest(_mac(key, timestamp, bytes(body)), v1)


_MAX_HEADER_CHARS = 512
"""A header :func:`webhook` sends is about 80 characters; a longer one is refused unread."""
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
"""Unix seconds, ASCII digits only (``str.isdigit`` also accepts other scripts' digits)."""
_HEX_MAC = re.compile(r"[0-9a-f]{64}")
"""A SHA-256 hex digest as ``hexdigest()`` writes it."""
