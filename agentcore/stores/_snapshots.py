"""What every store does the same way for run snapshots (``agentcore._snapshot``).

A store keeps one row per snapshot: the seq it covers up to, the first seq of its history
chunk, the tag of the code that wrote it, the chain digest of event ``seq`` when it was
saved, a seal, the folded state and the history chunk. The seal is an HMAC-SHA256 under
the chain key when one is set (a snapshot cannot be forged without the key, as the chain
head cannot), else a plain sha256 (it finds corruption, not an attacker). A row is handed
back only if its seal holds and its digest is still event ``seq``'s: a snapshot never
outlives the events it was taken from.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from agentcore.contracts.errors import StoreError

from ._chain import ChainKey, ChainReport
from ._codec import run_label

__all__ = [
    "Snapshot",
    "StoredRow",
    "audit",
    "check_snapshot",
    "no_event",
    "row_for",
    "seal",
    "usable",
]

_SEAL_TAG = b"agentcore.snapshot.v1\x00"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A run's snapshot (see ``agentcore._snapshot``).

    Attributes:
        seq: the last event it covers.
        start: the first event its history chunk covers (the previous snapshot's ``seq``
            + 1, or 0); a store drops its rows from ``start`` on before keeping this one.
        tag: the code that wrote it.
        state: the folded state after event ``seq``, as JSON.
        history: the messages rendered from events ``start`` to ``seq``, as JSON.
    """

    seq: int
    start: int
    tag: str
    state: str
    history: str


StoredRow = tuple[int, int, str, bytes | None, bytes | None, bytes, str, str]
"""(seq, start, tag, the digest saved with it, event seq's digest now (None: gone),
seal, state, history), as a store reads them, in seq order."""


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def seal(key: ChainKey | None, run_id: str, snap: Snapshot, digest: bytes) -> bytes:
    """The seal over everything a snapshot row holds."""
    message = b"".join(
        (
            _SEAL_TAG,
            _field(run_id.encode()),
            snap.seq.to_bytes(8, "big", signed=True),
            snap.start.to_bytes(8, "big", signed=True),
            _field(snap.tag.encode()),
            _field(digest),
            hashlib.sha256(snap.state.encode()).digest(),
            hashlib.sha256(snap.history.encode()).digest(),
        )
    )
    if key is None:
        return hashlib.sha256(message).digest()
    return key.mac(message)


def row_for(
    key: ChainKey | None, run_id: str, snap: Snapshot, digest: bytes
) -> tuple[str, int, int, str, bytes, bytes, str, str]:
    """The row a durable store keeps for ``snap``, bound to event ``snap.seq``'s
    ``digest``: (run_id, seq, start, tag, chain, seal, state, history)."""
    sealed = seal(key, run_id, snap, digest)
    return (run_id, snap.seq, snap.start, snap.tag, digest, sealed, snap.state, snap.history)


def no_event(run_id: str, seq: int) -> StoreError:
    """A snapshot of an event that is not there (or carries no digest)."""
    return StoreError(
        f"run {run_label(run_id)}: no chained event at seq {seq} to snapshot; nothing was saved"
    )


def check_snapshot(run_id: str, snap: Snapshot) -> None:
    """Refuse a snapshot no store could keep faithfully.

    Raises:
        StoreError: a bad range, or text that is not valid UTF-8.
    """
    if not 0 <= snap.start <= snap.seq:
        raise StoreError(
            f"run {run_label(run_id)}: a snapshot covering seq {snap.start}..{snap.seq} "
            "is not a range; nothing was saved"
        )
    for text in (snap.tag, snap.state, snap.history):
        try:
            text.encode()
        except UnicodeEncodeError as exc:
            raise StoreError(
                f"run {run_label(run_id)}: the snapshot at seq {snap.seq} is not valid text "
                f"({exc.reason}); nothing was saved"
            ) from exc


def _problem(key: ChainKey | None, run_id: str, row: StoredRow) -> tuple[Snapshot, str | None]:
    """A stored row as a snapshot, and why it may not be used (``None``: it may)."""
    seq, start, tag, saved, now, sealed, state, history = row
    snap = Snapshot(seq, start, tag, state, history)
    if saved is None or now is None:
        return snap, f"the event it was taken at (seq {seq}) is gone"
    if not hmac.compare_digest(saved, now):
        return snap, (
            f"it was taken from another event at seq {seq} than the one stored (the snapshot "
            "or the events were rewritten)"
        )
    if not hmac.compare_digest(seal(key, run_id, snap, saved), sealed):
        if key is None:
            return snap, _UNCHECKED  # sealed under a key, or changed: only the key can tell
        if hmac.compare_digest(seal(None, run_id, snap, saved), sealed):
            return snap, _UNKEYED
        return snap, (
            "its seal does not verify under the key: it was changed after it was written, "
            "or written by someone without the key"
        )
    return snap, None


_UNKEYED = "sealed without a key"
_UNCHECKED = "sealed under a key that was not given"


def usable(key: ChainKey | None, run_id: str, rows: Sequence[StoredRow]) -> list[Snapshot]:
    """The rows that may be used, in seq order: those before the first whose digest is
    no longer its event's or whose seal fails (a later row builds on the earlier ones)."""
    out: list[Snapshot] = []
    for row in rows:
        snap, problem = _problem(key, run_id, row)
        if problem is not None:
            break
        out.append(snap)
    return out


def audit(
    report: ChainReport, key: ChainKey | None, run_id: str, rows: Sequence[StoredRow]
) -> ChainReport:
    """``report`` (a run's chain check) with its snapshots checked as a resume reads them.

    A row whose event digest or seal fails breaks an otherwise intact run: resuming ignores
    it, so nothing wrong is ever restored, but it is evidence that the table was written by
    something other than the store. Counted, not breaks: a row sealed without a key while a
    key is given (saved before the key was set, as a chain head can be; a resume ignores it
    and the next save replaces it), and, with no key given, a row whose seal is not a plain
    hash in a run whose head is signed (sealed under that key, or changed: only the key
    tells which; its digest is checked). In a run whose head is not signed no key sealed
    anything, so such a row was changed: a break.
    """
    if not report.intact:
        return report
    unkeyed = unchecked = 0
    for row in rows:
        snap, problem = _problem(key, run_id, row)
        if problem == _UNKEYED:
            unkeyed += 1
        elif problem == _UNCHECKED and report.signature == "unchecked":
            unchecked += 1
        elif problem is not None:
            if problem == _UNCHECKED:
                problem = (
                    "its seal does not verify, and no key sealed it (the run's head is not "
                    "signed): it was changed after it was written"
                )
            why = f"the snapshot covering seq {snap.start}..{snap.seq}: {problem}"
            return dataclasses.replace(
                report,
                intact=False,
                broken_seq=snap.seq,
                reason=f"{why} (a resume ignores it and every later snapshot)",
            )
    return dataclasses.replace(
        report,
        snapshots=len(rows) - unkeyed - unchecked,
        unkeyed_snapshots=unkeyed,
        unchecked_snapshots=unchecked,
    )
