"""What a store may write: only bodies it can read back as the same events.

An event whose values prove it reads back (``_proof.reads_back``) is not decoded; any
other is decoded and compared.

Every store calls :func:`encode_batch` before writing, so no value (a lone surrogate, a
30,000-digit integer, a structure nested past the decoder's limit, NaN) can produce a row
that ``load`` then rejects: such an event is refused with a :class:`StoreError` naming the
run and the seq, and nothing of its batch is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import ValidationError

from agentcore.contracts.errors import StoreError
from agentcore.events import Event, decode_event, decode_events, encode_event_body

from ._proof import reads_back

__all__ = ["DECODE_CHUNK", "DECODE_ERRORS", "decode_rows", "encode_batch", "printable", "run_label"]

DECODE_ERRORS = (ValueError, TypeError, RecursionError, OverflowError)
"""What encoding or decoding an event may raise: pydantic's ValidationError and
PydanticSerializationError and UnicodeError are ValueErrors; deep values can recurse."""


def run_label(run_id: str) -> str:
    """The run id as it appears in messages: quoted and escaped, so any id prints."""
    return repr(run_id)


def printable(text: str) -> str:
    """``text`` with anything UTF-8 cannot carry (lone surrogates) escaped, for messages."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def encode_batch(run_id: str, events: Sequence[Event]) -> list[str]:
    """Each event's stored body, checked to decode back to an equal event.

    Raises:
        StoreError: the run id or an event cannot be stored faithfully (names the run and
            the seq of the first such event).
    """
    try:
        run_id.encode()
    except UnicodeEncodeError as exc:
        raise StoreError(
            f"run {run_label(run_id)}: cannot store seq {events[0].seq if events else 0}: the "
            f"run id is not valid text ({exc.reason}); nothing was written"
        ) from exc
    bodies: list[str] = []
    for event in events:
        try:
            body = encode_event_body(event)
            same = reads_back(event) or decode_event(run_id, event.seq, body) == event
        except DECODE_ERRORS as exc:
            raise _refused(run_id, event, _describe(exc)) from exc
        if not same:
            raise _refused(run_id, event, "it does not read back as the same event (NaN?)")
        bodies.append(body)
    return bodies


def _refused(run_id: str, event: Event, why: str) -> StoreError:
    return StoreError(
        f"run {run_label(run_id)}: cannot store the {event.type} event at seq {event.seq}: "
        f"{why}; nothing was written"
    )


def _describe(exc: BaseException) -> str:
    """The error in one printable line: pydantic's first problems, else the message."""
    if isinstance(exc, ValidationError):
        text = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'body'}: {err['msg']}" for err in exc.errors()[:3]
        )
    else:
        text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {printable(text)[:300]}"


Row = tuple[object, int | None, str | None, str | bytes | None]
"""One row of a store's load query: (the run's next seq, seq, type, body); the event
columns are NULL for a run with no events after the requested seq."""


DECODE_CHUNK = 1000
"""Rows decoded per validation by :func:`decode_rows`."""


def decode_rows(
    run_id: str,
    after: int,
    next_seq: int,
    rows: Sequence[Row],
    corrupted: Callable[[str, int, str], StoreError],
) -> list[Event]:
    """The events of a load query's rows, checked: consecutive seqs from ``after + 1`` up to
    ``next_seq``, bodies that decode, a type column that agrees with the body. Any break is
    reported by ``corrupted(run_id, seq, why)``, never guessed at.

    Bodies are validated :data:`DECODE_CHUNK` at a time (``decode_events``); a chunk that
    does not validate whole is decoded row by row, which names the first bad row."""
    out: list[Event] = []
    expected = max(after + 1, 0)
    for start in range(0, len(rows), DECODE_CHUNK):
        chunk = rows[start : start + DECODE_CHUNK]
        events = _decode_chunk(run_id, expected, chunk)
        if events is None:
            return _decode_each(run_id, expected, next_seq, rows[start:], corrupted, out)
        out.extend(events)
        expected += len(events)
        if len(events) < len(chunk):
            break  # the run has no events after ``after``
    if expected < next_seq:
        raise corrupted(run_id, expected, f"the event at seq {expected} is missing")
    return out


def _decode_chunk(run_id: str, expected: int, rows: Sequence[Row]) -> list[Event] | None:
    """The events of consecutive rows from seq ``expected`` that all decode and agree with
    their type column, in one validation; ``None`` when any of them does not (or a seq is
    off): the caller decodes them one by one to say which."""
    bodies: list[tuple[int, str]] = []
    types: list[str | None] = []
    for _, seq, type_, body in rows:
        if seq is None or body is None:
            break
        if seq != expected + len(bodies):
            return None
        try:
            text = body.decode() if isinstance(body, bytes) else body
        except UnicodeDecodeError:
            return None
        bodies.append((seq, text))
        types.append(type_)
    try:
        events = decode_events(run_id, bodies)
    except DECODE_ERRORS:
        return None
    if any(ev.type != type_ for ev, type_ in zip(events, types, strict=True)):
        return None
    return events


def _decode_each(
    run_id: str,
    expected: int,
    next_seq: int,
    rows: Sequence[Row],
    corrupted: Callable[[str, int, str], StoreError],
    out: list[Event],
) -> list[Event]:
    """:func:`decode_rows` one row at a time from seq ``expected`` (``out`` holds the events
    before it)."""
    for _, seq, type_, body in rows:
        if seq is None or body is None:
            break  # the run exists but has no events after ``after``
        if seq != expected:
            raise corrupted(run_id, expected, f"the event at seq {expected} is missing")
        try:
            event = decode_event(run_id, seq, body)
        except DECODE_ERRORS as exc:  # ValidationError, UnicodeDecodeError too
            raise corrupted(run_id, seq, f"its body cannot be decoded: {exc}") from exc
        if event.type != type_:
            raise corrupted(
                run_id, seq, f"its type column says {type_!r} but its body says {event.type!r}"
            )
        out.append(event)
        expected += 1
    if expected < next_seq:
        raise corrupted(run_id, expected, f"the event at seq {expected} is missing")
    return out
