"""The limits every value must pass before it enters a transcript.

A transcript must always read back: whatever agentcore records, every store can encode and
decode, and every later version can read. So the values that enter it from outside (a
model's reply, a person's edited arguments, a tool's result, a context provider's text, a
caller's run id, task and metadata) pass one check first, here. A value that fails is
refused with the path and the reason: a model is re-asked, a tool's result becomes an
error observation, a person or a caller gets :class:`LimitExceededError`.

=====================  ===========  ==========================================================
limit                  default      why
=====================  ===========  ==========================================================
``max_depth``          64           JSON parsers (pydantic's included) refuse deep nesting
``int`` range          64 bits      -2**63 .. 2**64-1: databases and other languages read it
floats                 finite       NaN and Infinity are not JSON: the stored value would
                                    differ from the one that ran
strings                valid text   no lone surrogates (they cannot be encoded as UTF-8)
``max_string_chars``   1,000,000    one string (a task, an answer, a tool result's field)
``max_event_bytes``    4 MiB        one event as stored (a backstop above all other caps)
``max_run_id_chars``   200          run ids are keys in every store, printed in commands
=====================  ===========  ==========================================================

Caps that users tune live in :class:`agentcore.Policy`: ``max_reply_bytes`` (a model's
reply, 64 KiB) and ``max_tool_result_bytes`` (a tool's result, 256 KiB: a larger result is
stored truncated with its full size and sha256, never refused).

This module lives in the lowest layer (it imports only pydantic-core): the contract, the
adapters and the core all apply the same rules.
"""

from __future__ import annotations

import math
from typing import Any, Final, cast

from pydantic_core import PydanticSerializationError, to_jsonable_python

from .errors import LimitExceededError

__all__ = [
    "MAX_DEPTH",
    "MAX_EVENT_BYTES",
    "MAX_INT",
    "MAX_RUN_ID_CHARS",
    "MAX_STRING_CHARS",
    "MAX_TENANT_CHARS",
    "MIN_INT",
    "check_json",
    "check_run_id",
    "check_tenant",
    "check_text",
    "clean_text",
    "json_problem",
    "to_recordable",
]

MAX_DEPTH: Final = 64
"""Deepest nesting of arrays and objects in any recorded value (the top level is depth 1)."""
MIN_INT: Final = -(2**63)
MAX_INT: Final = 2**64 - 1
"""Integers must fit in 64 bits, signed or unsigned."""
MAX_STRING_CHARS: Final = 1_000_000
"""Longest string in any recorded value."""
MAX_EVENT_BYTES: Final = 4 * 1024 * 1024
"""Largest event body a store accepts (UTF-8 JSON)."""
MAX_RUN_ID_CHARS: Final = 200
"""Longest run id."""
MAX_TENANT_CHARS: Final = 200
"""Longest tenant name."""


def _text_problem(value: str, max_chars: int | None = MAX_STRING_CHARS) -> str | None:
    if max_chars is not None and len(value) > max_chars:
        return f"a string of {len(value)} characters (the limit is {max_chars})"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"a string with a lone surrogate {value[exc.start]!r} at character {exc.start} "
            "(not valid Unicode text)"
        )
    return None


def json_problem(
    value: object,
    *,
    max_depth: int = MAX_DEPTH,
    max_string_chars: int | None = MAX_STRING_CHARS,
    other_types: bool = False,
) -> str | None:
    """Why ``value`` cannot be recorded, or ``None`` when it can.

    ``value`` is a JSON-ready Python value: dicts with string keys, lists (or tuples),
    strings, ints, floats, bools and ``None``. The walk is iterative, so a value nested
    beyond Python's recursion limit gets an answer too.

    Args:
        value: the value to check.
        max_depth: the deepest nesting allowed.
        max_string_chars: the longest string allowed (``None``: any length, for values
            whose size another cap governs, such as a tool result).
        other_types: accept values of other types (dates, enums: a validated model's
            Python form, which serialises them) instead of reporting them.

    Returns:
        A sentence naming the first problem and where it is (``$.a[3].b``).
    """
    stack: list[tuple[object, str, int]] = [(value, "$", 1)]
    while stack:
        item, path, depth = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            problem = _text_problem(item, max_string_chars)
            if problem is not None:
                return f"{path} is {problem}"
        elif isinstance(item, int):
            if not MIN_INT <= item <= MAX_INT:
                digits = len(str(abs(item))) if abs(item) < 10**4000 else "over 4000"
                return f"{path} is an integer of {digits} digits, outside 64 bits"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{path} is {item!r}, which is not a JSON number"
        elif isinstance(item, dict | list | tuple):
            if depth > max_depth:
                return f"{path} is nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                mapping = cast("dict[object, object]", item)
                for key, child in mapping.items():
                    if not isinstance(key, str):
                        return f"{path} has a key {key!r} that is not a string"
                    problem = _text_problem(key, max_string_chars)
                    if problem is not None:
                        return f"{path} has a key that is {problem}"
                    stack.append((child, f"{path}.{key}", depth + 1))
            else:
                for i, child in enumerate(cast("list[object]", item)):
                    stack.append((child, f"{path}[{i}]", depth + 1))
        elif not other_types:
            return f"{path} is a {type(item).__name__}, not a JSON value"
    return None


