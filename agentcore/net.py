"""A guarded HTTP transport for tools that fetch URLs a model chose (httpx).

::

    from agentcore.net import guarded_async_client

    @tool(effect="read", policies=[host_allowed("url", ["docs.example.com"])])
    async def fetch(url: str) -> str:
        async with guarded_async_client(follow_redirects=True) as client:
            return (await client.get(url)).text

The transport refuses to connect to private, loopback, link-local, shared, reserved,
multicast and unspecified addresses (anything that is not globally routable, IPv4-mapped
IPv6 included). It checks the addresses a host name resolves to, refuses the name when any
of them is refused, and then connects to the checked address itself, so a second DNS answer
(DNS rebinding) cannot move the connection. httpx sends every redirect through the
transport, so every hop is checked. ``hosts`` adds an allow-list of host names, checked on
every request and redirect too. A refusal raises :class:`httpx.ConnectError` saying why.

Proxies are not used (a proxy would connect on the tool's behalf, past the check); the
clients made here ignore proxy environment variables. Importing this module imports httpx.

A request made while a tool call runs carries the call's identity by itself
(:meth:`ToolContext.request_headers <agentcore.ToolContext.request_headers>`):
``Agentcore-Fencing-Token`` on every request, ``Idempotency-Key`` on a POST or PATCH. A
header the tool set itself is left as it is.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import socket
from collections.abc import Iterable, Sequence
from typing import Any

import httpcore
import httpx

from .tools import ToolContext

__all__ = [
    "AsyncGuardedTransport",
    "GuardedTransport",
    "address_refusal",
    "guarded_async_client",
    "guarded_client",
]

_IP = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def address_refusal(address: str, allow_networks: Iterable[str] = ()) -> str | None:
    """Why a connection to the IP ``address`` is refused, or ``None`` when it is allowed:
    a globally routable address, or one inside ``allow_networks`` (CIDR strings)."""
    ip: _IP = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone
    if isinstance(ip, ipaddress.IPv6Address) and (inner := _embedded(ip)) != ip:
        why = address_refusal(str(inner), allow_networks)
        return None if why is None else f"{why} (inside {ip})"
    if any(ip in ipaddress.ip_network(n, strict=False) for n in allow_networks):
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.teredo is not None:
        server, client = ip.teredo  # the client's address is stored inverted
        for inner in (server, ipaddress.IPv4Address(int(client) ^ 0xFFFFFFFF)):
            why = address_refusal(str(inner))
            if why is not None:
                return f"{ip} is a Teredo address around {inner}: {why}"
    for kind in ("unspecified", "loopback", "link_local", "private", "multicast", "reserved"):
        if getattr(ip, f"is_{kind}"):
            return f"{ip} is a {kind.replace('_', '-')} address"
    return None if ip.is_global else f"{ip} is not a globally routable address"


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # the well-known prefix: the last 32 bits


def _embedded(ip: ipaddress.IPv6Address) -> _IP:
    """The IPv4 address an IPv6 address carries to (IPv4-mapped, 6to4, NAT64's well-known
    prefix), judged instead of it: ``2002:7f00:1::`` reaches 127.0.0.1 through a 6to4
    relay. Anything else is returned as it is (NAT64's local-use prefix ``64:ff9b:1::/48``
    places the address by a prefix length the address does not tell: it is refused as not
    globally routable)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


class _Guard:
    def __init__(self, hosts: Sequence[str] | None, allow_networks: Sequence[str]) -> None:
        self.hosts = None if hosts is None else tuple(h.lower().rstrip(".") for h in hosts)
        self.networks = tuple(str(ipaddress.ip_network(n, strict=False)) for n in allow_networks)

    def prepare(self, request: httpx.Request) -> None:
        """Refuse a request to a host not allowed; add the running call's identity."""
        self.check_request(request)
        ctx = ToolContext.current()
        if ctx is not None:  # a header already there (the tool's, a redirect's) stays
            request.headers.update(ctx.request_headers(request.method, request.headers.keys()))

    def check_request(self, request: httpx.Request) -> None:
        host = request.url.host.lower().rstrip(".")
        if self.hosts is not None and not any(
            host == h or (h.startswith("*.") and fnmatch.fnmatch(host, h)) for h in self.hosts
        ):
            raise httpx.ConnectError(
                f"refused: host {host!r} is not in the allowed hosts ({', '.join(self.hosts)})",
                request=request,
            )

    def pick(self, host: str, infos: Sequence[tuple[Any, ...]]) -> str:  # Any: getaddrinfo rows
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not addresses:
            raise httpcore.ConnectError(f"refused: {host!r} resolves to no address")
        for address in addresses:
            why = address_refusal(address, self.networks)
            if why is not None:
                raise httpcore.ConnectError(f"refused: {host!r} resolves to {why}")
        return addresses[0]


