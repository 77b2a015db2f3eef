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

A plan covers a call (:func:`plan_misses`) when it names the tool and holds every argument
value, except values already in trusted text; of a long value (over 80 characters: a
message the model wrote) only its identifier-like tokens must be there. What a person
approved in a plan counts as trusted for the calls that follow it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Literal, cast

__all__ = ["Origin", "argument_origins", "judge_arguments", "normalise", "plan_misses"]

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
_LONG = 80
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


def _in(raw: str, value: str, text: str) -> bool:
    """``value`` (``raw`` normalised) is in ``text``, as it is or as it reads inside a JSON
    string (a tab as ``\\t``, a quote as ``\\"``: how a plan quoting arguments spells it)."""
    if value in text:
        return True
    escaped = json.dumps(raw)[1:-1]
    return escaped != raw and normalise(escaped) in text


def _origin(text: str, trusted: str, untrusted: str, *, urls_only: bool) -> tuple[Origin, int]:
    """The origin of one value and, when ``untrusted``, where in ``untrusted`` it is."""
    value = normalise(text)
    if not urls_only and len(value) >= _MIN_WHOLE:
        if _in(text, value, trusted):
            return "trusted", -1
        at = untrusted.find(value)
        if at >= 0:
            return "untrusted", at
    pattern = _URLISH if urls_only else _TOKENS
    for found in pattern.findall(value):
        token = found.rstrip(".,;:)")
        at = untrusted.find(token)
        if at >= 0 and token not in trusted:
            return "untrusted", at
    return "model", -1


def judge_arguments(
    args: Mapping[str, object], trusted: str, untrusted: str, *, urls_only: bool = False
) -> dict[str, tuple[Origin, int]]:
    """The origin of every leaf of ``args`` (paths like ``to``, ``items[0].iban``), given
    the run's trusted and untrusted text (both :func:`normalise`\\ d), with the offset in
    ``untrusted`` where an ``untrusted`` one was found (-1 otherwise). ``urls_only``: judge
    only URLs and hosts (for reads)."""
    if not untrusted:  # nothing untrusted was read: nothing can come from there
        return {}
    found: dict[str, tuple[Origin, int]] = {}
    for key, value in args.items():
        for path, text in _leaves(value, key):
            found[path] = _origin(text, trusted, untrusted, urls_only=urls_only)
    return found


def argument_origins(
    args: Mapping[str, object], trusted: str, untrusted: str, *, urls_only: bool = False
) -> dict[str, Origin]:
    """:func:`judge_arguments` without the offsets."""
    judged = judge_arguments(args, trusted, untrusted, urls_only=urls_only)
    return {path: origin for path, (origin, _) in judged.items()}


def plan_misses(tool: str, args: Mapping[str, object], plan: str, trusted: str) -> list[str]:
    """What a plan (:func:`normalise`\\ d steps) does not cover of a call: ``"the tool's
    name"`` and the paths of argument values that are neither in it nor in ``trusted``;
    empty when it covers the call."""
    name = normalise(tool)
    missing = [] if name in plan or name.replace("_", " ") in plan else ["the tool's name"]
    for key, value in args.items():
        for path, text in _leaves(value, key):
            value_text = normalise(text)
            if _in(text, value_text, plan) or _in(text, value_text, trusted):
                continue
            if len(value_text) > _LONG:
                tokens = (t.rstrip(".,;:)") for t in _TOKENS.findall(value_text))
                if all(t in plan or t in trusted for t in tokens):
                    continue
            missing.append(path)
    return missing
