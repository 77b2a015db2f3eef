"""Snapshots of a run: its folded state and its rendered history, kept beside the events.

A resume, a confirmation or a worker's shift reads the latest snapshot and only the events
after it, instead of decoding and folding the whole transcript. A snapshot is a cache of
what the events already say, never a source of truth:

- it is taken at seq ``S`` by the process that owns the run (under its lease), and the
  store binds it to the chain digest of event ``S`` (and signs it with the chain key, when
  one is set); a snapshot whose digest no longer matches the events (they were truncated,
  rewritten or tampered with) or whose signature fails is ignored;
- it carries a tag naming the code that produced it (the fold and the renderer, down to
  their source bytes): after an upgrade, older snapshots are ignored and rebuilt;
- any problem reading it (a bad body, chunks that do not follow each other) means the
  run is loaded from its events, exactly as without snapshots, and the next snapshot
  replaces it.

The history is kept in chunks: each snapshot adds the messages rendered since the last
one, so a long run's snapshots hold its history once, not once per snapshot.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, Final, cast

from agentcore.contracts import Usage, dump_action
from agentcore.contracts._schema import load_action
from agentcore.contracts.errors import ConfigurationError

from ._render import Renderer
from ._state import OpenCall, RunState, RunStatus, Turn, TurnMark
from .events import Charge, Event, decode_event, encode_event_body
from .policy import Budget, Policy
from .rules import PastCall, freeze, thaw
from .stores._snapshots import Snapshot

__all__ = [
    "EVERY_VARIABLE",
    "SNAPSHOT_EVERY",
    "UNUSABLE",
    "dump_state",
    "load_state",
    "restore",
    "snapshot_interval",
    "snapshot_tag",
]

SNAPSHOT_EVERY: Final = 512
"""Events between two snapshots of a run (``Agent(snapshot_every=...)``): about 100 tool
steps. A resume reads at most this many events, plus the snapshots."""

EVERY_VARIABLE: Final = "AGENTCORE_SNAPSHOT_EVERY"


def snapshot_interval(every: int | None) -> int:
    """``every``, else ``$AGENTCORE_SNAPSHOT_EVERY``, else :data:`SNAPSHOT_EVERY`.

    Raises:
        ConfigurationError: not a whole number >= 0.
    """
    if every is None:
        text = os.environ.get(EVERY_VARIABLE, "").strip()
        if not text:
            return SNAPSHOT_EVERY
        try:
            every = int(text)
        except ValueError:
            raise ConfigurationError(
                f"{EVERY_VARIABLE}={text!r} is not a whole number of events (0: no snapshots)"
            ) from None
        where = EVERY_VARIABLE
    else:
        where = "snapshot_every"
    if isinstance(every, bool) or every < 0:
        raise ConfigurationError(f"{where} must be a whole number >= 0, got {every!r}")
    return every


@functools.cache
def snapshot_tag() -> str:
    """Names the fold and the renderer this process runs: the sha256 of their modules'
    source (and of this one). A snapshot with another tag is not used. Where a module's
    source cannot be read (a frozen or zipped install), its name and agentcore's version
    stand in for it."""
    from ._version import __version__

    h = hashlib.sha256(b"agentcore.snapshot.v1\x00")
    for module in (RunState, Renderer, dump_state):
        path = sys.modules[module.__module__].__file__
        try:
            source = Path(path).read_bytes() if path else None
        except OSError:
            source = None
        h.update(source if source is not None else f"{module.__module__}@{__version__}".encode())
    return "s1:" + h.hexdigest()[:32]


# -- the folded state as JSON ------------------------------------------------------------------

Codec = tuple[Callable[[Any], Any], Callable[[str, Any], Any]]  # Any: JSON values
"""(encode a field's value to JSON, decode it back given the run id)."""


_NONE = type(None)
_JSON = (str, int, float, bool, _NONE, list, dict)


def _check(value: object, kinds: tuple[type, ...]) -> None:
    """TypeError unless ``value``'s exact type is one of ``kinds`` (a bool is no int)."""
    if type(value) not in kinds:
        wanted = " or ".join("null" if k is _NONE else k.__name__ for k in kinds)
        raise TypeError(f"expected {wanted}, got {type(value).__name__}")


def _plain(*kinds: type) -> Codec:
    """A JSON value of one of ``kinds``, kept as it is."""

    def decode(_run: str, v: object) -> object:
        _check(v, kinds)
        return v

    return (lambda v: v, decode)


def _dict_of(*kinds: type) -> Codec:
    """A JSON object with string keys and values of ``kinds`` (copied)."""

    def decode(_run: str, v: object) -> dict[str, object]:
        _check(v, (dict,))
        found = cast("dict[str, object]", v)
        for key, value in found.items():
            _check(key, (str,))
            _check(value, kinds)
        return dict(found)

    return (dict, decode)


def _event_codec() -> Codec:
    def encode(ev: Event | None) -> list[Any] | None:  # Any: [seq, body]
        return None if ev is None else [ev.seq, encode_event_body(ev)]

    def decode(run_id: str, v: object) -> Event | None:
        if v is None:
            return None
        _check(v, (list,))
        seq, body = cast("list[object]", v)  # ValueError unless two
        _check(seq, (int,))
        _check(body, (str,))
        return decode_event(run_id, cast("int", seq), cast("str", body))

    return (encode, decode)


def _events_codec() -> Codec:
    one_enc, one_dec = _event_codec()

    def decode(run_id: str, v: object) -> list[Event]:
        _check(v, (list,))
        return [one_dec(run_id, x) for x in cast("list[object]", v)]

    return (lambda evs: [one_enc(ev) for ev in evs], decode)


def _tuple() -> Codec:
    def decode(_run: str, v: object) -> tuple[str, ...]:
        _check(v, (list,))
        items = cast("list[object]", v)
        for x in items:
            _check(x, (str,))
        return tuple(str(x) for x in items)

    return (list, decode)


def _counter() -> Codec:
    counts = _dict_of(int)[1]

    def decode(run: str, v: object) -> Counter[str]:
        return Counter[str](cast("dict[str, int]", counts(run, v)))

    return (dict, decode)


def _decode_reads(_run: str, v: object) -> list[tuple[int, str, str]]:
    _check(v, (list,))
    reads: list[tuple[int, str, str]] = []
    for item in cast("list[object]", v):
        _check(item, (list,))
        end, call_id, tool = cast("list[object]", item)  # ValueError unless three
        _check(end, (int,))
        _check(call_id, (str,))
        _check(tool, (str,))
        reads.append((cast("int", end), cast("str", call_id), cast("str", tool)))
    return reads


def _decode_members(run_id: str, v: object) -> list[OpenCall]:
    _check(v, (list,))
    members = [_decode_call(run_id, cast("Mapping[str, Any]", m)) for m in cast("list[Any]", v)]
    if any(m is None for m in members):
        raise ValueError("a batch call is null")
    return [m for m in members if m is not None]


_CALL_CODECS: Final[Mapping[str, Codec]] = {
    "step": _plain(int),
    "call_id": _plain(str),
    "action": (dump_action, lambda _run, v: load_action(v)),
    "decision": _event_codec(),
    "confirmation": _event_codec(),
    "approvals": _events_codec(),
    "expiry": _event_codec(),
    "started": _event_codec(),
    "finished": _event_codec(),
    "resolution": _event_codec(),
    "put_to_a_person": _plain(bool),
    "rerun_authorised": _plain(bool),
    "members": (
        lambda calls: [_encode_call(c) for c in calls],
        _decode_members,
    ),
}


def _encode_call(call: OpenCall | None) -> dict[str, Any] | None:  # Any: JSON values
    if call is None:
        return None
    return {name: enc(getattr(call, name)) for name, (enc, _) in _CALL_CODECS.items()}


def _decode_call(run_id: str, v: Mapping[str, Any] | None) -> OpenCall | None:  # Any: JSON
    if v is None:
        return None
    kwargs: dict[str, Any] = {  # Any: each field's own type, checked by the codecs
        name: dec(run_id, v[name])
        for name, (_, dec) in _CALL_CODECS.items()
        if name != "members" or name in v  # a snapshot from before batches has none
    }
    return OpenCall(**kwargs)


def _usage(v: object) -> Usage:
    _check(v, (list,))
    tokens = cast("list[object]", v)
    if len(tokens) != 4:
        raise ValueError(f"usage has {len(tokens)} fields, not 4")
    for n in tokens[:3]:
        _check(n, (int,))
    _check(tokens[3], (float, int, _NONE))
    return Usage(*cast("tuple[int, int, int, float | None]", tuple(tokens)))


_json_object = _dict_of(*_JSON)[1]
_text = _plain(str)[1]


def _encode_usage(u: Usage) -> list[Any]:  # Any: JSON numbers
    return [u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cost]


def _decode_turns(_run: str, v: object) -> list[Turn]:
    _check(v, (list,))
    turns: list[Turn] = []
    for item in cast("list[object]", v):
        _check(item, (list,))
        number, message, status, answer, reason, seq = cast("list[object]", item)
        _check(number, (int,))
        _check(message, (str,))
        _check(status, (str,))
        _check(answer, (str, _NONE))
        _check(reason, (str, _NONE))
        _check(seq, (int,))
        turns.append(
            Turn(
                cast("int", number),
                cast("str", message),
                RunStatus(cast("str", status)),
                cast("str | None", answer),
                cast("str | None", reason),
                cast("int", seq),
            )
        )
    return turns


def _encode_mark(m: TurnMark) -> list[Any]:  # Any: JSON values
    return [
        m.steps,
        m.tool_calls,
        m.child_steps,
        m.child_tool_calls,
        dict(m.per_tool),
        _encode_usage(m.usage),
    ]


def _decode_mark(run: str, v: object) -> TurnMark:
    _check(v, (list,))
    steps, calls, child_steps, child_calls, per_tool, usage = cast("list[object]", v)
    for n in (steps, calls, child_steps, child_calls):
        _check(n, (int,))
    counts = cast("dict[str, int]", _dict_of(int)[1](run, per_tool))
    return TurnMark(
        cast("int", steps),
        cast("int", calls),
        cast("int", child_steps),
        cast("int", child_calls),
        counts,
        _usage(usage),
    )


def _decode_charged(_run: str, v: object) -> dict[str, list[Charge]]:
    _check(v, (dict,))
    out: dict[str, list[Charge]] = {}
    for call_id, charges in cast("dict[object, object]", v).items():
        _check(call_id, (str,))
        _check(charges, (list,))
        out[cast("str", call_id)] = [
            Charge.model_validate(c) for c in cast("list[object]", charges)
        ]
    return out


def _encode_past(calls: list[PastCall]) -> list[list[Any]]:  # Any: JSON values
    return [
        [
            c.call_id,
            c.step,
            c.turn,
            c.tool,
            thaw(c.args),
            c.effect,
            list(c.approved_by),
            c.ok,
            c.error,
        ]
        for c in calls
    ]


def _decode_past(run: str, v: object) -> list[PastCall]:
    _check(v, (list,))
    calls: list[PastCall] = []
    for item in cast("list[object]", v):
        _check(item, (list,))
        call_id, step, turn, tool, args, effect, approved_by, ok, error = cast(
            "list[object]", item
        )  # ValueError unless nine
        _check(call_id, (str,))
        _check(step, (int,))
        _check(turn, (int,))
        _check(tool, (str,))
        _check(effect, (str, _NONE))
        _check(ok, (bool, _NONE))
        _check(error, (str, _NONE))
        calls.append(
            PastCall(
                cast("str", call_id),
                cast("int", step),
                cast("int", turn),
                cast("str", tool),
                freeze(_json_object(run, args)),
                cast("str | None", effect),
                _tuple()[1](run, approved_by),
                cast("bool | None", ok),
                cast("str | None", error),
            )
        )
    return calls


def _decode_budget(run: str, v: object) -> Budget:
    return Budget.from_json(_json_object(run, v))


_STATE_CODECS: Final[Mapping[str, Codec]] = {
    "task": _plain(str),
    "scope": _tuple(),
    "budget": (Budget.to_json, _decode_budget),
    "policy": (Policy.to_json, lambda run, v: Policy.from_json(_json_object(run, v))),
    "route": _tuple(),
    "contract": _dict_of(str),
    "tools": _dict_of(dict),
    "status": (lambda s: s.value, lambda run, v: RunStatus(_text(run, v))),
    "answer": _plain(str, _NONE),
    "reason": _plain(str, _NONE),
    "steps": _plain(int),
    "tool_calls": _plain(int),
    "child_steps": _plain(int),
    "child_tool_calls": _plain(int),
    "per_tool": _counter(),
    "usage": (_encode_usage, lambda _run, v: _usage(v)),
    "model_calls": _plain(int),
    "calls_by_model": _dict_of(int),
    "last_call_tokens": _plain(int),
    "plan_approved": _plain(bool),
    "person_plan_approved": _plain(bool),
    "call": (_encode_call, _decode_call),
    "reasks": _plain(int),
    "failures": _counter(),
    "next_seq": _plain(int),
    "started_at": _plain(float, int),
    "updated_at": _plain(float, int),
    "recoveries": _plain(int),
    "context_step": _plain(int),
    "tenant": _plain(str, _NONE),
    "metadata": _dict_of(*_JSON),
    "trusted_text": _plain(str),
    "untrusted_text": _plain(str),
    "untrusted_reads": (lambda reads: [list(r) for r in reads], _decode_reads),
    "confirmed_plan": _plain(str, _NONE),
    "compensating": _plain(bool),
    "output_hash": _plain(str, _NONE),
    "turns": (
        lambda turns: [
            [t.number, t.message, t.status.value, t.answer, t.reason, t.seq] for t in turns
        ],
        _decode_turns,
    ),
    "turn_mark": (_encode_mark, _decode_mark),
    "turn_budget": (Budget.to_json, _decode_budget),
    "conversation_budget": (
        lambda b: None if b is None else b.to_json(),
        lambda run, v: None if v is None else _decode_budget(run, v),
    ),
    "reply_keys": _dict_of(int),
    "charged": (
        lambda charged: {k: [c.model_dump(mode="json") for c in v] for k, v in charged.items()},
        _decode_charged,
    ),
    "past_calls": (_encode_past, _decode_past),
}


@functools.cache
def _check_codecs() -> None:
    """Every field of the fold has a codec: a field added to RunState or OpenCall without
    one fails here (and in the tests), never silently drops state."""
    checks = ((RunState, _STATE_CODECS, {"run_id"}), (OpenCall, _CALL_CODECS, set[str]()))
    for cls, codecs, skip in checks:
        names = {f.name for f in fields(cls)} - skip
        if names != set(codecs):
            raise RuntimeError(
                f"snapshot codecs of {cls.__name__} are out of date: "
                f"missing {sorted(names - set(codecs))}, extra {sorted(set(codecs) - names)}"
            )


def dump_state(state: RunState) -> str:
    """The folded state as compact JSON (the run id is the row's)."""
    _check_codecs()
    data = {name: enc(getattr(state, name)) for name, (enc, _) in _STATE_CODECS.items()}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def load_state(run_id: str, text: str) -> RunState:
    """The state :func:`dump_state` wrote.

    Raises:
        One of :data:`UNUSABLE`: ``text`` is not such a state.
    """
    _check_codecs()
    data: object = json.loads(text)
    if not isinstance(data, dict):
        raise TypeError("a snapshot's state is not a JSON object")
    values = cast("dict[str, Any]", data)  # Any: JSON values
    kwargs: dict[str, Any] = {  # Any: each field's own type, checked by the codecs
        name: dec(run_id, values[name]) for name, (_, dec) in _STATE_CODECS.items()
    }
    return RunState(run_id, **kwargs)


def restore(run_id: str, snaps: Sequence[Snapshot]) -> tuple[RunState, Renderer]:
    """The state and the renderer a run's snapshots (a store's usable rows, in seq order)
    hold, as of the last one's seq.

    Raises:
        One of :data:`UNUSABLE`: the snapshots cannot be used (written by other code, not
            consecutive, not in the format).
    """
    if not snaps:
        raise ValueError("the run has no snapshot")
    if any(s.tag != snapshot_tag() for s in snaps):
        raise ValueError("it was written by another version of agentcore")
    last = snaps[-1]
    state = load_state(run_id, last.state)
    renderer = Renderer.restored(state.policy.max_observation_chars, [s.history for s in snaps])
    if not state.next_seq == renderer.rendered == last.seq + 1:
        raise ValueError(
            f"its state ends at seq {state.next_seq - 1} and its history at "
            f"{renderer.rendered - 1}, not at {last.seq}"
        )
    return state, renderer


UNUSABLE = (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError)
"""What :func:`restore` raises for snapshots it cannot use."""
