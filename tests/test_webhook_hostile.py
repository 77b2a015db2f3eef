"""Hostile inputs to the webhook's signature check: it fails closed.

Written against a scheme (how a request is signed, how a receiver verifies it, and which
headers a sender of that scheme could not have sent), so every webhook scheme is held to
the same inputs: a malformed header, body or tolerance is ``False``, never an exception and
never ``True``; a missing or unusable key is refused on both sides.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import string
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.approvals import WEBHOOK_HEADERS, sign, verify_signature, webhook
from agentcore.errors import ConfigurationError

SECRET = "whsec_" + base64.b64encode(b"a 32-byte key for these tests..!").decode()
BODY = b'{"run_id":"r1","occasion":"waiting"}'
ID, TS, SIG = WEBHOOK_HEADERS


@dataclass(frozen=True)
class Scheme:
    """How a request is signed and checked: what every webhook scheme provides."""

    sign: Callable[[bytes, str | bytes], Mapping[str, str]]
    verify: Callable[..., bool]  # (body, headers, secret, *, tolerance_s=...)
    hostile: Callable[[dict[str, str]], list[object]]  # header sets no sender could have sent
    forge: Callable[[bytes, bytes, int], dict[str, str]]  # (key, body, timestamp) by hand


def _v1(key: bytes, msg_id: str, at: str, body: bytes) -> str:
    """A v1 signature computed here, from the Standard Webhooks text."""
    mac = hmac.new(key, f"{msg_id}.{at}.".encode() + body, hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def _standard_hostile(valid: dict[str, str]) -> list[object]:
    msg_id, at, listed = valid[ID], valid[TS], valid[SIG]
    mac = listed.removeprefix("v1,")
    now = int(time.time())
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    last = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"
    # the same 32 bytes written another way: the last character's two unused bits flipped
    other_last = last[last.index(mac[-2]) ^ 1]

    def with_(**changes: object) -> dict[str, object]:
        headers: dict[str, object] = dict(valid)
        for name, value in changes.items():
            headers[name.replace("_", "-")] = value
        return headers

    def without(name: str) -> dict[str, str]:
        return {k: v for k, v in valid.items() if k != name}

    return [
        # not a set of headers
        None,
        "",
        f"t={at},v1={mac}",  # the text of one header
        listed.encode(),
        [(ID, msg_id), (TS, at), (SIG, listed)],  # pairs, not a mapping
        {},
        {"Agentcore-Signature": f"t={at},v1={hashlib.sha256(BODY).hexdigest()}"},
        # a header missing, repeated (in another case) or not text
        without(ID),
        without(TS),
        without(SIG),
        {**valid, "Webhook-Id": msg_id},
        {**valid, "WEBHOOK-SIGNATURE": listed},
        {**without(ID), "webhoo\u212a-id": msg_id},  # a Kelvin sign is not a k
        with_(webhook_id=msg_id.encode()),
        with_(webhook_timestamp=int(at)),
        with_(webhook_signature=[listed]),
        # the message id
        with_(webhook_id=""),
        with_(webhook_id="m" * 129),
        with_(webhook_id="msg é"),
        with_(webhook_id=f"{msg_id}\n"),
        {  # signed correctly, but a "." in the id makes the signed text ambiguous
            ID: "msg.1",
            TS: at,
            SIG: f"v1,{_v1(key, 'msg.1', at, BODY)}",
        },
        # the timestamp
        with_(webhook_timestamp=""),
        with_(webhook_timestamp="9" * 500),
        with_(webhook_timestamp="".join(chr(0x660 + int(d)) for d in at)),  # Arabic-Indic digits
        with_(webhook_timestamp=f"{at}.5"),
        with_(webhook_timestamp=f"-{at}"),
        with_(webhook_timestamp=f"+{at}"),
        with_(webhook_timestamp="0x10"),
        with_(webhook_timestamp=f"{at}\n"),
        with_(webhook_timestamp=f" {at}"),
        with_(webhook_timestamp="1e9"),
        {ID: msg_id, TS: str(now - 10_000), SIG: f"v1,{_v1(key, msg_id, str(now - 10_000), BODY)}"},
        {ID: msg_id, TS: str(now + 10_000), SIG: f"v1,{_v1(key, msg_id, str(now + 10_000), BODY)}"},
        # the signature list
        with_(webhook_signature=""),
        with_(webhook_signature=","),
        with_(webhook_signature="v1"),
        with_(webhook_signature="v1,"),
        with_(webhook_signature=f",{mac}"),
        with_(webhook_signature="garbage"),
        with_(webhook_signature=f"V1,{mac}"),
        with_(webhook_signature=f"v1={mac}"),
        with_(webhook_signature=f"v1,{mac},{mac}"),
        with_(webhook_signature=f"v1,{mac.upper()}"),
        with_(webhook_signature=f"v1,{mac[:-1]}"),
        with_(webhook_signature=f"v1,{mac}0"),
        with_(webhook_signature=f"v1,{mac[:-2]}{other_last}="),
        with_(webhook_signature=f"v1,{mac.rstrip('=')}"),
        with_(webhook_signature=f"v1,{hmac.new(key, BODY, hashlib.sha256).hexdigest()}"),
        with_(webhook_signature=f"v1,{mac}\x00"),
        with_(webhook_signature=f"v1,{mac} "),
        with_(webhook_signature=f" v1,{mac}"),
        with_(webhook_signature=f"v1,{mac}  v1,{mac}"),
        with_(webhook_signature=f"v1,{mac}\tv1,{mac}"),
        with_(webhook_signature=f"v1,{mac} v1,{'é' * 43}="),  # a valid entry beside a bad one
        with_(webhook_signature=f"v1,{mac} v1a,not base64!"),
        with_(webhook_signature=f"v2,{mac}"),  # no v1 entry
        with_(webhook_signature=f"v1a,{mac}"),
        with_(webhook_signature=f"v1,{mac}" + " v2,AAAA" * 500),  # an oversized list
    ]


def _standard_forge(key: bytes, body: bytes, timestamp: int) -> dict[str, str]:
    return {ID: "msg_1", TS: str(timestamp), SIG: f"v1,{_v1(key, 'msg_1', str(timestamp), body)}"}


SCHEMES = [
    Scheme(sign=sign, verify=verify_signature, hostile=_standard_hostile, forge=_standard_forge)
]


@pytest.fixture(params=SCHEMES, ids=["standard-webhooks-v1"])
def scheme(request: pytest.FixtureRequest) -> Scheme:
    chosen: Scheme = request.param
    return chosen


def _valid(scheme: Scheme) -> dict[str, str]:
    return dict(scheme.sign(BODY, SECRET))


def test_a_valid_signature_verifies(scheme: Scheme) -> None:
    assert scheme.verify(BODY, _valid(scheme), SECRET) is True


def test_hostile_headers_are_false_never_an_exception(scheme: Scheme) -> None:
    cases = scheme.hostile(_valid(scheme))
    assert len(cases) > 50
    for headers in cases:
        assert scheme.verify(BODY, headers, SECRET) is False, headers


@pytest.mark.parametrize("body", [None, "text, not bytes", 12, BODY + b" "])
def test_a_body_that_is_not_the_signed_bytes_is_false(scheme: Scheme, body: object) -> None:
    assert scheme.verify(body, _valid(scheme), SECRET) is False


@pytest.mark.parametrize("tolerance", [float("nan"), -1.0, float("-inf"), "300", None, True])
def test_a_tolerance_that_is_not_a_window_is_false(scheme: Scheme, tolerance: object) -> None:
    assert scheme.verify(BODY, _valid(scheme), SECRET, tolerance_s=tolerance) is False


@pytest.mark.parametrize(
    "key",
    [
        "",
        b"",
        [],
        "s3cret",  # text without the whsec_ prefix
        "whsec_",
        "whsec_not base64!",
        "whsec_" + base64.b64encode(b"k" * 23).decode(),  # too short a key
        "whsec_" + base64.b64encode(b"k" * 65).decode(),  # too long
        b"k" * 23,
        ["whsec_" + base64.b64encode(b"k" * 32).decode(), ""],  # one good key, one empty
        12,
        None,
    ],
)
def test_an_unusable_key_is_refused_when_signing_and_verifying(scheme: Scheme, key: object) -> None:
    with pytest.raises(ConfigurationError, match="secret"):
        scheme.sign(BODY, key)  # pyright: ignore[reportArgumentType]  # a bad setting
    with pytest.raises(ConfigurationError, match="secret"):
        scheme.verify(BODY, _valid(scheme), key)
    with pytest.raises(ConfigurationError, match="secret"):
        webhook("http://127.0.0.1/hook", key)  # pyright: ignore[reportArgumentType]  # a bad setting


def test_a_signature_made_with_an_empty_or_other_key_never_verifies(scheme: Scheme) -> None:
    now = int(time.time())
    assert scheme.verify(BODY, scheme.forge(b"", BODY, now), SECRET) is False
    assert scheme.verify(BODY, scheme.forge(b"x" * 32, BODY, now), SECRET) is False
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    assert scheme.verify(BODY, scheme.forge(key, BODY, now), SECRET) is True  # the forge is right


@settings(max_examples=300, deadline=None)
@given(
    headers=st.one_of(
        st.dictionaries(st.sampled_from([*WEBHOOK_HEADERS, "x"]), st.text(max_size=80)),
        st.fixed_dictionaries(
            {ID: st.text(max_size=40), TS: st.text(max_size=14), SIG: st.text(max_size=120)}
        ),
    ),
    body=st.binary(max_size=64),
)
def test_generated_garbage_is_false(headers: dict[str, str], body: bytes) -> None:
    for scheme in SCHEMES:
        assert scheme.verify(body, headers, SECRET) is False


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_change_to_a_valid_header_is_false(data: st.DataObject) -> None:
    for scheme in SCHEMES:
        valid = _valid(scheme)
        name = data.draw(st.sampled_from(sorted(valid)))
        in_name = data.draw(st.booleans())
        text = name if in_name else valid[name]
        at = data.draw(st.integers(0, len(text) - 1))
        original = text[at]
        replacement = data.draw(st.characters().filter(_another(original, in_name=in_name)))
        mutated_text = text[:at] + replacement + text[at + 1 :]
        mutated = dict(valid)
        if in_name:
            mutated[mutated_text] = mutated.pop(name)
        else:
            mutated[name] = mutated_text
        assert scheme.verify(BODY, mutated, SECRET) is False, mutated


def _another(original: str, *, in_name: bool) -> Callable[[str], bool]:
    """Whether a character changes ``original``: in a header name, the same letter in
    another ASCII case names the same header."""

    def changes(c: str) -> bool:
        return c != original and not (in_name and c.isascii() and c.lower() == original.lower())

    return changes
