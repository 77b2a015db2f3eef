"""Argument policies: rules on a tool's arguments that the dispatcher checks before a call
runs and before a person is asked about it.

::

    @tool(effect="write", policies=[path_within("path", "/srv/notes")])
    def save_note(path: str, text: str) -> str: ...

    @tool(effect="read", policies=[host_allowed("url", ["docs.example.com", "*.example.org"])])
    async def fetch(url: str) -> str: ...

A policy is any callable ``policy(args) -> str | None`` of the call's arguments (JSON
values, as proposed or as a person edited them) returning ``None`` to allow the call or the
reason to refuse it, in words the model reads. A refusal is a ``decision`` event
(``deny``): the call does not run and nobody is asked about it. A policy that raises
refuses the call too (it fails closed). Policies belong to the tool (``@tool(policies=...)``,
``ToolConfig(policies=...)`` for a remote tool), so every run of every agent that has the
tool applies them; they are code, so they are not recorded in the transcript.

An argument policy checks a value before the call; it cannot see what the tool does with
it. A tool that opens a path should open :func:`resolve_within`'s result, and a tool that
fetches URLs should use :class:`agentcore.net.AsyncGuardedTransport`, which checks the
address it connects to on every request and redirect.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentcore.contracts.errors import ConfigurationError

__all__ = ["ArgumentPolicy", "check_arguments", "host_allowed", "path_within", "resolve_within"]

ArgumentPolicy = Callable[[Mapping[str, Any]], "str | None"]  # Any: JSON values
"""``policy(args)``: ``None`` allows the call, a string is why it is refused."""


def check_arguments(
    policies: Iterable[ArgumentPolicy], args: Mapping[str, Any]
) -> str | None:  # Any: JSON values
    """The first refusal of ``policies`` for ``args``, or ``None`` when all allow them.
    A policy that raises refuses, naming the exception."""
    for policy in policies:
        try:
            refused = policy(args)
        except Exception as exc:  # user code: fail closed, and say why
            name = getattr(policy, "__name__", type(policy).__name__)
            return f"argument policy {name} failed ({type(exc).__name__}: {exc}); refused"
        if refused:
            return refused
    return None


def resolve_within(root: str | os.PathLike[str], value: str) -> Path:
    """``value`` (relative to ``root``, or absolute) as a real path inside ``root``.

    Symbolic links are resolved (in ``root`` too), ``..`` is followed, and the result must
    be ``root`` or under it. A tool should open the path this returns: between this check
    and the open, only someone who can already write inside ``root`` can swap a link.

    Raises:
        ValueError: the path is empty, holds a NUL byte, or resolves outside ``root``.
    """
    if not value or "\x00" in value:
        raise ValueError("the path is empty or holds a NUL byte")
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(real_root / value))  # an absolute value replaces the root
    if real != real_root and real_root not in real.parents:
        raise ValueError(
            f"the path {value!r} resolves to {str(real)!r}, outside {str(real_root)!r}"
        )
    return real


def path_within(arg: str, root: str | os.PathLike[str]) -> ArgumentPolicy:
    """A policy: argument ``arg`` is a path inside ``root`` once ``..`` and symbolic links
    are resolved (see :func:`resolve_within`). A missing or ``None`` argument is allowed
    (the tool's schema decides whether it is required).

    Raises:
        ConfigurationError: ``root`` is not an existing directory.
    """
    if not Path(root).is_dir():
        raise ConfigurationError(f"path_within({arg!r}, {str(root)!r}): not an existing directory")

    def check(value: str) -> str | None:
        try:
            resolve_within(root, value)
        except ValueError as exc:
            return f"argument {arg!r} is refused: {exc}; use a path inside {str(root)!r}"
        return None

    return _on_string(f"path_within({arg!r})", arg, "a path", check)


def host_allowed(
    arg: str, hosts: Iterable[str], *, schemes: Iterable[str] = ("https",)
) -> ArgumentPolicy:
    """A policy: argument ``arg`` is a URL whose scheme is in ``schemes`` and whose host is
    in ``hosts`` (exact names, or patterns such as ``*.example.com``, which match
    subdomains only). Compared case-insensitively, after the URL is parsed the way HTTP
    clients parse it (``https://good.example@evil.example/`` is a URL of ``evil.example``).
    A missing or ``None`` argument is allowed.

    Raises:
        ConfigurationError: ``hosts`` is empty.
    """
    allowed = tuple(h.lower().rstrip(".") for h in hosts)
    allowed_schemes = tuple(s.lower() for s in schemes)
    if not allowed:
        raise ConfigurationError(f"host_allowed({arg!r}, ...): name at least one host")
    shown = ", ".join(allowed)

    def check(value: str) -> str | None:
        if any(c in value for c in "\\ \t\r\n") or not value.isprintable():
            # Parsers disagree on these (a backslash is a slash to a browser, not to urllib).
            return f"argument {arg!r} holds a backslash, a space or a control character"
        try:
            parts = urlsplit(value)
            host = (parts.hostname or "").rstrip(".")
            _ = parts.port  # raises for an invalid port
        except ValueError:
            return f"argument {arg!r} is not a valid URL"
        if parts.scheme.lower() not in allowed_schemes:
            return (
                f"argument {arg!r} uses scheme {parts.scheme!r}; allowed: "
                f"{', '.join(allowed_schemes)}"
            )
        if not any(host == h or (h.startswith("*.") and fnmatch.fnmatch(host, h)) for h in allowed):
            return f"argument {arg!r} names host {host!r}, which is not allowed; allowed: {shown}"
        return None

    return _on_string(f"host_allowed({arg!r})", arg, "a URL", check)


def _on_string(
    name: str, arg: str, what: str, check: Callable[[str], str | None]
) -> ArgumentPolicy:
    """A policy named ``name``: argument ``arg`` is missing, ``None``, or a string (``what``,
    e.g. "a path") that ``check`` allows (``None``; else why not)."""

    def policy(args: Mapping[str, Any]) -> str | None:  # Any: JSON values
        value = args.get(arg)
        if value is None:
            return None
        if not isinstance(value, str):
            return f"argument {arg!r} must be {what} string"
        return check(value)

    policy.__name__ = name
    return policy
