"""Tamper evidence: a hash chain over each run's stored events, its head signed with a key.

Every event row carries a digest (``events.chain``, 32 bytes) that covers the previous
row's digest, so each event carries the hash of the one before it::

    digest(seq) = sha256(TAG || digest(seq - 1) || seq (8 bytes) || len+run_id || len+type
                         || len+body)

with fixed-width fields and length prefixes, so no two inputs can be confused, and
``digest(first - 1)`` a genesis derived from the run id alone: an event cannot be moved to
another run or another position, nor two swapped, without its digest changing. The body is
the stored text exactly (no event field is added), so decoding and exports are unchanged.

The run's row holds the head (``runs.chain_head``): the first and last chained seq, the last
digest, the seq signing began at, and an HMAC-SHA256 of those and the run id under the
application's key
(``AGENTCORE_CHAIN_KEY``, or the store's ``chain_key`` argument). Someone who can write the
tables but has no key can change a body and recompute every digest, but cannot sign the new
head: :func:`check_chain` finds the first seq where the stored rows stop matching.

A run written before chaining has NULL digests and no head; an append to it starts the
chain at the next seq (its prefix stays unchained: old rows are never rewritten). Appends
compute the chain inside the transaction that writes the events, from the head read (or,
on PostgreSQL, checked) in that same transaction.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from agentcore.contracts.errors import ConfigurationError, StoreCorruptedError, StoreError

from ._batch import Batch
from ._codec import run_label

__all__ = [
    "KEY_VARIABLE",
    "ChainKey",
    "ChainReport",
    "ChainRow",
    "Head",
    "WrittenHeads",
    "check_chain",
    "extend",
    "genesis",
    "link",
]

KEY_VARIABLE = "AGENTCORE_CHAIN_KEY"
"""The environment variable a store takes its chain key from when none is given."""

_LINK_TAG = b"agentcore.chain.v1\x00"
_GENESIS_TAG = b"agentcore.genesis.v1\x00"
_HEAD_TAG = b"agentcore.head.v1\x00"
_HEAD_VERSION = "c1"


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def _text(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


def genesis(run_id: str) -> bytes:
    """The digest before a run's first chained event: bound to the run id."""
    return hashlib.sha256(_GENESIS_TAG + _field(_text(run_id))).digest()


def link(prev: bytes, run_id: bytes, seq: int, type_: str, body: bytes) -> bytes:
    """The digest of one stored event, given the digest before it (``run_id`` encoded)."""
    return _link(prev, _field(run_id), seq, _type_field(type_), body)


def _link(prev: bytes, run_field: bytes, seq: int, type_field: bytes, body: bytes) -> bytes:
    """:func:`link` with the run id's and the type's length-prefixed fields given (a batch
    computes the run's once, and each type's field is kept)."""
    return _sha256(
        b"".join(
            (
                _LINK_TAG,
                prev,
                seq.to_bytes(8, "big", signed=True),
                run_field,
                type_field,
                len(body).to_bytes(8, "big"),
                body,
            )
        )
    ).digest()


_sha256 = hashlib.sha256
_TYPE_FIELDS: dict[str, bytes] = {}


def _type_field(type_: str) -> bytes:
    """The length-prefixed field of an event type (the few known ones kept)."""
    found = _TYPE_FIELDS.get(type_)
    if found is None:
        found = _field(_text(type_))
        if len(_TYPE_FIELDS) < 64:
            _TYPE_FIELDS[type_] = found
    return found


