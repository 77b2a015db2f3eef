"""Errors, retries, deadlines and the circuit breaker, over real HTTP to a fake provider.

Waits are recorded by the injected sleep of :class:`RetryPolicy` (fake time); the number
of requests the fake received is the number of attempts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from agentcore.adapters import BreakerPolicy, CompletionRequest, RetryPolicy
from agentcore.adapters._breaker import CircuitBreaker, breaker_for
from agentcore.adapters._errors import parse_retry_after
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.errors import (
    AuthenticationError,
    BadRequestError,
    CircuitOpenError,
    ModelError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitedError,
    SpendLimitError,
)

from .conftest import FINISH, FakeTime, wrapped
from .fakes import Delay, FakeProvider, JsonReply, Reset, error_reply, http_date, ok

RequestFactory = Callable[..., CompletionRequest]


@pytest.fixture
def adapter(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> OpenAIAdapter:
    return OpenAIAdapter(
        "gpt-4.1-mini",
        api_base=fake.base_url,
        api_key="sk-test",
        timeout=5,
        retry=retry,
        breaker=breaker,
    )


def server_error() -> JsonReply:
    return error_reply(
        500, "The server had an error while processing your request.", type="server_error"
    )


# --------------------------------------------------------------------------- not retried


@pytest.mark.parametrize(
    ("status", "error", "kind", "code"),
    [
        (400, BadRequestError, "invalid_request_error", None),
        (401, AuthenticationError, "invalid_request_error", "invalid_api_key"),
        (403, AuthenticationError, "permission_denied", None),
        (404, BadRequestError, "invalid_request_error", "model_not_found"),
        (422, BadRequestError, "invalid_request_error", None),
    ],
)
async def test_client_errors_are_not_retried(
    adapter: OpenAIAdapter,
    fake: FakeProvider,
    fake_time: FakeTime,
    make_request: RequestFactory,
    status: int,
    error: type[ProviderError],
    kind: str,
    code: str | None,
) -> None:
    fake.queue(error_reply(status, "Nope.", type=kind, code=code), ok(wrapped(FINISH)))
    with pytest.raises(error) as caught:
        await adapter.complete_structured(make_request())
    err = caught.value
    assert len(fake.requests) == 1
    assert fake_time.waits == []
    assert (err.status, err.attempts, err.retryable) == (status, 1, False)
    assert (err.model, err.provider) == ("openai/gpt-4.1-mini", "openai")
    assert f"HTTP {status}" in str(err) and "Nope." in str(err)
    # The provider library's exception is kept as the cause.
    assert err.__cause__ is not None
    assert type(err.__cause__).__module__.startswith("litellm")


async def test_auth_error_names_the_key_variable(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(error_reply(401, "Incorrect API key provided: sk-te**st.", code="invalid_api_key"))
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        await adapter.complete_structured(make_request())


async def test_spend_limit_429_is_not_retried(
    adapter: OpenAIAdapter, fake: FakeProvider, fake_time: FakeTime, make_request: RequestFactory
) -> None:
    fake.queue(
        error_reply(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            type="insufficient_quota",
            code="insufficient_quota",
            headers={"retry-after": "1"},
        )
    )
    with pytest.raises(SpendLimitError, match="waiting will not help") as caught:
        await adapter.complete_structured(make_request())
    assert not caught.value.retryable
    assert len(fake.requests) == 1
    assert fake_time.waits == []


# --------------------------------------------------------------------------- 429


async def test_rate_limit_waits_at_least_retry_after_seconds(
    adapter: OpenAIAdapter, fake: FakeProvider, fake_time: FakeTime, make_request: RequestFactory
) -> None:
    fake.queue(
        error_reply(
            429,
            "Rate limit reached for gpt-4.1-mini on requests per min (RPM): Limit 3.",
            type="requests",
            code="rate_limit_exceeded",
            headers={"Retry-After": "7"},
        ),
        ok(wrapped(FINISH)),
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.action is not None
    assert completion.attempts == 2
    assert fake_time.waits == [7.0]  # the floor beats the jittered backoff (0.25 s)


async def test_rate_limit_honours_retry_after_http_date(
    adapter: OpenAIAdapter, fake: FakeProvider, fake_time: FakeTime, make_request: RequestFactory
) -> None:
    retry_at = http_date(12, now=fake_time.now)
    fake.queue(
        error_reply(
            429, "Slow down.", code="rate_limit_exceeded", headers={"Retry-After": retry_at}
        ),
        ok(wrapped(FINISH)),
    )
    await adapter.complete_structured(make_request())
    assert fake_time.waits == [12.0]


async def test_retry_after_is_capped(
    fake: FakeProvider, fake_time: FakeTime, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    policy = RetryPolicy(
        max_retry_after=30, sleep=fake_time.sleep, clock=fake_time.clock, random=lambda: 0.5
    )
    adapter = OpenAIAdapter(
        "gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=policy, breaker=breaker
    )
    fake.queue(error_reply(429, "Slow down.", headers={"Retry-After": "3600"}), ok(wrapped(FINISH)))
    await adapter.complete_structured(make_request())
    assert fake_time.waits == [30.0]


async def test_rate_limit_error_keeps_retry_after_when_attempts_run_out(
    fake: FakeProvider, fake_time: FakeTime, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    policy = RetryPolicy(max_attempts=2, sleep=fake_time.sleep, clock=fake_time.clock)
    adapter = OpenAIAdapter(
        "gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=policy, breaker=breaker
    )
    limited = error_reply(429, "Slow down.", headers={"retry-after-ms": "1500"})
    fake.queue(limited, limited)
    with pytest.raises(RateLimitedError) as caught:
        await adapter.complete_structured(make_request())
    err = caught.value
    assert (err.retry_after, err.attempts, err.retryable) == (1.5, 2, True)
    assert fake_time.waits == [1.5]


# --------------------------------------------------------------------------- unavailable


async def test_server_errors_are_retried_with_jittered_backoff(
    adapter: OpenAIAdapter, fake: FakeProvider, fake_time: FakeTime, make_request: RequestFactory
) -> None:
    fake.queue(server_error(), server_error(), server_error(), ok(wrapped(FINISH)))
    completion = await adapter.complete_structured(make_request())
    assert completion.action is not None
    assert completion.attempts == 4
    # Full jitter: uniform(0, min(20, 0.5 * 2**n)); the injected random returns 0.5.
    assert fake_time.waits == [0.25, 0.5, 1.0]


async def test_server_errors_give_up_after_max_attempts(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.default = server_error()
    with pytest.raises(ProviderUnavailableError) as caught:
        await adapter.complete_structured(make_request())
    err = caught.value
    assert (err.status, err.attempts, err.retryable) == (500, 4, True)
    assert len(fake.requests) == 4
    assert "RetryError" not in repr(err) and "RetryError" not in repr(err.__cause__)


@pytest.mark.parametrize(
    "reply",
    [
        # Anthropic's documented overload: HTTP 529 with an overloaded_error body.
        JsonReply(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, 529
        ),
        # litellm classes a 503 whose body says invalid_request_error as BadRequestError:
        # the status decides.
        error_reply(503, "Service temporarily unavailable.", type="invalid_request_error"),
        error_reply(502, "Bad gateway.", type="server_error"),
    ],
)
async def test_overloaded_and_5xx_are_retried(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory, reply: JsonReply
) -> None:
    fake.queue(reply, ok(wrapped(FINISH)))
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2


async def test_connection_reset_is_retried(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(Reset(), ok(wrapped(FINISH)))
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2
    assert len(fake.requests) == 2


async def test_reset_every_time_is_a_connection_failure(
    fake: FakeProvider, fake_time: FakeTime, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    policy = RetryPolicy(max_attempts=2, sleep=fake_time.sleep, clock=fake_time.clock)
    adapter = OpenAIAdapter(
        "gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=policy, breaker=breaker
    )
    fake.queue(Reset(), Reset())
    with pytest.raises(ProviderUnavailableError, match="connection to openai") as caught:
        await adapter.complete_structured(make_request())
    assert caught.value.status is None
    assert caught.value.attempts == 2


async def test_timeout_is_retried(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    adapter = OpenAIAdapter(
        "gpt-4.1-mini",
        api_base=fake.base_url,
        api_key="k",
        timeout=0.3,
        retry=retry,
        breaker=breaker,
    )
    fake.queue(Delay(3.0, ok(wrapped(FINISH))), ok(wrapped(FINISH)))
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2


async def test_timeouts_exhausted_say_so(
    fake: FakeProvider, fake_time: FakeTime, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    policy = RetryPolicy(max_attempts=1, sleep=fake_time.sleep, clock=fake_time.clock)
    adapter = OpenAIAdapter(
        "gpt-4.1-mini",
        api_base=fake.base_url,
        api_key="k",
        timeout=0.2,
        retry=policy,
        breaker=breaker,
    )
    fake.queue(Delay(3.0, ok(wrapped(FINISH))))
    with pytest.raises(ProviderUnavailableError, match=r"within 0\.2s \(timeout\)"):
        await adapter.complete_structured(make_request())


# --------------------------------------------------------------------------- deadline


async def test_wait_past_the_deadline_fails_fast(
    adapter: OpenAIAdapter, fake: FakeProvider, fake_time: FakeTime, make_request: RequestFactory
) -> None:
    fake.queue(error_reply(429, "Slow down.", headers={"Retry-After": "30"}), ok(wrapped(FINISH)))
    request = make_request(deadline=fake_time.now + 10)
    with pytest.raises(RateLimitedError) as caught:
        await adapter.complete_structured(request)
    assert caught.value.attempts == 1
    assert fake_time.waits == []
    assert len(fake.requests) == 1


async def test_wait_within_the_deadline_is_taken(
    adapter: OpenAIAdapter, fake: FakeProvider, fake_time: FakeTime, make_request: RequestFactory
) -> None:
    fake.queue(error_reply(429, "Slow down.", headers={"Retry-After": "5"}), ok(wrapped(FINISH)))
    completion = await adapter.complete_structured(make_request(deadline=fake_time.now + 10))
    assert completion.attempts == 2
    assert fake_time.waits == [5.0]


# --------------------------------------------------------------------------- accounting


async def test_usage_and_attempts_are_summed_across_everything(
    adapter: OpenAIAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        ok('{"action": {', finish_reason="length", prompt_tokens=100, completion_tokens=50),
        server_error(),
        Reset(),
        ok(wrapped(FINISH), prompt_tokens=110, completion_tokens=20, cached_tokens=64),
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 4
    usage = completion.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (210, 70, 64)
    assert usage.cost is not None


async def test_failure_reports_tokens_of_attempts_that_got_answers(
    fake: FakeProvider, fake_time: FakeTime, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    policy = RetryPolicy(max_attempts=2, sleep=fake_time.sleep, clock=fake_time.clock)
    adapter = OpenAIAdapter(
        "gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=policy, breaker=breaker
    )
    fake.queue(
        ok('{"action": {', finish_reason="length", prompt_tokens=100, completion_tokens=50),
        server_error(),
        server_error(),
    )
    with pytest.raises(ProviderUnavailableError) as caught:
        await adapter.complete_structured(make_request())
    err = caught.value
    assert (err.attempts, err.input_tokens, err.output_tokens) == (3, 100, 50)


# --------------------------------------------------------------------------- breaker


async def test_breaker_opens_after_consecutive_failures_and_half_opens(
    fake: FakeProvider, fake_time: FakeTime, make_request: RequestFactory
) -> None:
    policy = RetryPolicy(max_attempts=1, sleep=fake_time.sleep, clock=fake_time.clock)
    breaker = BreakerPolicy(failure_threshold=3, cooldown=30, clock=fake_time.clock)
    adapter = OpenAIAdapter(
        "gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=policy, breaker=breaker
    )
    fake.queue(server_error(), server_error(), server_error())
    for _ in range(3):
        with pytest.raises(ProviderUnavailableError):
            await adapter.complete_structured(make_request())
    assert adapter.breaker.state == "open"

    # Open: fails at once, without a request; retryable so the route moves on.
    with pytest.raises(CircuitOpenError, match="paused after 3 consecutive failures") as caught:
        await adapter.complete_structured(make_request())
    assert caught.value.retryable and caught.value.attempts == 0
    assert len(fake.requests) == 3

    # After the cooldown one trial goes through; its failure re-opens the breaker.
    fake_time.advance(30)
    assert adapter.breaker.state == "half_open"
    fake.queue(server_error())
    with pytest.raises(ProviderUnavailableError):
        await adapter.complete_structured(make_request())
    assert adapter.breaker.state == "open"
    with pytest.raises(CircuitOpenError):
        await adapter.complete_structured(make_request())
    assert len(fake.requests) == 4

    # The next trial succeeds and closes it.
    fake_time.advance(30)
    fake.queue(ok(wrapped(FINISH)))
    completion = await adapter.complete_structured(make_request())
    assert completion.action is not None
    assert adapter.breaker.state == "closed"
    assert adapter.breaker.consecutive_failures == 0


async def test_breaker_counts_attempts_and_is_shared_per_endpoint(
    fake: FakeProvider, fake_time: FakeTime, retry: RetryPolicy, make_request: RequestFactory
) -> None:
    policy = BreakerPolicy(failure_threshold=5, clock=fake_time.clock)
    one = OpenAIAdapter(
        "gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=retry, breaker=policy
    )
    two = OpenAIAdapter("gpt-4.1", api_base=fake.base_url, api_key="k", retry=retry, breaker=policy)
    assert one.breaker is two.breaker is breaker_for("openai", fake.base_url, policy)
    fake.default = server_error()
    with pytest.raises(ProviderUnavailableError):
        await one.complete_structured(make_request())  # four failed attempts
    # The fifth failed attempt opens the breaker; the retry loop stops on CircuitOpenError.
    with pytest.raises(CircuitOpenError) as caught:
        await two.complete_structured(make_request())
    assert caught.value.attempts == 1
    assert len(fake.requests) == 5


async def test_client_errors_do_not_open_the_breaker(
    fake: FakeProvider, fake_time: FakeTime, retry: RetryPolicy, make_request: RequestFactory
) -> None:
    policy = BreakerPolicy(failure_threshold=2, clock=fake_time.clock)
    adapter = OpenAIAdapter(
        "gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=retry, breaker=policy
    )
    fake.default = error_reply(400, "Bad schema.")
    for _ in range(3):
        with pytest.raises(BadRequestError):
            await adapter.complete_structured(make_request())
    assert adapter.breaker.state == "closed"


# --------------------------------------------------------------------------- units


def test_parse_retry_after_forms() -> None:
    now = 1_750_000_000.0
    assert parse_retry_after({"Retry-After": "3"}, now=now) == 3.0
    assert parse_retry_after({"retry-after": "2.5"}, now=now) == 2.5
    assert parse_retry_after({"Retry-After": http_date(20, now=now)}, now=now) == 20.0
    assert parse_retry_after({"Retry-After": http_date(-20, now=now)}, now=now) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}, now=now) == 0.25
    assert parse_retry_after({"Retry-After": "soon"}, now=now) is None
    assert parse_retry_after({}, now=now) is None
    assert parse_retry_after(None, now=now) is None


def test_backoff_is_full_jitter_with_a_ceiling() -> None:
    top = RetryPolicy(random=lambda: 0.999999)
    assert [round(top.wait_after(ProviderError("x"), n), 3) for n in range(1, 9)] == [
        0.5,
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        20.0,
        20.0,
    ]
    assert RetryPolicy(random=lambda: 0.0).wait_after(ProviderError("x"), 3) == 0.0
    limited = RateLimitedError("x")
    limited.retry_after = 90
    assert RetryPolicy(random=lambda: 0.0).wait_after(limited, 1) == 60.0


def test_model_error_without_status_from_our_code_is_not_mapped() -> None:
    from agentcore.adapters._errors import ErrorContext, translate_exception

    context = ErrorContext(model="openai/x", provider="openai")
    assert translate_exception(ValueError("a bug"), context) is None
    mapped = translate_exception(ConnectionResetError("reset by peer"), context)
    assert isinstance(mapped, ProviderUnavailableError)
    assert isinstance(mapped, ModelError) and mapped.retryable


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    ("reply", "error", "status", "text"),
    [
        (Reset(), ProviderUnavailableError, None, "connection to openai"),
        (error_reply(500, "boom", type="server_error"), ProviderUnavailableError, 500, "boom"),
        (
            error_reply(429, "Slow down.", headers={"retry-after": "2"}),
            RateLimitedError,
            429,
            "asked to wait 2s",
        ),
        (
            error_reply(429, "Out of quota.", type="insufficient_quota", code="insufficient_quota"),
            SpendLimitError,
            429,
            "insufficient_quota): Out of quota.",
        ),
        (
            error_reply(401, "Bad key.", code="invalid_api_key"),
            AuthenticationError,
            401,
            "Bad key.",
        ),
        (
            error_reply(404, "The model `x` does not exist.", code="model_not_found"),
            BadRequestError,
            404,
            "model_not_found): The model `x` does not exist.",
        ),
    ],
)
async def test_errors_map_the_same_for_chat_and_responses(
    fake: FakeProvider,
    fake_time: FakeTime,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
    api: str,
    reply: JsonReply | Reset,
    error: type[ProviderError],
    status: int | None,
    text: str,
) -> None:
    """litellm raises different classes (and hides the body) on its Responses path."""
    policy = RetryPolicy(max_attempts=1, sleep=fake_time.sleep, clock=fake_time.clock)
    adapter = OpenAIAdapter(
        "gpt-4.1-mini",
        api_base=fake.base_url,
        api_key="k",
        retry=policy,
        breaker=breaker,
        api=api,  # type: ignore[arg-type]
    )
    fake.queue(reply)
    with pytest.raises(error) as caught:
        await adapter.complete_structured(make_request())
    assert caught.value.status == status
    assert text in str(caught.value)
    assert '{"error"' not in str(caught.value)


def test_half_open_breaker_lets_one_trial_through_at_a_time(fake_time: FakeTime) -> None:
    breaker = CircuitBreaker(
        "openai @ x", BreakerPolicy(failure_threshold=1, cooldown=10, clock=fake_time.clock)
    )
    with pytest.raises(ProviderUnavailableError), breaker.attempt("m"):
        raise ProviderUnavailableError("down")
    assert breaker.state == "open"
    fake_time.advance(10)
    # While the trial runs, another attempt fails fast.
    with (
        breaker.attempt("m"),
        pytest.raises(CircuitOpenError, match="trial call is under way"),
        breaker.attempt("m"),
    ):
        pass
    assert breaker.state == "closed"


def test_cancelled_trial_does_not_wedge_the_breaker(fake_time: FakeTime) -> None:
    breaker = CircuitBreaker(
        "openai @ x", BreakerPolicy(failure_threshold=1, cooldown=10, clock=fake_time.clock)
    )
    with pytest.raises(ProviderUnavailableError), breaker.attempt("m"):
        raise ProviderUnavailableError("down")
    fake_time.advance(10)
    with pytest.raises(asyncio.CancelledError), breaker.attempt("m"):
        raise asyncio.CancelledError
    assert breaker.state == "half_open"
    with breaker.attempt("m"):  # a new trial is allowed
        pass
    assert breaker.state == "closed"
