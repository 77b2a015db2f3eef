"""Secrets: tool parameters the model never sees, and values never written anywhere.

A parameter annotated with :class:`Secret` is left out of the tool's schema (the model
cannot see or send it) and filled when the tool runs, from the resolver the application
gives the agent::

    @tool(effect="write")
    async def send_mail(to: str, body: str, api_key: Annotated[str, Secret("MAIL_KEY")]) -> str:
        ...

    agent = Agent([send_mail], model, secrets=env_secrets())   # or any name -> value callable

The transcript, the arguments' hash, logs, exports and provider payloads hold the call's
other arguments only; the secret's name is in the tool's definition, its value nowhere.

Redaction: ``Agent(redact=[...], redact_env=[...])`` lists values (strings, and environment
variables by name) that must never be written. Every event is redacted before it is
recorded (store, exports, logs, streams) and so before it is rendered for a model: each
occurrence becomes ``[secret:NAME]`` (``NAME`` the variable's name, or ``redacted`` for a
listed string); values that overlap or nest become one placeholder together. Values a
resolver returns are added to the run's list as they are resolved, so a tool that echoes
its key in a result or an error does not leak it.
A redacted value is gone: the transcript holds the placeholder, and so do the arguments a
call runs with when a model sends a listed value in one.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from agentcore.contracts.errors import ConfigurationError

__all__ = [
    "MIN_SECRET_CHARS",
    "Redactor",
    "Secret",
    "SecretResolver",
    "env_secrets",
    "resolve_secret",
]

MIN_SECRET_CHARS = 6
"""Shorter listed values are refused: redacting ``"a"`` would destroy every transcript."""

_E = TypeVar("_E", bound=BaseModel)

SecretResolver = Callable[[str], "str | Awaitable[str]"]
"""``resolver(name)``: the secret's value (sync or async); raise when it has none."""


def _placeholder(name: str) -> str:
    """What a redacted value becomes: ``[secret:NAME]``, or ``[secret:redacted]`` for a
    listed string."""
    return f"[secret:{'redacted' if name.startswith('redacted#') else name}]"


@dataclass(frozen=True, slots=True)
class Secret:
    """Marks a tool parameter as a secret: ``Annotated[str, Secret("NAME")]``.

    Attributes:
        name: what the resolver is asked for, and the only thing ever recorded.
    """

    name: str


def env_secrets(prefix: str = "") -> SecretResolver:
    """A resolver reading environment variables (``prefix + name``)."""

    def resolve(name: str) -> str:
        value = os.environ.get(prefix + name)
        if not value:
            raise KeyError(f"environment variable {prefix + name} is not set")
        return value

    return resolve


async def resolve_secret(resolver: SecretResolver, name: str) -> str:
    """Call ``resolver`` (sync or async) for ``name``; the value must be a string."""
    value = resolver(name)
    if inspect.isawaitable(value):
        value = await value
    if not isinstance(value, str):  # pyright: ignore[reportUnnecessaryIsInstance]  # user code
        raise TypeError(f"the resolver returned {type(value).__name__} for {name!r}, not str")
    return value


class Redactor:
    """Replaces listed values with ``[secret:NAME]`` in events and text.

    Args:
        values: ``{name: value}``; the name is what the placeholder shows.
    """

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values: dict[str, str] = {}
        for name, value in (values or {}).items():
            self.add(name, value)

    @classmethod
    def listed(cls, strings: Iterable[str] = (), env: Iterable[str] = ()) -> Redactor:
        """From ``Agent(redact=..., redact_env=...)``: listed strings (shown as
        ``redacted``) and the values of the named environment variables (an unset or empty
        variable has nothing to leak and is skipped).

        Raises:
            ConfigurationError: a listed string shorter than :data:`MIN_SECRET_CHARS`.
        """
        found = {f"redacted#{i}": s for i, s in enumerate(strings)}
        for s in found.values():
            if len(s) < MIN_SECRET_CHARS:
                raise ConfigurationError(
                    f"redact= lists a value of {len(s)} characters; secrets to redact need at "
                    f"least {MIN_SECRET_CHARS} (a short one would be replaced everywhere)."
                )
        found.update({name: os.environ[name] for name in env if os.environ.get(name)})
        return cls(found)

    def __bool__(self) -> bool:
        return bool(self._values)

    def copy(self) -> Redactor:
        """An independent copy (a run adds the values its resolver returns)."""
        return Redactor(self._values)

    def add(self, name: str, value: str) -> None:
        """Redact ``value`` too (too short a value is ignored: it cannot be told apart)."""
        if len(value) >= MIN_SECRET_CHARS:
            self._values[name] = value

    def text(self, text: str) -> str:
        """``text`` with every listed value replaced, in one pass over it: where listed
        values overlap or nest, the whole stretch they cover becomes one placeholder, named
        for the longest of them (the name first in order on a tie), so no part of any of
        them is left, whatever order they were listed in."""
        found = [(name, value) for name, value in self._values.items() if value in text]
        if not found:
            return text
        spans: list[tuple[int, int, str]] = []  # every occurrence, overlapping ones too
        for name, value in found:
            at = text.find(value)
            while at >= 0:
                spans.append((at, at + len(value), name))
                at = text.find(value, at + 1)
        spans.sort(key=lambda span: (span[0], span[0] - span[1], span[2]))
        parts: list[str] = []
        done = 0  # text before this is in parts
        start, end, name = spans[0]  # the stretch being merged, and its label
        for at, stop, other in spans[1:]:
            if at >= end:  # a new stretch: the last one is replaced
                parts += (text[done:start], _placeholder(name))
                done, start, end, name = end, at, stop, other
                continue
            longer = (stop - at) - len(self._values[name])
            if longer > 0 or (longer == 0 and other < name):  # the label: longest, then name
                name = other
            end = max(end, stop)
        parts += (text[done:start], _placeholder(name), text[end:])
        return "".join(parts)

    def value(self, value: Any) -> Any:  # Any: JSON values in, JSON values out
        """A JSON value with every string (and key) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]  # pyright: ignore[reportUnknownVariableType]  # JSON
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]  # JSON
        return value

    def event(self, event: _E) -> _E:
        """``event``, or a copy of it with every listed value replaced."""
        if not self._values:
            return event
        data = event.model_dump(mode="json")
        clean = self.value(data)
        if clean == data:
            return event
        return type(event).model_validate(clean)
