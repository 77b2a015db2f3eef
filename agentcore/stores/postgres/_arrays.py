"""The append statement's arrays, typed ahead: psycopg's list dumper otherwise looks through
every list it is given (the element types, the largest int) on every execute to choose the
array's type, which was ~6% of a PostgreSQL step's client CPU. A list of one of these
classes is dumped as its array type straight away (on the connections of the store's pools,
where :func:`register` put their dumpers)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from psycopg.abc import Dumper
    from psycopg.adapt import AdaptersMap

__all__ = ["Byteas", "Float8s", "Int8s", "OptFloat8s", "OptInt8s", "OptTexts", "Texts", "register"]


class Int8s(list[int]):
    """A ``bigint[]`` parameter."""


class Texts(list[str]):
    """A ``text[]`` parameter."""


class Float8s(list[float]):
    """A ``float8[]`` parameter."""


class Byteas(list[bytes]):
    """A ``bytea[]`` parameter."""


class OptInt8s(list[int | None]):
    """A ``bigint[]`` parameter whose elements may be NULL."""


class OptTexts(list[str | None]):
    """A ``text[]`` parameter whose elements may be NULL."""


class OptFloat8s(list[float | None]):
    """A ``float8[]`` parameter whose elements may be NULL."""


_ELEMENTS = (
    (Int8s, "int8"),
    (Texts, "text"),
    (Float8s, "float8"),
    (Byteas, "bytea"),
    (OptInt8s, "int8"),
    (OptTexts, "text"),
    (OptFloat8s, "float8"),
)


def register(adapters: AdaptersMap) -> None:
    """Dump each class as its array type, in binary, with its element type fixed."""
    for cls, dumper in _dumpers():
        adapters.register_dumper(cls, dumper)


@functools.cache
def _dumpers() -> tuple[tuple[type, type[Dumper]], ...]:
    """Each class's dumper: psycopg's binary list dumper with the array's and the element's
    type ids of the built-in types set, made once per process."""
    from psycopg import postgres
    from psycopg.types.array import ListBinaryDumper

    out: list[tuple[type, type[Dumper]]] = []
    for cls, element in _ELEMENTS:
        info = postgres.types[element]
        attributes = {"oid": info.array_oid, "element_oid": info.oid}
        out.append((cls, type(f"{cls.__name__}Dumper", (ListBinaryDumper,), attributes)))
    return tuple(out)
