"""Calls that wait for people: who is told, who may answer, and a signed webhook.

A call waits for people when the dispatcher says so (a destructive tool, a plan under
``confirm_plans``, or a rule of :attr:`Policy.approvals` that asks for N approvers). Three
hooks of the :class:`~agentcore.policy.Policy` let the application take part without
agentcore knowing its users:

- ``authorize(by, pending) -> bool`` says whether a person may answer this call (roles are
  the application's); a refusal raises :class:`NotAuthorizedError` and records nothing.
- ``on_pending(request)`` hears of every call that starts waiting, of every approval that
  leaves it waiting (so the remaining people can be asked) and of every escalation.
- :func:`webhook` builds an ``on_pending`` that posts the request as JSON, signed by the
  Standard Webhooks scheme (a message id to deduplicate by, a timestamp, HMAC-SHA256 with
  one or more keys), and :func:`verify_signature` checks such a request on the receiving
  side.

Notifications are sent after the events are durable and at most once per occasion by the
process that recorded them: a process that dies in between sends none. The transcript is
the truth; ``agentcore runs --status awaiting_confirmation`` lists what waits.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import json
import re
import secrets
import time
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from email.message import Message
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import urlsplit

from agentcore.contracts.errors import AgentcoreError, ConfigurationError

from ._observability._log import get_logger
from ._pending import PendingCall

if TYPE_CHECKING:
    from agentcore.adapters import RetryPolicy

__all__ = [
    "WEBHOOK_HEADERS",
    "ApprovalRequest",
    "Authorize",
    "OnPending",
    "Secret",
    "Secrets",
    "WebhookDeliveryError",
    "new_secret",
    "person_key",
    "person_name",
    "sign",
    "verify_signature",
    "webhook",
]

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

    @property
    def message_id(self) -> str:
        """The webhook's ``webhook-id`` for this request: ``msg_`` and 32 hex digits of the
        SHA-256 of its JSON. The same request (run, occasion, call, approvals so far, window)
        has the same id in every attempt and every process, so a receiver deduplicates by
        it; another occasion, even of the same call, has another."""
        canonical = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return "msg_" + hashlib.sha256(canonical.encode()).hexdigest()[:32]


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


# --------------------------------------------------------------------------- the webhook
# Standard Webhooks (https://www.standardwebhooks.com, version 1.0.0): the content signed is
# "{webhook-id}.{webhook-timestamp}.{body}", HMAC-SHA256, base64, listed as "v1,<mac>".

Secret = str | bytes
"""A webhook signing key: ``whsec_`` followed by the key in base64 (what :func:`new_secret`
makes and what other Standard Webhooks tools print), or the key's raw bytes; 24 to 64 bytes
either way."""

Secrets = Secret | Sequence[Secret]
"""One signing key, or several while a new one replaces an old one: :func:`webhook` signs
with each, :func:`verify_signature` accepts a signature made with any."""

WEBHOOK_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
"""The headers :func:`webhook` signs with, as Standard Webhooks names them: the message id
(the same in every attempt: deduplicate by it), the attempt's Unix seconds, and the
space-separated signatures ``v1,<base64 HMAC-SHA256>``, one per key."""

_SECRET_PREFIX = "whsec_"
_KEY_BYTES = range(24, 65)
_FORM = (
    "A webhook secret is 'whsec_' followed by the key in base64 "
    "(agentcore.approvals.new_secret() makes one) or the key's raw bytes, 24 to 64 bytes, "
    "the same on both sides"
)


class WebhookDeliveryError(AgentcoreError):
    """The webhook was not delivered: the receiver refused it (any answer but 2xx, a
    redirect included) or could not be reached, on every attempt the retry policy allows.
    ``on_pending`` failures are logged (``on_pending_failed``), so this reaches only code
    that calls the hook itself.

    Attributes:
        status: the last answer's HTTP status, or ``None`` when none came.
        attempts: the requests made.
    """

    def __init__(self, message: str, *, status: int | None, attempts: int) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


def new_secret() -> str:
    """A new random 32-byte signing key as ``whsec_<base64>``: set it on both sides."""
    return _SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _key(secret: object) -> bytes:
    """The HMAC key of one secret.

    Raises:
        ConfigurationError: not a ``whsec_`` string or bytes of 24 to 64 bytes (an empty
            key signs what anyone can sign).
    """
    if isinstance(secret, str):
        if not secret:
            raise ConfigurationError(f"The webhook secret is empty. {_FORM}.")
        if not secret.startswith(_SECRET_PREFIX):
            raise ConfigurationError(
                f"The webhook secret has no {_SECRET_PREFIX!r} prefix. {_FORM} (a passphrase "
                "of 24 bytes or more may be passed as its bytes: phrase.encode())."
            )
        encoded = secret.removeprefix(_SECRET_PREFIX)
        try:
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except ValueError as exc:  # binascii.Error, or text that is not ASCII
            raise ConfigurationError(
                f"The webhook secret is not base64 after {_SECRET_PREFIX!r}. {_FORM}."
            ) from exc
    elif isinstance(secret, bytes | bytearray):
        key = bytes(secret)
    else:
        raise ConfigurationError(f"{_FORM}; got {type(secret).__name__}.")
    if len(key) not in _KEY_BYTES:
        raise ConfigurationError(f"The webhook secret is a {len(key)}-byte key. {_FORM}.")
    return key


def _keys(secret: object) -> tuple[bytes, ...]:
    """The HMAC keys of one secret or a list of them (see :data:`Secrets`).

    Raises:
        ConfigurationError: no secret, or one that :func:`_key` refuses.
    """
    if isinstance(secret, str | bytes | bytearray):
        return (_key(secret),)
    if isinstance(secret, Sequence) and secret:
        items: Sequence[object] = secret  # pyright: ignore[reportUnknownVariableType]  # a caller's setting
        return tuple(_key(item) for item in items)
    if isinstance(secret, Sequence):
        raise ConfigurationError(f"No webhook secret given (an empty list). {_FORM}.")
    raise ConfigurationError(f"{_FORM}, or a list of them; got {type(secret).__name__}.")


def _mac(key: bytes, msg_id: str, timestamp: str, body: bytes) -> str:
    """The base64 HMAC-SHA256 of ``"{msg_id}.{timestamp}.{body}"``."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def _headers(keys: Sequence[bytes], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three :data:`WEBHOOK_HEADERS` for one attempt.

    Raises:
        ConfigurationError: a ``msg_id`` or ``timestamp`` a receiver would refuse.
    """
    if not isinstance(msg_id, str) or not _MESSAGE_ID.fullmatch(msg_id):  # pyright: ignore[reportUnnecessaryIsInstance]  # a caller's value
        raise ConfigurationError(
            f"A webhook message id is 1 to 128 ASCII letters, digits, '_' or '-'; got {msg_id!r}."
        )
    at = str(timestamp)
    if isinstance(timestamp, bool) or not _TIMESTAMP.fullmatch(at):
        raise ConfigurationError(
            f"A webhook timestamp is Unix seconds (0 to 12 digits); got {timestamp!r}."
        )
    listed = " ".join(f"v1,{_mac(key, msg_id, at, body)}" for key in keys)
    return dict(zip(WEBHOOK_HEADERS, (msg_id, at, listed), strict=True))


def sign(
    body: bytes, secret: Secrets, *, msg_id: str | None = None, timestamp: int | None = None
) -> dict[str, str]:
    """The :data:`WEBHOOK_HEADERS` :func:`webhook` sends with ``body``, for a receiver's own
    tests: ``webhook-id`` (``msg_id``; a new random one by default), ``webhook-timestamp``
    (``timestamp``, Unix seconds; now by default) and ``webhook-signature``
    (``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`` per key, space-separated).

    Raises:
        ConfigurationError: a secret that is not a key of 24 to 64 bytes (see :data:`Secret`),
            a ``body`` that is not bytes, a ``msg_id`` that is not 1 to 128 letters, digits,
            ``_`` or ``-``, or a negative ``timestamp``.
    """
    if not isinstance(body, bytes | bytearray | memoryview):  # pyright: ignore[reportUnnecessaryIsInstance]  # a caller's value
        raise ConfigurationError(
            f"sign() takes the body as the bytes that are sent (encode text first); "
            f"got {type(body).__name__}."
        )
    chosen = f"msg_{secrets.token_hex(16)}" if msg_id is None else msg_id
    at = int(time.time()) if timestamp is None else timestamp
    return _headers(_keys(secret), chosen, at, bytes(body))


def _default_retry() -> RetryPolicy:
    """Three attempts, half a second then up to a second apart (jittered): the run's
    ``confirm`` or ``run`` returns after the webhook was told or gave up."""
    from agentcore.adapters import RetryPolicy

    return RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=5.0, max_retry_after=10.0)


def _shown(url: str) -> str:
    """``url`` as logged: without user, password, query or fragment (they may hold tokens)."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment="").geturl()


