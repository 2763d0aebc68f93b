"""Per-host caches in the host's partition: its robots.txt policy and soft-404 probe.

Plain strings with a TTL; workers keep a local cache in front (HostCache in
workers/runtime/context.py).
"""

from __future__ import annotations

from frontier.keys import partition_of
from frontier.scripts import Store


class HostCaches:
    """Get and set the serialized robots.txt policy and soft-404 probe of a host."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _partition(self, host: str) -> int:
        return partition_of(host, self.store.partitions)

    def robots_get(self, host: str) -> bytes | None:
        return self.store.r.get(self.store.keys.robots(self._partition(host), host))

    def robots_set(self, host: str, data: bytes, ttl_s: float) -> None:
        self.store.r.set(self.store.keys.robots(self._partition(host), host), data,
                         px=max(1, int(ttl_s * 1000)))

    def soft404_get(self, host: str) -> bytes | None:
        return self.store.r.get(self.store.keys.soft404(self._partition(host), host))

    def soft404_set(self, host: str, data: bytes, ttl_s: float) -> None:
        self.store.r.set(self.store.keys.soft404(self._partition(host), host), data,
                         px=max(1, int(ttl_s * 1000)))
