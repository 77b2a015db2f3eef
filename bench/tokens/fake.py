"""A loopback fake of OpenAI's Chat Completions API that replays a script and logs requests.

Standard library only: the peers' side imports it too, from another interpreter.

``POST /v1/chat/completions`` (any path ending in ``/chat/completions``) records the request
body and answers with the next :class:`Turn` of the script, in OpenAI's documented formats
(https://platform.openai.com/docs/api-reference/chat/object and
https://platform.openai.com/docs/guides/function-calling):

* a turn with calls: ``choices[0].message`` = ``{"role": "assistant", "content": <thought or
  null>, "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]}``,
  ``finish_reason: "tool_calls"``;
* a turn without calls: ``message.content`` = the text, ``finish_reason: "stop"``;
* always a ``usage`` block (``prompt_tokens`` is a rough size of the body: nobody here reads
  it as a measurement).

``"stream": true`` is answered as server-sent ``chat.completion.chunk`` events
(https://platform.openai.com/docs/api-reference/chat-streaming): a role/content delta, one
``delta.tool_calls`` item per call (``index``, ``id``, ``type``, the whole ``name`` and
``arguments``), the chunk with ``finish_reason``, the usage chunk when
``stream_options.include_usage`` is set, then ``data: [DONE]``.

A request past the end of the script gets a 400 error body and is counted in ``overruns``:
a run that asks more than its script allows fails loudly instead of being measured.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast

__all__ = ["FakeChat", "Turn", "completion_body"]


@dataclass(frozen=True)
class Turn:
    """One scripted model reply: text (a thought, an answer or a JSON action) and calls.

    ``calls`` are ``(name, arguments JSON text)`` pairs, sent as ``message.tool_calls``.
    """

    content: str | None
    calls: tuple[tuple[str, str], ...] = ()


def completion_body(
    turn: Turn, index: int, model: str, prompt_tokens: int
) -> dict[str, Any]:  # Any: JSON
    """A ``chat.completion`` object for ``turn`` (the ``index``-th reply of the run)."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}  # Any: JSON
    if turn.calls:
        message["tool_calls"] = [
            {
                "id": f"call_{index}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for i, (name, arguments) in enumerate(turn.calls)
        ]
    completion = max(1, (len(turn.content or "") + sum(len(a) for _, a in turn.calls)) // 4)
    return {
        "id": f"chatcmpl-bench{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if turn.calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _chunks(body: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:  # Any: JSON
    """``body`` as ``chat.completion.chunk`` objects."""
    message = body["choices"][0]["message"]
    base = {
        "id": body["id"],
        "object": "chat.completion.chunk",
        "created": body["created"],
        "model": body["model"],
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:  # Any: JSON
        return {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    out = [chunk({"role": "assistant", "content": message["content"] or ""})]
    for i, call in enumerate(message.get("tool_calls") or ()):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": call["function"],
                        }
                    ]
                }
            )
        )
    out.append(chunk({}, body["choices"][0]["finish_reason"]))
    if include_usage:
        out.append({**base, "choices": [], "usage": body["usage"]})
    return out


@dataclass
class _State:
    script: list[Turn]
    bodies: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])  # Any: JSON
    overruns: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # Any: stdlib's
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        body: dict[str, Any] = json.loads(raw or b"{}")  # Any: JSON
        state = cast("_Server", self.server).state
        with state.lock:
            index = len(state.bodies)
            state.bodies.append(body)
            turn = state.script[index] if index < len(state.script) else None
            if turn is None:
                state.overruns += 1
        if not self.path.rstrip("/").endswith("/chat/completions") or turn is None:
            why = "script exhausted" if turn is None else f"unknown path {self.path}"
            self._send(400, {"error": {"message": why, "type": "invalid_request_error"}})
            return
        reply = completion_body(turn, index, str(body.get("model", "gpt-4.1-mini")), len(raw) // 4)
        if body.get("stream"):
            options = body.get("stream_options") or {}
            events = _chunks(reply, bool(options.get("include_usage")))
            data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            payload = data.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self._send(200, reply)

    def _send(self, status: int, value: object) -> None:
        payload = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State


class FakeChat:
    """The fake on ``127.0.0.1`` (a free port), serving ``script`` in a thread.

    Use as a context manager; ``base_url`` is ``http://127.0.0.1:<port>/v1``, ``bodies`` the
    request bodies in arrival order, ``overruns`` the requests past the script's end.
    """

    def __init__(self, script: Sequence[Turn]) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = _State(list(script))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def bodies(self) -> list[dict[str, Any]]:  # Any: JSON
        return self._server.state.bodies

    @property
    def overruns(self) -> int:
        return self._server.state.overruns

    def __enter__(self) -> FakeChat:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
