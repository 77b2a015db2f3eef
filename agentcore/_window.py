"""The window rule: what a request shows of older steps when the whole history would not
fit the run's per-request budget (``Budget.max_request_tokens``).

The rule, a pure function of the rendered messages and the recorded budget (so a resumed,
replayed or re-routed run sends the same request, byte for byte, and the transcript keeps
everything whole):

- A request's size is estimated from its characters: the system text and every message,
  at :data:`CHARS_PER_TOKEN` characters a token. No tokenizer is used, so the estimate is
  the same for every provider and every version of a tokenizer.
- Over the budget, first the results of older tool calls are shown as a short stub that
  says the result was elided and how long it was: every result of a step before ``cut``.
- If the request still does not fit, older steps are left out whole (their actions,
  results, notes and the context added at them), replaced by one line saying which steps
  are not shown. The task (and what came before the first step) is always shown, and so
  is the conversation itself: the user's later messages (``User: ...``) and the answers
  that ended their turns (``finish`` actions) in the steps left out.
- ``cut`` and the first step shown are multiples of :data:`BLOCK_STEPS`, unless only a
  cut right before the last :data:`KEEP_LAST_STEPS` steps fits; those steps are always
  shown whole. When the request does not fit even so, :func:`fit` says so, and the run
  stops as ``budget_exhausted`` rather than send a request the model cannot take.

The window is chosen once a block: at the request that starts a block of ``BLOCK_STEPS``
steps, from the history as it was then, to fill at most :data:`HEADROOM` of the budget, and
kept for the block's other requests (chosen again sooner only when the block's own steps
outgrow it). Between two moves each request starts with the one before it, so a provider's
prompt cache keeps working.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agentcore.adapters import Message
from agentcore.contracts import FinishAction

__all__ = [
    "BLOCK_STEPS",
    "CHARS_PER_TOKEN",
    "HEADROOM",
    "KEEP_LAST_STEPS",
    "USER_PREFIX",
    "Fitted",
    "estimate",
    "fit",
]

CHARS_PER_TOKEN: Final = 3
"""Characters a token, for the estimate: on the requests of ``bench/tokens`` (English and
JSON), o200k counted 3.7-3.8 characters a token, so the estimate errs high by about a
fifth, leaving room for text that tokenizes worse."""

BLOCK_STEPS: Final = 8
"""How many steps' results are elided at a time."""

KEEP_LAST_STEPS: Final = 2
"""The results of this many latest steps are always shown whole."""

HEADROOM: Final = 0.6
"""The share of the budget the window leaves the history when it moves, so the steps of
the next block fit without moving it again."""

USER_PREFIX: Final = "User: "
"""How the user's next message (a new turn: ``user_message``) begins in the model's view
(``_render``); the window keeps such messages when it leaves older steps out."""

_RESULT: Final = re.compile(r"^\[c(\d+)(?:\.\d+)?\] (\S+) returned: ")
"""A tool result as the model's view renders it (``_render.Renderer``): ``[c12] tool
returned: ...`` (``c12.3`` for a call of a batch)."""


@dataclass(frozen=True, slots=True)
class Fitted:
    """The messages of a request after the window rule.

    Attributes:
        messages: the messages to send.
        cut: results of steps before this one are elided (0: none is).
        dropped: steps before this one are not shown at all (0: none is).
        tokens: the request's estimated size, system text included (0 with no budget).
        fits: whether that is within the budget.
    """

    messages: tuple[Message, ...]
    cut: int
    dropped: int
    tokens: int
    fits: bool


