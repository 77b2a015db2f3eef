"""The append statement's arrays, typed ahead: psycopg's list dumper otherwise looks through
every list it is given (the element types, the largest int) on every execute to choose the
array's type, which was ~6% of a PostgreSQL step's client CPU. A list of one of these
classes is dumped as its array type straight away (on the connections of the store's pools,
where :func:`register` put their dumpers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from psycopg.adapt import AdaptersMap

__all__ = ["Byteas", "Float8s", "Int8s", "Texts", "register"]


class Int8s(list[int]):
    """A ``bigint[]`` parameter."""


class Texts(list[str]):
    """A ``text[]`` parameter."""


class Float8s(list[float]):
    """A ``float8[]`` parameter."""


class Byteas(list[bytes]):
    """A ``bytea[]`` parameter."""


_ELEMENTS = ((Int8s, "int8"), (Texts, "text"), (Float8s, "float8"), (Byteas, "bytea"))


def register(adapters: AdaptersMap) -> None:
    """Dump each class as its array type, in binary, with its element type fixed."""
    from psycopg.types.array import ListBinaryDumper

    for cls, element in _ELEMENTS:
        info = adapters.types[element]
        dumper = type(
            f"{cls.__name__}Dumper",
            (ListBinaryDumper,),
            {"oid": info.array_oid, "element_oid": info.oid},
        )
        adapters.register_dumper(cls, dumper)
