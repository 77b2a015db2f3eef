"""A circuit breaker per provider endpoint: stop calling a provider that keeps failing.

One breaker per (adapter family, api_base, policy), shared by every adapter object that
talks to that endpoint in the process. It watches each HTTP attempt:

* **closed**: attempts go through. A retryable provider failure (timeout, reset, 5xx, 429)
  adds to a count of consecutive failures; any answer from the provider (a success, a
  refusal, even a 400) proves it is up and resets the count. At ``failure_threshold``
  consecutive failures the breaker opens.
* **open**: attempts fail at once with :class:`CircuitOpenError` (retryable, so the route
  moves to its next model) until ``cooldown`` seconds have passed.
* **half-open**: one trial attempt goes through (others still fail fast); its success closes
  the breaker, its failure opens it for another cooldown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from agentcore.contracts.errors import CircuitOpenError, ConfigurationError, ProviderError

__all__ = ["BreakerPolicy", "BreakerState", "CircuitBreaker", "breaker_for", "reset_breakers"]

BreakerState = Literal["closed", "open", "half_open"]


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """When a provider's breaker opens and when it tries again.

    Attributes:
        failure_threshold: consecutive failed attempts that open the breaker.
        cooldown: seconds the breaker stays open before one trial attempt.
        clock: monotonic seconds (inject a fake in tests).
    """

    failure_threshold: int = 5
    cooldown: float = 30.0
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def __post_init__(self) -> None:
        if self.failure_threshold < 1:
            raise ConfigurationError(
                f"BreakerPolicy.failure_threshold must be at least 1; got {self.failure_threshold}."
            )
        if self.cooldown < 0:
            raise ConfigurationError(f"BreakerPolicy.cooldown must be >= 0; got {self.cooldown}.")


class CircuitBreaker:
    """The breaker of one provider endpoint. Get it with :func:`breaker_for`.

    Attributes:
        key: the endpoint, e.g. ``"openai @ https://api.openai.com"``.
        policy: thresholds and clock.
    """

    def __init__(self, key: str, policy: BreakerPolicy) -> None:
        self.key = key
        self.policy = policy
        self._lock = threading.Lock()
        self._state: BreakerState = "closed"
        self._failures = 0
        self._opened_at = 0.0
        self._trial_running = False

    @property
    def state(self) -> BreakerState:
        """``closed``, ``open`` or ``half_open`` (an open breaker past its cooldown reads
        ``half_open``)."""
        with self._lock:
            if self._state == "open" and self._cooled_down():
                return "half_open"
            return self._state

    @property
    def consecutive_failures(self) -> int:
        """Failed attempts since the last answer from the provider."""
        return self._failures

    @contextmanager
    def attempt(self, model: str) -> Generator[None, None, None]:
        """Guard one HTTP attempt: fail fast while open, record how the attempt ended.

        Raises:
            CircuitOpenError: the breaker is open (or half-open with its trial running).
        """
        self._enter(model)
        try:
            yield
        except ProviderError as exc:
            self._record(failed=exc.retryable)
            raise
        except BaseException:
            self._release()  # cancelled or a bug: says nothing about the provider
            raise
        self._record(failed=False)

    def _enter(self, model: str) -> None:
        with self._lock:
            if self._state == "closed":
                return
            if self._state == "open" and self._cooled_down():
                self._state = "half_open"
            if self._state == "half_open" and not self._trial_running:
                self._trial_running = True
                return
            wait = max(0.0, self._opened_at + self.policy.cooldown - self.policy.clock())
            when = (
                "a trial call is under way"
                if self._state == "half_open"
                else f"one trial call is allowed in {wait:.0f}s"
            )
            raise CircuitOpenError(
                f"{model}: calls to {self.key} are paused after {self._failures} consecutive "
                f"failures; {when}. The route moves to its next model; check the provider's "
                "status if this persists.",
                model=model,
                attempts=0,
            )

    def _record(self, *, failed: bool) -> None:
        with self._lock:
            self._trial_running = False
            if not failed:
                self._state, self._failures = "closed", 0
                return
            self._failures += 1
            if self._state == "half_open" or self._failures >= self.policy.failure_threshold:
                self._state, self._opened_at = "open", self.policy.clock()

    def _release(self) -> None:
        with self._lock:
            self._trial_running = False

    def _cooled_down(self) -> bool:
        return self.policy.clock() - self._opened_at >= self.policy.cooldown


_BREAKERS: dict[tuple[str, str, BreakerPolicy], CircuitBreaker] = {}
_BREAKERS_LOCK = threading.Lock()


def breaker_for(family: str, api_base: str | None, policy: BreakerPolicy) -> CircuitBreaker:
    """The process-wide breaker of one endpoint (created on first use).

    Args:
        family: the adapter family (``openai``, ``deepseek``, ``local``, ...).
        api_base: the endpoint, or ``None`` for the provider's default.
        policy: the breaker's policy; adapters with equal policies share the breaker.
    """
    base = api_base or "default endpoint"
    with _BREAKERS_LOCK:
        key = (family, base, policy)
        breaker = _BREAKERS.get(key)
        if breaker is None:
            breaker = _BREAKERS[key] = CircuitBreaker(f"{family} @ {base}", policy)
        return breaker


def reset_breakers() -> None:
    """Forget every breaker's state (for tests and long-lived processes after an outage)."""
    with _BREAKERS_LOCK:
        _BREAKERS.clear()