def webhook(
    url: str, secret: Secrets, *, timeout: float = 5.0, retry: RetryPolicy | None = None
) -> OnPending:
    """An ``on_pending`` hook that POSTs each request as JSON to ``url``, signed by the
    Standard Webhooks scheme (:data:`WEBHOOK_HEADERS`; check it with
    :func:`verify_signature` or any Standard Webhooks library).

    ``webhook-id`` is the request's :attr:`ApprovalRequest.message_id`: the same in every
    attempt and every process, so a receiver deduplicates by it. Each attempt carries its
    own timestamp. ``secret`` may list several keys while one replaces another: every
    attempt is signed with each of them.

    A 2xx answer is a delivery. Anything else is a failure: a redirect (3xx) is never
    followed, since following it would send the notification somewhere the receiver did
    not sign up for (set ``url`` to where it moved); a 3xx, a 429, a 5xx, a timeout or a
    refused connection is retried as ``retry`` says (an
    :class:`~agentcore.adapters.RetryPolicy`: three attempts, jittered backoff, a
    ``Retry-After`` (seconds or an HTTP-date, read by
    :func:`~agentcore.adapters.parse_retry_after`) honoured up to ``max_retry_after``); any
    other 4xx is not. Each failed attempt is logged (``webhook_attempt_failed``); the last
    one raises :class:`WebhookDeliveryError`, which :class:`~agentcore.policy.Policy` logs
    as ``on_pending_failed``. ``timeout`` bounds each phase of each attempt (connect, send,
    wait for the answer), in seconds.

    Raises:
        ConfigurationError: ``url`` is not an http(s) URL with a host, or ``secret`` is not
            one or more keys of 24 to 64 bytes (see :data:`Secret`).
    """
    try:
        host = urlsplit(url).hostname if url.startswith(("http://", "https://")) else None
    except ValueError:  # a malformed IPv6 host
        host = None
    if not host:
        raise ConfigurationError(f"webhook url must be an http:// or https:// URL, got {url!r}")
    keys = _keys(secret)
    policy = _default_retry() if retry is None else retry
    shown = _shown(url)

    async def send(request: ApprovalRequest) -> None:
        import httpx  # loads on the first notification, not with agentcore

        from agentcore.adapters import parse_retry_after

        body = json.dumps(request.to_json(), separators=(",", ":")).encode()
        msg_id = request.message_id
        log = get_logger().bind(run_id=request.run_id, webhook_id=msg_id, url=shown)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            attempt = 0
            while True:
                attempt += 1
                headers = _headers(keys, msg_id, int(time.time()), body)
                headers["content-type"] = "application/json"
                status: int | None = None
                cause: Exception | None = None
                floor = 0.0
                try:  # the answer's body is never read: the status says it all
                    async with client.stream("POST", url, content=body, headers=headers) as answer:
                        status = answer.status_code
                        if 200 <= status < 300:
                            return
                        floor = parse_retry_after(answer.headers, now=time.time()) or 0.0
                        why = _refusal(status, answer.headers.get("location"))
                except httpx.HTTPError as exc:
                    cause, why = exc, f"{type(exc).__name__}: {exc}"
                retryable = status is None or status < 400 or status == 429 or status >= 500
                failure = WebhookDeliveryError(
                    f"POST {shown} failed (attempt {attempt} of {policy.max_attempts}): {why}",
                    status=status,
                    attempts=attempt,
                )
                if not retryable or attempt >= policy.max_attempts:
                    raise failure from cause
                wait = max(policy.wait_after(failure, attempt), min(floor, policy.max_retry_after))
                log.warning(
                    "webhook_attempt_failed",
                    attempt=attempt,
                    status=status,
                    error=why,
                    retry_in_s=round(wait, 3),
                )
                await policy.sleep(wait)

    return send