class ChainKey:
    """The application's key for signing chain heads (HMAC-SHA256). It is never shown,
    logged or stored: ``repr`` hides it.

    Args:
        secret: the key; a str is taken as UTF-8. Use 32 random bytes, e.g.
            ``python -c "import secrets; print(secrets.token_hex(32))"``.

    Raises:
        ConfigurationError: an empty key.
    """

    __slots__ = ("_state",)

    def __init__(self, secret: bytes | str) -> None:
        data = _text(secret) if isinstance(secret, str) else bytes(secret)
        if not data:
            raise ConfigurationError(
                f"The chain key is empty: set {KEY_VARIABLE} (or chain_key=) to a secret, e.g. "
                'python -c "import secrets; print(secrets.token_hex(32))"'
            )
        # Keyed once: each MAC copies this state (the key's padded blocks already hashed).
        self._state = hmac.new(data, digestmod=hashlib.sha256)

    @classmethod
    def configured(cls, secret: bytes | str | None) -> ChainKey | None:
        """``secret`` as a key, else ``$AGENTCORE_CHAIN_KEY`` when set, else ``None``."""
        if secret is None:
            secret = os.environ.get(KEY_VARIABLE) or None
        return None if secret is None else cls(secret)

    def sign(self, run_id: str, first: int, signed_from: int, last: int, digest: bytes) -> bytes:
        """The head's MAC: over the run id, the chained range, the seq signing began at
        and the last digest."""
        message = b"".join(
            (
                _HEAD_TAG,
                _field(_text(run_id)),
                first.to_bytes(8, "big", signed=True),
                signed_from.to_bytes(8, "big", signed=True),
                last.to_bytes(8, "big", signed=True),
                digest,
            )
        )
        return self.mac(message)

    def mac(self, message: bytes) -> bytes:
        """HMAC-SHA256 of ``message`` under this key (heads; snapshots' seals)."""
        state = self._state.copy()
        state.update(message)
        return state.digest()

    def __repr__(self) -> str:
        return "ChainKey(<hidden>)"


@dataclass(frozen=True, slots=True)
class Head:
    """A run's chain head, as ``runs.chain_head`` keeps it:
    ``c1:<first>:<signed from, or ->:<last>:<digest hex>:<mac hex, or ->``.

    ``signed_from`` is the first seq appended under a key: ``first`` for a run written
    with one throughout, later for a run begun without a key and continued with one (the
    events before it were chained under an unsigned head), ``None`` while unsigned.
    """

    first: int
    signed_from: int | None
    last: int
    digest: bytes
    mac: bytes | None

    def encode(self) -> str:
        mac = "-" if self.mac is None else self.mac.hex()
        since = "-" if self.signed_from is None else str(self.signed_from)
        return f"{_HEAD_VERSION}:{self.first}:{since}:{self.last}:{self.digest.hex()}:{mac}"

    @classmethod
    def parse(cls, text: str) -> Head:
        """Raises ValueError for anything but a well-formed head."""
        parts = text.split(":")
        if len(parts) != 6 or parts[0] != _HEAD_VERSION:
            raise ValueError(f"not a chain head: {text[:80]!r}")
        first, last = int(parts[1]), int(parts[3])
        since = None if parts[2] == "-" else int(parts[2])
        digest = bytes.fromhex(parts[4])
        mac = None if parts[5] == "-" else bytes.fromhex(parts[5])
        if (
            len(digest) != 32
            or (mac is None) != (since is None)
            or (mac is not None and len(mac) != 32)
            or not 0 <= first <= last
        ):
            raise ValueError(f"not a chain head: {text[:80]!r}")
        return cls(first, since, last, digest, mac)

    @classmethod
    def signed(
        cls,
        key: ChainKey | None,
        run_id: str,
        first: int,
        signed_from: int | None,
        last: int,
        digest: bytes,
    ) -> Head:
        """The head of a chain, signed with ``key`` (unsigned without one)."""
        if key is None:
            return cls(first, None, last, digest, None)
        since = first if signed_from is None else signed_from
        return cls(first, since, last, digest, key.sign(run_id, first, since, last, digest))

    def verifies(self, key: ChainKey, run_id: str) -> bool:
        """Whether the head's MAC is the one ``key`` gives it."""
        if self.mac is None or self.signed_from is None:
            return False
        expected = key.sign(run_id, self.first, self.signed_from, self.last, self.digest)
        return hmac.compare_digest(self.mac, expected)