class _AsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, guard: _Guard) -> None:
        self.guard = guard
        # httpcore declares a stand-in class for when anyio is missing; httpx requires anyio.
        self.inner: httpcore.AsyncNetworkBackend = httpcore.AnyIOBackend()  # pyright: ignore[reportAttributeAccessIssue]

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109  # httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,  # Any: httpcore's socket option tuples
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
        address = self.guard.pick(host, infos)
        return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109  # httpcore's interface
        socket_options: Iterable[Any] | None = None,  # Any: httpcore's socket option tuples
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("refused: Unix sockets are not reachable through this client")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _SyncBackend(httpcore.NetworkBackend):
    def __init__(self, guard: _Guard) -> None:
        self.guard = guard
        self.inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,  # Any: httpcore's socket option tuples
    ) -> httpcore.NetworkStream:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
        address = self.guard.pick(host, infos)
        return self.inner.connect_tcp(address, port, timeout, local_address, socket_options)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,  # Any: httpcore's socket option tuples
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("refused: Unix sockets are not reachable through this client")


class AsyncGuardedTransport(httpx.AsyncHTTPTransport):
    """An httpx async transport that connects only to globally routable addresses.

    Args:
        hosts: if given, the only host names requests (and redirects) may name; exact
            names or ``*.example.com`` patterns.
        allow_networks: CIDR networks allowed although not global (tests:
            ``["127.0.0.1/32"]``; an internal service you mean to reach).
        verify: TLS verification, as httpx's ``verify``.
    """

    def __init__(
        self,
        *,
        hosts: Sequence[str] | None = None,
        allow_networks: Sequence[str] = (),
        verify: bool | str = True,
    ) -> None:
        super().__init__(verify=verify, trust_env=False)
        self._guard = _Guard(hosts, allow_networks)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            network_backend=_AsyncBackend(self._guard),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self._guard.prepare(request)
        return await super().handle_async_request(request)


class GuardedTransport(httpx.HTTPTransport):
    """The synchronous :class:`AsyncGuardedTransport` (same arguments)."""

    def __init__(
        self,
        *,
        hosts: Sequence[str] | None = None,
        allow_networks: Sequence[str] = (),
        verify: bool | str = True,
    ) -> None:
        super().__init__(verify=verify, trust_env=False)
        self._guard = _Guard(hosts, allow_networks)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            network_backend=_SyncBackend(self._guard),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self._guard.prepare(request)
        return super().handle_request(request)


def guarded_async_client(
    *,
    hosts: Sequence[str] | None = None,
    allow_networks: Sequence[str] = (),
    **kwargs: Any,  # Any: httpx.AsyncClient's own keywords (timeout, follow_redirects, ...)
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` on :class:`AsyncGuardedTransport` that ignores proxy
    environment variables."""
    transport = AsyncGuardedTransport(hosts=hosts, allow_networks=allow_networks)
    return httpx.AsyncClient(transport=transport, trust_env=False, **kwargs)


def guarded_client(
    *,
    hosts: Sequence[str] | None = None,
    allow_networks: Sequence[str] = (),
    **kwargs: Any,  # Any: httpx.Client's own keywords (timeout, follow_redirects, ...)
) -> httpx.Client:
    """An ``httpx.Client`` on :class:`GuardedTransport` that ignores proxy environment
    variables."""
    transport = GuardedTransport(hosts=hosts, allow_networks=allow_networks)
    return httpx.Client(transport=transport, trust_env=False, **kwargs)