def _refusal(status: int, location: str | None) -> str:
    if 300 <= status < 400:
        return (
            f"answered {status}, a redirect to {location!r}: webhooks do not follow "
            "redirects; set the webhook url to the address that answers"
        )
    return f"answered {status}"


def verify_signature(
    body: bytes,
    headers: Mapping[str, str] | Message,
    secret: Secrets,
    *,
    tolerance_s: float = 300.0,
) -> bool:
    """Whether ``headers`` (the request's headers: a mapping, or ``http.server``'s
    ``self.headers``) sign ``body`` by the Standard Webhooks scheme with ``secret`` (one key,
    or several: a signature by any of them is enough) and their timestamp is within
    ``tolerance_s`` of now, either way (a replayed request is refused). Header names are
    matched without regard to case. Deduplicate by ``webhook-id`` after this returns ``True``.

    It fails closed: anything that is not exactly what a Standard Webhooks sender could have
    sent is ``False``, never an exception: a missing, repeated or non-text header; a
    ``webhook-id`` that is not 1 to 128 ASCII letters, digits, ``_`` or ``-``; a timestamp
    that is not 1 to 12 ASCII digits; a signature list that is longer than 2,048 characters,
    has an entry that is not ``<version>,<base64>`` (entries are separated by single spaces)
    or a ``v1`` entry that is not the 44 characters of a base64 SHA-256 MAC; a body that is
    not bytes; a ``tolerance_s`` that is not a number >= 0. Entries of other versions (such
    as ``v1a``, asymmetric) are skipped.

    Raises:
        ConfigurationError: a ``secret`` that is not one or more keys of 24 to 64 bytes (the
            receiver's setting, not the request's).
    """
    keys = _keys(secret)
    if not isinstance(body, bytes | bytearray | memoryview):  # pyright: ignore[reportUnnecessaryIsInstance]  # a request's data
        return False
    if isinstance(tolerance_s, bool) or not isinstance(tolerance_s, int | float):  # pyright: ignore[reportUnnecessaryIsInstance]  # a caller's value
        return False
    found = _webhook_headers(headers)
    if found is None:
        return False
    msg_id, at, listed = found
    if not _MESSAGE_ID.fullmatch(msg_id) or not _TIMESTAMP.fullmatch(at):
        return False
    if not abs(time.time() - int(at)) <= tolerance_s:  # also False for a NaN tolerance
        return False
    given = _v1_signatures(listed)
    if not given:
        return False
    # Compared as text: two base64 texts can decode to the same bytes (the unused low bits of
    # the last character), and only the one the sender wrote is accepted.
    expected = [_mac(key, msg_id, at, bytes(body)) for key in keys]
    return any(hmac.compare_digest(mac, sig) for mac in expected for sig in given)


