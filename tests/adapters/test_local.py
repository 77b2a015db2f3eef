"""LocalAdapter: the structured-output parameters per local server kind, on the wire."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentcore.adapters import BreakerPolicy, CompletionRequest, RetryPolicy, resolve_model
from agentcore.adapters.local import LocalAdapter, LocalServer
from agentcore.contracts import FinishAction
from agentcore.errors import BadRequestError, ConfigurationError, ModelTruncatedError

from .conftest import FINISH, strict_schema, wrapped
from .fakes import FakeProvider, JsonReply, error_reply, ok

RequestFactory = Callable[..., CompletionRequest]


def local(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    server: LocalServer,
    **options: Any,  # Any: LocalAdapter options
) -> LocalAdapter:
    base = fake.url if server == "ollama" else fake.base_url
    if server == "ollama":
        fake.fixed["/api/show"] = OLLAMA_SHOW
    return LocalAdapter(
        "smollm2", api_base=base, server=server, retry=retry, breaker=breaker, **options
    )


OLLAMA_SHOW = JsonReply(
    {
        "modelfile": "FROM smollm2",
        "parameters": "",
        "template": "{{ .Prompt }}",
        "details": {"format": "gguf", "family": "llama", "parameter_size": "135M"},
        "model_info": {"general.architecture": "llama", "llama.context_length": 8192},
        "capabilities": ["completion"],
    }
)
"""Ollama's ``POST /api/show`` answer (docs/api.md), which litellm asks for by itself."""


def ollama_reply(
    content: str, *, done_reason: str = "stop", prompt: int = 26, output: int = 10
) -> JsonReply:
    """Ollama's native ``/api/chat`` answer (docs/api.md, non-streaming)."""
    return JsonReply(
        {
            "model": "smollm2",
            "created_at": "2025-06-01T12:00:00.000000Z",
            "message": {"role": "assistant", "content": content},
            "done": True,
            "done_reason": done_reason,
            "total_duration": 4_883_583_458,
            "load_duration": 1_334_875,
            "prompt_eval_count": prompt,
            "prompt_eval_duration": 342_546_000,
            "eval_count": output,
            "eval_duration": 4_535_599_000,
        }
    )


async def test_llama_cpp_python_gets_json_object_with_the_schema(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    adapter = local(fake, retry, breaker, "llama_cpp_python")
    fake.queue(ok(wrapped(FINISH), model="/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    request = make_request()
    completion = await adapter.complete_structured(request)

    (sent,) = fake.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "smollm2"
    assert sent.body["response_format"] == {
        "type": "json_object",
        "schema": strict_schema(request.schema),
    }
    assert sent.body["max_tokens"] == 1024
    # The OpenAI key never goes to a local server.
    assert sent.headers["authorization"] == "Bearer sk-no-key-required"
    assert completion.action == FinishAction(thought="I know it.", answer="It shipped.")
    assert completion.model == "local/smollm2"
    assert completion.usage.cost is None
    assert completion.usage.input_tokens == 120


@pytest.mark.parametrize("server", ["llama_cpp", "vllm"])
async def test_llama_server_and_vllm_get_json_schema(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
    server: LocalServer,
) -> None:
    adapter = local(fake, retry, breaker, server, api_key="local-secret")
    fake.queue(ok(wrapped(FINISH)))
    request = make_request()
    completion = await adapter.complete_structured(request)
    sent = fake.last
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer local-secret"
    assert sent.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "next_action",
            "schema": strict_schema(request.schema),
            "strict": True,
        },
    }
    assert "guided_json" not in sent.body
    assert completion.action is not None
    assert completion.usage.cost is None


async def test_ollama_native_chat_gets_the_schema_as_format(
    fake: FakeProvider,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    make_request: RequestFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    monkeypatch.delenv("AGENTCORE_LOCAL_API_KEY", raising=False)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    adapter = local(fake, retry, breaker, "ollama")
    fake.queue(ollama_reply(json.dumps(wrapped(FINISH))))
    request = make_request()
    completion = await adapter.complete_structured(request)
    sent = fake.last
    assert sent.path == "/api/chat"
    assert sent.body["model"] == "smollm2"
    assert sent.body["format"] == strict_schema(request.schema)
    assert sent.body["options"] == {"num_predict": 1024}
    assert sent.body["stream"] is False
    assert "authorization" not in sent.headers
    assert [m["role"] for m in sent.body["messages"]] == ["system", "user"]
    assert completion.model == "ollama_chat/smollm2"
    assert completion.action == FinishAction(thought="I know it.", answer="It shipped.")
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (26, 10)


async def test_ollama_length_is_truncation(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    adapter = local(fake, retry, breaker, "ollama", max_output_tokens=32)
    fake.queue(
        ollama_reply('{"action": {"ty', done_reason="length", output=32),
        ollama_reply('{"action": {"type": "fin', done_reason="length", output=64),
    )
    with pytest.raises(ModelTruncatedError) as caught:
        await adapter.complete_structured(make_request())
    assert [b["options"]["num_predict"] for b in fake.bodies] == [32, 64]
    assert (caught.value.attempts, caught.value.output_tokens) == (2, 96)


async def test_ollama_error_body_is_mapped(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    adapter = local(fake, retry, breaker, "ollama")
    fake.queue(JsonReply({"error": "model 'smollm2' not found"}, 404))
    with pytest.raises(BadRequestError, match="not found") as caught:
        await adapter.complete_structured(make_request())
    assert caught.value.status == 404
    assert len(fake.requests) == 1


async def test_local_server_500_is_retried(
    fake: FakeProvider, retry: RetryPolicy, breaker: BreakerPolicy, make_request: RequestFactory
) -> None:
    adapter = local(fake, retry, breaker, "llama_cpp_python")
    fake.queue(error_reply(500, "llama_decode failed", type="server_error"), ok(wrapped(FINISH)))
    completion = await adapter.complete_structured(make_request())
    assert completion.attempts == 2


def test_local_route_needs_an_api_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTCORE_LOCAL_API_BASE", raising=False)
    with pytest.raises(ConfigurationError, match="AGENTCORE_LOCAL_API_BASE"):
        resolve_model("local/smollm2")
    monkeypatch.setenv("AGENTCORE_LOCAL_API_BASE", "http://127.0.0.1:8000/v1")
    adapter = resolve_model("local/smollm2")
    assert isinstance(adapter, LocalAdapter) and adapter.api_base == "http://127.0.0.1:8000/v1"
    assert resolve_model("ollama_chat/llama3.2", api_base="http://gpu:11434").api_base == (  # type: ignore[attr-defined]
        "http://gpu:11434"
    )
    with pytest.raises(ConfigurationError, match="Valid: 'llama_cpp_python'"):
        LocalAdapter("m", api_base="http://x", server="lmstudio")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "ready"),
    [
        ({"object": "list", "data": [{"id": "local/smollm2", "object": "model"}]}, True),
        ({"object": "list", "data": [{"id": "gpt-4.1-mini", "object": "model"}]}, False),
        ({"data": []}, False),
        ("not a models list", False),
    ],
)
def test_a_llama_server_is_ready_only_when_it_lists_its_own_model(body: Any, ready: bool) -> None:
    """Another process that took the port while ours loaded its model (a loopback fake that
    answers ``/v1/models``) is not taken for our server."""
    import http.server
    import threading

    from agentcore.adapters._llama_server import _answers  # pyright: ignore[reportPrivateUsage]

    payload = json.dumps(body).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/models"
        assert _answers(url, "local/smollm2") is ready
    finally:
        server.shutdown()
