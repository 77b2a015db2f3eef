"""Where an argument came from: the run's trusted text, untrusted tool output, or the model.

Text a run reads has a trust level: the task and what people enter (approvals' edits and
reasons, resolutions) are trusted; the results of tools declared ``@tool(output=
"untrusted")`` (mail, web pages, files, tickets; MCP tools unless configured trusted) are
not. Before a ``write`` or ``destructive`` call runs, the dispatcher labels each argument
value (each leaf of the arguments):

- ``untrusted``: it, or an identifier-like token in it (an e-mail address, a URL or host,
  an IBAN-like code, a number or code of six or more characters), appears in untrusted
  output and not in trusted text: it could only have come from there;
- ``trusted``: it appears in trusted text;
- ``model``: anything else (the model wrote it).

Matching is on normalised text (case folded, whitespace collapsed), whole values of four
or more characters and tokens. What it catches: an attacker's IBAN, address, URL, host or
account number copied from a mail into a payment or a message. What it misses: a value
the model paraphrased or computed (a sum, a translation), short values (``"yes"``, ``42``),
and text that both the user and the attacker wrote. Reads are judged only on URLs and
hosts (a fetch that would carry data to an address an injection supplied).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Literal, cast

__all__ = ["Origin", "argument_origins", "normalise"]

Origin = Literal["trusted", "untrusted", "model"]

_TOKENS = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # e-mail addresses
    r"|(?:https?|ftp)://[^\s\"'<>]+"  # URLs
    r"|\b(?:[a-z0-9-]+\.)+[a-z]{2,}\b"  # hosts
    r"|\b[a-z]{2}\d{2}[a-z0-9]{10,30}\b"  # IBAN-like codes
    r"|\b[a-z0-9]*\d[a-z0-9-]{5,}\b",  # numbers and codes with a digit, 6+ characters
    re.IGNORECASE,
)
_URLISH = re.compile(r"(?:https?|ftp)://[^\s\"'<>]+|\b(?:[a-z0-9-]+\.)+[a-z]{2,}\b", re.I)
_MIN_WHOLE = 4
_SPACES = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Case folded, whitespace collapsed: the form values and texts are compared in."""
    return _SPACES.sub(" ", text.casefold()).strip()


def _leaves(value: object, path: str) -> Iterator[tuple[str, str]]:
    """(path, text) of every string and number leaf of an argument value."""
    match value:
        case bool() | None:
            return
        case str():
            yield path, value
        case int() | float():
            yield path, repr(value)
        case Mapping():
            items = cast("Mapping[str, object]", value)
            for key, item in items.items():
                yield from _leaves(item, f"{path}.{key}")
        case list() | tuple():
            for i, item in enumerate(cast("list[object]", value)):
                yield from _leaves(item, f"{path}[{i}]")
        case _:
            return


def _origin(text: str, trusted: str, untrusted: str, *, urls_only: bool) -> Origin:
    value = normalise(text)
    if not urls_only and len(value) >= _MIN_WHOLE:
        if value in trusted:
            return "trusted"
        if value in untrusted:
            return "untrusted"
    pattern = _URLISH if urls_only else _TOKENS
    for found in pattern.findall(value):
        token = found.rstrip(".,;:)")
        if token in untrusted and token not in trusted:
            return "untrusted"
    return "model"


def argument_origins(
    args: Mapping[str, object], trusted: str, untrusted: str, *, urls_only: bool = False
) -> dict[str, Origin]:
    """The origin of every leaf of ``args`` (paths like ``to``, ``items[0].iban``), given
    the run's trusted and untrusted text (both :func:`normalise`\\ d). ``urls_only``: judge
    only URLs and hosts (for reads)."""
    if not untrusted:  # nothing untrusted was read: nothing can come from there
        return {}
    found: dict[str, Origin] = {}
    for key, value in args.items():
        for path, text in _leaves(value, key):
            found[path] = _origin(text, trusted, untrusted, urls_only=urls_only)
    return found