def estimate(system: str, messages: Sequence[Message]) -> int:
    """A request's size in tokens, estimated from its characters."""
    chars = len(system) + sum(len(m.content) for m in messages)
    return -(-chars // CHARS_PER_TOKEN)


def _step(message: Message) -> int | None:
    """The step a message belongs to, from its call id (``c12``, ``c12.3``)."""
    cid = message.call_id
    if cid is None or not cid.startswith("c"):
        return None
    head = cid[1:].partition(".")[0]
    return int(head) if head.isdigit() else None


def _stub(message: Message, step: int, tool: str, prefix_end: int) -> Message:
    elided = len(message.content) - prefix_end
    text = (
        f"{message.content[:prefix_end]}(elided: {elided} characters of step {step}'s result, "
        f"to keep the request within its budget; call {tool} again if you need it)"
    )
    return Message(message.role, text, call_id=message.call_id)


def _elide(whole: tuple[Message, ...], cut: int) -> tuple[Message, ...]:
    shown = list(whole)
    for i, m in enumerate(whole):
        found = _RESULT.match(m.content) if m.role == "user" else None
        if found is not None and int(found.group(1)) < cut:
            shown[i] = _stub(m, int(found.group(1)), found.group(2), found.end())
    return tuple(shown)


def _said(message: Message) -> bool:
    """A message of the conversation itself: the user's later message, or an answer that
    ended a turn."""
    if message.role == "user":
        return message.call_id is None and message.content.startswith(USER_PREFIX)
    return isinstance(message.action, FinishAction)


def _drop(messages: tuple[Message, ...], before: int) -> tuple[Message, ...]:
    if before <= 1:
        return messages
    steps = [_step(m) for m in messages]
    first = next(i for i, s in enumerate(steps) if s is not None)
    keep = next(i for i, s in enumerate(steps) if s is not None and s >= before)
    said = [m for m in messages[first:keep] if _said(m)]
    kept = "; the user's messages and your answers in them are" if said else ""
    note = Message(
        "user",
        f"(Steps 1 to {before - 1} are not shown, to keep the request within its budget{kept}; "
        "the run's transcript keeps them.)",
    )
    return (*messages[:first], note, *said, *messages[keep:])


def _search(system: str, whole: tuple[Message, ...], target: int) -> Fitted:
    """The least window (fewest results elided, then fewest steps left out, each by whole
    blocks) that brings ``whole`` within ``target`` tokens, or the most there is."""
    steps = [s for s in map(_step, whole) if s is not None]
    limit = (max(steps) - KEEP_LAST_STEPS + 1) if steps else 0  # from here on: whole
    cuts = [*range(BLOCK_STEPS, limit + 1, BLOCK_STEPS)]
    if limit > 0 and limit % BLOCK_STEPS:
        cuts.append(limit)  # the last resort: all but the latest steps, off the block grid
    cut, shown, tokens = 0, whole, estimate(system, whole)
    for cut in cuts:
        shown = _elide(whole, cut)
        tokens = estimate(system, shown)
        if tokens <= target:
            return Fitted(shown, cut, 0, tokens, True)
    dropped, elided = 0, shown
    for dropped in cuts:
        shown = _drop(elided, dropped)
        tokens = estimate(system, shown)
        if tokens <= target:
            return Fitted(shown, cut, dropped, tokens, True)
    return Fitted(shown, cut, dropped, tokens, False)


def fit(system: str, messages: Sequence[Message], max_tokens: int | None) -> Fitted:
    """``messages`` with the window rule applied for a request of at most ``max_tokens``
    (``None``: no budget, nothing elided)."""
    whole = tuple(messages)
    if max_tokens is None:  # no budget: not even the estimate (it reads every message)
        return Fitted(whole, 0, 0, 0, True)
    tokens = estimate(system, whole)
    if tokens <= max_tokens:
        return Fitted(whole, 0, 0, tokens, True)
    steps = [_step(m) for m in whole]
    last = max((s for s in steps if s is not None), default=0)
    start = last - last % BLOCK_STEPS  # the window is chosen as the block began
    if start > 0:
        begun = next(i for i, s in enumerate(steps) if s is not None and s >= start)
        chosen = _search(system, whole[:begun], int(max_tokens * HEADROOM))
        if chosen.fits:
            shown = _drop(_elide(whole, chosen.cut), chosen.dropped)
            tokens = estimate(system, shown)
            if tokens <= max_tokens:
                return Fitted(shown, chosen.cut, chosen.dropped, tokens, True)
    return _search(system, whole, max_tokens)
