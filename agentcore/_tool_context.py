"""What a tool call knows of its run: :class:`ToolContext`, the run's identity, and the
parameters bound to it (:class:`FromRun`). Re-exported by :mod:`agentcore.tools`, where
users import them from."""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import sys
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal

from typing_extensions import TypeVar

from .policy import Budget

__all__ = [
    "FENCING_TOKEN_HEADER",
    "IDEMPOTENCY_KEY_HEADER",
    "DepsFactory",
    "DepsT",
    "FromRun",
    "RunIdentity",
    "ToolContext",
    "current_context",
]

DepsT = TypeVar("DepsT", default=Any)
"""The type of ``ToolContext.deps`` (``ToolContext[MyDeps]``); ``Any`` when not given."""

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
"""The HTTP header a call's idempotency key travels in (:meth:`ToolContext.request_headers`)."""

FENCING_TOKEN_HEADER = "Agentcore-Fencing-Token"
"""The HTTP header a call's fencing token travels in (:meth:`ToolContext.request_headers`)."""

_KEYED_METHODS = frozenset({"POST", "PATCH"})  # the methods HTTP does not make idempotent


@dataclass(frozen=True, slots=True)
class FromRun:
    """Binds a tool parameter to the run, never to the model:
    ``customer_id: Annotated[str, FromRun("customer_id")]`` is filled from the run's
    recorded ``metadata["customer_id"]`` (``agent.run(..., metadata={...})``), and
    ``Annotated[str, FromRun.tenant()]`` from its ``tenant``.

    The parameter is left out of the tool's schema, so a model (or text injected into
    it) can neither see nor set it; the value is checked present and of the parameter's
    type when the run starts (a missing one is a :class:`ConfigurationError` before
    anything runs), and recorded on each ``tool_started`` it fills (``bound``).

    Attributes:
        key: the metadata key (``"tenant"`` for :meth:`tenant`).
        source: ``"metadata"`` or ``"tenant"``.
    """

    key: str
    source: Literal["metadata", "tenant"] = "metadata"

    @classmethod
    def tenant(cls) -> FromRun:
        """The run's tenant (``agent.run(..., tenant=...)``)."""
        return cls("tenant", "tenant")

    @property
    def pinned(self) -> str:
        """Where the value comes from, as the run's tool manifest records it
        (``metadata:customer_id``, ``tenant``)."""
        return "tenant" if self.source == "tenant" else f"metadata:{self.key}"

    def describe(self) -> str:
        """Where the value comes from, in words."""
        return "the run's tenant" if self.source == "tenant" else f"metadata[{self.key!r}]"


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """Who a run acts for, as recorded when it started: what ``Agent(deps=...)``'s factory
    is given in whichever process advances the run.

    Attributes:
        run_id: the run.
        tenant: its tenant, or ``None``.
        metadata: its recorded metadata.
    """

    run_id: str
    tenant: str | None
    metadata: Mapping[str, Any]  # Any: JSON values


_NO_DEPS: Any = None  # Any: stands for any DepsT until a factory builds one

DepsFactory = Callable[[RunIdentity], Any]
"""``Agent(deps=factory)``: ``factory(identity)`` (sync or async) builds what tools get as
``ToolContext.deps`` for one run: a database pool, an HTTP client, the caller's service
objects, scoped to the run's tenant and metadata."""