class WrittenHeads:
    """The heads a store object wrote last, per run (at most ``limit`` runs, the oldest
    forgotten first). An append that finds one of them stored, exactly, skips reading and
    checking it again: this process wrote and signed it."""

    __slots__ = ("_heads", "_limit")

    def __init__(self, limit: int = 10_000) -> None:
        self._heads: dict[str, tuple[str, Head]] = {}
        self._limit = limit

    def get(self, run_id: str, text: str) -> Head | None:
        known = self._heads.get(run_id)
        return known[1] if known is not None and known[0] == text else None

    def put(self, run_id: str, text: str, head: Head) -> None:
        self._heads.pop(run_id, None)
        self._heads[run_id] = (text, head)
        if len(self._heads) > self._limit:
            del self._heads[next(iter(self._heads))]


def extend(
    key: ChainKey | None,
    batch: Batch,
    stored_head: str | None,
    *,
    previous_chained: bool = False,
    written: WrittenHeads | None = None,
) -> tuple[list[bytes], str]:
    """The digests of a batch appended at its ``expected_seq`` and the run's new head.

    Args:
        stored_head: the run's head as read in the append's transaction (``None``: a new
            run, or one written before chaining, whose chain starts at ``expected_seq``).
        previous_chained: the event at ``expected_seq - 1`` carries a digest (checked by
            the caller when there is no head): a head was removed, and the chain is not
            restarted over it.
        written: the heads this store wrote (read and updated).

    Raises:
        StoreCorruptedError: the stored head does not fit the run (unreadable, another
            range, a signature that does not verify under ``key``, or missing while the
            last event is chained): the run may have been tampered with; nothing is
            appended to it until someone looks (``agentcore verify``).
        StoreError: the head is signed but this store has no key (it would be replaced by
            an unsigned one).
    """
    run_id, expected_seq = batch.run_id, batch.expected_seq
    if stored_head is None:
        if previous_chained:
            raise _tampered(run_id, expected_seq, "its events are chained but it has no head")
        first, since, prev = expected_seq, expected_seq, genesis(run_id)
    else:
        mine = None if written is None else written.get(run_id, stored_head)
        head = mine or _checked(key, run_id, expected_seq, stored_head)
        if head.last != expected_seq - 1:
            raise _tampered(
                run_id,
                expected_seq,
                f"its chain head ends at seq {head.last}, not at the last event",
            )
        # An unsigned head extended under a key: signing starts here, and the head says so.
        since = expected_seq if head.signed_from is None else head.signed_from
        first, prev = head.first, head.digest
    run_field = _field(_text(run_id))
    chains: list[bytes] = []
    seq = expected_seq
    for ev, body in zip(batch.events, batch.bodies, strict=True):
        prev = _link(prev, run_field, seq, _type_field(ev.type), body.encode("utf-8"))
        chains.append(prev)
        seq += 1
    new = Head.signed(key, run_id, first, since, seq - 1, prev)
    text = new.encode()
    if written is not None:
        written.put(run_id, text, new)
    return chains, text


def _checked(key: ChainKey | None, run_id: str, seq: int, stored_head: str) -> Head:
    """The stored head, read, and its signature checked under ``key``.

    Raises:
        StoreCorruptedError, StoreError: as :func:`extend`.
    """
    try:
        head = Head.parse(stored_head)
    except ValueError:
        raise _tampered(run_id, seq, "its chain head cannot be read") from None
    if head.mac is not None and key is None:
        raise StoreError(
            f"run {run_label(run_id)}: its chain head is signed, but this store has no chain "
            f"key: set {KEY_VARIABLE} (the key the run was written with) to append to it; "
            "nothing was written"
        )
    if key is not None and head.mac is not None and not head.verifies(key, run_id):
        raise _tampered(run_id, seq, "its chain head's signature does not verify")
    return head


def _tampered(run_id: str, seq: int, why: str) -> StoreCorruptedError:
    return StoreCorruptedError(
        f"run {run_label(run_id)}: cannot append at seq {seq}: {why}. The run may have been "
        f"tampered with: check it with `agentcore verify {run_id}`; nothing was written"
    )


ChainRow = tuple[int, str, bytes, bytes | None]
"""One stored event as verification reads it: (seq, type column, body bytes, digest)."""

