"""Where the A2A client may connect. Enforced under every HTTP client it uses, for every request.

For a peer, the client reaches exactly one origin (`scheme://host:port` from the peers file), so
neither the model nor a peer's agent card can point it anywhere else. Before connecting, the host
is resolved and every address checked: link-local, cloud metadata, multicast and unspecified
addresses are refused (loopback and private ranges are fine: that is where homelab agents live).
The connection then goes to the address that was checked — the URL's host is replaced by it, with
the name kept for TLS (`sni_hostname`) and the `Host` header — so a DNS answer that changes
between check and connect cannot slip through. Redirects are never followed: a 3xx is an error.
Proxies from the environment are ignored (`trust_env=False`): they would bypass the address check.

`Resolver` is the seam tests use to map a name to an address of their choosing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx
import httpx2

from interop.peers import url_origin

Resolver = Callable[[str, int], Awaitable[list[str]]]

# Addresses that answer with cloud credentials or host secrets (AWS/GCP/Azure/OpenStack, ECS,
# AWS IPv6, Alibaba, Azure's wire server).
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_BROADCAST = ipaddress.ip_address("255.255.255.255")


class PeerRefused(Exception):
    """Hermes refused to make (or finish) a request to a peer. `kind`: `not_allowed`,
    `forbidden_address` or `redirect`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


async def system_resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in the resolver's order, without duplicates."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def address_refusal(address: str) -> str | None:
    """Why Hermes must not connect to `address`, or None when it may."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_unspecified or ip == _BROADCAST or (isinstance(ip, ipaddress.IPv4Address) and ip in _THIS_NETWORK):
        return "an unspecified or broadcast address"
    return None


class PeerPolicy:
    """The rules for one peer's requests: its one origin, checked addresses, no redirects."""

    def __init__(self, *, origin: str, resolver: Resolver | None = None) -> None:
        self.origin = origin
        self._resolve = resolver or system_resolve

    async def address_for(self, url: str, host: str, port: int) -> str:
        """The checked address to connect to for `url`; raises `PeerRefused`."""
        try:
            origin = url_origin(url)
        except ValueError as exc:
            raise PeerRefused("not_allowed", str(exc)) from None
        if origin != self.origin:
            raise PeerRefused("not_allowed", f"{origin} is not this peer's origin ({self.origin}); request refused")
        try:
            addresses = await self._resolve(host, port)
        except OSError as exc:
            raise PeerRefused("forbidden_address", f"cannot resolve {host}: {exc}") from None
        if not addresses:
            raise PeerRefused("forbidden_address", f"{host} resolves to no address")
        for address in addresses:
            reason = address_refusal(address)
            if reason is not None:
                raise PeerRefused(
                    "forbidden_address", f"{host} resolves to {address}, {reason}; Hermes does not connect there"
                )
        return addresses[0]

    def redirect_refusal(self, status: int, location: str | None) -> PeerRefused | None:
        if 300 <= status < 400:
            target = f" to {location}" if location else ""
            return PeerRefused(
                "redirect", f"the peer answered HTTP {status}, a redirect{target}; Hermes does not follow redirects"
            )
        return None


# The two httpx generations have the same request/response API under different types.
RequestT = TypeVar("RequestT", httpx.Request, httpx2.Request)
ResponseT = TypeVar("ResponseT", httpx.Response, httpx2.Response)


async def guarded(policy: PeerPolicy, request: RequestT, send: Callable[[RequestT], Awaitable[ResponseT]]) -> ResponseT:
    """`send(request)` to the address `policy` checked, keeping the name for TLS; refuses a redirect."""
    host = request.url.host
    port = request.url.port or (443 if request.url.scheme == "https" else 80)
    address = await policy.address_for(str(request.url), host, port)
    request.extensions = {**request.extensions, "sni_hostname": host}
    request.url = request.url.copy_with(host=address)
    response = await send(request)
    refusal = policy.redirect_refusal(response.status_code, response.headers.get("location"))
    if refusal is not None:
        await response.aclose()
        raise refusal
    return response


class GuardedTransport(httpx.AsyncHTTPTransport):
    """A classic-httpx transport (for the `a2a-sdk` client) that obeys a `PeerPolicy`."""

    def __init__(self, policy: PeerPolicy) -> None:
        super().__init__(trust_env=False)
        self._policy = policy

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await guarded(self._policy, request, super().handle_async_request)


class GuardedTransport2(httpx2.AsyncHTTPTransport):
    """The same rules for httpx2, which Hermes's own requests use."""

    def __init__(self, policy: PeerPolicy) -> None:
        super().__init__(trust_env=False)
        self._policy = policy

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await guarded(self._policy, request, super().handle_async_request)
