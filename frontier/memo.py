"""A bounded memo for per-process caches of pure answers whose inputs repeat (hosts, links)."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(dict[K, V]):
    """A dict of at most ``size`` entries, dropped whole when full.

    Why not an LRU: a lookup stays one dict access on the hot path, and the entries in use
    (a site's navigation links, the hosts of a crawl) come back right after a drop. dict get
    and set are atomic, so threads may share one without a lock.
    """

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def put(self, key: K, value: V) -> V:
        if len(self) >= self.size:
            self.clear()
        self[key] = value
        return value