Signature = Literal["valid", "unsigned", "unchecked", "invalid"]


@dataclass(frozen=True, slots=True)
class ChainReport:
    """What :meth:`verify_chain` found for one run.

    Attributes:
        run_id: the run.
        intact: no break found (a run written wholly before chaining is intact too: there
            is nothing to check, see ``unchained``).
        events: how many events the run has (its row's next seq).
        unchained: how many events at the start were written before chaining (seqs
            ``0 .. unchained - 1``); they are reported, never back-filled.
        first, last: the chained range (``None``: nothing is chained).
        signature: ``valid`` (the head's HMAC verified under the key), ``unsigned`` (the
            head has none and no key was given), ``unchecked`` (signed, but no key was
            given to check it), ``invalid`` (wrong, or missing while a key was given).
        broken_seq: the first seq found broken (``None`` when intact).
        reason: why, in words (``None`` when intact).
        signed_from: the first seq appended under a key, when the head is signed; above
            ``first`` for a run begun without a key: the events before it were chained
            under an unsigned head, and are only as safe as the tables were then.
        snapshots: how many of the run's snapshots verify (sealed, and bound to the digest
            of the event they were taken at): a broken one makes the run broken.
        unkeyed_snapshots: snapshots sealed without a key while a key is given (saved
            before the key was set): a resume ignores them.
        unchecked_snapshots: with no key given, snapshots whose seal is not a plain hash
            (sealed under a key, or changed): their digests are checked, their seals not.
    """

    run_id: str
    intact: bool
    events: int
    unchained: int
    first: int | None
    last: int | None
    signature: Signature | None
    broken_seq: int | None = None
    reason: str | None = None
    signed_from: int | None = None
    snapshots: int = 0
    unkeyed_snapshots: int = 0
    unchecked_snapshots: int = 0

    def describe(self) -> str:
        """One line for people: what holds, or the first broken seq and why."""
        if not self.intact:
            return f"BROKEN at seq {self.broken_seq}: {self.reason}"
        parts: list[str] = []
        if self.unchained:
            parts.append(f"unchained prefix seq 0..{self.unchained - 1} (written before chaining)")
        if self.first is None:
            parts.append("no chained events")
        else:
            parts.append(f"chained seq {self.first}..{self.last}")
            parts.append(
                {
                    "valid": "head signed, signature valid",
                    "unsigned": "head NOT signed (no key): the digests are consistent, but "
                    "anyone who can write the tables could have recomputed them",
                    "unchecked": f"head signed, signature NOT checked (no key: set {KEY_VARIABLE})",
                    "invalid": "head signature invalid",
                    None: "",
                }[self.signature]
            )
        since, first = self.signed_from, self.first
        if since is not None and first is not None and since > first:
            parts.append(
                f"signed only from seq {since}: seq {first}..{since - 1} were chained while "
                "the head was unsigned (a key was set later)"
            )
        if self.snapshots:
            parts.append(f"{self.snapshots} snapshot(s) verify")
        if self.unkeyed_snapshots:
            parts.append(
                f"{self.unkeyed_snapshots} snapshot(s) sealed without a key (saved before it "
                "was set): ignored when resuming"
            )
        if self.unchecked_snapshots:
            parts.append(
                f"{self.unchecked_snapshots} snapshot(s) sealed under a key, NOT checked "
                f"(no key: set {KEY_VARIABLE})"
            )
        return "intact: " + "; ".join(parts)


