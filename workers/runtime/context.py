"""Per-process state of a crawl worker: config, Redis, frontier, fetcher, stores, caches.

Built once per worker process (lazily, on the first task) from the crawl's config in Redis, so
a worker that joins a running crawl needs only the Redis URL and the crawl's namespace.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Generic, TypeVar

import redis
from redis.cluster import RedisCluster

from dedup.service import DedupService
from frontier.config import ConfigError, CrawlConfig
from frontier.frontier import Frontier
from frontier.keys import Keys
from frontier.memo import BoundedMemo
from frontier.redisclient import client_from_url
from frontier.scope import Scope
from frontier.urls import DEFAULT_MAX_LENGTH, ParamStripper
from frontier.useragent import user_agent
from workers.fetch import Fetcher
from workers.pipeline.dnspool import worker_resolver
from workers.pipeline.robots import RobotsPolicy
from workers.pipeline.soft404 import Soft404Probe
from workers.runtime.fdlimit import KEPT_POOLS_PER_SLOT
from workers.storage.jsonl import RecordWriter
from workers.storage.warc import WarcWriter

log = logging.getLogger(__name__)
V = TypeVar("V")

E_NO_CRAWL = (
    "No crawl named {ns!r} in Redis at {url}: start one with 'trawl crawl' (or 'trawl demo') "
    "first, or pass the right --namespace."
)


def load_config(client: redis.Redis, namespace: str, url: str = "") -> CrawlConfig:
    raw = client.get(Keys(namespace).config)
    if raw is None:
        raise ConfigError(E_NO_CRAWL.format(ns=namespace, url=url))
    return CrawlConfig.from_json(raw.decode())


#: Hosts a HostCache keeps in the process before it starts over: a memory bound, not a
#: setting (a miss costs one Redis read, and the hosts in rotation come back at once).
HOST_CACHE_LOCAL_HOSTS = 50_000
#: URLs per generation of the seen-memo and links resolved in the link memo: memory bounds
#: of caches that change only how often Redis is asked, never what is crawled.
SEEN_MEMO_URLS = 50_000
LINK_MEMO_LINKS = 100_000


class HostCache(Generic[V]):
    """Per-host values kept in Redis with a TTL (robots.txt policies, soft-404 probes),
    mirrored in the process for ``local_ttl_s`` (host_cache_local_ttl_s) so hot hosts cost
    no Redis read."""

    def __init__(self, load: Callable[[str], bytes | None],
                 store: Callable[[str, bytes, float], None],
                 decode: Callable[[bytes], V | None], encode: Callable[[V], bytes],
                 what: str, local_ttl_s: float) -> None:
        self._load, self._store = load, store
        self._decode, self._encode = decode, encode
        self.what = what
        self.local_ttl_s = local_ttl_s
        self._local: dict[str, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, host: str) -> V | None:
        """The host's value, or None when there is none (or an unreadable one: fetch again)."""
        now = time.monotonic()
        with self._lock:
            hit = self._local.get(host)
        if hit and hit[0] > now:
            return hit[1]
        raw = self._load(host)
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

    def put(self, host: str, value: V, ttl_s: float) -> None:
        self._store(host, self._encode(value), ttl_s)
        self._remember(host, value, min(ttl_s, self.local_ttl_s))

    def _remember(self, host: str, value: V, ttl: float) -> None:
        with self._lock:
            if len(self._local) > HOST_CACHE_LOCAL_HOSTS:
                self._local.clear()
            self._local[host] = (time.monotonic() + ttl, value)


def robots_cache(frontier: Frontier, local_ttl_s: float) -> HostCache[RobotsPolicy]:
    return HostCache(frontier.robots_get, frontier.robots_set, RobotsPolicy.from_bytes,
                     RobotsPolicy.to_bytes, "robots.txt policy", local_ttl_s)


def soft404_cache(frontier: Frontier, local_ttl_s: float) -> HostCache[Soft404Probe]:
    return HostCache(frontier.soft404_get, frontier.soft404_set, Soft404Probe.from_json,
                     lambda probe: probe.to_json().encode(), "soft-404 probe", local_ttl_s)


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


