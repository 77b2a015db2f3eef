"""ScriptedModel: a deterministic model for tests, demos and replays.

It answers from a script and goes through exactly the validation path a real provider's
text takes (:func:`parse_reply`), so invalid output, unknown tools and oversized replies
can be exercised without a network.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from agentcore.contracts import Usage
from agentcore.contracts.errors import AgentcoreError, ModelError, ScriptExhaustedError

from ._protocol import (
    Completion,
    CompletionRequest,
    Message,
    PartialAction,
    parse_reply,
    partial_action,
)

__all__ = ["ScriptItem", "ScriptedModel"]

ScriptItem: TypeAlias = (
    "Mapping[str, Any] | str | BaseException | Callable[[Sequence[Message]], ScriptReply]"
)
"""One scripted reply: an action as a dict (sent as JSON text), a raw string (returned
verbatim), an exception (raised as a provider error), or a callable of the rendered
messages returning one of those (or an awaitable of one)."""

ScriptReply: TypeAlias = (
    "Mapping[str, Any] | str | BaseException | Awaitable[Mapping[str, Any] | str | BaseException]"
)


class ScriptedModel:
    """A model that replays a script.

    Args:
        script: a sequence of :data:`ScriptItem`, consumed one per call; or a single callable
            of the rendered messages, called for every request. A sequence is followed by
            each run from its own position: the replies a model of this name already gave
            in that run's transcript (``request.prior_calls``) are skipped, so runs sharing
            one ScriptedModel each start at the first reply, and a run confirmed or resumed
            by another process (a new ScriptedModel) replays no earlier action. Give each
            scripted model of one route its own name.
        name: the route name recorded in ``model_called`` (default ``"scripted"``).
        input_tokens: input tokens reported per call (deterministic, for budget tests).
        output_tokens_per_char: output tokens reported per character of the reply, rounded
            up, at least 1.
        stream_chunk_chars: when the caller streams (``request.on_partial``), the reply is
            fed in chunks of this many characters through the same partial parser real
            streaming adapters use.
        stream_delay_s: a pause between chunks (demos, streaming benchmarks).

    Example:
        >>> model = ScriptedModel([
        ...     {"type": "tool", "thought": "look", "tool": "get_order",
        ...      "args": {"order_id": "A1"}},
        ...     {"type": "finish", "thought": "done", "answer": "Shipped."},
        ... ])
    """

    def __init__(
        self,
        script: Iterable[ScriptItem] | Callable[[Sequence[Message]], ScriptReply],
        *,
        name: str = "scripted",
        input_tokens: int = 50,
        output_tokens_per_char: float = 0.25,
        stream_chunk_chars: int = 12,
        stream_delay_s: float = 0.0,
    ) -> None:
        self.name = name
        self._fn: Callable[[Sequence[Message]], ScriptReply] | None = None
        self._items: list[ScriptItem] = []
        if callable(script):
            self._fn = script
        else:
            # Dicts are serialised once here, not on every call.
            self._items = [
                json.dumps(item, ensure_ascii=False) if isinstance(item, Mapping) else item
                for item in script
            ]
        self._pos: dict[str, int] = {}
        """Per run: the next reply's index, as far as this object has given replies."""
        self.input_tokens = input_tokens
        self.output_tokens_per_char = output_tokens_per_char
        self.stream_chunk_chars = max(1, stream_chunk_chars)
        self.stream_delay_s = stream_delay_s
        self.requests: list[CompletionRequest] = []
        """Every request received, for tests to inspect."""

    @property
    def remaining(self) -> int:
        """Scripted replies the run furthest along has not used yet (0 for a callable
        script)."""
        return len(self._items) - max(self._pos.values(), default=0)

    async def complete_structured(self, request: CompletionRequest) -> Completion:
        """Return the next scripted reply, validated against ``request.schema``."""
        started = time.perf_counter()
        self.requests.append(request)
        # The run's position: what its transcript records of this model, or further when
        # this object gave replies the run has not recorded (a crash, a direct call).
        pos = max(self._pos.get(request.run_id, 0), request.prior_calls.get(self.name, 0))
        item = self._next(pos)
        self._pos[request.run_id] = pos + 1
        reply: Any = item(request.messages) if callable(item) else item
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, BaseException):
            if isinstance(reply, AgentcoreError):
                raise reply
            err = ModelError(f"{self.name}: {type(reply).__name__}: {reply}", model=self.name)
            raise err from reply
        text = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        if request.on_partial is not None:
            await self._stream(text, request.on_partial)
        action, error = parse_reply(request, text)
        usage = Usage(
            input_tokens=self.input_tokens,
            output_tokens=max(1, math.ceil(len(text) * self.output_tokens_per_char)),
        )
        return Completion(
            text=text,
            action=action,
            error=error,
            usage=usage,
            model=self.name,
            finish_reason="stop",
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    async def _stream(self, text: str, on_partial: Callable[[PartialAction], None]) -> None:
        last: PartialAction | None = None
        for end in range(
            self.stream_chunk_chars, len(text) + self.stream_chunk_chars, self.stream_chunk_chars
        ):
            if self.stream_delay_s:
                await asyncio.sleep(self.stream_delay_s)
            partial = partial_action(text[:end])
            if partial is not None and partial != last:
                on_partial(partial)
                last = partial

    def _next(self, pos: int) -> ScriptItem:
        if self._fn is not None:
            return self._fn
        if pos >= len(self._items):
            raise ScriptExhaustedError(
                f"{self.name}: the script has {len(self._items)} replies and this run used "
                "all of them; add more replies or a finish action.",
                model=self.name,
            )
        return self._items[pos]