def check_chain(
    run_id: str,
    next_seq: int,
    stored_head: str | None,
    rows: Iterable[ChainRow],
    key: ChainKey | None,
) -> ChainReport:
    """Recompute a run's chain from its stored rows (in seq order) and check its head.

    Returns the first break found, in seq order: a missing event, a NULL digest after a
    chained one, a digest that does not follow, then the head (missing, another range,
    another digest, its signature).
    """
    encoded = _text(run_id)
    expected = 0
    unchained = 0
    first: int | None = None
    prev = genesis(run_id)
    signature: Signature | None = None

    def broken(seq: int, why: str) -> ChainReport:
        return ChainReport(run_id, False, next_seq, unchained, first, None, signature, seq, why)

    for seq, type_, body, chain in rows:
        if seq != expected:
            if seq < expected:
                return broken(seq, f"seq {seq} is stored twice")
            return broken(expected, f"the event at seq {expected} is missing (deleted)")
        expected += 1
        if chain is None:
            if first is not None:
                return broken(seq, "its digest is NULL after chained events (the chain was erased)")
            unchained += 1
            continue
        if first is None:
            first = seq
        prev = link(prev, encoded, seq, type_, body)
        if not hmac.compare_digest(prev, chain):
            why = "its stored digest does not match its body, type and position"
            if seq != first:
                why += f" (the event at seq {seq} was changed, or the digest of seq {seq - 1})"
            return broken(seq, why)
    last = expected - 1 if first is not None else None
    if next_seq != expected:
        if next_seq > expected:
            return broken(
                expected,
                f"the event at seq {expected} is missing (the run's row counts {next_seq} events)",
            )
        return broken(
            next_seq, f"seq {next_seq} and later are stored beyond the run's count ({next_seq})"
        )
    if stored_head is None:
        if first is not None:
            return broken(first, "its events are chained but the run's chain head is missing")
        return ChainReport(run_id, True, next_seq, unchained, None, None, None)
    try:
        head = Head.parse(stored_head)
    except ValueError:
        return broken(first or 0, "the run's chain head cannot be read")
    if first is None:
        return broken(
            head.first,
            f"the head covers seq {head.first}..{head.last}, but the events carry no digest "
            "(the chain was erased)",
        )
    assert last is not None
    if head.first != first:
        return broken(
            min(head.first, first),
            f"the head starts the chain at seq {head.first}, the events at seq {first}",
        )
    if head.last < last:
        return broken(
            head.last + 1,
            f"appended after the head (which ends at seq {head.last}) without a new head",
        )
    if head.last > last:
        return broken(
            last + 1,
            f"the event at seq {last + 1} is missing (the head covers up to seq {head.last})",
        )
    if not hmac.compare_digest(head.digest, prev):
        return broken(last, "the last digest does not match the head's (the events were rewritten)")
    if key is None:
        signature = "unsigned" if head.mac is None else "unchecked"
    else:
        if not head.verifies(key, run_id):
            signature = "invalid"
            why = (
                "the head is not signed, but a key was given"
                if head.mac is None
                else "the head's signature does not verify under the key (a wrong key, or "
                "the chain was rewritten by someone without it)"
            )
            return broken(first, why + f": nothing from seq {first} on can be trusted")
        signature = "valid"
    return ChainReport(
        run_id, True, next_seq, unchained, first, last, signature, signed_from=head.signed_from
    )


def truncated_head(
    key: ChainKey | None,
    run_id: str,
    stored_head: str | None,
    kept: Sequence[tuple[int, bytes | None]],
) -> str | None:
    """The head after a truncation that keeps ``kept`` (seq, digest) rows: the last kept
    digest, signed again (``None`` when no kept event is chained).

    Raises:
        StoreCorruptedError: the kept events are chained but the run has no head.
        StoreError: the head is signed but there is no key to sign the new one.
    """
    chained = [(seq, chain) for seq, chain in kept if chain is not None]
    if not chained:
        return None
    if stored_head is None:
        raise _tampered(run_id, chained[-1][0] + 1, "its events are chained but it has no head")
    try:
        head = Head.parse(stored_head)
    except ValueError:
        raise _tampered(run_id, chained[-1][0] + 1, "its chain head cannot be read") from None
    if key is None and head.mac is not None:
        raise StoreError(
            f"run {run_label(run_id)}: its chain head is signed, but this store has no chain "
            f"key to sign the truncated one: set {KEY_VARIABLE}; nothing was deleted"
        )
    last, digest = chained[-1]
    # Signing a head over events chained while unsigned does not vouch for them.
    since = last + 1 if head.signed_from is None else min(head.signed_from, last + 1)
    return Head.signed(key, run_id, chained[0][0], since, last, digest).encode()
