"""Twins of the agent's async methods: blocking (``run_sync``) and streamed (``stream``).

A twin is a descriptor over the method it wraps, so the twin has the method's full typed
signature (``Callable[P, ...]`` from its ``ParamSpec``): editors and pyright see every
argument, and nothing is written twice. At run time it carries the same signature
(``__signature__``), so ``inspect.signature`` and ``help()`` list the real parameters too.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from agentcore.contracts.errors import ConfigurationError

from ._state import RunResult
from .streaming import SINK, RunEnded, StreamEvent

__all__ = ["StreamTwin", "SyncTwin", "stream_events"]

A = TypeVar("A")
P = ParamSpec("P")
T = TypeVar("T")


class SyncTwin(Generic[A, P, T]):
    """A method's twin for code without an event loop, with the method's own signature."""

    def __init__(self, method: Callable[Concatenate[A, P], Coroutine[Any, Any, T]]) -> None:
        self._method = method  # Any: coroutine plumbing
        self.__doc__ = f":meth:`{method.__name__}` for code without an event loop."
        self.__name__ = f"{method.__name__}_sync"
        self.__signature__ = inspect.signature(method)
        self._bound_signature = _without_self(self.__signature__)

    def __set_name__(self, owner: type[A], name: str) -> None:
        self.__name__ = name

    def __call__(self, agent: A, *args: P.args, **kwargs: P.kwargs) -> T:
        """Called on the class: ``Agent.run_sync(agent, ...)``."""
        return self.__get__(agent, type(agent))(*args, **kwargs)

    @overload
    def __get__(self, agent: None, owner: type[A]) -> SyncTwin[A, P, T]: ...
    @overload
    def __get__(self, agent: A, owner: type[A]) -> Callable[P, T]: ...
    def __get__(self, agent: A | None, owner: type[A]) -> SyncTwin[A, P, T] | Callable[P, T]:
        if agent is None:
            return self
        method = self._method

        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return asyncio.run(method(agent, *args, **kwargs))
            raise ConfigurationError(
                "The *_sync methods cannot run inside an event loop; await "
                f"{method.__name__}() instead."
            )

        return _described(call, self, self._bound_signature)


class StreamTwin(Generic[A, P]):
    """A method's streamed twin (see ``Agent.stream``), with the method's own signature."""

    def __init__(
        self,
        method: Callable[Concatenate[A, P], Coroutine[Any, Any, RunResult[Any]]],  # Any: output
    ) -> None:
        self._method = method  # Any: coroutine plumbing
        self.__doc__ = f":meth:`{method.__name__}`, streamed (see ``Agent.stream``)."
        self.__name__ = f"stream_{method.__name__}"
        self.__signature__ = inspect.signature(method).replace(
            return_annotation="AsyncIterator[StreamEvent]"
        )
        self._bound_signature = _without_self(self.__signature__)

    def __set_name__(self, owner: type[A], name: str) -> None:
        self.__name__ = name

    def __call__(self, agent: A, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[StreamEvent]:
        """Called on the class: ``Agent.stream(agent, ...)``."""
        return self.__get__(agent, type(agent))(*args, **kwargs)

    @overload
    def __get__(self, agent: None, owner: type[A]) -> StreamTwin[A, P]: ...
    @overload
    def __get__(self, agent: A, owner: type[A]) -> Callable[P, AsyncIterator[StreamEvent]]: ...
    def __get__(
        self, agent: A | None, owner: type[A]
    ) -> StreamTwin[A, P] | Callable[P, AsyncIterator[StreamEvent]]:
        if agent is None:
            return self
        method = self._method

        def call(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[StreamEvent]:
            return stream_events(lambda: method(agent, *args, **kwargs))

        return _described(call, self, self._bound_signature)


def _without_self(signature: inspect.Signature) -> inspect.Signature:
    """A method's signature as its bound form shows it: without the first parameter."""
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def _described(
    call: Callable[P, T],
    twin: SyncTwin[Any, Any, Any] | StreamTwin[Any, Any],
    signature: inspect.Signature,
) -> Callable[P, T]:  # Any: any twin
    """``call`` named and documented as ``twin``, with its method's bound signature."""
    call.__name__ = call.__qualname__ = twin.__name__
    call.__doc__ = twin.__doc__
    call.__module__ = twin._method.__module__  # pyright: ignore[reportPrivateUsage]  # this module's
    call.__signature__ = signature  # pyright: ignore[reportFunctionMemberAccess]  # read by inspect.signature
    return call


async def stream_events(
    start: Callable[[], Coroutine[Any, Any, RunResult[Any]]],  # Any: coroutine plumbing, output
) -> AsyncIterator[StreamEvent]:
    """Run ``start()`` in a task, yielding what it records as it happens, then its result.

    Closing the iterator early cancels the task: what was recorded stays.
    """
    queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
    token = SINK.set(queue.put_nowait)
    try:
        runner = asyncio.create_task(start())  # copies the context: the sink goes along
    finally:
        SINK.reset(token)
    runner.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (item := await queue.get()) is not None:
            yield item
        yield RunEnded(runner.result())
    finally:
        if not runner.done():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