def check_json(value: object, what: str) -> None:
    """Raise :class:`LimitExceededError` when ``value`` cannot be recorded.

    Args:
        value: a JSON-ready value.
        what: what it is, for the message (``"metadata"``, ``"edited arguments"``).
    """
    problem = json_problem(value)
    if problem is not None:
        raise LimitExceededError(f"The {what} cannot be recorded: {problem}.")


def to_recordable(value: object, what: str) -> Any:  # Any: a JSON-ready value
    """``value`` as JSON-ready data (pydantic models, dataclasses, dates...), checked.

    Raises:
        LimitExceededError: it cannot become JSON (cyclic, bytes, custom objects, too
            deep to serialise) or breaks a limit.
    """
    try:
        data = to_jsonable_python(value)
    except (PydanticSerializationError, ValueError, TypeError, RecursionError) as exc:
        raise LimitExceededError(
            f"The {what} cannot be recorded: it is not JSON-ready ({type(exc).__name__}: "
            f"{str(exc)[:300]})."
        ) from exc
    check_json(data, what)
    return data


def check_text(value: str, what: str) -> None:
    """Raise :class:`LimitExceededError` for a string that cannot be recorded."""
    problem = _text_problem(value)
    if problem is not None:
        raise LimitExceededError(f"The {what} cannot be recorded: it is {problem}.")


def clean_text(value: str, max_chars: int = MAX_STRING_CHARS) -> str:
    """``value`` made recordable, for text that is kept as a record rather than judged (a
    model's invalid reply, an error message): lone surrogates become ``?`` and the text is
    cut at ``max_chars``."""
    value = value[:max_chars]
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8")
    return value


def check_run_id(run_id: str) -> None:
    """Raise :class:`LimitExceededError` unless ``run_id`` is a usable run id.

    A run id is non-empty, at most :data:`MAX_RUN_ID_CHARS` characters, and has no control
    characters (it is printed in commands and logs) and no lone surrogates.
    """
    _check_name(
        run_id,
        "run id",
        MAX_RUN_ID_CHARS,
        "pass run_id=None for a new random id, or a non-empty string",
    )


def check_tenant(tenant: str) -> None:
    """Raise :class:`LimitExceededError` unless ``tenant`` is a usable tenant name.

    The same rules as a run id: non-empty, at most :data:`MAX_TENANT_CHARS` characters, no
    control characters (it is printed and filtered on) and no lone surrogates.
    """
    _check_name(
        tenant, "tenant", MAX_TENANT_CHARS, "pass tenant=None for no tenant, or a non-empty string"
    )


def _check_name(value: str, what: str, limit: int, empty_hint: str) -> None:
    if not isinstance(value, str):  # pyright: ignore[reportUnnecessaryIsInstance]  # untyped callers
        raise LimitExceededError(f"A {what} is a string, not {type(value).__name__}.")
    if not value:
        raise LimitExceededError(f"The {what} is empty: {empty_hint}.")
    if len(value) > limit:
        raise LimitExceededError(f"The {what} has {len(value)} characters; the limit is {limit}.")
    for i, ch in enumerate(value):
        code = ord(ch)
        if code < 0x20 or 0x7F <= code < 0xA0:
            raise LimitExceededError(
                f"The {what} has a control character {ch!r} at position {i}; use printable "
                "characters."
            )
        if 0xD800 <= code <= 0xDFFF:
            raise LimitExceededError(
                f"The {what} has a lone surrogate {ch!r} at position {i} (not valid Unicode)."
            )
