"""The one seam between the loop and a model: ``complete_structured(request) -> Completion``.

An adapter turns a :class:`CompletionRequest` (the action schema, the system text and the
provider-neutral messages) into a :class:`Completion`. It knows nothing of governance,
budgets or stores. Every adapter validates the reply through ``request.schema.parse``
(use :func:`parse_reply`), so scripted and real replies take exactly one validation path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, cast, runtime_checkable

from pydantic import JsonValue
from pydantic_core import from_json

from agentcore.contracts import ActionSchema, NextAction, Usage
from agentcore.contracts._schema import load_action
from agentcore.contracts.errors import InvalidActionError

__all__ = [
    "Completion",
    "CompletionRequest",
    "Message",
    "Mode",
    "ModelAdapter",
    "PartialAction",
    "parse_reply",
    "partial_action",
]


Mode = Literal["structured", "native"]
"""How an adapter asks for the action: the structured contract or native tool calling."""


_FROM_CONTENT: object = object()
"""``Message.action`` not parsed yet: the content is the action's canonical JSON."""


class Message:
    """One provider-neutral message. The system text travels separately.

    Structured adapters send ``role`` and ``content`` only. Native tool-calling adapters
    also use ``call_id`` and ``action`` to render our events as the provider's tool calls
    and tool results, with our call ids.

    Messages are immutable and compare by their fields, like a frozen dataclass.

    Attributes:
        role: ``user`` (task, observations, notes from the runner) or ``assistant``
            (the model's earlier replies, as canonical JSON).
        content: the text.
        call_id: our call id (``c3``) when the message is an action (assistant) or says
            what became of one (user: its result, a refusal, an approval).
        action: the action, on an assistant message that is one.
    """

    __slots__ = ("_action", "call_id", "content", "role")
    __match_args__ = ("role", "content", "call_id", "action")

    role: Literal["user", "assistant"]
    content: str
    call_id: str | None

    def __init__(
        self,
        role: Literal["user", "assistant"],
        content: str,
        call_id: str | None = None,
        action: NextAction | None = None,
    ) -> None:
        _set = object.__setattr__
        _set(self, "role", role)
        _set(self, "content", content)
        _set(self, "call_id", call_id)
        _set(self, "_action", action)

    @classmethod
    def of_stored_action(cls, content: str, call_id: str) -> Message:
        """An assistant message whose ``content`` is an action's canonical JSON (as
        rendered before); ``action`` is parsed from it when first read, so restoring a
        long history from a snapshot does not validate every action up front."""
        message = cls("assistant", content, call_id)
        object.__setattr__(message, "_action", _FROM_CONTENT)
        return message

    @property
    def action(self) -> NextAction | None:
        """The action, on an assistant message that is one."""
        found = self._action
        if found is _FROM_CONTENT:
            found = load_action(self.content)
            object.__setattr__(self, "_action", found)
        return cast("NextAction | None", found)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Message is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Message is immutable: cannot delete {name!r}")

    def _key(self) -> tuple[object, ...]:
        return (self.role, self.content, self.call_id, self.action)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Message(role={self.role!r}, content={self.content!r}, "
            f"call_id={self.call_id!r}, action={self.action!r})"
        )


