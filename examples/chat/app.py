"""A support chat served over HTTP: one agentcore run per conversation, streamed as
server-sent events.

Run it (from the repository root)::

    uvicorn app:app --app-dir examples/chat --port 8000

then open http://127.0.0.1:8000/ or use the endpoints (README.md in this folder):

- ``POST /conversations`` ``{"message": ...}``: the first message starts a run;
- ``POST /conversations/{run_id}/messages`` ``{"message": ...}``: the next message
  (``Idempotency-Key`` header: a retried request is refused with 409, not appended twice);
- ``POST /conversations/{run_id}/approvals`` ``{"approve": ..., "step": ..., "args_hash": ...}``:
  approve or deny the call the conversation waits on, then continue;
- ``GET /conversations/{run_id}``: the turns so far, as JSON.

The three POSTs answer with ``text/event-stream``: ``conversation`` (the run id), ``thought``
(the model's reasoning as it writes it), ``tool`` (a tool call starting and how it ended), then
one of ``answer``, ``question`` (the agent asks the user), ``approval`` (a call waits for a
person) or ``error``, and last ``done`` with the run's status.

Environment:

- ``AGENTCORE_MODEL``: the model (``"openai/gpt-4o-mini"``...); without it a scripted model
  answers from the conversation, so the demo works offline.
- ``AGENTCORE_STORE``: where conversations are kept (default ``chat.db`` next to this file):
  a restarted server continues them.
- ``CHAT_STREAM_DELAY_S``: the scripted model's pause between streamed chunks (default 0.03).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentcore import Agent, Policy, RunResult, RunStatus, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import (
    AgentcoreError,
    ConfigurationError,
    DuplicateReplyError,
    RunError,
    RunNotFoundError,
)
from agentcore.events import ToolFinished, ToolStarted
from agentcore.streaming import RunEnded, StreamEvent, ThoughtDelta

HERE = Path(__file__).resolve().parent
RUN_PREFIX = "chat-"
"""The ids of this service's runs start with it (a store may hold other runs too)."""
log = structlog.get_logger("chat")
MAX_MESSAGE_CHARS = 4_000

# -- the agent: two tools over a tiny order book --------------------------------------------

ORDERS: dict[str, dict[str, Any]] = {  # Any: JSON values
    "A1001": {"item": "Kettle", "status": "shipped", "total": 25.0, "currency": "EUR"},
    "A1002": {"item": "Desk lamp", "status": "delivered", "total": 40.0, "currency": "EUR"},
    "A1003": {"item": "Teapot", "status": "processing", "total": 18.5, "currency": "EUR"},
}


def _order(order_id: str) -> dict[str, Any]:  # Any: JSON values
    found = ORDERS.get(order_id.strip().upper())
    if found is None:
        raise ValueError(f"no order {order_id!r}; order numbers look like A1001")
    return found


@tool(effect="read")
def lookup_order(order_id: str) -> dict[str, Any]:  # Any: JSON values
    """Look up one order: its item, status and total.

    Args:
        order_id: the order number, such as A1001.
    """
    return {"order_id": order_id.strip().upper(), **_order(order_id)}


@tool(effect="destructive")
def refund_order(order_id: str) -> dict[str, Any]:  # Any: JSON values
    """Refund an order in full. Destructive: a person approves each call first.

    Args:
        order_id: the order number, such as A1001.
    """
    order = _order(order_id)
    return {
        "order_id": order_id.strip().upper(),
        "refunded": order["total"],
        "currency": order["currency"],
    }


INSTRUCTIONS = """\
You are the support assistant of a small shop. Answer the customer briefly and kindly.
Look orders up with lookup_order before you say anything about them. Refund only when the
customer asks for it, with refund_order; a member of staff approves each refund. When you
need an order number (or anything else) that the conversation does not give, ask the
customer instead of guessing."""

ORDER_ID = re.compile(r"\b[A-Z]\d{4}\b", re.IGNORECASE)


