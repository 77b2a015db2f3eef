"""Hostile inputs to the webhook's signature check: it fails closed.

Written against a scheme (how a request is signed, how a receiver verifies it), so a
later webhook scheme is held to the same inputs: a malformed header, body or tolerance is
``False``, never an exception and never ``True``; an empty key is refused on both sides.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.approvals import sign, verify_signature, webhook
from agentcore.errors import ConfigurationError

SECRET = "s3cret"
BODY = b'{"run_id":"r1","occasion":"waiting"}'


@dataclass(frozen=True)
class Scheme:
    """How a request is signed and checked: what every webhook scheme provides."""

    sign: Callable[[bytes, str | bytes], str]
    verify: Callable[..., bool]  # (body, header, secret, *, tolerance_s=...)


SCHEMES = [Scheme(sign=sign, verify=verify_signature)]


@pytest.fixture(params=SCHEMES, ids=["hmac-sha256-v1"])
def scheme(request: pytest.FixtureRequest) -> Scheme:
    chosen: Scheme = request.param
    return chosen


def _valid(scheme: Scheme) -> str:
    return scheme.sign(BODY, SECRET)


def test_a_valid_signature_verifies(scheme: Scheme) -> None:
    assert scheme.verify(BODY, _valid(scheme), SECRET) is True


def _hostile_headers(valid: str) -> list[object]:
    t_part, v1_part = valid.split(",")
    digest = v1_part.removeprefix("v1=")
    now = int(time.time())
    return [
        None,
        b"t=1,v1=00",  # bytes, not text
        "",
        ",",
        "=",
        "t=",
        "v1=",
        "garbage",
        f"t={'9' * 500},v1={digest}",  # a 500-digit timestamp
        f"t={now},v1={'é' * 64}",  # a non-ASCII v1
        f"t={now},v1=\u0663{digest[1:]}",  # an Arabic-Indic digit
        f"t=\u0661\u0662,v1={digest}",  # non-ASCII digits in t
        f"t={now}.5,v1={digest}",
        f"t=-{now},v1={digest}",
        f"t=+{now},v1={digest}",
        f"t=0x10,v1={digest}",
        f"t={now}\n,v1={digest}",
        f"{t_part}",  # no v1
        f"{v1_part}",  # no t
        f"{t_part},v1={digest.upper()}",
        f"{t_part},v1={digest[:-1]}",
        f"{t_part},v1={digest}0",
        f"{t_part},{v1_part},{v1_part}",  # a repeated v1
        f"{t_part},{t_part},{v1_part}",
        f"{t_part},v1={digest}\x00",
        f"{t_part},{v1_part}," + "x=1," * 500,  # an oversized header
        f"t={now - 10_000},v1={digest}",  # outside the tolerance
    ]


def test_hostile_headers_are_false_never_an_exception(scheme: Scheme) -> None:
    for header in _hostile_headers(_valid(scheme)):
        assert scheme.verify(BODY, header, SECRET) is False, header


@pytest.mark.parametrize("body", [None, "text, not bytes", 12, BODY + b" "])
def test_a_body_that_is_not_the_signed_bytes_is_false(scheme: Scheme, body: object) -> None:
    assert scheme.verify(body, _valid(scheme), SECRET) is False


@pytest.mark.parametrize("tolerance", [float("nan"), -1.0, float("-inf")])
def test_a_tolerance_that_is_not_a_window_is_false(scheme: Scheme, tolerance: float) -> None:
    assert scheme.verify(BODY, _valid(scheme), SECRET, tolerance_s=tolerance) is False


@pytest.mark.parametrize("key", ["", b""])
def test_an_empty_key_is_refused_when_signing_and_verifying(scheme: Scheme, key: str) -> None:
    with pytest.raises(ConfigurationError, match="secret"):
        scheme.sign(BODY, key)
    with pytest.raises(ConfigurationError, match="secret"):
        scheme.verify(BODY, _valid(scheme), key)
    with pytest.raises(ConfigurationError, match="secret"):
        webhook("http://127.0.0.1/hook", key)


def test_a_signature_made_with_an_empty_key_never_verifies(scheme: Scheme) -> None:
    import hashlib
    import hmac

    now = int(time.time())
    forged = hmac.new(b"", f"{now}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert scheme.verify(BODY, f"t={now},v1={forged}", SECRET) is False


@settings(max_examples=300, deadline=None)
@given(header=st.text(max_size=200), body=st.binary(max_size=64))
def test_generated_garbage_is_false(header: str, body: bytes) -> None:
    for scheme in SCHEMES:
        assert scheme.verify(body, header, SECRET) is False


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_change_to_a_valid_header_is_false(data: st.DataObject) -> None:
    for scheme in SCHEMES:
        valid = _valid(scheme)
        at = data.draw(st.integers(0, len(valid) - 1))
        replacement = data.draw(st.characters().filter(valid[at].__ne__))
        mutated = valid[:at] + replacement + valid[at + 1 :]
        assert scheme.verify(BODY, mutated, SECRET) is False, mutated
