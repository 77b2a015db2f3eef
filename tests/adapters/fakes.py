"""An in-process loopback HTTP server that answers like a model provider, and its payloads.

The adapters under test talk to it through the real litellm and openai code (their own
HTTP clients), so the tests see exactly what leaves the process. The server records every
request and answers from a queue that each test fills:

* :class:`JsonReply`: a JSON body with a status and headers (successes and errors);
* :class:`SseReply`: a ``text/event-stream`` body sent chunk by chunk (streaming);
* :class:`Reset`: the connection is closed with a TCP reset and no response;
* :class:`Delay`: wait, then answer (or never answer in time: a client timeout).

The builders below produce the providers' documented payloads: OpenAI ``chat.completion``
objects (usage with ``prompt_tokens_details.cached_tokens``, ``message.refusal``,
``finish_reason: length``), Responses API objects (``status: incomplete`` with
``incomplete_details.reason``), and error bodies ``{"error": {...}}``.
"""

from __future__ import annotations

import email.utils
import itertools
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeAlias

__all__ = [
    "Delay",
    "FakeProvider",
    "JsonReply",
    "RecordedRequest",
    "Reply",
    "Reset",
    "SseReply",
    "chat_chunk",
    "chat_completion",
    "error_body",
    "error_reply",
    "http_date",
    "ok",
    "responses_response",
]

_ids = itertools.count(1)


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class JsonReply:
    """Answer with a JSON body."""

    body: Any  # Any: any JSON value
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict[str, str])


@dataclass(frozen=True)
class SseReply:
    """Answer with a server-sent event stream: one ``data:`` line per event, then [DONE]."""

    events: Sequence[Any]  # Any: JSON values, or preformatted str lines
    done: bool = True
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict[str, str])