def scripted_support(messages: Sequence[Message]) -> dict[str, Any]:  # Any: an action
    """A stand-in for a real model, for the offline demo and the tests: it reads the
    conversation it is shown and answers the latest message from it.

    Everything it knows comes from ``messages``: "refund it" in a later turn refunds the
    order an earlier turn was about, which only works if the earlier turns are shown.
    """
    said = [
        i
        for i, m in enumerate(messages)
        if m.role == "user" and m.content.startswith(("Task: ", "User: "))
    ]
    if not said:
        raise ValueError("the conversation has no message from the user")
    last = said[-1]
    request = messages[last].content.split(": ", 1)[1]
    if _asked(messages, last) and len(said) > 1:  # the message answers our question
        request = messages[said[-2]].content.split(": ", 1)[1] + " " + request
    since = "\n".join(m.content for m in messages[last + 1 :] if m.role == "user")
    wants_refund = "refund" in request.lower()

    if done := re.search(r"refund_order returned: (\{.*\})", since):
        r = json.loads(done.group(1))
        return _finish(
            "The refund went through; tell the customer the amount.",
            f"Done: I refunded {r['refunded']:.2f} {r['currency']} for order {r['order_id']}. "
            "It shows on your statement within a few days.",
        )
    if denied := re.search(r"Denied by ([^:.]+)(?::\s*(.*?))?\.? Do not repeat", since):
        why = f" ({denied.group(2)})" if denied.group(2) else ""
        return _finish(
            "Staff declined the refund; explain that to the customer.",
            f"I'm sorry, our staff declined this refund{why}. Is there anything else?",
        )
    if found := re.search(r"lookup_order returned: (\{.*\})", since):
        o = json.loads(found.group(1))
        return _finish(
            "I have the order; answer with its status.",
            f"Order {o['order_id']} ({o['item']}, {o['total']:.2f} {o['currency']}) is "
            f"{o['status']}.",
        )
    if failed := re.search(r"(?:lookup|refund)_order failed: (?:\w+Error: )?(.*)", since):
        return _finish(
            "The order does not exist; tell the customer.",
            f"I could not find that order: {failed.group(1)}",
        )
    order = _order_in(request) or (_order_in(_earlier(messages, last)) if wants_refund else None)
    if wants_refund and order:
        return {
            "type": "tool",
            "thought": f"The customer wants order {order} refunded; staff must approve it.",
            "tool": "refund_order",
            "args": {"order_id": order},
        }
    if order:
        return {
            "type": "tool",
            "thought": f"The customer asks about order {order}; I look it up first.",
            "tool": "lookup_order",
            "args": {"order_id": order},
        }
    if wants_refund or "order" in request.lower():
        return {
            "type": "ask",
            "thought": "I need the order number before I can do anything.",
            "question": "Which order is it? Order numbers look like A1001.",
        }
    return _finish(
        "A greeting or a question I cannot act on: say what I can do.",
        "Hello! I can tell you where an order is or refund it. Try: Where is order A1001?",
    )


def _finish(thought: str, answer: str) -> dict[str, Any]:  # Any: an action
    return {"type": "finish", "thought": thought, "answer": answer}


def _asked(messages: Sequence[Message], at: int) -> bool:
    """The model's message just before ``at`` was a question for the user."""
    if at == 0 or messages[at - 1].role != "assistant":
        return False
    try:
        return json.loads(messages[at - 1].content).get("type") == "ask"
    except ValueError:
        return False


def _earlier(messages: Sequence[Message], before: int) -> str:
    """What the user said and the tools returned before message ``before``, latest first."""
    return "\n".join(m.content for m in reversed(messages[:before]) if m.role == "user")


def _order_in(text: str) -> str | None:
    found = ORDER_ID.search(text)
    return found.group(0).upper() if found else None


def build_agent() -> Agent:
    """The support agent: its model from ``AGENTCORE_MODEL`` (else scripted), its store from
    ``AGENTCORE_STORE`` (else ``chat.db`` in this folder)."""
    model = os.environ.get("AGENTCORE_MODEL") or ScriptedModel(
        scripted_support,
        stream_chunk_chars=8,
        stream_delay_s=float(os.environ.get("CHAT_STREAM_DELAY_S", "0.03")),
    )
    return Agent(
        tools=[lookup_order, refund_order],
        model=model,
        store=os.environ.get("AGENTCORE_STORE") or f"sqlite:///{HERE / 'chat.db'}",
        # ask: the model may ask the customer; no plan before a write: the refund's own
        # approval is the check (destructive tools wait for a person by default).
        policy=Policy(ask=True, plan_before_writes=False),
        instructions=INSTRUCTIONS,
    )


agent = build_agent()

