"""Per-host caches in the host's partition: its robots.txt policy and soft-404 probe.

Plain strings with a TTL; workers keep a local cache in front (``HostVerdicts`` in
workers/pipeline/caches.py). A worker reads both of a host's entries in one round trip and
writes them in the completion pipeline of the fetch that learned them, not one command per
value from a fetcher thread: those single GETs and SETs were 12% of a worker's CPU on the
internet-like web (py-spy, bench/run --web internet --profile: redis-py's per-command cost
in a process of a hundred threads).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from frontier.keys import partition_of
from frontier.scripts import Store


class HostCacheKind(Enum):
    """What a host cache entry holds."""

    ROBOTS = "robots"
    SOFT404 = "soft404"


@dataclass(frozen=True, slots=True)
class HostCacheWrite:
    """A serialized entry to store for ``ttl_s`` seconds."""

    kind: HostCacheKind
    host: str
    data: bytes
    ttl_s: float


class HostCaches:
    """Get and set the serialized robots.txt policy and soft-404 probe of a host."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def key(self, kind: HostCacheKind, host: str) -> str:
        keys, partition = self.store.keys, partition_of(host, self.store.partitions)
        return (keys.robots(partition, host) if kind is HostCacheKind.ROBOTS
                else keys.soft404(partition, host))

    def get(self, host: str, kinds: Sequence[HostCacheKind]) -> list[bytes | None]:
        """The host's entries of ``kinds``, in that order, in one round trip (the keys share
        the host's partition, hence one cluster slot)."""
        if len(kinds) == 1:
            return [self.store.r.get(self.key(kinds[0], host))]
        return list(self.store.r.mget([self.key(kind, host) for kind in kinds]))

    def queue_set(self, pipe: Any, writes: Iterable[HostCacheWrite]) -> int:
        """Queue ``writes`` on a frontier pipeline; returns how many replies they add."""
        n = 0
        for write in writes:
            pipe.command("SET", self.key(write.kind, write.host), write.data, "PX",
                         max(1, int(write.ttl_s * 1000)))
            n += 1
        return n