@dataclass(frozen=True)
class Reset:
    """Close the connection with a TCP reset, without any response."""


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` (interrupted when the server stops), then answer ``then``."""

    seconds: float
    then: Reply


Reply: TypeAlias = "JsonReply | SseReply | Reset | Delay"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it.

    Attributes:
        method: the HTTP method.
        path: the request path with its query string.
        headers: header names lowercased.
        body: the JSON body, or ``None`` when there was none or it was not JSON.
        raw: the body bytes.
        received_at: ``time.monotonic()`` when it arrived.
    """

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any  # Any: the decoded JSON body
    raw: bytes
    received_at: float


# --------------------------------------------------------------------------- the server


class FakeProvider:
    """A loopback HTTP server answering from a queue. Use as a context manager.

    Attributes:
        requests: every request received, in order (except those to :attr:`fixed` paths).
        default: the reply when the queue is empty (a 400 saying so, by default, which no
            adapter retries, so a test that queued too little fails loudly).
        fixed: replies by path that do not use the queue, for the side requests a client
            makes on its own (litellm asks Ollama's ``/api/show`` for model details in the
            background after an answer).
        side_requests: the requests answered from :attr:`fixed`.
    """

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.fixed: dict[str, Reply] = {}
        self.side_requests: list[RecordedRequest] = []
        self.default: Reply = error_reply(
            400, "The fake provider has no reply queued for this request.", code="fake_empty"
        )
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style API base, ``http://127.0.0.1:<port>/v1``."""
        return self.url + "/v1"

    def queue(self, *replies: Reply) -> None:
        """Append replies, answered one per request in order."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Replies queued and not yet used."""
        with self._lock:
            return len(self._queue)

    @property
    def bodies(self) -> list[Any]:  # Any: JSON bodies
        """The JSON body of every request, in order."""
        return [r.body for r in self.requests]

    @property
    def last(self) -> RecordedRequest:
        """The latest request."""
        return self.requests[-1]

    def close(self) -> None:
        """Stop serving; delayed replies are abandoned."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            if request.path in self.fixed:
                self.side_requests.append(request)
                return self.fixed[request.path]
            self.requests.append(request)
            return self._queue.popleft() if self._queue else self.default


def _handler_for(fake: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # Any: stdlib signature
            return

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None  # Any: JSON
            except ValueError:
                body = None
            recorded = RecordedRequest(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                raw=raw,
                received_at=time.monotonic(),
            )
            try:
                self._answer(fake._next(recorded))  # the handler is the server's
            except OSError:  # the client went away (timeouts): nothing to answer
                self.close_connection = True

        def _answer(self, reply: Reply) -> None:
            match reply:
                case Delay(seconds=seconds, then=then):
                    if fake._stopping.wait(seconds):
                        self.close_connection = True
                        return
                    self._answer(then)
                case Reset():
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    self.close_connection = True
                case JsonReply(body=body, status=status, headers=headers):
                    data = json.dumps(body).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                case SseReply(events=events, done=done, status=status, headers=headers):
                    self.send_response(status)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    for event in events:
                        line = event if isinstance(event, str) else json.dumps(event)
                        self.wfile.write(f"data: {line}\n\n".encode())
                        self.wfile.flush()
                    if done:
                        self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    self.close_connection = True

    return Handler


# --------------------------------------------------------------------------- payloads


def chat_completion(
    content: str | Mapping[str, Any] | None,  # Any: an action as a dict
    *,
    model: str = "gpt-4.1-mini-2025-04-14",
    finish_reason: str = "stop",
    refusal: str | None = None,
    prompt_tokens: int = 120,
    completion_tokens: int = 30,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
    response_id: str | None = None,
) -> dict[str, Any]:  # Any: JSON
    """An OpenAI ``chat.completion`` object (Chat Completions API reference).

    ``content`` given as a dict is sent as its JSON text.
    """
    text = json.dumps(content) if isinstance(content, Mapping) else content
    return {
        "id": response_id or f"chatcmpl-fake{next(_ids)}",
        "object": "chat.completion",
        "created": 1_750_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "refusal": refusal,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def ok(content: str | Mapping[str, Any] | None, **options: Any) -> JsonReply:  # Any: as above
    """A 200 answer holding :func:`chat_completion` (``options`` go to it)."""
    return JsonReply(chat_completion(content, **options))


def chat_chunk(
    delta: Mapping[str, Any],  # Any: JSON
    *,
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,  # Any: JSON
    model: str = "gpt-4.1-mini-2025-04-14",
    chunk_id: str = "chatcmpl-fakestream",
) -> dict[str, Any]:  # Any: JSON
    """One ``chat.completion.chunk`` of a stream (with ``usage`` on the final chunk)."""
    choices = (
        []
        if usage is not None and not delta
        else [{"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish_reason}]
    )
    chunk: dict[str, Any] = {  # Any: JSON
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": 1_750_000_000,
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = dict(usage)
    return chunk


def responses_response(
    text: str | Mapping[str, Any] | None,  # Any: an action as a dict
    *,
    model: str = "gpt-4.1-mini-2025-04-14",
    status: str = "completed",
    incomplete_reason: str | None = None,
    refusal: str | None = None,
    input_tokens: int = 120,
    output_tokens: int = 30,
    cached_tokens: int = 0,
    response_id: str | None = None,
) -> dict[str, Any]:  # Any: JSON
    """An OpenAI Responses API ``response`` object (Responses API reference)."""
    body = json.dumps(text) if isinstance(text, Mapping) else text
    content: list[dict[str, Any]] = []  # Any: JSON
    if refusal is not None:
        content.append({"type": "refusal", "refusal": refusal})
    if body is not None:
        content.append({"type": "output_text", "text": body, "annotations": [], "logprobs": []})
    return {
        "id": response_id or f"resp_fake{next(_ids)}",
        "object": "response",
        "created_at": 1_750_000_000,
        "status": status,
        "error": None,
        "incomplete_details": (
            {"reason": incomplete_reason} if incomplete_reason is not None else None
        ),
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": [
            {
                "type": "message",
                "id": f"msg_fake{next(_ids)}",
                "status": status,
                "role": "assistant",
                "content": content,
            }
        ],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
        "user": None,
        "metadata": {},
    }


def error_body(
    message: str,
    *,
    type: str = "invalid_request_error",  # the documented field name
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:  # Any: JSON
    """An OpenAI-style error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_reply(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",  # the documented field name
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JsonReply:
    """A JSON error answer with :func:`error_body`."""
    return JsonReply(error_body(message, type=type, code=code), status, dict(headers or {}))


def http_date(seconds_from_now: float, *, now: float | None = None) -> str:
    """An HTTP-date (RFC 9110 IMF-fixdate) ``seconds_from_now`` ahead, for Retry-After."""
    return email.utils.formatdate((now or time.time()) + seconds_from_now, usegmt=True)
