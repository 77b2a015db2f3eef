"""The litellm transport shared by every HTTP provider adapter.

litellm is imported lazily, on the first model call (:func:`~._litellm_lib.litellm`, which
also keeps it off the network at import). Every call passes ``num_retries=0`` and
``max_retries=0`` (litellm's and the openai SDK's own retries stay off, so each HTTP
request is one attempt of :mod:`._retry`) and ``"no-log": True`` (no litellm logging
callbacks run for our calls; we register none). litellm's configuration is otherwise left
as the application set it.

This module holds the adapter's flow and its hooks; reading the stream is in
:mod:`._litellm_stream`, reading payloads into plain types (:class:`RawReply`) in
:mod:`._wire`.

:class:`LiteLLMAdapter` is the base of the provider adapters. One call of
``complete_structured``:

1. picks the schema form (:func:`choose_form`) and compiles the wire schema of the
   adapter's dialect;
2. builds the provider-neutral envelope (system text plus messages, consecutive messages
   of one role merged), then lets the subclass shape it (:meth:`shape_messages`,
   :meth:`format_params`, :meth:`extra_params`);
3. sends it through the circuit breaker, the error mapper and the retry loop;
4. reads the reply (:meth:`read_reply`): text, stop reason, refusal, usage, response id;
   cost comes from litellm's local price map where it knows the model;
5. a refusal raises :class:`ModelRefusedError`; a truncated reply is asked again once with
   twice the output tokens and then raises :class:`ModelTruncatedError` (both retryable:
   the route may move on); otherwise the text is unwrapped and validated with
   :func:`parse_reply` against the form actually sent.

Streaming: when ``request.on_partial`` is set, the same request is sent with ``stream=True``
(and :meth:`LiteLLMAdapter.stream_params`: usage requested in the stream). The text deltas
are accumulated and ``on_partial`` gets :func:`partial_action` of the text so far whenever
that changes; it is only ever shown. When the stream ends, its chunks are assembled
(``litellm.stream_chunk_builder``) into one response and read by the same
:meth:`LiteLLMAdapter.read_reply`, so truncation, refusal, usage and validation are exactly
the non-streaming path's. A stream that breaks (a reset, or an end without the provider's
final event, which litellm reports as an error) or whose text stops inside the JSON object
while its stop reason says it finished is a retryable :class:`ProviderUnavailableError`:
the retry loop sends the whole request again, and nothing partial is ever returned.

Usage and attempts of every request are summed: in ``Completion.usage`` and
``Completion.attempts`` on success, in the raised error's ``input_tokens``,
``output_tokens`` and ``attempts`` on failure.

Native tool calling (``mode="native"``, or :meth:`LiteLLMAdapter.with_mode`): step 1
builds no wire schema and no structured-output parameter; instead
:meth:`LiteLLMAdapter.native_request_params` sends the step's functions
(:meth:`LiteLLMAdapter.tool_params`: each offered tool, ``plan`` and ``finish``, with the
provider's "auto" tool choice), the history as tool calls and tool results with our call ids
(:meth:`LiteLLMAdapter.shape_native_messages`) and the system text with a note that actions
are function calls. The reply's tool calls (:attr:`RawReply.calls`) are mapped back by
:func:`~agentcore.adapters._native.native_reply`: the first call is the action, the others
go to ``Completion.dropped_calls``, a text with no call is a ``finish``. Steps 3 to 5 are
the same code in both modes: retries, the breaker, usage, refusal and truncation (a reply
cut off inside a call's arguments is asked again, never executed). Streamed, ``on_partial``
gets the thought from the text deltas and the type and tool once the first call's name has
arrived; the action is validated only after the stream ends.

A provider adapter overrides class attributes and hooks, never a switch in here.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Self

from agentcore.contracts import ActionSchema, Usage
from agentcore.contracts._dialects import (
    Dialect,
    WireSchema,
    choose_form,
    compile_parameters,
    compile_wire_schema,
)
from agentcore.contracts._schema_nodes import JsonSchema
from agentcore.contracts.errors import (
    AuthenticationError,
    ConfigurationError,
    InvalidActionError,
    ModelError,
    ModelRefusedError,
    ModelTruncatedError,
    ProviderUnavailableError,
)

from ._breaker import BreakerPolicy, CircuitBreaker, breaker_for
from ._errors import ErrorContext, is_spend_limit, map_provider_errors, translate_exception
from ._litellm_lib import litellm, litellm_warnings_ignored, require_providers, too_deep
from ._litellm_stream import PartialFeed, read_chunks, received_usage, stops_inside_json
from ._native import MODES, Mode, native_messages, native_note, native_reply, native_tools
from ._protocol import Completion, CompletionRequest, Message, parse_reply
from ._retry import RetryPolicy, call_with_retries
from ._wire import (
    RawReply,
    as_int,
    as_items,
    as_str,
    decode_response_id,
    error_body,
    get_field,
    merge_messages,
    read_tool_calls,
)

__all__ = [
    "LiteLLMAdapter",
    "PartialFeed",
    "RawReply",
    "as_int",
    "as_items",
    "as_str",
    "decode_response_id",
    "error_body",
    "get_field",
    "litellm",
    "litellm_warnings_ignored",
    "merge_messages",
    "read_tool_calls",
]


@dataclass(slots=True)
class _Tally:
    """Requests made and usage reported by one ``complete_structured`` call."""

    attempts: int = 0
    usage: Usage = Usage()  # noqa: RUF009  # Usage is a frozen value


class LiteLLMAdapter:
    """Base class of the litellm-backed adapters: one ``complete_structured`` per call.

    Subclasses set the class attributes and override hooks for their provider's wire format;
    the flow (retries, breaker, error mapping, truncation, refusal, usage) stays here.

    Args:
        model: the model, with or without the route prefix (``"gpt-4.1-mini"`` or
            ``"openai/gpt-4.1-mini"``).
        api_base: the endpoint, or ``None`` for the provider's default (litellm's).
        api_key: the key, or ``None`` to read the provider's usual environment variable.
        timeout: seconds per HTTP request.
        extra_headers: headers added to every request.
        max_output_tokens: the reply's token cap when the request sets none; doubled once
            for the retry after a truncated reply.
        retry: the retry policy.
        breaker: the circuit-breaker policy (one breaker per family and ``api_base``).
        mode: ``"structured"`` (the next-action contract as structured output) or
            ``"native"`` (the provider's tool calling; see the module docstring).

    Attributes:
        name: the route entry, e.g. ``"openai/gpt-4.1-mini"``.
        model: the model string passed to litellm.
        mode: how the next action is asked for.
    """

    family: ClassVar[str] = "openai"
    """The provider family: error messages, ``ProviderError.provider`` and breaker keys."""
    route_prefix: str = "openai"
    """The ``provider/`` prefix of route strings this adapter answers for."""
    litellm_prefix: str = "openai"
    """litellm's provider prefix for the model string."""
    dialect: ClassVar[Dialect] = "openai_strict"
    """The schema dialect sent."""
    key_env: ClassVar[str | None] = "OPENAI_API_KEY"
    """The environment variable litellm reads the key from (named in error messages)."""
    key_env_fallbacks: ClassVar[tuple[str, ...]] = ()
    """Other environment variables litellm also takes the key from (Gemini: ``GOOGLE_API_KEY``)."""
    key_required: ClassVar[bool] = True
    """Whether a request without a key is pointless (:meth:`check_key`); local servers: no."""
    max_tokens_param: ClassVar[str] = "max_tokens"
    """The request field that caps the reply's tokens."""
    truncation_reasons: ClassVar[frozenset[str]] = frozenset({"length", "max_tokens"})
    """Stop reasons that mean the reply was cut off."""
    refusal_reasons: ClassVar[frozenset[str]] = frozenset({"content_filter", "refusal"})
    """Stop reasons that mean the provider refused to answer."""
    truncation_hint: ClassVar[str] = ""
    """A provider-specific sentence added to the error after a reply was cut off twice."""
    native_strict: ClassVar[bool] = False
    """Native mode: send strict functions (arguments constrained to their schema)."""
    native_dialect: ClassVar[Dialect | None] = None
    """Native mode: the dialect tool parameters are compiled in (``None``: :attr:`dialect`)."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        extra_headers: Mapping[str, str] | None = None,
        max_output_tokens: int = 1024,
        retry: RetryPolicy | None = None,
        breaker: BreakerPolicy | None = None,
        mode: Mode = "structured",
    ) -> None:
        bare = model.removeprefix(f"{self.route_prefix}/")
        if not bare or not model.strip():
            raise ConfigurationError(
                f"{type(self).__name__} needs a model name, e.g. '{self.route_prefix}/<model>'."
            )
        if timeout <= 0:
            raise ConfigurationError(
                f"timeout must be a positive number of seconds; got {timeout}."
            )
        if max_output_tokens < 1:
            raise ConfigurationError(
                f"max_output_tokens must be at least 1; got {max_output_tokens}."
            )
        self.name = f"{self.route_prefix}/{bare}"
        require_providers(self.name)  # the providers extra, named in the error
        self.model = f"{self.litellm_prefix}/{bare}"
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout
        self.extra_headers: dict[str, str] = dict(extra_headers or {})
        self.max_output_tokens = max_output_tokens
        self.retry = retry or RetryPolicy()
        self.breaker: CircuitBreaker = breaker_for(
            self.family, api_base, breaker or BreakerPolicy()
        )
        self.check_mode(mode)
        self.mode: Mode = mode

    def __repr__(self) -> str:
        where = f", api_base={self.api_base!r}" if self.api_base else ""
        native = ", mode='native'" if self.mode == "native" else ""
        return f"{type(self).__name__}({self.name!r}{where}{native})"

    def with_mode(self, mode: Mode) -> Self:
        """A copy of this adapter that asks in ``mode`` (same model, endpoint, key, policies
        and circuit breaker); this one is unchanged.

        Example:
            >>> agent.configured(model=adapter.with_mode("native"))

        Raises:
            ConfigurationError: an unknown mode, or one this adapter cannot use.
        """
        self.check_mode(mode)
        clone = copy.copy(self)
        clone.extra_headers = dict(self.extra_headers)
        clone.mode = mode
        return clone

    def check_mode(self, mode: str) -> None:
        """Raise :class:`ConfigurationError` unless this adapter can ask in ``mode``."""
        if mode not in MODES:
            valid = ", ".join(repr(m) for m in MODES)
            raise ConfigurationError(
                f"Invalid mode {mode!r} for {self.name}. Valid modes: {valid}."
            )

    # -- the call -----------------------------------------------------------------------------

    def check_key(self) -> None:
        """Raise :class:`AuthenticationError` when no usable key is configured: ``api_key``
        given but blank, or none given and :attr:`key_env` (and its fallbacks) unset or
        blank. Called before any request, so a missing key is never sent, retried or
        counted by the circuit breaker.
        """
        if not self.key_required or self.key_env is None:
            return
        if self.api_key is not None:
            if self.api_key.strip():
                return
            problem = "api_key was given but is empty"
        else:
            names = (self.key_env, *self.key_env_fallbacks)
            if any(os.environ.get(name, "").strip() for name in names):
                return
            state = "empty" if self.key_env in os.environ else "not set"
            problem = f"${self.key_env} is {state} and no api_key was given"
        raise AuthenticationError(
            f"{self.name}: no API key ({problem}). Set {self.key_env} in the environment or "
            "pass api_key=...; nothing was sent.",
            model=self.name,
            provider=self.family,
            attempts=0,
        )

    async def complete_structured(self, request: CompletionRequest) -> Completion:
        """Ask the provider for one next action (see the module docstring for the flow).

        Raises:
            ModelRefusedError: the provider refused (retryable: the route may move on).
            ModelTruncatedError: the reply was cut off twice (retryable).
            ProviderError: the provider failed after the retries (see ``retryable``).
            CircuitOpenError: the provider's breaker is open.
        """
        self.check_key()
        litellm()  # the one-time import is not part of any call's latency
        started = time.perf_counter()
        native = self.mode == "native"
        schema = request.schema if native else choose_form(request.schema, self.dialect)
        sent = replace(request, schema=schema)
        wire = None if native else compile_wire_schema(schema, self.dialect)
        tally = _Tally()
        max_tokens = request.max_output_tokens or self.max_output_tokens
        feed = (
            PartialFeed(request.on_partial, schema if native else None)
            if request.on_partial is not None
            else None
        )
        try:
            for round_ in (1, 2):
                params = (
                    self.request_params(sent, wire, max_tokens)
                    if wire is not None
                    else self.native_request_params(sent, max_tokens)
                )
                if feed is not None:
                    params.update(self.stream_params())
                reply = await call_with_retries(
                    lambda params=params: self._attempt(params, tally, feed),
                    self.retry,
                    deadline=request.deadline,
                )
                if reply.refusal is not None or reply.finish_reason in self.refusal_reasons:
                    raise ModelRefusedError(
                        f"{self.name}: the model refused to answer "
                        f"({_quote(reply.refusal or reply.finish_reason or 'refusal')}). "
                        "The route moves to its next model; if every model refuses, change "
                        "the task.",
                        model=self.name,
                    )
                if reply.finish_reason in self.truncation_reasons:
                    if round_ == 1:
                        max_tokens *= 2
                        continue
                    hint = f" {self.truncation_hint}" if self.truncation_hint else ""
                    raise ModelTruncatedError(
                        f"{self.name}: the reply was cut off twice (finish_reason "
                        f"{reply.finish_reason!r}, the second time at {max_tokens} output "
                        "tokens); nothing partial is executed. Raise max_output_tokens or "
                        f"shorten the context.{hint}",
                        model=self.name,
                    )
                return self._completion(sent, wire, reply, tally, started)
        except ModelError as exc:
            exc.model = self.name
            exc.attempts = tally.attempts
            exc.input_tokens = tally.usage.input_tokens
            exc.output_tokens = tally.usage.output_tokens
            raise
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    async def _attempt(
        self,
        params: dict[str, Any],  # Any: litellm keyword arguments
        tally: _Tally,
        feed: PartialFeed | None,
    ) -> RawReply:
        """One HTTP request (streamed when ``feed`` is set), guarded by the breaker and the
        error mapper."""
        with (
            self.breaker.attempt(self.name),
            map_provider_errors(self.error_context(), self.translate_error),
        ):
            tally.attempts += 1
            with litellm_warnings_ignored():
                if feed is None:
                    try:
                        raw = await self.send(params)
                    except Exception as exc:
                        if not too_deep(exc):
                            raise
                        return RawReply(
                            None,
                            None,
                            None,
                            Usage(),
                            None,
                            unreadable=f"{self.name}: the reply nests too deep to be read "
                            "(litellm could not convert it). Reply with one short, flat action.",
                        )
                    reply = self.read_reply(raw)
                else:
                    feed.restart()
                    raw = None
                    try:
                        reply = await self.stream(params, feed)
                    except Exception:
                        # the provider bills a broken attempt too: count what it got and
                        # what it sent before the break
                        tally.usage = tally.usage + self.broken_stream_usage(params, feed)
                        raise
            tally.usage = tally.usage + reply.usage
            self.check_reply(raw, reply)
            if feed is not None:
                self.check_stream_end(reply)
        return reply

    def _completion(
        self,
        request: CompletionRequest,
        wire: WireSchema | None,
        reply: RawReply,
        tally: _Tally,
        started: float,
    ) -> Completion:
        dropped: tuple[str, ...] = ()
        if reply.unreadable is not None:
            text, action, error = "", None, InvalidActionError(reply.unreadable)
        elif wire is None:
            mapped = native_reply(request.schema, reply.text, reply.calls)
            text, action, error, dropped = mapped.text, mapped.action, mapped.error, mapped.dropped
        else:
            text = wire.unwrap(reply.text or "")
            action, error = parse_reply(request, text)
        return Completion(
            text=text,
            action=action,
            error=error,
            usage=tally.usage,
            model=self.name,
            attempts=tally.attempts,
            finish_reason=reply.finish_reason,
            response_id=reply.response_id,
            latency_ms=(time.perf_counter() - started) * 1000,
            mode="structured" if wire is not None else "native",
            dropped_calls=dropped,
        )

    # -- hooks: the request -------------------------------------------------------------------

    def request_params(
        self, request: CompletionRequest, wire: WireSchema, max_tokens: int
    ) -> dict[str, Any]:  # Any: litellm keyword arguments
        """The keyword arguments of one litellm call."""
        system = self.system_text(request, wire)
        return {
            "model": self.model,
            "messages": self.shape_messages(system, request.messages),
            self.max_tokens_param: max_tokens,
            **self.transport_params(),
            **self.format_params(wire),
            **self.extra_params(request),
        }

    # -- hooks: extraction (see :mod:`._extract`) -------------------------------------------

    def for_extraction(self) -> LiteLLMAdapter:
        """The adapter that extracts: this one (extraction speaks Chat Completions)."""
        return self

    def extraction_params(
        self, schema: JsonSchema, name: str
    ) -> dict[str, Any]:  # Any: litellm arguments
        """The structured-output parameters of an extraction: the output model's schema
        compiled in this adapter's dialect and sent like an action schema
        (:meth:`format_params`)."""
        body = compile_parameters(schema, self.dialect)
        wire = WireSchema(dialect=self.dialect, name=name, schema=body, wrapped=False, prompt=None)
        return self.format_params(wire)

    def transport_params(self) -> dict[str, Any]:  # Any: litellm keyword arguments
        """How litellm sends: the timeout, its retries off, no logging callbacks, and
        ``api_base``, ``api_key`` and ``extra_headers`` where set."""
        params: dict[str, Any] = {  # Any: litellm keyword arguments
            "timeout": self.timeout,
            "num_retries": 0,  # litellm's retry wrapper
            "max_retries": 0,  # the openai SDK's
            "no-log": True,
        }
        if self.api_base is not None:
            params["api_base"] = self.api_base
        if self.api_key is not None:
            params["api_key"] = self.api_key
        if self.extra_headers:
            params["extra_headers"] = dict(self.extra_headers)
        return params

    def system_text(self, request: CompletionRequest, wire: WireSchema) -> str:
        """The system text sent: the request's, plus the dialect's prompt when it has one."""
        return f"{request.system}\n\n{wire.prompt}" if wire.prompt else request.system

    def shape_messages(
        self, system: str, messages: Sequence[Message]
    ) -> list[dict[str, Any]]:  # Any: provider message objects
        """The provider's message list (OpenAI chat shape: a leading system message, then
        the messages with consecutive ones of a role merged)."""
        shaped: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        shaped += [{"role": m.role, "content": m.content} for m in merge_messages(messages)]
        return shaped

    def format_params(self, wire: WireSchema) -> dict[str, Any]:  # Any: litellm arguments
        """The structured-output parameters (default: OpenAI strict ``json_schema``)."""
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": wire.name, "schema": wire.schema, "strict": True},
            }
        }

    def extra_params(self, request: CompletionRequest) -> dict[str, Any]:  # Any: litellm args
        """Any other provider parameters (none by default)."""
        del request
        return {}

    # -- hooks: the request in native mode ------------------------------------------------------

    def native_request_params(
        self, request: CompletionRequest, max_tokens: int
    ) -> dict[str, Any]:  # Any: litellm keyword arguments
        """The keyword arguments of one litellm call in native mode: no structured-output
        parameter; the functions and the tool choice (:meth:`tool_params`) instead."""
        system = self.native_system_text(request)
        return {
            "model": self.model,
            "messages": self.shape_native_messages(system, request),
            self.max_tokens_param: max_tokens,
            **self.transport_params(),
            **self.tool_params(request.schema),
            **self.extra_params(request),
        }

    def native_system_text(self, request: CompletionRequest) -> str:
        """The request's system text for native mode (its ``native_system``, else its
        ``system``) plus the native-mode note (actions are function calls; renamed tools)."""
        system = request.native_system if request.native_system is not None else request.system
        return f"{system}\n\n{native_note(request.schema)}"

    def shape_native_messages(
        self, system: str, request: CompletionRequest
    ) -> list[dict[str, Any]]:  # Any: OpenAI-format chat messages (litellm maps them)
        """The history as tool calls and tool results with our call ids (OpenAI chat format;
        litellm converts it for other providers)."""
        return native_messages(system, request.messages, request.schema)

    def native_tool_dialect(self) -> Dialect:
        """The dialect tool parameters are compiled in."""
        return self.native_dialect or self.dialect

    def tool_params(self, schema: ActionSchema) -> dict[str, Any]:  # Any: litellm arguments
        """The step's functions in OpenAI's format and the "auto" tool choice (the model may
        call a function or answer in text; never a forced call)."""
        tools = native_tools(schema, self.native_tool_dialect(), strict=self.native_strict)
        return {"tools": tools, "tool_choice": "auto"}

    def stream_params(self) -> dict[str, Any]:  # Any: litellm keyword arguments
        """What a streamed request adds: ``stream=True`` and usage in the stream.

        ``stream_options.include_usage`` is OpenAI's option for a final usage chunk; litellm
        sends it to OpenAI-compatible servers and reads Anthropic's and Gemini's stream
        usage (``message_delta``, ``usageMetadata``) into the same final chunk.
        """
        return {"stream": True, "stream_options": {"include_usage": True}}

    # -- hooks: the transport -------------------------------------------------------------------

    async def send(self, params: dict[str, Any]) -> Any:  # Any: litellm's response object
        """Make the HTTP request through litellm (``acompletion`` by default)."""
        return await litellm().acompletion(**params)

    async def stream(
        self,
        params: dict[str, Any],  # Any: litellm keyword arguments
        feed: PartialFeed,
    ) -> RawReply:
        """Make a streamed request: give ``feed`` the text so far as deltas arrive (and the
        first tool call so far, once its name is known; :func:`read_chunks`), then read the
        assembled response like a non-streamed one (:meth:`read_reply`).

        ``stream_chunk_builder`` assembles litellm's chunks into one response with the
        stream's usage (when a server sends none, litellm counts the tokens itself).
        """
        response: Any = await self.send(params)  # Any: litellm's CustomStreamWrapper
        chunks, refusal = await read_chunks(response, feed)
        built: object = (
            litellm().stream_chunk_builder(chunks, messages=params.get("messages"))
            if chunks
            else None
        )
        if built is None:
            raise self._broken_stream("without any chunk")
        reply = self.read_reply(built)
        if refusal and reply.refusal is None:
            reply = replace(reply, refusal=refusal)
        return reply

    def broken_stream_usage(
        self,
        params: dict[str, Any],  # Any: litellm keyword arguments
        feed: PartialFeed,
    ) -> Usage:
        """The tokens of a streamed attempt that broke after it started: the prompt and the
        text received, counted with litellm's tokenizer (the provider's usage report comes
        at the end, so it never arrived). Nothing when no text had arrived."""
        return received_usage(self.model, params, feed.received)

    def check_stream_end(self, reply: RawReply) -> None:
        """Raise a retryable error when a streamed reply did not really end.

        litellm raises for most providers when a stream stops before the provider's final
        event; its Gemini stream parser does not (it reads a chunk without ``finishReason``
        as ``stop``), so a reply said to be finished whose text (native mode: a tool call's
        arguments) stops inside a JSON value is treated as a broken stream too.
        """
        if reply.finish_reason is None:
            raise self._broken_stream("without a stop reason")
        done = self.truncation_reasons | self.refusal_reasons
        if reply.finish_reason in done:
            return
        if self.mode == "native":
            if any(stops_inside_json(call.arguments) for call in reply.calls):
                raise self._broken_stream("inside a tool call's arguments")
        elif stops_inside_json(reply.text or ""):
            raise self._broken_stream("inside the JSON object although it reported a stop")

    def _broken_stream(self, how: str) -> ProviderUnavailableError:
        return ProviderUnavailableError(
            f"{self.name}: the {self.family} stream ended {how}. The whole request is sent "
            "again; nothing partial is used.",
            model=self.name,
            provider=self.family,
        )

    def error_context(self) -> ErrorContext:
        """Who is calling, for error messages."""
        return ErrorContext(
            model=self.name,
            provider=self.family,
            api_base=self.api_base,
            timeout=self.timeout,
            key_env=self.key_env,
            clock=self.retry.clock,
            spend_limit=self.is_spend_limit,
        )

    def translate_error(self, exc: BaseException, context: ErrorContext) -> ModelError | None:
        """Turn a provider library's exception into an agentcore error (override to extend)."""
        return translate_exception(exc, context)

    def is_spend_limit(self, status: int, code: str | None, kind: str | None, text: str) -> bool:
        """Whether an error body means a spend or quota limit (not worth retrying)."""
        return is_spend_limit(status, code, kind, text)

    # -- hooks: the reply -----------------------------------------------------------------------

    def read_reply(self, raw: Any) -> RawReply:  # Any: litellm's ModelResponse
        """Read a Chat Completions response (litellm's ``ModelResponse``)."""
        choices = as_items(get_field(raw, "choices"))
        choice: object = choices[0] if choices else None
        message: object = get_field(choice, "message")
        usage: object = get_field(raw, "usage")
        return RawReply(
            text=as_str(get_field(message, "content")),
            finish_reason=as_str(get_field(choice, "finish_reason")),
            refusal=as_str(get_field(message, "refusal")) or None,
            usage=Usage(
                input_tokens=as_int(get_field(usage, "prompt_tokens")),
                output_tokens=as_int(get_field(usage, "completion_tokens")),
                cached_input_tokens=as_int(
                    get_field(get_field(usage, "prompt_tokens_details"), "cached_tokens")
                ),
                cost=self.cost(raw),
            ),
            response_id=as_str(get_field(raw, "id")),
            calls=read_tool_calls(get_field(message, "tool_calls")),
        )

    def check_reply(self, raw: Any, reply: RawReply) -> None:  # Any: litellm's response
        """Raise a :class:`ProviderError` for a 200 that is really a provider failure
        (retried like an HTTP error). Nothing by default. ``raw`` is ``None`` for a
        streamed reply."""
        del raw, reply

    def cost(self, raw: Any) -> float | None:  # Any: litellm's response object
        """The response's cost in US dollars from litellm's local price map, or ``None``."""
        try:
            value: object = litellm().completion_cost(completion_response=raw)
        except Exception:  # an unknown model or a price-map gap: cost is unknown, not an error
            return None
        return float(value) if isinstance(value, int | float) and value >= 0 else None


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 300 else text[:297] + "...")
