"""Hand-written code replaced by the library that does its job: each test holds the new
code to the library's own answer (or to the property the hand-written code was meant to
have) over generated inputs."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from agentcore.stores._chain import ChainKey  # the key itself: not exported

# --- the chain key's HMAC -------------------------------------------------------------


@given(
    key=st.binary(min_size=1, max_size=200),  # shorter than, equal to and over a block (64)
    messages=st.lists(st.binary(max_size=600), min_size=1, max_size=5),
)
def test_chain_key_mac_is_hmac_sha256(key: bytes, messages: list[bytes]) -> None:
    """Every MAC from one key object equals a fresh ``hmac.new(key, msg, sha256)``: the
    pre-keyed state is copied per message, never updated in place."""
    chain_key = ChainKey(key)
    for message in messages:
        assert chain_key.mac(message) == hmac.new(key, message, hashlib.sha256).digest()


@given(secret=st.text(min_size=1, max_size=80))
def test_chain_key_text_secret_is_its_utf8(secret: str) -> None:
    expected = hmac.new(secret.encode("utf-8", "surrogatepass"), b"m", hashlib.sha256).digest()
    assert ChainKey(secret).mac(b"m") == expected


def test_chain_key_head_signature_is_hmac_over_the_documented_message() -> None:
    key = b"k" * 32
    digest = bytes(range(32))
    message = (
        b"agentcore.head.v1\x00"
        + len(b"run-1").to_bytes(8, "big")
        + b"run-1"
        + (0).to_bytes(8, "big", signed=True)
        + (2).to_bytes(8, "big", signed=True)
        + (7).to_bytes(8, "big", signed=True)
        + digest
    )
    expected = hmac.new(key, message, hashlib.sha256).digest()
    assert ChainKey(key).sign("run-1", 0, 2, 7, digest) == expected
