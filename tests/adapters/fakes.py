"""An in-process loopback HTTP server that answers like a model provider, and its payloads.

The adapters under test talk to it through the real litellm and openai code (their own
HTTP clients), so the tests see exactly what leaves the process. The server records every
request and answers from a queue that each test fills:

* :class:`JsonReply`: a JSON body with a status and headers (successes and errors);
* :class:`SseReply`: a ``text/event-stream`` body sent chunk by chunk (streaming), with
  ``event:`` lines where the provider names its events (Anthropic, the Responses API), and
  optionally cut off by a TCP reset mid-stream;
* :class:`NdjsonReply`: newline-delimited JSON sent line by line (Ollama's native streaming);
* :class:`Reset`: the connection is closed with a TCP reset and no response;
* :class:`Delay`: wait, then answer (or never answer in time: a client timeout).

The builders below produce the providers' documented payloads: OpenAI ``chat.completion``
objects (usage with ``prompt_tokens_details.cached_tokens``, ``message.refusal``,
``finish_reason: length``), Responses API objects (``status: incomplete`` with
``incomplete_details.reason``), their stream chunks and events, Anthropic Messages objects
and stream events, Gemini ``generateContent`` responses (one per streamed chunk), and error
bodies (OpenAI's ``{"error": {...}}``, Anthropic's ``{"type": "error", "error": {...}}``,
Google's ``{"error": {"code", "message", "status", "details"}}``).
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
    "NdjsonReply",
    "RecordedRequest",
    "Reply",
    "Reset",
    "SseReply",
    "anthropic_error",
    "anthropic_message",
    "anthropic_stream",
    "chat_chunk",
    "chat_completion",
    "chat_stream",
    "error_body",
    "error_reply",
    "gemini_response",
    "gemini_stream",
    "google_error",
    "http_date",
    "ok",
    "ollama_stream",
    "responses_response",
    "responses_stream",
    "split",
]

_ids = itertools.count(1)


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class JsonReply:
    """Answer with a JSON body (pretty-printed with ``indent``, as Google's APIs answer)."""

    body: Any  # Any: any JSON value
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    indent: int | None = None


@dataclass(frozen=True)
class SseReply:
    """Answer with a server-sent event stream: one ``data:`` line per event, then [DONE].

    Attributes:
        events: JSON values (or preformatted ``data`` strings), one event each.
        done: end with OpenAI's ``data: [DONE]`` sentinel.
        named: precede each event with ``event: <its "type">`` (Anthropic's and the
            Responses API's streams name their events).
        reset: after the events, close the connection with a TCP reset (a stream that
            breaks mid-reply) instead of ending it cleanly.
        delay: seconds to wait before each event (a stream at a fixed rate).
        hold: when set, the server waits (up to 5 s) for this event before sending the
            event at index ``hold_at``: a test can prove something happened mid-stream.
        hold_at: see ``hold``.
    """

    events: Sequence[Any]  # Any: JSON values, or preformatted str lines
    done: bool = True
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    named: bool = False
    reset: bool = False
    delay: float = 0.0
    hold: threading.Event | None = None
    hold_at: int = 0


@dataclass(frozen=True)
class NdjsonReply:
    """Answer with newline-delimited JSON, one object per line (Ollama's ``/api/chat``),
    ``delay`` seconds before each line; ``hold`` and ``hold_at`` as for :class:`SseReply`."""

    lines: Sequence[Any]  # Any: JSON values
    status: int = 200
    delay: float = 0.0
    hold: threading.Event | None = None
    hold_at: int = 0


@dataclass(frozen=True)
class Reset:
    """Close the connection with a TCP reset, without any response."""


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` (interrupted when the server stops), then answer ``then``."""

    seconds: float
    then: Reply


Reply: TypeAlias = "JsonReply | SseReply | NdjsonReply | Reset | Delay"


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
        stream_ends: ``time.monotonic()`` when each streamed answer had been fully written.
        held_too_long: how many holds (see :class:`SseReply`) were never released.
    """

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.fixed: dict[str, Reply] = {}
        self.side_requests: list[RecordedRequest] = []
        self.stream_ends: list[float] = []
        self.held_too_long = 0
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
                case JsonReply(body=body, status=status, headers=headers, indent=indent):
                    data = json.dumps(body, indent=indent).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                case SseReply():
                    self._stream_events(reply)
                case NdjsonReply(lines=lines, status=status, delay=delay):
                    self.send_response(status)
                    self.send_header("Content-Type", "application/x-ndjson")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for i, line in enumerate(lines):
                        self._wait_for(reply.hold, i == reply.hold_at)
                        if delay and fake._stopping.wait(delay):
                            break
                        self.wfile.write(json.dumps(line).encode() + b"\n")
                        self.wfile.flush()
                    fake.stream_ends.append(time.monotonic())
                    self.close_connection = True

        def _wait_for(self, hold: threading.Event | None, now: bool) -> None:
            if hold is not None and now and not hold.wait(5):
                fake.held_too_long += 1

        def _stream_events(self, reply: SseReply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            for i, event in enumerate(reply.events):
                self._wait_for(reply.hold, i == reply.hold_at)
                if reply.delay and fake._stopping.wait(reply.delay):
                    break
                line = event if isinstance(event, str) else json.dumps(event)
                name = event.get("type") if reply.named and isinstance(event, dict) else None
                prefix = f"event: {name}\n" if name else ""
                self.wfile.write(f"{prefix}data: {line}\n\n".encode())
                self.wfile.flush()
            fake.stream_ends.append(time.monotonic())
            if reply.reset:
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
            elif reply.done:
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


def chat_stream(
    text: str,
    *,
    pieces: int = 8,
    finish_reason: str = "stop",
    prompt_tokens: int = 120,
    completion_tokens: int = 30,
    cached_tokens: int = 0,
    model: str = "gpt-4.1-mini-2025-04-14",
) -> list[dict[str, Any]]:  # Any: JSON
    """A Chat Completions stream of ``text``: a role chunk, content chunks, a chunk with
    ``finish_reason``, and the final usage chunk (``stream_options.include_usage``)."""
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }
    return [
        chat_chunk({"role": "assistant", "content": ""}, model=model),
        *(chat_chunk({"content": p}, model=model) for p in split(text, pieces)),
        chat_chunk({}, finish_reason=finish_reason, model=model),
        chat_chunk({}, usage=usage, model=model),
    ]


def split(text: str, pieces: int) -> list[str]:
    """``text`` in ``pieces`` consecutive parts (the last may be shorter)."""
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def responses_stream(
    text: str,
    *,
    pieces: int = 8,
    input_tokens: int = 120,
    output_tokens: int = 30,
    cached_tokens: int = 0,
    response_id: str = "resp_stream1",
) -> list[dict[str, Any]]:  # Any: JSON
    """A Responses API stream (``stream: true``): ``response.created``, the output item and
    content part events, ``response.output_text.delta`` per piece, ``...done`` events and
    ``response.completed`` carrying the whole response with its usage."""
    final = responses_response(
        text,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached_tokens,
        response_id=response_id,
    )
    item = final["output"][0]
    created = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [  # Any: JSON
        {"type": "response.created", "sequence_number": 0, "response": created},
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {
            "type": "response.content_part.added",
            "sequence_number": 2,
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
        },
    ]
    for piece in split(text, pieces):
        events.append(
            {
                "type": "response.output_text.delta",
                "sequence_number": len(events),
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            }
        )
    events += [
        {
            "type": "response.output_text.done",
            "sequence_number": len(events),
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        },
        {
            "type": "response.output_item.done",
            "sequence_number": len(events) + 1,
            "output_index": 0,
            "item": item,
        },
        {"type": "response.completed", "sequence_number": len(events) + 2, "response": final},
    ]
    return events


# --------------------------------------------------------------------------- Anthropic


def anthropic_message(
    text: str | Mapping[str, Any] | None,  # Any: an action as a dict
    *,
    stop_reason: str = "end_turn",
    model: str = "claude-sonnet-4-5-20250929",
    input_tokens: int = 120,
    output_tokens: int = 30,
    cache_read: int = 0,
    cache_creation: int = 0,
    message_id: str | None = None,
) -> dict[str, Any]:  # Any: JSON
    """An Anthropic Messages API ``message`` object (Messages API reference): one text
    content block, ``stop_reason``, and ``usage`` with the prompt-caching fields."""
    body = json.dumps(text) if isinstance(text, Mapping) else text
    return {
        "id": message_id or f"msg_fake{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [] if body is None else [{"type": "text", "text": body}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": cache_creation,
            "cache_read_input_tokens": cache_read,
            "output_tokens": output_tokens,
            "service_tier": "standard",
        },
    }


def anthropic_stream(
    text: str,
    *,
    pieces: int = 8,
    stop_reason: str = "end_turn",
    input_tokens: int = 120,
    output_tokens: int = 30,
    cache_read: int = 0,
    message_id: str = "msg_stream1",
    complete: bool = True,
) -> list[dict[str, Any]]:  # Any: JSON
    """Anthropic's streaming events (``stream: true``): ``message_start`` (input usage),
    ``content_block_start``, ``ping``, one ``content_block_delta`` (``text_delta``) per
    piece, ``content_block_stop``, ``message_delta`` (``stop_reason`` and the cumulative
    output usage) and ``message_stop``. ``complete=False`` stops after the deltas."""
    start = anthropic_message(
        None, input_tokens=input_tokens, output_tokens=1, cache_read=cache_read
    )
    start.update(id=message_id, stop_reason=None)
    events: list[dict[str, Any]] = [  # Any: JSON
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
        for p in split(text, pieces)
    ]
    if complete:
        events += [
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
            {"type": "message_stop"},
        ]
    return events


def anthropic_error(
    status: int, message: str, *, kind: str, headers: Mapping[str, str] | None = None
) -> JsonReply:
    """An Anthropic error answer: ``{"type": "error", "error": {"type", "message"}}``."""
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}
    return JsonReply(body, status, dict(headers or {}))


# --------------------------------------------------------------------------- Gemini


def gemini_response(
    text: str | Mapping[str, Any] | None,  # Any: an action as a dict
    *,
    finish_reason: str | None = "STOP",
    prompt_tokens: int = 120,
    output_tokens: int = 30,
    cached_tokens: int = 0,
    thoughts_tokens: int = 0,
    response_id: str | None = "gemini-resp-1",
    model: str = "gemini-2.5-flash",
    usage: bool = True,
) -> dict[str, Any]:  # Any: JSON
    """A Gemini ``GenerateContentResponse`` (also one chunk of ``streamGenerateContent``):
    one candidate, ``finishReason`` when set, ``usageMetadata`` with the cached and
    thinking token counts."""
    body = json.dumps(text) if isinstance(text, Mapping) else text
    candidate: dict[str, Any] = {  # Any: JSON
        "content": {"role": "model", "parts": [] if body is None else [{"text": body}]},
        "index": 0,
    }
    if finish_reason is not None:
        candidate["finishReason"] = finish_reason
    response: dict[str, Any] = {  # Any: JSON
        "candidates": [candidate],
        "modelVersion": model,
        "responseId": response_id,
    }
    if usage:
        meta: dict[str, int] = {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": prompt_tokens + output_tokens + thoughts_tokens,
        }
        if cached_tokens:
            meta["cachedContentTokenCount"] = cached_tokens
        if thoughts_tokens:
            meta["thoughtsTokenCount"] = thoughts_tokens
        response["usageMetadata"] = meta
    return response


def gemini_stream(
    text: str,
    *,
    pieces: int = 8,
    finish_reason: str = "STOP",
    prompt_tokens: int = 120,
    output_tokens: int = 30,
    cached_tokens: int = 0,
    complete: bool = True,
) -> list[dict[str, Any]]:  # Any: JSON
    """``streamGenerateContent?alt=sse`` chunks: each a ``GenerateContentResponse`` holding
    one piece of text; the last carries ``finishReason`` and the full ``usageMetadata``.
    ``complete=False`` leaves the final chunk out."""
    parts = split(text, pieces)
    chunks = [gemini_response(p, finish_reason=None, usage=False) for p in parts[:-1]]
    last = gemini_response(
        parts[-1],
        finish_reason=finish_reason,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached_tokens,
    )
    return [*chunks, last] if complete else chunks


def google_error(
    status: int,
    message: str,
    *,
    grpc_status: str,
    details: Sequence[Mapping[str, Any]] = (),  # Any: JSON
) -> JsonReply:
    """A Google API error answer: ``{"error": {"code", "message", "status", "details"}}``."""
    error: dict[str, Any] = {"code": status, "message": message, "status": grpc_status}  # Any: JSON
    if details:
        error["details"] = [dict(d) for d in details]
    return JsonReply({"error": error}, status, indent=2)


# --------------------------------------------------------------------------- Ollama


def ollama_stream(
    text: str, *, pieces: int = 8, done_reason: str = "stop", prompt: int = 26, output: int = 10
) -> NdjsonReply:
    """Ollama's streamed ``/api/chat`` answer: one line per piece, then ``done: true`` with
    ``done_reason`` and the token counts (docs/api.md)."""
    lines: list[dict[str, Any]] = [  # Any: JSON
        {
            "model": "smollm2",
            "created_at": "2025-06-01T12:00:00.000000Z",
            "message": {"role": "assistant", "content": p},
            "done": False,
        }
        for p in split(text, pieces)
    ]
    lines.append(
        {
            "model": "smollm2",
            "created_at": "2025-06-01T12:00:01.000000Z",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": done_reason,
            "total_duration": 4_883_583_458,
            "prompt_eval_count": prompt,
            "eval_count": output,
        }
    )
    return NdjsonReply(lines)
