"""The address policy (SSRF guard): which IP addresses the crawler may connect to, and if not,
why not, in words a user can act on.

By default only globally routable unicast addresses are allowed: a page (or a DNS answer, or
a redirect) must not make the crawler fetch from its own network (10.0.0.1, 127.0.0.1,
169.254.169.254, fe80::1, ...). IPv6 forms that embed an IPv4 address (IPv4-mapped
``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo) are judged by the
embedded address as well. Two settings relax it: ``allow_private_ips`` allows every address,
``allowed_networks`` the networks listed (an internal crawl, the sandbox web).

Why a table of our own rather than ``ipaddress``'s ``is_global`` alone: its answers differ
between Python versions (CGNAT, 192.0.0.0/24) and it names no kind, which the refusal's reason
needs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["SETTINGS_HINT", "AddressPolicy", "Network", "parse_networks"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: What a refusal tells the user to change (the crawl's settings, frontier/config.py).
SETTINGS_HINT = "allow with allowed_networks or allow_private_ips"

_V4_KINDS: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/32", "unspecified"),  # connecting to it reaches the local host
    ("0.0.0.0/8", "this-network"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("169.254.0.0/16", "link-local"),  # 169.254.169.254: cloud metadata services
    ("100.64.0.0/10", "shared (carrier-grade NAT)"),  # RFC 6598
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
    ("192.0.0.0/24", "reserved"),  # IETF protocol assignments
    ("198.18.0.0/15", "reserved"),  # benchmarking
    ("192.0.2.0/24", "documentation"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
)
_V6_KINDS: tuple[tuple[str, str], ...] = (
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("fe80::/10", "link-local"),
    ("fc00::/7", "unique-local"),
    ("fec0::/10", "site-local"),  # deprecated, still routed inside some sites
    ("ff00::/8", "multicast"),
    ("2001:db8::/32", "documentation"),
)
_V4_TABLE = tuple((ipaddress.IPv4Network(n), k) for n, k in _V4_KINDS)
_V6_TABLE = tuple((ipaddress.IPv6Network(n), k) for n, k in _V6_KINDS)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _v4_kind(addr: ipaddress.IPv4Address) -> str | None:
    for net, kind in _V4_TABLE:
        if addr in net:
            return kind
    return None if addr.is_global else "special-purpose"


def _v6_own_kind(addr: ipaddress.IPv6Address) -> str | None:
    for net, kind in _V6_TABLE:
        if addr in net:
            return kind
    if addr in _NAT64:
        return None  # judged by its IPv4 address (Python calls the prefix reserved)
    return "reserved" if addr.is_reserved else (
        None if addr.is_global else "special-purpose")


def _embedded(addr: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address stands for, each with the form's name."""
    out: list[tuple[str, ipaddress.IPv4Address]] = []
    if addr.ipv4_mapped is not None:
        out.append(("IPv4-mapped", addr.ipv4_mapped))
    if addr in _NAT64:
        out.append(("NAT64", ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)))
    if addr.sixtofour is not None:
        out.append(("6to4", addr.sixtofour))
    if addr.teredo is not None:
        out.extend(("Teredo", v4) for v4 in addr.teredo)
    return out


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """CIDR strings ("10.1.0.0/16", "fd00::/8", a bare address = one host) as networks.

    Raises ValueError naming the entry that is not one (host bits set count as a mistake:
    "10.1.2.3/16" is refused rather than silently widened)."""
    nets: list[Network] = []
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not a string")
        try:
            nets.append(ipaddress.ip_network(value.strip(), strict=True))
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a network in CIDR form ({exc})") from None
    return tuple(nets)


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """Which addresses may be connected to: :meth:`refusal` says why one may not.

    ``allow_private`` allows everything that parses; ``allowed_networks`` allows the
    addresses in them (an IPv4-mapped ``::ffff:a.b.c.d`` also when ``a.b.c.d`` is in one);
    everything else must be globally routable unicast.
    """

    allow_private: bool = False
    allowed_networks: tuple[Network, ...] = ()

    @classmethod
    def of(cls, allow_private: bool = False, allowed_networks: Iterable[str] = ()
           ) -> AddressPolicy:
        """A policy from the crawl's two settings (raises ValueError for a bad network)."""
        return cls(allow_private, parse_networks(allowed_networks))

    def refusal(self, ip: str) -> str | None:
        """None if ``ip`` may be connected to, else why not: "private address 10.0.0.1"."""
        try:
            addr: Address = ipaddress.ip_address(ip.split("%", 1)[0])  # drop a zone id
        except ValueError:
            return f"not an IP address: {ip!r}"
        if self.allow_private or self._listed(addr):
            return None
        if isinstance(addr, ipaddress.IPv4Address):
            kind = _v4_kind(addr)
            return None if kind is None else f"{kind} address {ip}"
        for form, v4 in _embedded(addr):
            kind = _v4_kind(v4)
            if kind is not None and not self._listed(v4):
                return f"{form} {kind} address {ip} ({v4})"
        if addr.ipv4_mapped is not None:
            return None  # judged entirely by its IPv4 address
        kind = _v6_own_kind(addr)
        return None if kind is None else f"{kind} address {ip}"

    def allows(self, ip: str) -> bool:
        return self.refusal(ip) is None

    def _listed(self, addr: Address) -> bool:
        if any(addr in net for net in self.allowed_networks):
            return True
        mapped = getattr(addr, "ipv4_mapped", None)
        return mapped is not None and any(mapped in net for net in self.allowed_networks)
