"""Typed extraction: one validated pydantic object from a text, through instructor over litellm.

This is instructor's job: it turns the output model into a schema, parses and validates the
reply with pydantic (the model's own validators included) and, when validation fails, asks
again with the errors (its re-asks). What goes on the wire is still the adapter's business,
so every provider gets its own structured-output mechanism, not litellm's guess:

* the output model's JSON Schema is compiled in the adapter's dialect
  (:func:`~agentcore.contracts._dialects.compile_parameters`: OpenAI strict, Anthropic
  without bounds, Gemini, or a schema in the prompt), and sent with the adapter's
  :meth:`~agentcore.adapters._litellm.LiteLLMAdapter.extraction_params`: OpenAI's strict
  ``response_format``, Anthropic's native ``output_config.format`` (never a forced
  ``tool_choice``, which current Claude models reject), Gemini's ``responseJsonSchema``,
  DeepSeek's JSON mode with the schema in the system text, a local server's
  ``json_schema`` / ``json_object`` with schema. instructor runs in ``JSON_SCHEMA`` mode,
  and the ``response_format`` it builds is replaced by the adapter's before litellm sees
  the request.
* every request goes through the adapter's plumbing: the key check, the circuit breaker,
  the error mapping and the retry policy (429, 5xx, timeouts); a refusal raises
  :class:`ModelRefusedError`, a reply cut off :class:`ModelTruncatedError`. Chat
  Completions is used for every family (an OpenAI adapter set to the Responses API
  extracts over Chat Completions).
* tokens and requests of every attempt, re-asks included, are summed in
  :attr:`Extraction.usage` and :attr:`Extraction.attempts`, and on failure in the error's
  ``input_tokens``, ``output_tokens`` and ``attempts``.

instructor and litellm are imported on the first call only.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from agentcore.contracts import Usage
from agentcore.contracts.errors import (
    ConfigurationError,
    ExtractionError,
    ModelError,
    ModelRefusedError,
    ModelTruncatedError,
)

from ._errors import map_provider_errors
from ._litellm import LiteLLMAdapter, litellm, litellm_warnings_ignored
from ._litellm_lib import missing_providers
from ._protocol import ModelAdapter
from ._retry import call_with_retries
from ._wire import as_items

__all__ = ["DEFAULT_INSTRUCTIONS", "Extraction", "extract"]

T = TypeVar("T", bound=BaseModel)

DEFAULT_INSTRUCTIONS = (
    "Extract the requested information from the user's text into one JSON object that "
    "matches the schema. Use only what the text says."
)
"""The system text of an extraction when the caller gives none."""


_QUIET = logging.NullHandler()


@dataclass(frozen=True, slots=True)
class Extraction(Generic[T]):
    """What :func:`extract` returns.

    Attributes:
        value: the validated object.
        model: the route entry that produced it.
        usage: tokens (and cost) of every request, re-asks included.
        attempts: HTTP requests made (retries and re-asks included).
        reasks: replies that failed validation and were asked again.
        latency_ms: wall time of the whole extraction.
    """

    value: T
    model: str
    usage: Usage
    attempts: int
    reasks: int
    latency_ms: float


@dataclass(slots=True)
class _Tally:
    attempts: int = 0
    replies: int = 0
    usage: Usage = Usage()  # noqa: RUF009  # Usage is a frozen value


async def extract(
    adapter: ModelAdapter,
    output: type[T],
    text: str,
    *,
    instructions: str | None = None,
    max_reasks: int = 2,
    max_output_tokens: int | None = None,
) -> Extraction[T]:
    """Extract one ``output`` object from ``text`` with ``adapter``'s model.

    Args:
        adapter: a provider adapter (``openai``, ``anthropic``, ``gemini``, ``deepseek``,
            ``local``, ...).
        output: the pydantic model to fill; its validators run on every reply.
        text: the text to read.
        instructions: the system text (default :data:`DEFAULT_INSTRUCTIONS`).
        max_reasks: how many times a reply that fails validation is asked again.
        max_output_tokens: the reply's token cap (default: the adapter's).

    Raises:
        ConfigurationError: the adapter cannot extract (a scripted model), a bad option,
            or instructor is not installed (the providers extra).
        ExtractionError: no reply validated after the re-asks.
        ModelError: the provider failed (its retries done), refused or cut the reply off.
    """
    if not isinstance(adapter, LiteLLMAdapter):
        name = getattr(adapter, "name", type(adapter).__name__)
        raise ConfigurationError(
            f"{name} cannot extract: extraction needs a provider model (openai/..., "
            "anthropic/..., gemini/..., deepseek/..., local/...)."
        )
    if max_reasks < 0:
        raise ConfigurationError(f"max_reasks must be 0 or more; got {max_reasks}.")
    chat = adapter.for_extraction()
    chat.check_key()
    started = time.perf_counter()
    tally = _Tally()
    schema = output.model_json_schema()
    params = chat.extraction_params(schema, output.__name__)
    system = instructions or DEFAULT_INSTRUCTIONS
    if chat.dialect == "json_prompt":  # no constrained decoding: the schema goes in the prompt
        compact = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
        system += f"\n\nReply with JSON only, one object matching this JSON Schema: {compact}"
    tokens = max_output_tokens or chat.max_output_tokens

    async def create(**kwargs: Any) -> Any:  # Any: instructor's keyword arguments, litellm's reply
        kwargs.pop("response_format", None)  # instructor's; the adapter's mechanism instead
        request = {
            "model": chat.model,
            "messages": kwargs["messages"],
            chat.max_tokens_param: tokens,
            **chat.transport_params(),
            **params,
        }
        return await _ask(chat, request, tally)

    try:
        import instructor  # noqa: TID251  # instructor's one import point, on first use
    except ModuleNotFoundError as exc:
        raise ConfigurationError(missing_providers(chat.name, "instructor")) from exc

    # instructor logs every failed validation at ERROR; with no handler configured Python
    # would print that to stderr. An application that configures logging still gets it.
    logging.getLogger("instructor").addHandler(_QUIET)

    client: Any = instructor.from_litellm(  # Any: instructor's client is loosely typed
        create, mode=instructor.Mode.JSON_SCHEMA, async_client=True
    )
    litellm()  # the one-time import is not part of the first request's latency
    try:
        value: object = await client.chat.completions.create(
            response_model=output,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": text}],
            max_retries=max_reasks,  # instructor's retries after the first reply
        )
    except Exception as exc:
        raise _failure(exc, chat.name, tally, max_reasks) from exc
    if not isinstance(value, BaseModel):  # pragma: no cover  # instructor returns the model
        raise ExtractionError(f"{chat.name}: instructor returned {type(value).__name__}")
    # instructor validates into a subclass it derives from ``output``; hand back ``output``
    result = value if type(value) is output else output.model_validate(value.model_dump())
    return Extraction(
        value=result,
        model=chat.name,
        usage=tally.usage,
        attempts=tally.attempts,
        reasks=max(tally.replies - 1, 0),
        latency_ms=(time.perf_counter() - started) * 1000,
    )


async def _ask(
    adapter: LiteLLMAdapter,
    request: dict[str, Any],  # Any: litellm keyword arguments
    tally: _Tally,
) -> Any:  # Any: litellm's ModelResponse
    """One reply: the adapter's breaker, error mapping and retries around each request."""

    async def attempt() -> Any:  # Any: litellm's ModelResponse
        with (
            adapter.breaker.attempt(adapter.name),
            map_provider_errors(adapter.error_context(), adapter.translate_error),
        ):
            tally.attempts += 1
            with litellm_warnings_ignored():
                raw: Any = await litellm().acompletion(**request)  # Any: ModelResponse
            reply = adapter.read_reply(raw)
            tally.usage = tally.usage + reply.usage
            adapter.check_reply(raw, reply)
        return raw

    raw = await call_with_retries(attempt, adapter.retry)
    tally.replies += 1
    reply = adapter.read_reply(raw)
    if reply.refusal is not None or reply.finish_reason in adapter.refusal_reasons:
        raise ModelRefusedError(
            f"{adapter.name}: the model refused to extract "
            f"({reply.refusal or reply.finish_reason!r}).",
            model=adapter.name,
        )
    if reply.finish_reason in adapter.truncation_reasons:
        raise ModelTruncatedError(
            f"{adapter.name}: the extraction was cut off at {request[adapter.max_tokens_param]} "
            "output tokens; raise max_output_tokens or shorten the text.",
            model=adapter.name,
        )
    return raw


def _failure(exc: Exception, model: str, tally: _Tally, max_reasks: int) -> ModelError:
    """Our error for what instructor raised: the provider's error as it was, else an
    :class:`ExtractionError` with the last validation error."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ModelError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, ModelError):
        error = cause
    else:
        tried = as_items(getattr(exc, "failed_attempts", None))  # instructor's record
        last: object = tried[-1] if tried else None
        detail = " ".join(str(getattr(last, "exception", None) or exc).split())
        detail = detail if len(detail) <= 600 else detail[:597] + "..."
        error = ExtractionError(
            f"{model}: no reply matched the output model after {max_reasks} re-asks; last "
            f"error: {detail}",
            model=model,
        )
    error.model = model
    error.attempts = tally.attempts
    error.input_tokens = tally.usage.input_tokens
    error.output_tokens = tally.usage.output_tokens
    return error