# -- server-sent events ----------------------------------------------------------------------


def sse(event: str, data: object) -> bytes:
    """One server-sent event (``data`` as one line of JSON)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def translate(item: StreamEvent) -> list[bytes]:
    """What the page is told about one item of ``agent.stream``."""
    match item:
        case ThoughtDelta(step=step, text=text):
            return [sse("thought", {"step": step, "text": text})]
        case ToolStarted():
            data = {"step": item.step, "tool": item.tool, "args": item.args, "status": "started"}
            return [sse("tool", data)]
        case ToolFinished():
            status = "ok" if item.ok else "error"
            return [sse("tool", {"step": item.step, "tool": item.tool, "status": status})]
        case RunEnded(result=result):
            return [*ending(result), sse("done", {"run_id": result.run_id, **_head(result)})]
        case _:  # the rest of the transcript: kept, not shown
            return []


def ending(result: RunResult[Any]) -> list[bytes]:  # Any: the agent's output type
    """How the turn ended: an answer, a question, a call awaiting approval, or an error."""
    if result.status is RunStatus.COMPLETED:
        return [sse("answer", {"text": result.answer})]
    if result.status is RunStatus.AWAITING_INPUT:
        return [sse("question", {"text": result.question})]
    if result.status is RunStatus.AWAITING_CONFIRMATION and result.pending is not None:
        return [sse("approval", _pending(result))]
    return [sse("error", {"status": result.status.value, "message": result.reason})]


def _head(result: RunResult[Any]) -> dict[str, Any]:  # Any: output type; JSON values
    return {"status": result.status.value, "turn": len(result.turns)}


def _pending(result: RunResult[Any]) -> dict[str, Any] | None:  # Any: as above
    p = result.pending
    if p is None or result.status is not RunStatus.AWAITING_CONFIRMATION:
        return None
    return {
        "tool": p.tool,
        "args": p.args,
        "step": p.step,
        "args_hash": p.args_hash,
        "thought": p.thought,
        "reason": p.reason,
    }


class Turns:
    """Turns being streamed. A turn is carried out by a task of its own, so a client that
    goes away mid-turn (a closed tab, a dropped connection) does not stop it: the reply is
    recorded, and ``GET /conversations/{id}`` shows it."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, events: AsyncIterator[StreamEvent], *head: bytes) -> StreamingResponse:
        """Stream ``events`` as server-sent events.

        Waits for the first event first, so a refused request (an unknown run, a duplicate
        key, a run that takes no message now) raises here and is answered with its status
        code instead of an event stream.
        """
        first = await anext(events)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        for chunk in (*head, *translate(first)):
            queue.put_nowait(chunk)
        self._track(asyncio.create_task(self._pump(events, queue)))

        async def body() -> AsyncIterator[bytes]:
            while (chunk := await queue.get()) is not None:
                yield chunk

        return StreamingResponse(
            body(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

    @staticmethod
    async def _pump(events: AsyncIterator[StreamEvent], queue: asyncio.Queue[bytes | None]) -> None:
        try:
            async for item in events:
                for chunk in translate(item):
                    queue.put_nowait(chunk)
        except AgentcoreError as exc:  # recorded up to here; the page says what went wrong
            queue.put_nowait(sse("error", {"status": "error", "message": str(exc)}))
            queue.put_nowait(sse("done", {"status": "error"}))
        finally:
            queue.put_nowait(None)

    async def resume_interrupted(self) -> None:
        """Finish the turns a previous process left half done (it crashed or was killed
        mid-turn): the transcript says how far each got, and a tool call that started is
        not run twice. A run another live process is advancing is left to it."""
        for run in await agent.store.list_runs(status="running", search=RUN_PREFIX):
            if run.run_id.startswith(RUN_PREFIX):
                self._track(asyncio.create_task(self._resume(run.run_id)))

    @staticmethod
    async def _resume(run_id: str) -> None:
        try:
            await agent.resume(run_id)
        except AgentcoreError as exc:  # still shown as running; a reply says what to do
            log.warning("chat.resume_failed", run_id=run_id, error=str(exc))

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout_s: float) -> None:
        """Let the turns in progress end (at shutdown), cancelling those that take longer."""
        if not self._tasks:
            return
        _, late = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task


turns = Turns()

# -- endpoints -------------------------------------------------------------------------------


async def _body(request: Request) -> dict[str, object]:
    """The request's JSON object, or a 400."""
    try:
        body: object = await request.json()
    except ValueError as exc:
        raise ConfigurationError("the body must be a JSON object") from exc
    if not isinstance(body, dict):
        raise ConfigurationError("the body must be a JSON object")
    return cast("dict[str, object]", body)


async def _message(request: Request) -> str:
    message = (await _body(request)).get("message")
    if not isinstance(message, str) or not message.strip():
        raise ConfigurationError("'message' must be a non-empty string")
    if len(message) > MAX_MESSAGE_CHARS:
        raise ConfigurationError(f"'message' is longer than {MAX_MESSAGE_CHARS} characters")
    return message.strip()


async def start_conversation(request: Request) -> Response:
    """The first message: a new run, streamed. Its id is in ``Location`` and the first event."""
    message = await _message(request)
    run_id = f"{RUN_PREFIX}{secrets.token_hex(8)}"
    response = await turns.start(
        agent.stream(message, run_id=run_id), sse("conversation", {"run_id": run_id})
    )
    response.headers["Location"] = f"/conversations/{run_id}"
    return response


async def send_message(request: Request) -> Response:
    """The next message of a conversation, streamed."""
    run_id = request.path_params["run_id"]
    message = await _message(request)
    key = request.headers.get("idempotency-key")
    return await turns.start(agent.stream_reply(run_id, message, key=key))


async def decide(request: Request) -> Response:
    """Approve or deny the call the conversation waits on (bound to its step and arguments'
    hash, as shown), then stream the rest of the turn."""
    run_id = request.path_params["run_id"]
    body = await _body(request)
    approve, step, args_hash = body.get("approve"), body.get("step"), body.get("args_hash")
    if not isinstance(approve, bool) or not isinstance(step, int) or not isinstance(args_hash, str):
        raise ConfigurationError(
            "an approval needs 'approve' (true or false), and the 'step' and 'args_hash' of the "
            "call that was shown"
        )
    by, reason = body.get("by") or "support staff", body.get("reason")
    if not isinstance(by, str) or not (reason is None or isinstance(reason, str)):
        raise ConfigurationError("'by' and 'reason' must be strings")
    events = agent.stream_confirm(
        run_id, approve=approve, by=by, reason=reason or None, step=step, args_hash=args_hash
    )
    return await turns.start(events)


async def show(request: Request) -> Response:
    """The conversation so far: each turn's message and how it ended, and what it waits on."""
    result = await agent.result(request.path_params["run_id"])
    return JSONResponse(
        {
            "run_id": result.run_id,
            **_head(result),
            "turns": [
                {
                    "number": t.number,
                    "message": t.message,
                    "status": t.status.value,
                    "answer": t.answer,
                    "reason": t.reason,
                }
                for t in result.turns
            ],
            "question": result.question,
            "pending": _pending(result),
        }
    )


async def page(_: Request) -> Response:
    return FileResponse(HERE / "index.html", headers={"Cache-Control": "no-store"})


async def refused(_: Request, exc: Exception) -> Response:
    """A request agentcore refused: 404 for an unknown run, 400 for bad input, 409 when the
    run cannot take it now (a duplicate key, a turn in progress, nothing awaiting approval)."""
    body: dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}  # Any: JSON
    if isinstance(exc, DuplicateReplyError):
        body["turn"] = exc.turn
    if isinstance(exc, RunNotFoundError):
        code = 404
    elif isinstance(exc, ConfigurationError):
        code = 400
    elif isinstance(exc, RunError):
        code = 409
    else:
        code = 500
    return JSONResponse(body, status_code=code)


@asynccontextmanager
async def lifespan(_: Starlette) -> AsyncGenerator[None]:
    await turns.resume_interrupted()
    try:
        yield
    finally:
        await turns.drain(timeout_s=10)
        await agent.close()


app = Starlette(
    routes=[
        Route("/", page),
        Route("/conversations", start_conversation, methods=["POST"]),
        Route("/conversations/{run_id}", show),
        Route("/conversations/{run_id}/messages", send_message, methods=["POST"]),
        Route("/conversations/{run_id}/approvals", decide, methods=["POST"]),
    ],
    exception_handlers={AgentcoreError: refused},
    lifespan=lifespan,
)

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
