"""A PostgreSQL DSN shown without its secrets (messages, ``agentcore db status``).

libpq decides what a DSN's password is, so psycopg's parser (``psycopg.conninfo``, libpq's
own) finds the secrets: a ``key=value`` string is rebuilt from what it parsed with each
secret replaced; a URL keeps its form, its user info and secret query parameters hidden,
and is parsed again: a secret libpq still reads there hides all but the scheme. Where
psycopg is not installed or cannot parse the text (a DSN that would not connect anyway,
and whose error message shows it), the text is hidden by its shape, erring towards hiding
too much.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["redact_dsn"]

HIDDEN = "***"
_SECRET_KEYS = ("password", "sslpassword")
_URL = re.compile(r"^(postgres(?:ql)?://)(.*)$", re.IGNORECASE | re.DOTALL)
_USER_INFO = re.compile(r"^([^:@/?]*):.*@", re.DOTALL)  # to the last "@": a password may hold "@"
_PARAM = re.compile(r"([?&])([^=&]*)=([^&]*)")
_SECRET_PAIR = re.compile(
    r"((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*(?:'|\\?$)|(?:\\.|\S)*)", re.IGNORECASE | re.DOTALL
)


def redact_dsn(dsn: str) -> str:
    """The DSN with its password (and ``sslpassword``) replaced by ``***``, for messages.

    Both forms libpq reads are understood: a ``postgresql://`` / ``postgres://`` URL keeps
    its form (``postgresql://user:***@host/db``); a ``key=value`` string comes back in
    libpq's ``key=value`` form with ``password=***``.
    """
    parsed = _libpq_secrets(dsn) is not None
    url = _URL.match(dsn)
    if url is None:
        if parsed:
            return _rebuilt(dsn)
        return _SECRET_PAIR.sub(rf"\g<1>{HIDDEN}", dsn)
    scheme, rest = url.groups()
    rest = _PARAM.sub(_param_shown, _USER_INFO.sub(rf"\g<1>:{HIDDEN}@", rest))
    shown = scheme + rest
    if parsed and _libpq_secrets(shown, hidden_ok=True) != []:
        return scheme + HIDDEN  # libpq reads a secret where the shape did not expect one
    return shown


def _param_shown(param: re.Match[str]) -> str:
    """A URL's query parameter, its value hidden when its name (decoded) is a secret's."""
    sep, name, value = param.groups()
    if unquote(name).lower() in _SECRET_KEYS:
        value = HIDDEN
    return f"{sep}{name}={value}"


def _libpq_secrets(dsn: str, *, hidden_ok: bool = False) -> list[str] | None:
    """The non-empty secrets libpq finds in ``dsn`` (``None``: psycopg is not installed,
    or it cannot parse the DSN); with ``hidden_ok``, those that are not ``***``."""
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return None
    try:
        params = conninfo_to_dict(dsn)
    except ProgrammingError:
        return None
    found = [str(params[key]) for key in _SECRET_KEYS if params.get(key)]
    return [secret for secret in found if not (hidden_ok and secret == HIDDEN)]


def _rebuilt(dsn: str) -> str:
    """A ``key=value`` DSN psycopg parsed, rebuilt with its secrets hidden (as it is when
    it has none)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    if not any(params.get(key) for key in _SECRET_KEYS):
        return dsn
    for key in _SECRET_KEYS:
        if key in params:
            params[key] = HIDDEN
    return make_conninfo("", **params)
