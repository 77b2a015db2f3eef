"""Translate litellm, openai-SDK, httpx and aiohttp exceptions into agentcore's error tree.

Like httpx's ``map_httpcore_exceptions``: one context manager at the boundary, the most
specific class first, always ``raise ... from exc`` so the provider's own error stays the
``__cause__``::

    ModelError
    └── ProviderError                      what the mapper raises
        ├── ProviderUnavailableError       timeouts, connection failures and resets,
        │                                  408, 409, 5xx, 529 and ``overloaded_error``
        ├── RateLimitedError               429 (``retry_after`` from Retry-After)
        ├── SpendLimitError                402, or a 429 whose body names a spend, quota,
        │                                  billing or balance limit       (not retryable)
        ├── AuthenticationError            401, 403                       (not retryable)
        └── BadRequestError                400, 404, 422 and other 4xx    (not retryable)

The status code decides, not litellm's exception class: litellm picks its class partly from
the error text (a 500 or 503 whose body says ``invalid_request_error`` arrives as
``litellm.BadRequestError`` with ``status_code`` 500), while ``status_code`` and the
response headers are kept as received (``exc.status_code``, ``exc.response.headers`` and
``exc.litellm_response_headers``). A failure with no response at all (a timeout, a refused
or reset connection) is found in the exception chain: litellm wraps the openai SDK's
``APIConnectionError`` in an ``InternalServerError`` with a made-up status of 500.

Exceptions from anywhere else (a bug, a ``TypeError``) are not provider errors and pass
through unchanged; so do agentcore's own errors.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import cast

from agentcore.contracts.errors import (
    AuthenticationError,
    BadRequestError,
    ModelError,
    ProviderUnavailableError,
    RateLimitedError,
    SpendLimitError,
)

__all__ = [
    "ErrorContext",
    "is_spend_limit",
    "json_object_in_text",
    "map_provider_errors",
    "parse_retry_after",
    "translate_exception",
]

_MAX_DETAIL = 300
_MAX_BRACES = 16  # where json_object_in_text looks for a body
_LIBRARIES = ("litellm", "openai", "httpx", "httpcore", "aiohttp", "anthropic", "google")
_TIMEOUT_NAMES = frozenset(
    {
        "APITimeoutError",  # openai SDK
        "Timeout",  # litellm
        "TimeoutException",  # httpx
        "ServerTimeoutError",  # aiohttp
        "ConnectionTimeoutError",  # aiohttp
        "SocketTimeoutError",  # aiohttp
    }
)
_CONNECTION_NAMES = frozenset(
    {
        "APIConnectionError",  # openai SDK (and litellm's subclass)
        "TransportError",  # httpx: ConnectError, ReadError, RemoteProtocolError, ...
        "ClientConnectionError",  # aiohttp: ServerDisconnectedError, ClientOSError, ...
        "ClientPayloadError",  # aiohttp: the body ended early
    }
)
_SPEND_CODES = frozenset(
    {
        "insufficient_quota",
        "billing_hard_limit_reached",
        "billing_not_active",
        "spend_limit_exceeded",
        "budget_exceeded",
        "insufficient_balance",
    }
)
_SPEND_TEXT = re.compile(
    r"spend(ing)? limit|usage limit|budget|billing|insufficient (balance|quota|credit|funds)"
    r"|exceeded your current quota|credit balance|out of credits",
    re.IGNORECASE,
)


def is_spend_limit(status: int, code: str | None, kind: str | None, text: str) -> bool:
    """Whether an error says a spend, quota, billing or balance limit was reached.

    OpenAI answers 429 ``insufficient_quota`` when the account is out of quota; DeepSeek
    answers 402 "Insufficient Balance"; other providers word it in the message.
    """
    if status == 402:
        return True
    if code in _SPEND_CODES or kind in _SPEND_CODES:
        return True
    return bool(_SPEND_TEXT.search(text))


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """What a message needs to say who failed and what to do.

    Attributes:
        model: the route entry (``"openai/gpt-4.1-mini"``).
        provider: the adapter family (``"openai"``), recorded on the error.
        api_base: where requests went, when not the provider's default.
        timeout: the per-request timeout in seconds.
        key_env: the environment variable the key is usually read from.
        clock: wall-clock seconds, for Retry-After given as an HTTP-date.
        spend_limit: decides whether an error body means a spend or quota limit.
    """

    model: str
    provider: str
    api_base: str | None = None
    timeout: float | None = None
    key_env: str | None = None
    clock: Callable[[], float] = time.time
    spend_limit: Callable[[int, str | None, str | None, str], bool] = is_spend_limit


@contextmanager
def map_provider_errors(
    context: ErrorContext,
    translate: Callable[[BaseException, ErrorContext], ModelError | None] | None = None,
) -> Generator[None, None, None]:
    """Raise provider failures inside the block as agentcore errors (``from`` the original).

    Args:
        context: who is calling, for the messages.
        translate: the translation (an adapter's hook); :func:`translate_exception` by default.
    """
    try:
        yield
    except ModelError:
        raise
    except Exception as exc:
        mapped = (translate or translate_exception)(exc, context)
        if mapped is None:
            raise
        raise mapped from exc


def translate_exception(exc: BaseException, context: ErrorContext) -> ModelError | None:
    """The agentcore error for a provider library's exception, or ``None`` if it is not one."""
    chain = list(_chain(exc))
    where = f" at {context.api_base}" if context.api_base else ""
    if any(_is_kind(e, _TIMEOUT_NAMES) or isinstance(e, TimeoutError) for e in chain):
        limit = f" within {context.timeout:g}s" if context.timeout is not None else ""
        return ProviderUnavailableError(
            f"{context.model}: {context.provider}{where} did not answer{limit} "
            "(timeout). It was retried with backoff; raise the adapter's timeout, try "
            "again later, or add another model to the route.",
            model=context.model,
            provider=context.provider,
        )
    if any(_is_kind(e, _CONNECTION_NAMES) or isinstance(e, ConnectionError) for e in chain):
        cause = next((e for e in reversed(chain) if str(e)), exc)
        return ProviderUnavailableError(
            f"{context.model}: the connection to {context.provider}{where} failed "
            f"({type(cause).__name__}: {_short(str(cause))}). It was retried with backoff; "
            "check api_base and the network, or add another model to the route.",
            model=context.model,
            provider=context.provider,
        )
    status = _status(exc)
    if status is None:
        if not _from_provider_library(exc):
            return None
        return ProviderUnavailableError(
            f"{context.model}: {context.provider}{where} failed without an HTTP status "
            f"({type(exc).__name__}: {_short(str(exc))}). Try again later or add another "
            "model to the route.",
            model=context.model,
            provider=context.provider,
        )
    code, kind, text = _error_fields(exc)
    detail = f"(HTTP {status}{f', {code}' if code else ''}): {_short(text)}"
    if status == 402 or (status == 429 and context.spend_limit(status, code, kind, text)):
        return SpendLimitError(
            f"{context.model}: {context.provider} refused the request because a spend, "
            f"quota or balance limit was reached {detail}. Raise the limit or add credit "
            "in the provider's console; waiting will not help.",
            status=status,
            model=context.model,
            provider=context.provider,
        )
    if status == 429:
        retry_after = parse_retry_after(_headers(exc), now=context.clock())
        after = f"; the provider asked to wait {retry_after:g}s" if retry_after else ""
        err = RateLimitedError(
            f"{context.model}: {context.provider} is rate limiting requests {detail}{after}. "
            "Retried after the requested wait; lower the request rate or add another "
            "model to the route.",
            status=status,
            model=context.model,
            provider=context.provider,
        )
        err.retry_after = retry_after
        return err
    if status in (401, 403):
        key = f" ({context.key_env})" if context.key_env else ""
        return AuthenticationError(
            f"{context.model}: {context.provider} rejected the credentials {detail}. Check "
            f"the API key{key} and that it may use this model.",
            status=status,
            model=context.model,
            provider=context.provider,
        )
    if status in (408, 409, 529) or status >= 500 or kind == "overloaded_error":
        return ProviderUnavailableError(
            f"{context.model}: {context.provider}{where} is unavailable {detail}. It was "
            "retried with backoff; try again later or add another model to the route.",
            status=status,
            model=context.model,
            provider=context.provider,
        )
    return BadRequestError(
        f"{context.model}: {context.provider} rejected the request {detail}. Check the "
        "model name, api_base and parameters; sending it again will not help.",
        status=status,
        model=context.model,
        provider=context.provider,
    )


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` as seconds or HTTP-date.

    The one reader of these headers: the provider adapters' retries and the approval
    webhook's use it. ``headers`` is any mapping of names to values (``httpx.Headers``, a
    dict); names are matched without regard to case. ``now`` is the wall-clock time an
    HTTP-date is counted from.

    Returns ``None`` when no usable header was sent; never a negative number.
    """
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now)


# --------------------------------------------------------------------------- helpers


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_kind(exc: BaseException, names: frozenset[str]) -> bool:
    return any(
        cls.__name__ in names and cls.__module__.split(".")[0] in _LIBRARIES
        for cls in type(exc).__mro__
    )


def _from_provider_library(exc: BaseException) -> bool:
    return any(cls.__module__.split(".")[0] in _LIBRARIES for cls in type(exc).__mro__[:-2])


def _status(exc: BaseException) -> int | None:
    status: object = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) and 100 <= status <= 599 else None


def _headers(exc: BaseException) -> Mapping[str, str] | None:
    """Response headers: litellm copies them to ``litellm_response_headers``."""
    for candidate in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "headers", None),
    ):
        if isinstance(candidate, Mapping) and candidate:
            return cast("Mapping[str, str]", candidate)  # httpx.Headers or a dict of str
    return None


def _error_fields(exc: BaseException) -> tuple[str | None, str | None, str]:
    """``(code, type, message)`` from the provider's error body, as far as it can be read.

    The openai SDK keeps the body's ``error`` object as ``exc.body``; otherwise the response
    is read, or the JSON litellm pasted into its message (its Responses API errors carry
    the body only there): ``{"error": {...}}`` (OpenAI, Anthropic, DeepSeek) or
    ``{"error": "..."}`` (Ollama).
    """
    body = (
        _mapping(getattr(exc, "body", None))
        or _mapping(_json_body(exc))
        or _mapping(json_object_in_text(_plain(exc)))
    )
    inner: object = body.get("error", body)
    if isinstance(inner, str) and inner:
        return None, None, inner
    error = _mapping(inner)
    code, kind, message = error.get("code"), error.get("type"), error.get("message")
    return (
        str(code) if isinstance(code, str | int) and code != "" else None,
        kind if isinstance(kind, str) else None,
        message if isinstance(message, str) and message else _plain(exc),
    )


def _mapping(value: object) -> Mapping[str, object]:
    """A JSON object as a mapping; anything else as an empty one."""
    return cast("Mapping[str, object]", value) if isinstance(value, Mapping) else {}


def _json_body(exc: BaseException) -> object:
    response: object = getattr(exc, "response", None)
    json_method: object = getattr(response, "json", None)
    if not callable(json_method):
        return None
    try:
        return cast("Callable[[], object]", json_method)()  # httpx.Response.json
    except Exception:  # a body that is not JSON: fall back to the message
        return None


def json_object_in_text(text: str) -> Mapping[str, object] | None:
    """The first JSON object embedded in ``text``, or ``None``: a provider's error body
    pasted into an exception's message (``"...Exception - {...}"``, or the ``b'{...}'`` of
    a stream's raw bytes). Each ``{`` is tried in turn, so a brace in the prose before the
    body does not hide it (the first 16 of them: the body follows a short prose), and text
    nested past Python's recursion limit is no body."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _attempt in range(_MAX_BRACES):
        if start < 0:
            break
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON there, or nested past the limit
            start = text.find("{", start + 1)
            continue
        return cast("Mapping[str, object]", value)  # a JSON text that starts with "{"
    return None


def _plain(exc: BaseException) -> str:
    message: object = getattr(exc, "message", None)
    text = message if isinstance(message, str) and message else str(exc)
    for prefix in ("litellm.", "OpenAIException - "):
        text = text.replace(prefix, "")
    return text


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."
