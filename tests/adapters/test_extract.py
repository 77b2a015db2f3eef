"""Typed extraction (``Agent.extract``): instructor over litellm, at the HTTP level.

For OpenAI (strict ``json_schema``), Anthropic (native ``output_config.format``, never a
tool: current Claude models reject a forced ``tool_choice``) and a local llama-cpp-python
server (``json_object`` with the schema), through the real instructor, litellm and openai
code against the loopback fake; then inside a run (its usage and budget) and past the
routing gate.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field, field_validator

from agentcore import Agent, Budget, ModelSpec, Route, RunStatus, ToolContext, tool
from agentcore.adapters import BreakerPolicy, RetryPolicy, ScriptedModel
from agentcore.adapters.anthropic import AnthropicAdapter
from agentcore.adapters.deepseek import DeepSeekAdapter
from agentcore.adapters.gemini import GeminiAdapter
from agentcore.adapters.local import LocalAdapter
from agentcore.adapters.openai import OpenAIAdapter
from agentcore.errors import AuthenticationError, ConfigurationError, ExtractionError
from agentcore.events import ModelCalled

from .fakes import FakeProvider, JsonReply, anthropic_message, error_reply, gemini_response, ok

TEXT = "Hi, this is Ana (customer C-17). Invoice INV-2041 was charged twice: 42.50 EUR."


class Complaint(BaseModel):
    customer_id: str = Field(description="The customer's id, e.g. C-17.")
    invoice: str
    amount: float = Field(ge=0)

    @field_validator("invoice")
    @classmethod
    def _invoice_id(cls, value: str) -> str:
        if not value.startswith("INV-"):
            raise ValueError("an invoice id starts with INV-")
        return value


GOOD = {"customer_id": "C-17", "invoice": "INV-2041", "amount": 42.5}
BAD = {"customer_id": "C-17", "invoice": "2041", "amount": 42.5}


@pytest.fixture
def openai(fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy) -> OpenAIAdapter:
    return OpenAIAdapter(
        "gpt-4.1-mini", api_base=fake.base_url, api_key="k", retry=retry, breaker=breaker
    )


def _agent(model: ModelSpec | None = None) -> Agent:
    @tool(effect="read")
    def noop() -> str:
        """Does nothing."""
        return ""

    route = model or ScriptedModel([{"type": "finish", "thought": "t", "answer": "a"}])
    return Agent(tools=[noop], model=route, store="memory://")


async def test_openai_strict_schema_and_a_validation_reask(
    openai: OpenAIAdapter, fake: FakeProvider
) -> None:
    fake.queue(ok(BAD, prompt_tokens=100, completion_tokens=20), ok(GOOD))
    value = await _agent().extract(Complaint, TEXT, model=openai)

    assert value == Complaint(**GOOD)
    first, second = fake.bodies
    assert fake.requests[0].path == "/v1/chat/completions"
    form = first["response_format"]
    assert form["type"] == "json_schema" and form["json_schema"]["strict"] is True
    schema = form["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == ["amount", "customer_id", "invoice"]
    assert first["messages"][-1] == {"role": "user", "content": TEXT}
    # instructor's re-ask: the reply and the validation error go back to the model
    assert second["messages"][-2]["role"] == "assistant"
    assert "an invoice id starts with INV-" in second["messages"][-1]["content"]


async def test_anthropic_native_output_never_a_tool_even_for_an_unknown_model(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    claude = AnthropicAdapter(
        "claude-opus-9-future", api_base=fake.url, api_key="k", retry=retry, breaker=breaker
    )
    fake.queue(JsonReply(anthropic_message(GOOD)))
    value = await _agent().extract(Complaint, TEXT, model=claude)

    assert value == Complaint(**GOOD)
    (body,) = fake.bodies
    assert fake.requests[0].path == "/v1/messages"
    assert "tools" not in body and "tool_choice" not in body
    schema = body["output_config"]["format"]["schema"]
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert schema["additionalProperties"] is False
    assert "minimum" not in json.dumps(schema)  # Anthropic rejects bounds: checked locally


async def test_anthropic_bounds_are_checked_locally_and_reasked(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    claude = AnthropicAdapter(
        "claude-sonnet-4-5", api_base=fake.url, api_key="k", retry=retry, breaker=breaker
    )
    fake.queue(
        JsonReply(anthropic_message({**GOOD, "amount": -1})), JsonReply(anthropic_message(GOOD))
    )
    assert await _agent().extract(Complaint, TEXT, model=claude) == Complaint(**GOOD)
    assert len(fake.requests) == 2


async def test_a_local_server_gets_json_object_with_the_schema(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    local = LocalAdapter("smollm2", api_base=fake.base_url, retry=retry, breaker=breaker)
    fake.queue(ok(GOOD))
    value = await _agent().extract(Complaint, TEXT, model=local)

    assert value == Complaint(**GOOD)
    (body,) = fake.bodies
    assert body["response_format"]["type"] == "json_object"
    assert set(body["response_format"]["schema"]["properties"]) == set(GOOD)


async def test_gemini_gets_response_json_schema(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    gemini = GeminiAdapter(
        "gemini-2.5-flash", api_base=fake.url, api_key="k", retry=retry, breaker=breaker
    )
    fake.queue(JsonReply(gemini_response(GOOD)))
    assert await _agent().extract(Complaint, TEXT, model=gemini) == Complaint(**GOOD)
    (body,) = fake.bodies
    assert fake.requests[0].path.endswith("/models/gemini-2.5-flash:generateContent")
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert set(config["responseJsonSchema"]["properties"]) == set(GOOD)
    assert "tools" not in body


async def test_deepseek_gets_json_mode_with_the_schema_in_the_prompt(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy
) -> None:
    deepseek = DeepSeekAdapter(
        "deepseek-chat", api_base=fake.base_url, api_key="k", retry=retry, breaker=breaker
    )
    fake.queue(ok(GOOD))
    assert await _agent().extract(Complaint, TEXT, model=deepseek) == Complaint(**GOOD)
    (body,) = fake.bodies
    assert body["response_format"] == {"type": "json_object"}
    system = body["messages"][0]["content"]
    assert "JSON" in system and '"invoice"' in system


async def test_replies_that_never_validate_raise_extraction_error_with_their_tokens(
    openai: OpenAIAdapter, fake: FakeProvider
) -> None:
    fake.queue(*[ok(BAD, prompt_tokens=100, completion_tokens=20)] * 3)
    with pytest.raises(ExtractionError, match="INV-") as caught:
        await _agent().extract(Complaint, TEXT, model=openai, max_reasks=2)
    err = caught.value
    assert (err.attempts, err.input_tokens, err.output_tokens) == (3, 300, 60)
    assert len(fake.requests) == 3


async def test_provider_errors_are_retried_by_the_adapters_policy(
    openai: OpenAIAdapter, fake: FakeProvider
) -> None:
    fake.queue(error_reply(503, "overloaded"), ok(GOOD))
    assert await _agent().extract(Complaint, TEXT, model=openai) == Complaint(**GOOD)
    assert len(fake.requests) == 2


async def test_a_missing_key_fails_before_any_request(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    adapter = OpenAIAdapter("gpt-4.1-mini", api_base=fake.base_url)
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        await _agent().extract(Complaint, TEXT, model=adapter)
    assert fake.requests == []


async def test_a_scripted_model_cannot_extract() -> None:
    with pytest.raises(ConfigurationError, match="cannot extract"):
        await _agent().extract(Complaint, TEXT)


def test_extract_sync(openai: OpenAIAdapter, fake: FakeProvider) -> None:
    fake.queue(ok(GOOD))
    assert _agent().extract_sync(Complaint, TEXT, model=openai) == Complaint(**GOOD)


# --------------------------------------------------------------------------- inside a run


def _run_agent(openai: OpenAIAdapter, *, sync: bool) -> Agent:
    holder: list[Agent] = []

    @tool(effect="read")
    async def read_complaint(message: str, ctx: ToolContext) -> dict[str, object]:
        """Read a customer's complaint into fields.

        Args:
            message: the complaint's text.
        """
        del ctx
        return (await holder[0].extract(Complaint, message, model=openai)).model_dump()

    @tool(effect="read")
    def read_complaint_sync(message: str) -> dict[str, object]:
        """Read a customer's complaint into fields (sync).

        Args:
            message: the complaint's text.
        """
        return holder[0].extract_sync(Complaint, message, model=openai).model_dump()

    name = "read_complaint_sync" if sync else "read_complaint"
    script = ScriptedModel(
        [
            {"type": "tool", "thought": "Read it.", "tool": name, "args": {"message": TEXT}},
            {"type": "finish", "thought": "Done.", "answer": "INV-2041"},
        ]
    )
    agent = Agent(tools=[read_complaint, read_complaint_sync], model=script, store="memory://")
    holder.append(agent)
    return agent


@pytest.mark.parametrize("sync", [False, True], ids=["async-tool", "sync-tool"])
async def test_an_extraction_inside_a_tool_is_recorded_in_the_run(
    openai: OpenAIAdapter, fake: FakeProvider, sync: bool
) -> None:
    fake.queue(ok(BAD, prompt_tokens=100, completion_tokens=20), ok(GOOD))
    agent = _run_agent(openai, sync=sync)
    result = await agent.run("Read the complaint")
    events = await agent.transcript(result.run_id)
    await agent.close()

    assert result.status is RunStatus.COMPLETED, result.reason
    (extraction,) = [e for e in events if isinstance(e, ModelCalled) and e.role == "extract"]
    assert extraction.model == "openai/gpt-4.1-mini"
    assert (extraction.attempts, extraction.input_tokens, extraction.output_tokens) == (
        2,
        220,
        50,
    )
    scripted = sum(
        e.input_tokens for e in events if isinstance(e, ModelCalled) and e.role != "extract"
    )
    assert result.usage.input_tokens == scripted + 220
    types = [e.type for e in events]
    assert types.index("model_called", types.index("tool_started")) < types.index("tool_finished")


async def test_an_extractions_tokens_count_against_the_runs_budget(
    openai: OpenAIAdapter, fake: FakeProvider
) -> None:
    fake.queue(ok(GOOD, prompt_tokens=5_000, completion_tokens=100))
    agent = _run_agent(openai, sync=False)
    result = await agent.run("Read the complaint", budget=Budget(max_tokens=3_000))
    await agent.close()
    assert result.status is RunStatus.BUDGET_EXHAUSTED, result.reason
    assert result.usage.input_tokens >= 5_000


# --------------------------------------------------------------------------- the routing gate


async def test_a_gated_model_is_refused_for_plan_and_act_but_may_extract(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, tmp_path: Path
) -> None:
    weak = OpenAIAdapter(
        "gpt-4.1-nano", api_base=fake.base_url, api_key="k", retry=retry, breaker=breaker
    )
    cards = tmp_path / "scorecards"  # no scorecard: below any bar
    with pytest.raises(ConfigurationError, match="plan and act"):
        Route(models=[weak], min_score=0.8, scorecards=cards)

    fake.queue(ok(GOOD))
    assert await _agent().extract(Complaint, TEXT, model=weak) == Complaint(**GOOD)
