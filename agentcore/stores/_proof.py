"""Events that read back as themselves, proven from their values' types.

A store refuses an event whose stored body would not decode back to an equal event
(``_codec.encode_batch``). Decoding every body to find out costs a pydantic validation
and a model comparison per event. For most events the answer follows from the values
alone: :func:`reads_back` walks an event along its model's field types and answers
``True`` only when every value is of a kind whose JSON form pydantic reads back equal:

- ``str``: exactly ``str``, encodable as UTF-8 (no lone surrogate);
- ``int``: exactly ``int`` (not ``bool``), within 64 bits;
- ``float``: exactly ``float`` and finite (no NaN, no infinity);
- ``bool``, ``None``, ``Literal`` members (exact type);
- ``list``, ``dict`` with ``str`` keys, ``JsonValue``: exactly those types, nested at most
  :data:`MAX_DEPTH` deep;
- a nested model: exactly that class, its fields only, its length constraints met.

``False`` means "not proven", never "refused": the store then decodes the body and
compares, as it does for any field type this module does not know. So the proof only
decides how an event is checked, never whether it is stored.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, Literal, Union, get_args, get_origin

from annotated_types import MaxLen, MinLen
from pydantic import BaseModel, JsonValue

from ..events import EVENT_SCHEMA_VERSION

__all__ = ["MAX_DEPTH", "reads_back"]

MAX_DEPTH = 32
"""How deep the proof follows nested values; deeper ones are decoded and compared (the
JSON decoder's own nesting limit is far above this)."""

_INT_LIMIT = 1 << 63

Check = Callable[[object, int], bool]
"""Whether a value (at a nesting depth) reads back as itself."""


def reads_back(event: BaseModel) -> bool:
    """Whether ``event`` is proven to read back from its stored body as an equal event:
    ``False`` when any value is outside what the proof covers (the caller then decodes
    and compares)."""
    check = _model_check(type(event))
    return check is not None and check(event, 0) and event.__dict__["v"] <= EVENT_SCHEMA_VERSION


def _utf8(value: str) -> bool:
    """Whether a (non-ASCII) str encodes as UTF-8: no lone surrogate."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _text(value: object, depth: int) -> bool:
    return type(value) is str and (value.isascii() or _utf8(value))


def _int(value: object, depth: int) -> bool:
    return type(value) is int and -_INT_LIMIT <= value < _INT_LIMIT


def _float(value: object, depth: int) -> bool:
    return type(value) is float and math.isfinite(value)


def _bool(value: object, depth: int) -> bool:
    return type(value) is bool


def _none(value: object, depth: int) -> bool:
    return value is None


def _json(value: object, depth: int) -> bool:
    """A ``JsonValue``: null, bool, int, float, str, list, dict of str keys (loops rather
    than generators: this runs for every argument and result)."""
    kind = type(value)
    if kind is str:
        return value.isascii() or _utf8(value)  # type: ignore[union-attr]  # kind is str
    if value is None or kind is bool:
        return True
    if kind is int:
        return -_INT_LIMIT <= value < _INT_LIMIT  # type: ignore[operator]  # kind is int
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]  # kind is float
    if depth >= MAX_DEPTH:
        return False
    members: Iterable[Any]  # Any: checked just below
    if kind is dict:
        items: dict[Any, Any] = value  # type: ignore[assignment]  # Any: checked just below
        for key in items:
            if type(key) is not str or not (key.isascii() or _utf8(key)):
                return False
        members = items.values()
    elif kind is list:
        members = value  # type: ignore[assignment]  # kind is list
    else:
        return False
    for member in members:
        if type(member) is str:
            if not (member.isascii() or _utf8(member)):
                return False
        elif not _json(member, depth + 1):
            return False
    return True


_SCALARS: dict[object, Check] = {
    str: _text,
    int: _int,
    float: _float,
    bool: _bool,
    type(None): _none,
    None: _none,
}


def _literal(choices: tuple[object, ...]) -> Check:
    allowed = {(type(c), c) for c in choices}

    def check(value: object, depth: int) -> bool:
        return (type(value), value) in allowed

    return check


def _any_of(checks: list[Check]) -> Check:
    def check(value: object, depth: int) -> bool:
        return any(c(value, depth) for c in checks)

    return check


def _one_of(models: dict[object, Check]) -> Check:
    """A union of models: the check of the value's own class."""

    def check(value: object, depth: int) -> bool:
        found = models.get(type(value))
        return found is not None and found(value, depth)

    return check


def _list_of(item: Check) -> Check:
    def check(value: object, depth: int) -> bool:
        if type(value) is not list or depth >= MAX_DEPTH:
            return False
        members: list[Any] = value  # type: ignore[assignment]  # Any: checked per item
        return all(item(member, depth + 1) for member in members)

    return check


def _dict_of(item: Check) -> Check:
    def check(value: object, depth: int) -> bool:
        if type(value) is not dict or depth >= MAX_DEPTH:
            return False
        items: dict[Any, Any] = value  # type: ignore[assignment]  # Any: checked per item
        return all(_text(k, depth) and item(v, depth + 1) for k, v in items.items())

    return check


def _sized(inner: Check, low: int | None, high: int | None) -> Check:
    def check(value: object, depth: int) -> bool:
        if not inner(value, depth):
            return False
        size = len(value)  # type: ignore[arg-type]  # inner proved a str or list
        return (low is None or size >= low) and (high is None or size <= high)

    return check


def _check_for(tp: object, metadata: list[object]) -> Check | None:
    """The check of a field's type and constraints; ``None``: not provable."""
    inner = _type_check(tp)
    if inner is None or not metadata:
        return inner
    low = high = None
    for item in metadata:
        if isinstance(item, MinLen):
            low = item.min_length
        elif isinstance(item, MaxLen):
            high = item.max_length
        else:
            return None
    return _sized(inner, low, high)


def _type_check(tp: object) -> Check | None:
    if tp is JsonValue:
        return _json
    if tp in _SCALARS:
        return _SCALARS[tp]
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _model_check(tp)
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return _literal(args)
    if origin is typing.Annotated:
        return _check_for(args[0], list(args[1:]))
    if origin is Union or origin is types.UnionType:
        checks = [_type_check(a) for a in args]
        if all(isinstance(a, type) and issubclass(a, BaseModel) for a in args):
            # a member the proof does not cover (a validator of its own: the ask action's
            # question) is not proven; the others still are
            return _one_of({a: c for a, c in zip(args, checks, strict=True) if c is not None})
        if any(c is None for c in checks):
            return None
        return _any_of([c for c in checks if c is not None])
    if origin is list and len(args) == 1:
        item = _type_check(args[0])
        return None if item is None else _list_of(item)
    if origin is dict and len(args) == 2 and args[0] is str:
        item = _type_check(args[1])
        return None if item is None else _dict_of(item)
    return None


_INLINE: dict[object, str] = {
    str: "(type({x}) is str and ({x}.isascii() or _utf8({x})))",
    int: "(type({x}) is int and -_INT_LIMIT <= {x} < _INT_LIMIT)",
    float: "(type({x}) is float and {x} - {x} == 0.0)",  # inf - inf and NaN are NaN
    bool: "(type({x}) is bool)",
    type(None): "({x} is None)",
    None: "({x} is None)",
}


def _inline(tp: object, metadata: list[object], x: str, names: dict[str, object]) -> str | None:
    """The check of a field as a Python expression over the variable ``x`` (scalars,
    literals of str, their unions and length constraints), else a call of its
    :data:`Check` (registered in ``names``); ``None``: not provable."""
    expr = _inline_type(tp, x, names)
    if expr is None:
        check = _check_for(tp, metadata)
        if check is None:
            return None
        name = f"_c{len(names)}"
        names[name] = check
        return f"{name}({x}, depth + 1)"
    for item in metadata:
        if isinstance(item, MinLen):
            expr = f"({expr} and len({x}) >= {item.min_length})"
        elif isinstance(item, MaxLen):
            expr = f"({expr} and len({x}) <= {item.max_length})"
        else:
            return None
    return expr


def _inline_type(tp: object, x: str, names: dict[str, object]) -> str | None:
    if tp in _INLINE:
        return _INLINE[tp].format(x=x)
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal and all(type(a) is str for a in args):
        name = f"_l{len(names)}"
        names[name] = frozenset(args)
        return f"(type({x}) is str and {x} in {name})"
    if origin is Union or origin is types.UnionType:
        parts = [_inline_type(a, x, names) for a in args]
        if any(p is None for p in parts):
            return None
        return "(" + " or ".join(p for p in parts if p is not None) + ")"
    return None


@functools.cache
def _model_check(cls: type[BaseModel]) -> Check | None:
    """The check of an instance of exactly ``cls``: its fields and nothing else, as one
    generated function (a call per field would cost more than the decode it replaces)."""
    if cls.__private_attributes__ or cls.model_config.get("extra") != "forbid":
        return None
    names: dict[str, object] = {
        "_cls": cls,
        "_utf8": _utf8,
        "_INT_LIMIT": _INT_LIMIT,
        "MAX_DEPTH": MAX_DEPTH,
    }
    lines = [
        "def check(value, depth):",
        "    if type(value) is not _cls or depth >= MAX_DEPTH:",
        "        return False",
        "    d = value.__dict__",
        f"    if len(d) != {len(cls.model_fields)}:",
        "        return False",
        "    try:",
    ]
    for name, info in cls.model_fields.items():
        expr = _inline(info.annotation, list(info.metadata), "x", names)
        if expr is None:
            return None
        lines += [f"        x = d[{name!r}]", f"        if not {expr}:", "            return False"]
    lines += ["    except KeyError:", "        return False", "    return True"]
    exec("\n".join(lines), names)  # source built above from field types only
    made: Check = names["check"]  # type: ignore[assignment]  # defined by the exec above
    return made