def _webhook_headers(headers: object) -> tuple[str, str, str] | None:
    """The values of the three :data:`WEBHOOK_HEADERS`, or ``None`` when one is missing,
    repeated (in any case) or not text."""
    pairs: Iterable[tuple[object, object]]
    if isinstance(headers, Message):
        pairs = cast("Message[object, object]", headers).items()  # cast: a request's data
    elif isinstance(headers, Mapping):
        pairs = cast("Mapping[object, object]", headers).items()  # cast: a request's data
    else:
        return None
    found: dict[str, str] = {}
    for name, value in pairs:
        # ASCII names only: str.lower() maps the Kelvin sign to k, and header names are ASCII
        wanted = name.lower() if isinstance(name, str) and name.isascii() else None
        if wanted not in WEBHOOK_HEADERS:
            continue
        if wanted in found or not isinstance(value, str):
            return None
        found[wanted] = value
    if len(found) != len(WEBHOOK_HEADERS):
        return None
    msg_id, at, listed = (found[name] for name in WEBHOOK_HEADERS)
    return msg_id, at, listed


def _v1_signatures(listed: str) -> list[str] | None:
    """The ``v1`` signatures of a ``webhook-signature`` value, or ``None`` when any entry is
    malformed."""
    if len(listed) > _MAX_SIGNATURES_CHARS:
        return None
    v1: list[str] = []
    for entry in listed.split(" "):
        version, comma, value = entry.partition(",")
        if not comma or not _VERSION.fullmatch(version):
            return None
        if version == "v1":
            if not _V1.fullmatch(value):
                return None
            v1.append(value)
        elif not _BASE64.fullmatch(value):
            return None
    return v1


_MAX_SIGNATURES_CHARS = 2048
"""A signature list :func:`webhook` sends is 48 characters per key; a longer one is refused
unread."""
_MESSAGE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""A message id: no ``.`` (the signed content's separator) and nothing outside ASCII."""
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
"""Unix seconds, ASCII digits only (``str.isdigit`` also accepts other scripts' digits)."""
_VERSION = re.compile(r"v[0-9]{1,3}[a-z]?")
"""A signature's version: ``v1`` (HMAC-SHA256), ``v1a`` (ed25519), later ones."""
_V1 = re.compile(r"[A-Za-z0-9+/]{43}=")
"""A SHA-256 MAC in base64 as ``b64encode`` writes it."""
_BASE64 = re.compile(r"[A-Za-z0-9+/]{1,1024}={0,2}")
"""Another version's signature: base64, checked for form only."""
