"""The per-IP politeness gate: at most ``ip_concurrency`` fetches in flight per IP, and the
IP's own next allowed time (hosts sharing an IP share it).

Encoders and decoders of lua/ip_acquire.lua and ip_release.lua. IPs are partitioned apart
from hosts (keys ``{i<n>}``), by a hash of the IP.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from frontier.keys import ip_partition_of
from frontier.scripts import Store, load_script

_IP_ACQUIRE = load_script("ip_acquire")
_IP_RELEASE = load_script("ip_release")


class IpRelease(NamedTuple):
    """A fetch to ``ip`` ended: free its token; the IP may be used again from next_allowed."""

    ip: str
    token: str
    next_allowed: float


def encode_ip_acquire(prefix: str, now: float, limit: int, token_ttl_s: float,
                      requests: Iterable[tuple[str, str]]) -> list[Any]:
    """lua/ip_acquire.lua's ARGV: ip prefix, now, limit, token_ttl_s, then per request:
    ip, token."""
    argv: list[Any] = [prefix, now, limit, token_ttl_s]
    for ip, token in requests:
        argv += [ip, token]
    return argv


def decode_ip_acquire(raw: Sequence[Any]) -> list[float]:
    """Per request, 0.0 (granted) or the seconds to wait."""
    return [float(w) for w in raw]


def encode_ip_release(prefix: str, releases: Iterable[IpRelease]) -> list[Any]:
    """lua/ip_release.lua's ARGV: ip prefix, then per token: ip, token, next_allowed."""
    argv: list[Any] = [prefix]
    for ip, token, next_allowed in releases:
        argv += [ip, token, repr(next_allowed)]
    return argv


class IpGate:
    """Grants and releases per-IP fetch tokens (off when ``ip_concurrency`` is 0)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _partition(self, ip: str) -> int:
        return ip_partition_of(ip, self.store.partitions)

    def acquire(self, requests: Sequence[tuple[str, str]],
                now: float | None = None) -> list[float]:
        """Gate (ip, token) pairs; returns per pair 0.0 (granted) or seconds to wait."""
        cfg = self.store.config
        if cfg.ip_concurrency <= 0 or not requests:
            return [0.0] * len(requests)
        now = time.time() if now is None else now
        groups: dict[int, list[int]] = defaultdict(list)
        for i, (ip, _token) in enumerate(requests):
            groups[self._partition(ip)].append(i)
        pipe = self.store.pipeline()
        keys = self.store.keys
        for ipp, idx in groups.items():
            argv = encode_ip_acquire(keys.ip_prefix(ipp), now, cfg.ip_concurrency,
                                     cfg.lease_ttl_s, [requests[i] for i in idx])
            pipe.script(_IP_ACQUIRE, [keys.ip_next(ipp)], argv)
        waits = [0.0] * len(requests)
        for idx, raw in zip(groups.values(), pipe.execute(), strict=True):
            for i, w in zip(idx, decode_ip_acquire(raw), strict=True):
                waits[i] = w
        return waits

    def queue_release(self, pipe: Any, releases: Iterable[tuple[str, str, float]]) -> int:
        """Add token releases to ``pipe``; returns how many replies they add."""
        if self.store.config.ip_concurrency <= 0:
            return 0
        groups: dict[int, list[IpRelease]] = defaultdict(list)
        for release in releases:
            groups[self._partition(release[0])].append(IpRelease(*release))
        keys = self.store.keys
        for ipp, group in groups.items():
            pipe.script(_IP_RELEASE, [keys.ip_next(ipp)],
                        encode_ip_release(keys.ip_prefix(ipp), group))
        return len(groups)
