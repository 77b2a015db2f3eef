"""The guarded HTTP transport against a loopback server: refused by default, allowed with
an override, and checked again on every redirect."""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.net import address_refusal, guarded_async_client, guarded_client


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        port = self.server.server_address[1]
        targets = {
            "/to-self": "/",
            "/to-127.0.0.2": f"http://127.0.0.2:{port}/",
            "/to-localhost": f"http://localhost:{port}/",
            "/to-metadata": "http://169.254.169.254/latest/meta-data/",
        }
        if self.path in targets:
            self.send_response(302)
            self.send_header("Location", targets[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


LOCAL = ["127.0.0.1/32"]


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("169.254.169.254", "link-local"),
        ("100.64.0.1", "not a globally routable"),
        ("0.0.0.0", "unspecified"),
        ("::1", "loopback"),
        ("fe80::1%eth0", "link-local"),
        ("fd00::1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("224.0.0.1", "multicast"),
    ],
)
def test_address_refusal(address: str, kind: str) -> None:
    why = address_refusal(address)
    assert why is not None and kind in why


def test_global_and_allowed_addresses() -> None:
    assert address_refusal("93.184.215.14") is None
    assert address_refusal("2606:4700::1") is None
    assert address_refusal("127.0.0.1", LOCAL) is None
    assert address_refusal("127.0.0.2", LOCAL) is not None


async def test_loopback_is_refused(server: str) -> None:
    async with guarded_async_client() as client:
        with pytest.raises(httpx.ConnectError, match="loopback"):
            await client.get(server)


async def test_a_name_is_checked_after_resolution(server: str) -> None:
    port = server.rsplit(":", 1)[1]
    async with guarded_async_client() as client:
        with pytest.raises(httpx.ConnectError, match=r"'localhost' resolves to .*loopback"):
            await client.get(f"http://localhost:{port}/")


async def test_the_override_allows_it(server: str) -> None:
    async with guarded_async_client(allow_networks=LOCAL, follow_redirects=True) as client:
        assert (await client.get(server)).text == "hello"
        assert (await client.get(server + "/to-self")).text == "hello"


@pytest.mark.parametrize("path", ["/to-127.0.0.2", "/to-metadata"])
async def test_every_redirect_is_checked(server: str, path: str) -> None:
    async with guarded_async_client(allow_networks=LOCAL, follow_redirects=True) as client:
        with pytest.raises(httpx.ConnectError, match="refused"):
            await client.get(server + path)


async def test_the_host_allow_list_applies_to_redirects(server: str) -> None:
    async with guarded_async_client(
        hosts=["127.0.0.1"], allow_networks=["127.0.0.0/8"], follow_redirects=True
    ) as client:
        assert (await client.get(server)).text == "hello"
        with pytest.raises(httpx.ConnectError, match="not in the allowed hosts"):
            await client.get(server + "/to-localhost")


def test_the_sync_client(server: str) -> None:
    with guarded_client() as client, pytest.raises(httpx.ConnectError, match="loopback"):
        client.get(server)
    with guarded_client(allow_networks=LOCAL, follow_redirects=True) as client:
        assert client.get(server + "/to-self").text == "hello"
        with pytest.raises(httpx.ConnectError, match="link-local"):
            client.get(server + "/to-metadata")


def test_proxy_variables_are_ignored(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    with guarded_client(allow_networks=LOCAL) as client:
        assert client.get(server).text == "hello"


# -- IPv4 addresses carried inside IPv6 ---------------------------------------------------------


def _embeddings(v4: ipaddress.IPv4Address) -> dict[str, str]:
    """``v4`` inside each IPv6 form that reaches it: IPv4-mapped, 6to4 and NAT64's
    well-known prefix."""
    n = int(v4)
    return {
        "mapped": str(ipaddress.IPv6Address((0xFFFF << 32) | n)),
        "6to4": str(ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1)),
        "nat64": str(ipaddress.IPv6Address((0x64FF9B << 96) | n)),
    }


@pytest.mark.parametrize("form", ["mapped", "6to4", "nat64"])
@pytest.mark.parametrize(
    ("v4", "kind"),
    [("127.0.0.1", "loopback"), ("10.0.0.1", "private"), ("169.254.169.254", "link-local")],
)
def test_an_ipv4_address_inside_ipv6_is_judged_as_itself(form: str, v4: str, kind: str) -> None:
    address = _embeddings(ipaddress.IPv4Address(v4))[form]
    why = address_refusal(address)
    assert why is not None and kind in why and v4 in why and address in why, why


@settings(max_examples=500, deadline=None)
@given(v4=st.builds(ipaddress.IPv4Address, st.integers(0, 2**32 - 1)))
def test_every_embedding_is_refused_exactly_when_its_ipv4_address_is(
    v4: ipaddress.IPv4Address,
) -> None:
    refused = address_refusal(str(v4)) is not None
    for form, address in _embeddings(v4).items():
        assert (address_refusal(address) is not None) == refused, (form, address)


def test_teredo_and_nat64_local_use_are_refused() -> None:
    # Teredo (2001::/32) around the server 65.54.227.120 and a client, and NAT64's
    # local-use prefix (its embedding depends on a prefix length the address cannot tell)
    assert address_refusal("2001:0:4136:e378:8000:63bf:3fff:fdd2") is not None
    assert address_refusal("64:ff9b:1::a00:1") is not None


async def test_a_6to4_address_of_loopback_is_not_connected_to(server: str) -> None:
    port = server.rsplit(":", 1)[1]
    async with guarded_async_client() as client:
        with pytest.raises(httpx.ConnectError, match=r"127\.0\.0\.1 is a loopback address"):
            await client.get(f"http://[2002:7f00:1::1]:{port}/")
