"""Tools: decorated functions become a schema, a description and a safe runner."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import os
import socket
import threading
import time
from enum import Enum
from typing import Any

import pytest
from conftest import SLOW_SLEEP_S, SLOW_TIMEOUT_S, NetworkBlockedError, Toolbox
from pydantic import BaseModel

from agentcore import Tool, ToolContext, tool
from agentcore.errors import ConfigurationError, ToolDefinitionError

CTX = ToolContext(run_id="r1", step=3, call_id="c3", idempotency_key="r1:3")


def test_network_is_blocked() -> None:
    """The conftest guard: a non-loopback connection fails before any packet is sent."""
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("192.0.2.1", 80), timeout=0.01)  # TEST-NET-1
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(NetworkBlockedError):
            sock.connect(("example.com", 443))
    finally:
        sock.close()


# --------------------------------------------------------------------------- schema


class Status(Enum):
    OPEN = "open"
    CLOSED = "closed"


@tool(effect="read")
def search_orders(customer_id: str, status: Status | None = None, limit: int = 10) -> list[str]:
    """Find a customer's orders. Use when the user asks about their orders.

    Longer explanation that is part of the description.

    Args:
        customer_id: the customer's id, e.g. "C-17".
        status: only orders in this status; the description of this argument
            continues on a second line.
        limit: at most this many orders.

    Returns:
        Order ids.
    """
    return [customer_id, str(status), str(limit)]


def test_schema_from_type_hints() -> None:
    schema = search_orders.spec.args_schema
    props = schema["properties"]
    assert set(props) == {"customer_id", "status", "limit"}
    assert props["customer_id"]["type"] == "string"
    assert props["limit"]["type"] == "integer"
    assert props["limit"]["default"] == 10
    assert schema["required"] == ["customer_id"]
    assert schema.get("additionalProperties") is False
    # The enum is part of the schema (through a $ref or inline).
    assert "open" in str(schema) and "closed" in str(schema)


def test_description_and_arg_docs_from_google_docstring() -> None:
    spec = search_orders.spec
    assert spec.name == "search_orders"
    assert spec.description.startswith("Find a customer's orders. Use when the user asks")
    assert "Longer explanation" in spec.description
    assert "Args:" not in spec.description
    assert "customer_id:" not in spec.description
    props = spec.args_schema["properties"]
    assert props["customer_id"]["description"] == 'the customer\'s id, e.g. "C-17".'
    assert props["status"]["description"] == (
        "only orders in this status; the description of this argument continues on a second line."
    )
    assert props["limit"]["description"] == "at most this many orders."
    # "Returns:" is another section, not part of the last argument.
    assert "Order ids" not in props["limit"]["description"]


def test_name_and_description_overrides() -> None:
    @tool(effect="read", name="orders.search", description="Search orders by customer.")
    def anything(customer_id: str) -> list[str]:
        return [customer_id]

    assert anything.name == "orders.search"
    assert anything.spec.description == "Search orders by customer."


def test_tool_context_hidden_from_schema_and_injected(tools: Toolbox) -> None:
    props = tools.delete_order.spec.args_schema["properties"]
    assert set(props) == {"order_id"}
    assert "ctx" not in str(tools.delete_order.spec.args_schema)


async def test_tool_context_is_injected(tools: Toolbox) -> None:
    outcome = await tools.delete_order.run({"order_id": "A1"}, CTX)
    assert outcome.ok, outcome.error
    assert outcome.result == {"deleted": "A1"}
    assert tools.contexts == [CTX]


async def test_tool_context_cannot_be_sent_by_the_model(tools: Toolbox) -> None:
    outcome = await tools.delete_order.run({"order_id": "A1", "ctx": "forged"}, CTX)
    assert not outcome.ok
    assert "ctx" in (outcome.error or "")
    assert tools.calls == []


@pytest.mark.parametrize(
    ("effect", "expected"), [("read", True), ("write", False), ("destructive", False)]
)
def test_default_idempotent_per_effect(effect: Any, expected: bool) -> None:
    @tool(effect=effect)
    def act(x: int) -> int:
        """Do something with x."""
        return x

    assert act.spec.effect == effect
    assert act.spec.idempotent is expected


def test_idempotent_can_be_declared() -> None:
    @tool(effect="write", idempotent=True)
    def set_flag(value: bool) -> bool:
        """Set the flag to a value (safe to repeat)."""
        return value

    assert set_flag.spec.idempotent is True


def test_decorated_tool_is_still_callable() -> None:
    assert isinstance(search_orders, Tool)
    assert search_orders("C1", limit=2) == ["C1", "None", "2"]


# --------------------------------------------------------------------------- definition errors


def test_missing_docstring_is_an_error() -> None:
    with pytest.raises(ToolDefinitionError, match="no description"):

        @tool(effect="read")
        def undocumented(x: int) -> int:
            return x


def test_missing_type_hint_is_an_error() -> None:
    with pytest.raises(ToolDefinitionError, match="'x' has no type hint"):

        @tool(effect="read")
        def untyped(x) -> int:  # type: ignore[no-untyped-def]  # the point of the test
            """Return x."""
            return int(x)


def test_star_args_is_an_error() -> None:
    with pytest.raises(ToolDefinitionError, match=r"\*args"):

        @tool(effect="read")
        def variadic(*values: int) -> int:
            """Sum values."""
            return sum(values)


def test_star_kwargs_is_an_error() -> None:
    with pytest.raises(ToolDefinitionError, match=r"\*\*kwargs"):

        @tool(effect="read")
        def keywords(**options: int) -> int:
            """Count options."""
            return len(options)


@pytest.mark.parametrize("bad", ["bad name", "1starts_with_digit", "x" * 65, "semi;colon"])
def test_bad_name_is_an_error(bad: str) -> None:
    with pytest.raises(ToolDefinitionError, match="Invalid tool name"):

        @tool(effect="read", name=bad)
        def fine(x: int) -> int:
            """Return x."""
            return x


def test_bad_effect_is_an_error() -> None:
    with pytest.raises(ToolDefinitionError, match="Invalid effect"):

        @tool(effect="dangerous")  # type: ignore[arg-type]  # the point of the test
        def risky(x: int) -> int:
            """Return x."""
            return x


def test_bad_timeout_is_an_error() -> None:
    with pytest.raises(ToolDefinitionError, match="timeout"):

        @tool(effect="read", timeout=0)
        def quick(x: int) -> int:
            """Return x."""
            return x


def test_inline_with_a_timeout_is_an_error() -> None:
    """A call on the event loop cannot be abandoned, so it cannot have a timeout."""
    with pytest.raises(ToolDefinitionError, match="inline=True cannot take a timeout"):

        @tool(effect="read", inline=True, timeout=1)
        def quick(x: int) -> int:
            """Return x."""
            return x


def test_inline_async_function_is_an_error() -> None:
    with pytest.raises(ToolDefinitionError, match="inline=True is for sync functions"):

        @tool(effect="read", inline=True)
        async def quick(x: int) -> int:
            """Return x."""
            return x


def test_tool_definition_error_is_a_configuration_error() -> None:
    assert issubclass(ToolDefinitionError, ConfigurationError)


# --------------------------------------------------------------------------- running


async def test_sync_function_runs(tools: Toolbox) -> None:
    outcome = await tools.lookup.run({"order_id": "A1"}, CTX)
    assert outcome.ok
    assert outcome.error is None
    assert outcome.result == {"order_id": "A1", "status": "shipped"}
    assert tools.args_of("lookup") == [{"order_id": "A1"}]
    assert outcome.duration_ms >= 0


_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("_SEEN", default="unset")


async def test_sync_function_runs_in_a_worker_thread_with_the_callers_context() -> None:
    """The default stays safe for blocking tools: a worker thread (a warm pool of the
    library's own), in a copy of the caller's context (what tracing relies on)."""
    seen: list[tuple[str, str]] = []

    @tool(effect="read")
    def where(x: int) -> int:
        """Report the thread and the context the call runs in."""
        seen.append((threading.current_thread().name, _SEEN.get()))
        _SEEN.set("changed in the tool")
        return x

    _SEEN.set("caller")
    for i in range(2):
        assert (await where.run({"x": i}, CTX)).ok
    assert [name.startswith("agentcore-tool") for name, _ in seen] == [True, True]
    assert [value for _, value in seen] == ["caller", "caller"]
    assert _SEEN.get() == "caller"  # a copy: the tool's changes stay in its call


async def test_a_blocking_sync_tool_does_not_hold_up_the_event_loop() -> None:
    """The loop waits for a sync tool's worker only briefly (tens of microseconds, to take
    a quick tool's outcome directly), never for the tool's own time: other runs, streams
    and timers on the loop keep moving while it blocks."""

    @tool(effect="read")
    def blocking(seconds: float) -> str:
        """Block the thread for a while."""
        time.sleep(seconds)
        return "done"

    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.005)

    other = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    started = time.perf_counter()
    outcome = await blocking.run({"seconds": 0.5}, CTX)
    ended = time.perf_counter()
    other.cancel()
    assert (outcome.ok, outcome.result) == (True, "done")
    during = [started, *(t for t in ticks if started <= t <= ended), ended]
    assert len(during) > 10  # ~100 ticks of 5 ms in 0.5 s; none if the loop were blocked
    assert max(b - a for a, b in itertools.pairwise(during)) < 0.25


async def test_sync_function_raising_stop_iteration_is_an_error_outcome() -> None:
    @tool(effect="read")
    def odd(x: int) -> int:
        """Fail oddly."""
        raise StopIteration(x)

    outcome = await odd.run({"x": 1}, CTX)
    assert not outcome.ok
    assert outcome.error is not None
    assert "StopIteration" in outcome.error


async def test_inline_sync_function_runs_on_the_event_loop() -> None:
    loop_thread = threading.current_thread()
    seen: list[threading.Thread] = []

    @tool(effect="read", inline=True)
    def quick(x: int) -> int:
        """Return x doubled."""
        seen.append(threading.current_thread())
        if x < 0:
            raise ValueError("negative")
        return 2 * x

    outcome = await quick.run({"x": 4}, CTX)
    assert (outcome.ok, outcome.result, seen) == (True, 8, [loop_thread])
    failed = await quick.run({"x": -1}, CTX)
    assert (failed.ok, failed.error) == (False, "ValueError: negative")


async def test_async_function_runs(tools: Toolbox) -> None:
    assert tools.fetch_status.spec.args_schema["required"] == ["service"]
    outcome = await tools.fetch_status.run({"service": "billing"}, CTX)
    assert outcome.ok
    assert outcome.result == "billing: up"
    assert tools.count("fetch_status") == 1


async def test_arguments_are_validated_and_coerced() -> None:
    seen: list[Any] = []

    @tool(effect="read")
    def pick(status: Status, limit: int = 3) -> str:
        """Pick orders in a status."""
        seen.append((status, limit))
        return "ok"

    outcome = await pick.run({"status": "open"}, CTX)
    assert outcome.ok
    assert seen == [(Status.OPEN, 3)]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({}, "order_id"),  # missing
        ({"order_id": 7}, "order_id"),  # wrong type
        ({"order_id": "A1", "extra": 1}, "extra"),  # unknown argument
    ],
)
async def test_invalid_args_are_an_error_outcome(
    tools: Toolbox, args: dict[str, Any], field: str
) -> None:
    outcome = await tools.lookup.run(args, CTX)
    assert not outcome.ok
    assert outcome.result is None
    assert outcome.error is not None
    assert "invalid arguments" in outcome.error
    assert field in outcome.error
    assert tools.calls == []


async def test_exception_is_an_error_outcome(tools: Toolbox) -> None:
    outcome = await tools.explode.run({"reason": "disk on fire"}, CTX)
    assert not outcome.ok
    assert outcome.error == "ValueError: cannot do it: disk on fire"
    assert tools.count("explode") == 1


async def test_async_exception_is_an_error_outcome() -> None:
    @tool(effect="read")
    async def broken(x: int) -> int:
        """Always fails."""
        raise KeyError(x)

    outcome = await broken.run({"x": 5}, CTX)
    assert not outcome.ok
    assert outcome.error is not None
    assert outcome.error.startswith("KeyError")


async def test_timeout_is_an_error_outcome(tools: Toolbox) -> None:
    started = time.perf_counter()
    outcome = await tools.slow.run({}, CTX)
    elapsed = time.perf_counter() - started
    assert not outcome.ok
    assert outcome.error == f"timed out after {SLOW_TIMEOUT_S:g}s"
    assert elapsed < SLOW_SLEEP_S  # the wait was abandoned, not sat out
    assert tools.count("slow") == 1


async def test_sync_timeout_is_an_error_outcome() -> None:
    @tool(effect="read", timeout=0.05)
    def blocking(seconds: float) -> str:
        """Block the thread for a while."""
        time.sleep(seconds)
        return "done"

    outcome = await blocking.run({"seconds": 0.2}, CTX)
    assert not outcome.ok
    assert outcome.error is not None
    assert "timed out" in outcome.error


async def test_fast_call_within_timeout_succeeds(tools: Toolbox) -> None:
    outcome = await tools.slow.run({"seconds": 0}, CTX)
    assert outcome.ok
    assert outcome.result == "finally"


async def test_non_json_result_is_an_error_outcome() -> None:
    @tool(effect="read")
    def weird() -> object:
        """Return something that is not JSON."""
        return object()

    outcome = await weird.run({}, CTX)
    assert not outcome.ok
    assert outcome.error is not None
    assert "not JSON-ready" in outcome.error


class Order(BaseModel):
    order_id: str
    total: float
    tags: list[str] = []


async def test_pydantic_model_results_are_serialised() -> None:
    @tool(effect="read")
    async def get_orders(customer_id: str) -> list[Order]:
        """Orders of a customer."""
        return [Order(order_id=f"{customer_id}-1", total=9.5, tags=["new"])]

    outcome = await get_orders.run({"customer_id": "C"}, CTX)
    assert outcome.ok
    assert outcome.result == [{"order_id": "C-1", "total": 9.5, "tags": ["new"]}]


async def test_pydantic_model_arguments() -> None:
    got: list[Order] = []

    @tool(effect="write")
    def save(order: Order) -> str:
        """Save an order."""
        got.append(order)
        return order.order_id

    assert "order" in save.spec.args_schema["properties"]
    outcome = await save.run({"order": {"order_id": "X", "total": 1}}, CTX)
    assert outcome.ok
    assert outcome.result == "X"
    assert got == [Order(order_id="X", total=1.0)]
    bad = await save.run({"order": {"order_id": "X"}}, CTX)
    assert not bad.ok
    assert "total" in (bad.error or "")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_sync_tools_run_in_a_forked_child() -> None:
    """A child forked after sync tools ran (a Celery prefork worker) gets a pool of its own:
    the parent's idle workers do not exist there."""

    @tool(effect="read")
    def double(x: int) -> int:
        """Return x doubled."""
        return 2 * x

    assert asyncio.run(double.run({"x": 1}, CTX)).result == 2
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the call completes
        code = 1
        try:
            outcome = asyncio.run(asyncio.wait_for(double.run({"x": 2}, CTX), 5))
            code = 0 if outcome.result == 4 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