class WorkerContext:
    def __init__(self, redis_url: str, namespace: str) -> None:
        self.redis_url = redis_url
        # The pool's size is a crawl setting, so the config is read first on its own client.
        with client_from_url(redis_url) as boot:
            self.config = cfg = load_config(boot, namespace, redis_url)
        self.client = client_from_url(redis_url, health_check_interval=30,
                                      max_connections=cfg.worker_redis_connections)
        self.frontier = Frontier(self.client, cfg)
        self.scope = Scope.from_config(cfg)
        self.strip = ParamStripper(cfg.session_id_params)
        #: Resolved link -> (canonical URL, host, Scope.url_reasons). Most links of a site are
        #: its navigation, on every page (the bench's sandbox web: 8,038 distinct links among
        #: 66,236 on 800 pages), and canonicalization + scope cost 5.9 us a link (issue 7).
        self.links: BoundedMemo[str, tuple[str, str, tuple[str | None, str | None]]] = (
            BoundedMemo(LINK_MEMO_LINKS))
        self.seen = (SeenMemo() if cfg.ordering in ("bfs", "random")
                     and not self.frontier.budgets_on
                     and not isinstance(self.client, RedisCluster) else None)
        #: Canonical URLs longer than this are invalid links (0 = the canonicalizer's cap).
        self.max_url_length = cfg.max_url_length or DEFAULT_MAX_LENGTH
        self.resolver = worker_resolver(cfg)
        self.user_agent = user_agent(cfg.user_agent_contact)
        self.fetcher = Fetcher(
            self.resolver, self.user_agent,
            connect_timeout_s=cfg.connect_timeout_s, read_timeout_s=cfg.read_timeout_s,
            total_timeout_s=cfg.total_timeout_s, max_bytes=cfg.max_body_bytes,
            allowed_content_types=tuple(cfg.allowed_content_types),
            allow_private=cfg.allow_private_ips,
            # One request per host at a time, so one kept-alive connection per host; keep the
            # pools of the hosts in rotation (a crawl of 5,000 hosts at 1 s delays visits
            # each every few seconds) so keep-alive survives between their fetches. Internal
            # sizing that follows from the politeness rule, so not settings.
            pool_maxsize=2,
            pool_connections=max(1000, KEPT_POOLS_PER_SLOT * cfg.fetch_concurrency),
            extra_ca=cfg.ca_bundle or None,
        )
        self.robots = robots_cache(self.frontier, cfg.host_cache_local_ttl_s)
        self.soft404 = soft404_cache(self.frontier, cfg.host_cache_local_ttl_s)
        self.dedup = DedupService(self.client, cfg.namespace, cfg.dedup_config())
        out = Path(cfg.output_dir)
        self.worker_id = f"{socket.gethostname()}-{os.getpid()}"
        self.warc = (WarcWriter(out / "warc", prefix=f"trawl-{self.worker_id}",
                                max_bytes=cfg.warc_max_bytes) if cfg.store_warc else None)
        self.records = RecordWriter(out / "records" / f"{self.worker_id}.jsonl")

    def close(self) -> None:
        if self.warc:
            self.warc.close()
        self.records.close()


_context: WorkerContext | None = None
_context_lock = threading.Lock()

#: Cyclic GC thresholds of a worker process (CPython's default: 700, 10, 10); CPU tuning
#: measured for the worker's allocation pattern (see tune_gc), not crawl behaviour.
GC_THRESHOLDS = (20_000, 50, 100)


def tune_gc() -> None:
    """Fewer cyclic collections in a worker: its pages allocate thousands of short-lived
    containers each, which reference counting frees, yet every 700 net allocations start a
    collection that also walks the memos' long-lived entries. bench/stage_cost.py on 2,000
    sandbox pages: 551 collections costing 0.095 ms a page by default, 15 costing 0.027 ms
    with these thresholds (issue 7). ``gc.freeze`` moves what exists now (modules, config,
    the context) out of every future collection."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def get_context(redis_url: str, namespace: str) -> WorkerContext:
    global _context
    if _context is None:
        with _context_lock:
            if _context is None:
                _context = WorkerContext(redis_url, namespace)
                tune_gc()
    return _context


def close_context() -> None:
    global _context
    with _context_lock:
        if _context is not None:
            _context.close()
            _context = None
