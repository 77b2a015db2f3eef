"""Who is asking, and whether a state-changing request came from the console's own page.

Two ways to know the user: the application's ``authenticate(request)`` callable (a service
mounting the console under its own auth), or, without one, :class:`TokenLogin`: a one-time
login URL with a random token (``agentcore serve`` prints it); the name given at login is
kept in a session and recorded as the approver.

CSRF: every state-changing request carries a token (form field ``csrf`` or header
``X-CSRF-Token``) that is an HMAC of the user's name under a per-app secret with a random
nonce. A page of another site can neither read it nor compute it; the session cookie is
also ``SameSite=Strict``.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from starlette.requests import Request

__all__ = ["SESSION_COOKIE", "Authenticate", "Csrf", "TokenLogin", "foreign_origin"]

Authenticate = Callable[[Request], "str | Awaitable[str | None] | None"]
"""Identifies the user of a request: their name (recorded as the approver), or ``None``."""

SESSION_COOKIE = "agentcore_console"


class TokenLogin:
    """A one-time login token and the sessions it opened.

    Args:
        token: the login token (default: 32 random bytes, URL-safe).

    Attributes:
        token: put it in the login URL: ``/login?token=...``. It works once.
    """

    def __init__(self, token: str | None = None) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self._used = False
        self._sessions: dict[str, str] = {}

    def login(self, token: str, name: str) -> str | None:
        """A new session id for ``name`` if ``token`` is the unused login token."""
        if self._used or not hmac.compare_digest(token.encode(), self.token.encode()):
            return None
        self._used = True
        session = secrets.token_urlsafe(32)
        self._sessions[session] = name
        return session

    def user(self, request: Request) -> str | None:
        """The name of the request's session, if it has one."""
        session = request.cookies.get(SESSION_COOKIE)
        return self._sessions.get(session) if session else None


async def identify(
    request: Request, authenticate: Authenticate | None, login: TokenLogin | None
) -> str | None:
    """The request's user, by the application's callable or the token login's session."""
    if authenticate is not None:
        found = authenticate(request)
        if inspect.isawaitable(found):
            found = await found
        return found or None
    return login.user(request) if login is not None else None


class Csrf:
    """Tokens bound to a user name: ``nonce.hmac(secret, name + nonce)``."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def token(self, user: str) -> str:
        """A fresh token for ``user``."""
        nonce = secrets.token_urlsafe(12)
        return f"{nonce}.{self._mac(user, nonce)}"

    def check(self, user: str, token: str | None) -> bool:
        """Whether ``token`` was issued for ``user`` by this app."""
        if not token or "." not in token:
            return False
        nonce, _, mac = token.partition(".")
        return hmac.compare_digest(mac, self._mac(user, nonce))

    def _mac(self, user: str, nonce: str) -> str:
        msg = f"{user}\x00{nonce}".encode()
        return hmac.new(self._secret, msg, hashlib.sha256).hexdigest()


def foreign_origin(request: Request) -> str | None:
    """Why a state-changing request comes from another site, or ``None``: its ``Origin``
    names another host than the one it was sent to (the ``Host`` header; the scheme is not
    compared, so a TLS-terminating proxy in front is fine), or the browser says
    ``Sec-Fetch-Site: cross-site``. A request with neither header (curl, a script) is left
    to the CSRF token alone."""
    origin = request.headers.get("origin")
    if (
        origin is not None
        and urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower()
    ):
        return f"Refused: the request comes from {origin}, not from this console."
    if request.headers.get("sec-fetch-site", "").lower() == "cross-site":
        return "Refused: the browser says this request comes from another site."
    return None
