"""Which networks an address belongs to: mesh_only's allowed networks and the trusted proxies.

Settings hold the networks as validated strings (see `hermes_site.environment.env_cidrs`); they are
parsed here once per distinct list, so tests that override settings see their own lists.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

from access.config import AccessConfig

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def address_parse(raw: str | None) -> IPAddress | None:
    """A peer address as the server reported it, or None when it is not an IP address.

    An IPv4 client of a dual-stack (`::`) socket shows up as `::ffff:a.b.c.d`: it is that IPv4
    address, and must match IPv4 networks.
    """
    if not raw:
        return None
    try:
        address = ipaddress.ip_address(raw.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def address_within(raw: str | None, networks: Iterable[IPNetwork]) -> bool:
    """Whether `raw` is an IP address inside one of `networks` (never true for a missing address)."""
    address = address_parse(raw)
    return address is not None and any(address in network for network in networks)


def address_is_loopback(raw: str) -> bool:
    """Loopback addresses and the name `localhost`; the wildcard addresses are not loopback."""
    if raw.strip().lower() == "localhost":
        return True
    address = address_parse(raw.strip().strip("[]"))
    return address is not None and address.is_loopback


def trusted_proxy_networks() -> tuple[IPNetwork, ...]:
    return _parse(AccessConfig.from_settings().trusted_proxy_cidrs)


def allowed_networks() -> tuple[IPNetwork, ...]:
    """mesh_only's networks: HERMES_ALLOWED_CIDRS plus the trusted proxies, which must reach us."""
    config = AccessConfig.from_settings()
    return _parse((*config.allowed_cidrs, *config.trusted_proxy_cidrs))


@functools.lru_cache(maxsize=16)
def _parse(values: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(value, strict=False) for value in values)
