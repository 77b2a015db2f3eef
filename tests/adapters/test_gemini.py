"""GeminiAdapter against a fake Gemini API (Google AI Studio) on loopback.

The requests go through litellm's real Gemini code; each test checks what left the process
and what the adapter made of Gemini's documented answers and errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from agentcore.adapters import BreakerPolicy, CompletionRequest, RetryPolicy, resolve_model
from agentcore.adapters.gemini import GeminiAdapter
from agentcore.contracts import FinishAction, ToolAction, compile_wire_schema
from agentcore.errors import (
    AuthenticationError,
    BadRequestError,
    ModelRefusedError,
    ModelTruncatedError,
    RateLimitedError,
    SpendLimitError,
)

from .conftest import FINISH, NOTE_CALL, FakeTime
from .fakes import FakeProvider, JsonReply, SseReply, gemini_response, gemini_stream, google_error

RequestFactory = Callable[..., CompletionRequest]

QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)
PER_MINUTE: Mapping[str, Any] = {  # Any: JSON
    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
    "violations": [
        {
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
            "quotaValue": "10",
        }
    ],
}


def retry_info(delay: str) -> Mapping[str, str]:
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}


def gemini(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    model: str = "gemini-2.5-flash",
    **options: Any,  # Any: GeminiAdapter options
) -> GeminiAdapter:
    return GeminiAdapter(
        model, api_base=fake.url, api_key="gm-test", retry=retry, breaker=breaker, **options
    )


@pytest.fixture
def adapter(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> GeminiAdapter:
    return gemini(fake, retry, breaker)


# --------------------------------------------------------------------------- the wire


@pytest.mark.parametrize(
    "model",
    [
        "gemini-2.5-flash",  # litellm would send response_json_schema itself
        "gemini-flash-latest",  # litellm would send the OpenAPI-subset response_schema
        "gemini-future-9",  # unknown: litellm would fold the system text into the user turn
    ],
)
async def test_response_json_schema_and_system_instruction_for_any_model_name(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
    model: str,
) -> None:
    adapter = gemini(fake, retry, breaker, f"gemini/{model}")
    fake.queue(JsonReply(gemini_response(FINISH, model=model)))
    request = make_request()
    completion = await adapter.complete_structured(request)

    (sent,) = fake.requests
    assert (sent.method, sent.path) == ("POST", f"/models/{model}:generateContent")
    assert sent.headers["x-goog-api-key"] == "gm-test"
    body = sent.body
    assert set(body) == {"contents", "generationConfig", "systemInstruction"}
    assert body["systemInstruction"] == {"parts": [{"text": "You are a careful support agent."}]}
    assert body["generationConfig"] == {
        "max_output_tokens": 1024,
        "responseMimeType": "application/json",
        "responseJsonSchema": compile_wire_schema(request.schema, "gemini").schema,
    }
    assert "anyOf" in body["generationConfig"]["responseJsonSchema"]  # the union at the root
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Task: where is order A1?\n\nNote: be brief."}]}
    ]
    assert completion.action == FinishAction(thought="I know it.", answer="It shipped.")
    assert completion.model == f"gemini/{model}"


async def test_tool_answer_usage_with_cached_and_thinking_tokens(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        JsonReply(
            gemini_response(
                NOTE_CALL,
                prompt_tokens=900,
                output_tokens=40,
                cached_tokens=768,
                thoughts_tokens=25,
                response_id="resp-gem-7",
            )
        )
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.action == ToolAction(
        thought="Record it.", tool="add_note", args={"order_id": "A1", "note": "customer called"}
    )
    usage = completion.usage
    # Thinking tokens are output tokens (litellm adds them to completion_tokens).
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (900, 65, 768)
    assert usage.cost is not None and usage.cost > 0  # gemini-2.5-flash is in the price map
    assert completion.response_id == "resp-gem-7"
    assert completion.finish_reason == "STOP"


# --------------------------------------------------------------------------- stop reasons


async def test_max_tokens_is_truncation_with_a_thinking_hint(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    cut = gemini_response('{"type": "fin', finish_reason="MAX_TOKENS", thoughts_tokens=90)
    fake.queue(JsonReply(cut), JsonReply(cut))
    with pytest.raises(ModelTruncatedError, match="thoughts count toward") as caught:
        await adapter.complete_structured(make_request(max_output_tokens=128))
    assert [b["generationConfig"]["max_output_tokens"] for b in fake.bodies] == [128, 256]
    assert caught.value.attempts == 2


@pytest.mark.parametrize("reason", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT"])
async def test_safety_finish_reasons_are_refusals(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory, reason: str
) -> None:
    fake.queue(JsonReply(gemini_response(None, finish_reason=reason)))
    # litellm reports Gemini's flagged finish reasons as content_filter.
    with pytest.raises(ModelRefusedError, match="content_filter") as caught:
        await adapter.complete_structured(make_request())
    assert caught.value.retryable
    assert len(fake.requests) == 1


# --------------------------------------------------------------------------- errors


async def test_per_minute_quota_is_retried_after_its_retry_delay(
    adapter: GeminiAdapter,
    fake: FakeProvider,
    fake_time: FakeTime,
    make_request: RequestFactory,
) -> None:
    fake.queue(
        google_error(
            429,
            QUOTA_MESSAGE,
            grpc_status="RESOURCE_EXHAUSTED",
            details=[PER_MINUTE, retry_info("47s")],
        ),
        JsonReply(gemini_response(FINISH)),
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2
    assert fake_time.waits == [47.0]  # RetryInfo's delay is the floor of the backoff


async def test_retry_delay_is_capped_and_reported(
    fake: FakeProvider,
    fake_time: FakeTime,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
) -> None:
    policy = RetryPolicy(
        max_attempts=2,
        max_retry_after=30,
        sleep=fake_time.sleep,
        clock=fake_time.clock,
        random=lambda: 0.5,
    )
    adapter = gemini(fake, policy, breaker)
    busy = google_error(
        429,
        QUOTA_MESSAGE,
        grpc_status="RESOURCE_EXHAUSTED",
        details=[PER_MINUTE, retry_info("38.804097346s")],
    )
    fake.queue(busy, busy)
    with pytest.raises(RateLimitedError, match=r"retry after 38\.8041s") as caught:
        await adapter.complete_structured(make_request())
    assert caught.value.retry_after == pytest.approx(38.804097346)
    assert fake_time.waits == [30.0]


async def test_billing_429_without_retry_info_is_a_spend_limit(
    adapter: GeminiAdapter,
    fake: FakeProvider,
    fake_time: FakeTime,
    make_request: RequestFactory,
) -> None:
    fake.queue(google_error(429, QUOTA_MESSAGE, grpc_status="RESOURCE_EXHAUSTED"))
    with pytest.raises(SpendLimitError, match="waiting will not help") as caught:
        await adapter.complete_structured(make_request())
    assert caught.value.provider == "gemini"
    assert len(fake.requests) == 1
    assert fake_time.waits == []


async def test_bare_resource_exhausted_is_retried(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        google_error(
            429,
            "Resource has been exhausted (e.g. check quota).",
            grpc_status="RESOURCE_EXHAUSTED",
        ),
        JsonReply(gemini_response(FINISH)),
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2


async def test_unavailable_is_retried(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        google_error(
            503, "The model is overloaded. Please try again later.", grpc_status="UNAVAILABLE"
        ),
        JsonReply(gemini_response(FINISH)),
    )
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2


async def test_invalid_argument_is_not_retried(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        google_error(
            400,
            'Invalid JSON payload received. Unknown name "foo".',
            grpc_status="INVALID_ARGUMENT",
        )
    )
    with pytest.raises(BadRequestError, match="HTTP 400"):
        await adapter.complete_structured(make_request())
    assert len(fake.requests) == 1


async def test_bad_key_names_the_key_variable(
    adapter: GeminiAdapter, fake: FakeProvider, make_request: RequestFactory
) -> None:
    fake.queue(
        google_error(
            403,
            "API key not valid. Please pass a valid API key.",
            grpc_status="PERMISSION_DENIED",
        )
    )
    with pytest.raises(AuthenticationError, match="GEMINI_API_KEY"):
        await adapter.complete_structured(make_request())


def test_registry_resolves_gemini_routes() -> None:
    adapter = resolve_model("gemini/gemini-2.5-flash", max_output_tokens=2048)
    assert isinstance(adapter, GeminiAdapter)
    assert (adapter.name, adapter.model, adapter.max_output_tokens) == (
        "gemini/gemini-2.5-flash",
        "gemini/gemini-2.5-flash",
        2048,
    )


async def test_streamed_request_reads_retry_info_too(
    adapter: GeminiAdapter,
    fake: FakeProvider,
    fake_time: FakeTime,
    make_request: RequestFactory,
) -> None:
    """litellm reports a streamed request's error body as the repr of its bytes; Google's
    pretty-printed JSON must still be read."""
    fake.queue(
        google_error(
            429,
            QUOTA_MESSAGE,
            grpc_status="RESOURCE_EXHAUSTED",
            details=[PER_MINUTE, retry_info("12s")],
        ),
        SseReply(gemini_stream(json.dumps(FINISH)), done=False),
    )
    completion = await adapter.complete_structured(make_request(on_partial=lambda _: None))
    assert completion.attempts == 2
    assert fake_time.waits == [12.0]
    assert completion.action == FinishAction(thought="I know it.", answer="It shipped.")
