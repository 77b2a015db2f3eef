"""A run's typed output: the type the ``finish`` action's ``answer`` has.

By default a run ends with a text answer. With ``Agent(output=T)`` the ``finish`` variant of
the per-run action union declares ``answer`` as ``T`` (a pydantic model, a TypedDict, a
dataclass, a primitive, or a union of models), so every dialect sends its schema and
:meth:`ActionSchema.parse` validates it like a tool's arguments: an invalid answer is
re-asked with the errors. The normalised :class:`FinishAction` keeps ``answer`` a string,
the canonical JSON of the value; :meth:`OutputSpec.decode` turns that JSON back into a
``T``.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import types
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Union, cast, get_args, get_origin

from pydantic import (
    JsonValue,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from ._canonical import canonical_json
from ._limits import json_problem
from .errors import ConfigurationError

__all__ = ["OutputSpec", "output_spec"]


@dataclass(frozen=True, eq=False)
class OutputSpec:
    """The type of a run's answer, as the contract compiles and validates it.

    Build it with :func:`output_spec`, which returns one shared object per type.

    Attributes:
        type: the answer's type (``Invoice``, ``list[int]``, ``Refund | Escalation``).
    """

    type: Any  # Any: any type pydantic validates; a union has no static type here

    @cached_property
    def adapter(self) -> TypeAdapter[Any]:  # Any: see type
        """The pydantic validator and serializer of :attr:`type`."""
        return TypeAdapter(self.type)

    @cached_property
    def answer_type(self) -> Any:  # Any: an Annotated form of type
        """:attr:`type` as the ``finish`` action's ``answer`` declares it: the same JSON
        Schema, validated strictly, as a tool's arguments are: a field the type does not
        declare is refused (at any depth: models, TypedDicts, dataclasses), and no JSON
        value is coerced into another type (``true`` is not an ``int``, ``"5"`` is not a
        number; an ISO date string is still a ``date``). A refused answer is re-asked."""
        return Annotated[self.type, WrapValidator(self._strictly)]

    def _strictly(
        self, value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:  # Any: a value of type
        handler(value)  # what lax validation refuses too is reported where it is
        try:
            if info.mode == "json":  # the reply's JSON value, validated as JSON again
                return self.validate_answer(json.dumps(value, allow_nan=True))
            return self.adapter.validate_python(value, strict=True, **_NO_EXTRA)
        except ValidationError as exc:
            raise PydanticCustomError(
                "answer_invalid", "{problems}", {"problems": _problems(exc)}
            ) from None

    def validate_answer(self, answer: str) -> Any:  # Any: a value of type
        """A model's answer (JSON text) validated strictly (see :attr:`answer_type`).

        Raises:
            ValueError: the answer does not validate (pydantic's ``ValidationError``).
        """
        return self.adapter.validate_json(answer, strict=True, **_NO_EXTRA)

    @cached_property
    def json_schema(self) -> dict[str, Any]:  # Any: JSON Schema
        """The JSON Schema of the answer (pydantic's form, before any dialect)."""
        return self.adapter.json_schema()

    @cached_property
    def hash(self) -> str:
        """A hash of :attr:`json_schema`: what a run records in ``run_started`` and
        compares when it continues, so a run never decodes its answer as another type."""
        return hashlib.sha256(canonical_json(self.json_schema).encode()).hexdigest()[:16]

    @property
    def name(self) -> str:
        """A readable name of the type, for messages."""
        members = get_args(self.type) if get_origin(self.type) in (Union, types.UnionType) else ()
        if members:
            return " | ".join(getattr(m, "__name__", None) or repr(m) for m in members)
        return getattr(self.type, "__name__", None) or repr(self.type)

    def to_json(self, value: object) -> JsonValue:
        """The JSON form of an answer ``value`` (validated already).

        Raises:
            ValueError: the value cannot be recorded (NaN, an integer beyond 64 bits, too
                deep); the message is written for the model.
        """
        problem = json_problem(self.adapter.dump_python(value), other_types=True)
        if problem is not None:
            raise ValueError(problem)
        dumped: JsonValue = self.adapter.dump_python(value, mode="json")
        return dumped

    def decode(self, answer: str) -> Any:  # Any: a value of type
        """The typed answer from the canonical JSON a run recorded as its ``answer``.

        Raises:
            ValueError: ``answer`` does not validate as :attr:`type` (pydantic's
                ``ValidationError``).
        """
        return self.adapter.validate_json(answer)


def output_spec(output: object) -> OutputSpec | None:
    """The :class:`OutputSpec` of ``output`` (``None`` for ``str``, the default text answer).

    ``output`` is a type, or a list or tuple of types (their union: ``[Refund, Escalation]``
    is ``Refund | Escalation``).

    Raises:
        ConfigurationError: ``output`` is not a type pydantic can validate and describe.
    """
    if isinstance(output, list | tuple):
        members = tuple(cast("Sequence[object]", output))  # types given by the caller
        if not members:
            raise ConfigurationError("output=[] names no type; give a type or a list of types.")
        output = members[0] if len(members) == 1 else functools.reduce(_union, members)
    if output is str:
        return None
    if not (isinstance(output, type) or get_origin(output) is not None):
        raise ConfigurationError(
            f"output={output!r} is not a type. Use a pydantic model, a TypedDict, a dataclass, "
            "a primitive (int, float, bool, list[str], ...) or a list of models (their union)."
        )
    try:
        return _spec(output)
    except TypeError as exc:  # unhashable: an unusual generic alias
        raise ConfigurationError(f"output={output!r} cannot be used: {exc}") from exc


_EXTRA_AT_VALIDATION = "extra" in inspect.signature(TypeAdapter(int).validate_json).parameters
_NO_EXTRA: dict[str, Any] = {"extra": "forbid"} if _EXTRA_AT_VALIDATION else {}  # Any: kwargs
"""Refuse fields the type does not declare, whatever its own config says (pydantic 2.12
and later; earlier versions apply the type's own config)."""


def _problems(exc: ValidationError) -> str:
    """A strict validation's errors, in words the model can act on."""
    parts = [
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
        for err in exc.errors(include_url=False)[:5]
    ]
    return "; ".join(parts)


def _union(a: object, b: object) -> object:
    return Union[a, b]  # pyright: ignore[reportInvalidTypeForm]  # run-time union of user types  # noqa: UP007


@functools.cache
def _spec(output: object) -> OutputSpec:
    spec = OutputSpec(output)
    try:
        spec.json_schema  # noqa: B018  # fail at configuration, not at the first step
    except Exception as exc:  # pydantic's PydanticSchemaGenerationError, and others
        raise ConfigurationError(
            f"output={spec.name} cannot be validated or described as JSON Schema: {exc}"
        ) from exc
    return spec