@dataclass(frozen=True, slots=True)
class PartialAction:
    """What is known of an action while it is still being generated (streaming adapters).

    Attributes:
        type: the action type once known.
        tool: the tool name once known.
        thought: the thought so far.
        answer: a ``finish`` action's answer so far, as partial JSON (a string cut short,
            an object missing its last keys); ``None`` until it begins.
    """

    type: str | None = None
    tool: str | None = None
    thought: str = ""
    answer: JsonValue = None


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """Everything an adapter needs for one structured completion.

    Attributes:
        schema: the action union offered at this step; validate replies with it.
        system: the system text (contract, tools in scope, examples). Identical across the
            steps of a run, so provider prompt caches hit.
        native_system: the system text for native tool calling, where the tools are offered
            as functions and not listed again; ``None``: an adapter in native mode uses
            ``system``.
        messages: the conversation rendered from the transcript, oldest first.
        run_id: the run this call belongs to (for logs and provider metadata).
        step: the step number (1-based).
        max_output_tokens: a cap on the reply's tokens, or ``None`` for the adapter default.
        deadline: a wall-clock time (``time.time()`` seconds) after which waiting is pointless.
        on_partial: called with what is known of the action while it streams, if the
            adapter streams; never given a partial action to execute.
        prior_calls: how many times each model (by route name) was already asked in this
            run, from its transcript (``model_called`` events): where a run resumed in
            another process stands. A scripted model's position in its script.
    """

    schema: ActionSchema
    system: str
    messages: Sequence[Message]
    run_id: str = ""
    step: int = 0
    max_output_tokens: int | None = None
    deadline: float | None = None
    on_partial: Callable[[PartialAction], None] | None = field(default=None, compare=False)
    prior_calls: Mapping[str, int] = field(default_factory=dict[str, int])
    native_system: str | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    """The outcome of one ``complete_structured`` call.

    A reply that does not validate is not an exception: ``action`` is ``None`` and ``error``
    says why (the runner re-asks with that text, and counts the tokens).

    Attributes:
        text: the raw reply text.
        action: the validated, normalised action, or ``None``.
        error: why the reply is not a valid action, or ``None``.
        usage: tokens (and cost) of all attempts this call made.
        model: the route entry that answered, e.g. ``"openai/gpt-4.1-mini"``.
        attempts: HTTP requests made (retries included).
        finish_reason: the provider's stop reason, as reported.
        response_id: the provider's response id (kept for audit, never needed to render).
        latency_ms: wall time of the call.
        dropped_calls: see below.
    """

    text: str
    action: NextAction | None
    error: InvalidActionError | None
    usage: Usage
    model: str
    attempts: int = 1
    finish_reason: str | None = None
    response_id: str | None = None
    latency_ms: float = 0.0
    mode: Mode = "structured"
    """How the action was asked for: the structured contract, or native tool calling."""
    dropped_calls: tuple[str, ...] = ()
    """Native mode: further tool calls of the same reply, not executed (one action per
    step), as ``name(arguments JSON)``."""


@runtime_checkable
class ModelAdapter(Protocol):
    """What the loop needs of a model. Implement this to add a provider.

    Attributes:
        name: the route entry this adapter answers for (``"provider/model"``).
    """

    name: str

    async def complete_structured(self, request: CompletionRequest) -> Completion:
        """Ask for one next action.

        Raises:
            ModelError: the provider could not answer after the adapter's retries (or
                refused, or truncated twice); ``retryable`` says if another model may help.
        """
        ...


def partial_action(text: str) -> PartialAction | None:
    """What is known of an action from the start of its JSON text (for streaming adapters).

    Uses pydantic's partial JSON parsing. Understands the wrapped form (``{"action": ...}``)
    and a grouped tool choice (``{"call": {"tool": ...}}``). The type and tool name are
    reported only once their strings are complete; the thought grows as it streams.
    Returns ``None`` while nothing is known yet (or the text is not JSON).
    """
    try:
        complete: object = from_json(text, allow_partial=True)
        growing: object = from_json(text, allow_partial="trailing-strings")
    except ValueError:
        return None
    action, live = _inner(complete), _inner(growing)
    if action is None or live is None:
        return None
    kind, tool, thought = action.get("type"), action.get("tool"), live.get("thought")
    answer = _partial_answer(live) if kind == "finish" else None
    call = action.get("call")
    if tool is None and isinstance(call, dict):
        tool = cast("dict[str, object]", call).get("tool")
    return PartialAction(
        type=kind if isinstance(kind, str) else None,
        tool=tool if isinstance(tool, str) else None,
        thought=thought if isinstance(thought, str) else "",
        answer=answer,
    )


def _partial_answer(live: dict[str, object]) -> JsonValue:
    """A ``finish``'s answer so far: its ``answer``, or the start of the JSON in the generic
    form's ``answer_json`` string (a typed output), read as partial JSON."""
    if "answer" in live:
        return cast("JsonValue", live["answer"])
    text = live.get("answer_json")
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return cast("JsonValue", from_json(text, allow_partial="trailing-strings"))
    except ValueError:
        return None


def _inner(value: object) -> dict[str, object] | None:
    if not isinstance(value, dict):
        return None
    obj = cast("dict[str, object]", value)
    wrapped = obj.get("action")
    if isinstance(wrapped, dict) and "type" not in obj:
        return cast("dict[str, object]", wrapped)
    return obj


def parse_reply(
    request: CompletionRequest, text: str
) -> tuple[NextAction | None, InvalidActionError | None]:
    """Validate ``text`` against the request's schema: the one path every adapter uses."""
    try:
        return request.schema.parse(text), None
    except InvalidActionError as exc:
        return None, exc
