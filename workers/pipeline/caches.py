"""Caches in front of Redis that the pipeline reads per URL: per-host verdicts (robots.txt
policies, soft-404 probes) and the worker's memo of URLs the URL-seen test already holds."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from frontier.frontier import Frontier
from frontier.hostcache import HostCacheKind, HostCacheWrite
from workers.pipeline.robots import RobotsPolicy
from workers.pipeline.soft404 import Soft404Probe

log = logging.getLogger(__name__)
V = TypeVar("V")


#: Hosts a HostCache keeps in the process before it starts over: a memory bound, not a
#: setting (a miss costs one Redis read, and the hosts in rotation come back at once).
HOST_CACHE_LOCAL_HOSTS = 50_000
#: URLs per generation of the seen-memo and links resolved in the link memo: memory bounds
#: of caches that change only how often Redis is asked, never what is crawled.
SEEN_MEMO_URLS = 50_000
LINK_MEMO_LINKS = 100_000


class HostCache(Generic[V]):
    """The process's copy of one kind of per-host value (robots.txt policies, soft-404
    probes), each kept for ``local_ttl_s`` (host_cache_local_ttl_s) so hot hosts cost no Redis
    read. Redis holds the shared copy: :class:`HostVerdicts` reads it, the completion pipeline
    writes it."""

    def __init__(self, kind: HostCacheKind, decode: Callable[[bytes], V | None],
                 encode: Callable[[V], bytes], what: str, local_ttl_s: float) -> None:
        self.kind = kind
        self._decode, self._encode = decode, encode
        self.what = what
        self.local_ttl_s = local_ttl_s
        self._local: dict[str, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def local(self, host: str) -> V | None:
        """The host's value if this process holds a current one."""
        with self._lock:
            hit = self._local.get(host)
        return hit[1] if hit and hit[0] > time.monotonic() else None

    def load(self, host: str, raw: bytes | None) -> V | None:
        """The value of a Redis entry (None when there is none or it is unreadable: fetch it
        again), kept in the process."""
        if raw is None:
            return None
        try:
            value = self._decode(raw)
        except (ValueError, KeyError):
            log.warning("unreadable %s cached for %s: fetching it again", self.what, host)
            return None
        if value is not None:
            self._remember(host, value, self.local_ttl_s)
        return value

    def stage(self, host: str, value: V, ttl_s: float) -> HostCacheWrite:
        """Keep ``value`` in the process now; the returned write goes to Redis with the
        completion of the fetch that learned it (before the lease completes, so the next
        worker given the host finds it)."""
        self._remember(host, value, min(ttl_s, self.local_ttl_s))
        return HostCacheWrite(self.kind, host, self._encode(value), ttl_s)

    def _remember(self, host: str, value: V, ttl: float) -> None:
        with self._lock:
            if len(self._local) > HOST_CACHE_LOCAL_HOSTS:
                self._local.clear()
            self._local[host] = (time.monotonic() + ttl, value)


@dataclass(frozen=True, slots=True)
class HostState:
    """What the pipeline knows of a host before it fetches one of its URLs (None: unknown)."""

    robots: RobotsPolicy | None
    soft404: Soft404Probe | None


class HostVerdicts:
    """A host's robots.txt policy and soft-404 probe: from the process, else both from
    Redis in one round trip."""

    def __init__(self, frontier: Frontier, local_ttl_s: float) -> None:
        self._frontier = frontier
        self.robots: HostCache[RobotsPolicy] = HostCache(
            HostCacheKind.ROBOTS, RobotsPolicy.from_bytes, RobotsPolicy.to_bytes,
            "robots.txt policy", local_ttl_s)
        self.soft404: HostCache[Soft404Probe] = HostCache(
            HostCacheKind.SOFT404, Soft404Probe.from_json,
            lambda probe: probe.to_json().encode(), "soft-404 probe", local_ttl_s)

    @property
    def frontier(self) -> Frontier:
        """The frontier the verdicts are read through (also where a sitemap's lastmod goes)."""
        return self._frontier

    def get(self, host: str, with_soft404: bool = True) -> HostState:
        robots = self.robots.local(host)
        probe = self.soft404.local(host) if with_soft404 else None
        missing: list[HostCache[Any]] = []
        if robots is None:
            missing.append(self.robots)
        if with_soft404 and probe is None:
            missing.append(self.soft404)
        if missing:
            raws = self._frontier.host_cache_get(host, [cache.kind for cache in missing])
            for cache, raw in zip(missing, raws, strict=True):
                if cache is self.robots:
                    robots = self.robots.load(host, raw)
                else:
                    probe = self.soft404.load(host, raw)
        return HostState(robots, probe)


class SeenMemo:
    """Canonical URLs the URL-seen test already holds, as this worker process learned from
    its own admissions: Mercator's cache in front of the URL-seen test. A page's links are
    mostly its site's navigation, the same on every page, so most links need no trip to
    Redis (no arguments to pack and send, no Lua test: issue 7).

    Only sound where a seen link has no effect but being dropped: bfs and random orderings
    (indegree and opic count it), no domain budgets (a URL over budget is not marked seen),
    one Redis server. A server that restarted may have lost the last admissions (AOF), so
    entries are tied to the ``run_id`` of the server that answered them: see
    ``workers.app.tasks.apply_results``. Two generations of ``size`` URLs: when the newer fills
    up the older is dropped, so the URLs in use stay.
    """

    def __init__(self, size: int = SEEN_MEMO_URLS) -> None:
        self.size = size
        self.server: str | None = None
        self._new: set[str] = set()
        self._old: set[str] = set()

    def __contains__(self, url: str) -> bool:
        return url in self._new or url in self._old

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def add(self, urls: Iterable[str], server: str) -> None:
        """``urls`` were answered (admitted or seen) by the server whose run_id is ``server``."""
        if server != self.server:
            self.clear()
            self.server = server
        for url in urls:
            if len(self._new) >= self.size:
                self._old, self._new = self._new, set()
            self._new.add(url)

    def clear(self) -> None:
        self._new, self._old, self.server = set(), set(), None