@dataclass(frozen=True, slots=True)
class ToolContext(Generic[DepsT]):
    """Given to a tool that declares a parameter of this type (``ToolContext[MyDeps]``
    types :attr:`deps`).

    Attributes:
        run_id: the run calling the tool.
        step: the step number.
        call_id: our id of this call (``c<step>``).
        idempotency_key: ``run_id:step``, stable across retries and resumes; pass it to the
            systems you call so they can deduplicate.
        secrets: the agent's secret resolver (``await ctx.secrets(name)``), or ``None``;
            a value it returns is redacted from everything the run records.
        fencing_token: the epoch of the lease the worker running the call holds on the
            run: it grows with every lease taken on the run (a resume, a takeover), so a
            worker that was taken over carries a smaller token than every later holder.
            Forward it to a system that can reject a stale writer (keep the largest token
            seen with the row and refuse a write with a smaller one; a storage
            precondition): a stalled worker that wakes after a takeover is then refused
            there. ``None`` when the call runs without a lease.
        tenant, metadata: the run's identity as recorded when it started (read-only).
        deps: what ``Agent(deps=factory)``'s factory built for this run in this process
            (from the recorded identity), or ``None`` without one.
        budget_left: what the run has left of its budget when the call starts (tokens,
            cost, tool calls, deadline), for work done on its behalf (a sub-agent's run);
            ``None`` outside a run.
    """

    run_id: str
    step: int
    call_id: str
    idempotency_key: str
    secrets: Callable[[str], Awaitable[str]] | None = None
    fencing_token: int | None = None
    tenant: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict[str, Any])  # Any: JSON values
    deps: DepsT = _NO_DEPS  # None until Agent(deps=...) builds the application's
    budget_left: Budget | None = None
    _keyed: Iterator[int] = field(
        default_factory=lambda: itertools.count(1), init=False, repr=False, compare=False
    )  # numbers the call's POST and PATCH requests (request_headers)

    @staticmethod
    def current() -> ToolContext | None:
        """The context of the tool call running here (its task, or the worker thread of a
        sync tool), or ``None`` outside a call. How :mod:`agentcore.net`'s clients find
        the call whose identity they send."""
        return _CURRENT.get()

    def request_headers(self, method: str, present: Iterable[str] = ()) -> dict[str, str]:
        """The headers that carry this call's identity on an HTTP request, which
        :mod:`agentcore.net`'s clients add by themselves; for another HTTP client.

        ``Agentcore-Fencing-Token`` (:attr:`fencing_token`, when there is one) on every
        request, and ``Idempotency-Key`` on a POST or PATCH (the methods HTTP does not
        make idempotent): the call's first such request carries :attr:`idempotency_key`,
        the n-th ``idempotency_key/n``, so a call that makes several writes never sends
        one key with two payloads, and the call run again sends the same keys in the same
        order.

        Args:
            method: the request's HTTP method.
            present: the names of the headers the request already has (any case): those
                are left out, and a request that has its own ``Idempotency-Key`` takes no
                number.
        """
        have = {name.lower() for name in present}
        headers: dict[str, str] = {}
        if method.upper() in _KEYED_METHODS and IDEMPOTENCY_KEY_HEADER.lower() not in have:
            n = next(self._keyed)
            key = self.idempotency_key if n == 1 else f"{self.idempotency_key}/{n}"
            headers[IDEMPOTENCY_KEY_HEADER] = key
        if self.fencing_token is not None and FENCING_TOKEN_HEADER.lower() not in have:
            headers[FENCING_TOKEN_HEADER] = str(self.fencing_token)
        return headers

    def trace_headers(self) -> dict[str, str]:
        """W3C trace context headers (``traceparent``, ``tracestate``) of this call, to
        send to the services the tool calls so their spans join the run's trace.

        When agentcore traces (``configure_telemetry``), the tool runs inside its
        ``execute_tool`` span and the headers name that span; its own spans, made with any
        OpenTelemetry tracer, are that span's children without these headers. Empty when
        OpenTelemetry is not in use. Call it from the tool, while it runs.
        """
        if "opentelemetry.trace" not in sys.modules:
            return {}  # nobody imported OpenTelemetry, so no span is current
        from opentelemetry.propagate import inject

        headers: dict[str, str] = {}
        inject(headers)
        return headers


_CURRENT: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "agentcore_tool_context", default=None
)
"""The context of the tool call running in this task or thread (set by ``Tool.run``)."""


@contextlib.contextmanager
def current_context(ctx: ToolContext) -> Generator[None]:
    """Make ``ctx`` what :meth:`ToolContext.current` returns inside the block (a tool call,
    or a compensation)."""
    token = _CURRENT.set(ctx)
    try:
        yield
    finally:
        _CURRENT.reset(token)
