"""The one retry loop of the adapter layer (tenacity), with exact attempt counting.

litellm's and the openai SDK's own retries are switched off (``num_retries=0``,
``max_retries=0``) so that every HTTP request is one attempt here. What is retried:

* only a :class:`ProviderError` whose ``retryable`` is true: 429 rate limits, 5xx, 529
  overloaded, timeouts and connection failures. Never 400/401/403/404/422 or a spend limit;
  never anything that is not a provider error (refusals and truncation are handled by the
  adapter, a bug is a bug);
* after a full-jitter exponential backoff (``uniform(0, min(max_delay, base_delay * 2**n))``);
  a 429's Retry-After is a floor for that wait, itself capped at ``max_retry_after``;
* at most ``max_attempts`` requests in all;
* and not at all when the next wait would end after the request's deadline: the last error
  is raised at once, so the route can move to its next model while there is time.

The caller always gets the last underlying error (never tenacity's ``RetryError``).
"""

from __future__ import annotations

import asyncio
import random as _random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
)
from tenacity.stop import stop_base

from agentcore.contracts.errors import ConfigurationError, ProviderError, RateLimitedError

__all__ = ["RetryPolicy", "call_with_retries", "is_retryable"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How an adapter retries a failed request.

    Attributes:
        max_attempts: requests per call at most, the first included (1 = no retries).
        base_delay: the backoff's first ceiling in seconds; it doubles per retry.
        max_delay: the backoff's ceiling in seconds.
        max_retry_after: the longest wait a provider's Retry-After can impose, in seconds.
        sleep: awaited with each wait (inject a recorder in tests).
        clock: wall-clock seconds, compared with ``CompletionRequest.deadline``.
        random: a number in ``[0, 1)`` for the jitter.
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False)
    clock: Callable[[], float] = field(default=time.time, repr=False)
    random: Callable[[], float] = field(default=_random.random, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError(
                f"RetryPolicy.max_attempts must be at least 1 (1 means no retries); "
                f"got {self.max_attempts}."
            )
        for name in ("base_delay", "max_delay", "max_retry_after"):
            value: float = getattr(self, name)
            if value < 0:
                raise ConfigurationError(f"RetryPolicy.{name} must be >= 0; got {value}.")

    def wait_after(self, error: BaseException, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1-based) after ``error``."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        wait = self.random() * ceiling
        if isinstance(error, RateLimitedError) and error.retry_after is not None:
            wait = max(wait, min(error.retry_after, self.max_retry_after))
        return wait


class _PastDeadline(stop_base):
    """Stop when the upcoming wait would end after the deadline (tenacity computes the wait
    before it asks the stop condition)."""

    def __init__(self, deadline: float | None, clock: Callable[[], float]) -> None:
        self._deadline = deadline
        self._clock = clock

    def __call__(self, retry_state: RetryCallState) -> bool:
        if self._deadline is None:
            return False
        return self._clock() + (retry_state.upcoming_sleep or 0.0) > self._deadline


def is_retryable(error: BaseException) -> bool:
    """Whether the retry loop may send the request again after ``error``."""
    return isinstance(error, ProviderError) and error.retryable


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    deadline: float | None = None,
) -> T:
    """Await ``attempt()`` until it succeeds, fails for good, or time or attempts run out.

    Args:
        attempt: makes one request; raises agentcore errors (map provider errors first).
        policy: the retry policy.
        deadline: wall-clock seconds (``policy.clock``) after which no wait may end.

    Raises:
        ModelError: the last attempt's error, unchanged.
    """

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        return policy.wait_after(error, state.attempt_number) if error is not None else 0.0

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_attempts) | _PastDeadline(deadline, policy.clock),
        wait=wait,
        retry=retry_if_exception(is_retryable),
        sleep=policy.sleep,
        reraise=True,
    )
    async for trial in retrying:
        with trial:
            result = await attempt()
        if not trial.retry_state.outcome or not trial.retry_state.outcome.failed:
            return result
    raise AssertionError("unreachable: tenacity returns or re-raises")  # pragma: no cover
