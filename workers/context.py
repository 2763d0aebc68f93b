"""Per-process state of a crawl worker: config, Redis, frontier, fetcher, stores, caches.

Built once per worker process (lazily, on the first task) from the crawl's config in Redis, so
a worker that joins a running crawl needs only the Redis URL and the crawl's namespace.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from pathlib import Path

import redis

from dedup.config import DedupConfig
from dedup.service import DedupService
from frontier.config import ConfigError, CrawlConfig
from frontier.frontier import Frontier
from frontier.keys import Keys
from frontier.redisclient import client_from_url
from frontier.scope import Scope
from frontier.urls import DEFAULT_MAX_LENGTH, ParamStripper
from workers.dns import CachingResolver
from workers.fetch import Fetcher
from workers.robots import RobotsPolicy
from workers.soft404 import Soft404Probe
from workers.storage import RecordWriter, WarcWriter
from workers.useragent import user_agent

log = logging.getLogger(__name__)

E_NO_CRAWL = (
    "No crawl named {ns!r} in Redis at {url}: start one with 'trawl crawl' (or 'trawl demo') "
    "first, or pass the right --namespace."
)


def load_config(client: redis.Redis, namespace: str, url: str = "") -> CrawlConfig:
    raw = client.get(Keys(namespace).config)
    if raw is None:
        raise ConfigError(E_NO_CRAWL.format(ns=namespace, url=url))
    return CrawlConfig.from_json(raw.decode())


class Soft404Cache:
    """Per-host soft-404 probes (workers/soft404.py): Redis, mirrored in the process."""

    def __init__(self, frontier: Frontier, local_ttl_s: float = 60.0) -> None:
        self.frontier = frontier
        self.local_ttl_s = local_ttl_s
        self._local: dict[str, tuple[float, Soft404Probe]] = {}
        self._lock = threading.Lock()

    def get(self, host: str) -> Soft404Probe | None:
        now = time.monotonic()
        with self._lock:
            hit = self._local.get(host)
        if hit and hit[0] > now:
            return hit[1]
        raw = self.frontier.soft404_get(host)
        if raw is None:
            return None
        try:
            probe = Soft404Probe.from_json(raw)
        except (ValueError, KeyError):
            log.warning("unreadable soft-404 probe cached for %s: probing again", host)
            return None
        if probe is not None:
            self._remember(host, probe, self.local_ttl_s)
        return probe

    def put(self, probe: Soft404Probe, ttl_s: float) -> None:
        self.frontier.soft404_set(probe.host, probe.to_json(), ttl_s)
        self._remember(probe.host, probe, min(ttl_s, self.local_ttl_s))

    def _remember(self, host: str, probe: Soft404Probe, ttl: float) -> None:
        with self._lock:
            if len(self._local) > 50_000:
                self._local.clear()
            self._local[host] = (time.monotonic() + ttl, probe)


class RobotsCache:
    """In-process mirror of the Redis robots cache, so hot hosts cost no Redis read."""

    def __init__(self, frontier: Frontier, local_ttl_s: float = 60.0) -> None:
        self.frontier = frontier
        self.local_ttl_s = local_ttl_s
        self._local: dict[str, tuple[float, RobotsPolicy]] = {}
        self._lock = threading.Lock()

    def get(self, host: str) -> RobotsPolicy | None:
        now = time.monotonic()
        with self._lock:
            hit = self._local.get(host)
        if hit and hit[0] > now:
            return hit[1]
        raw = self.frontier.robots_get(host)
        if raw is None:
            return None
        try:
            policy = RobotsPolicy.from_bytes(raw)
        except ValueError:
            log.warning("unreadable robots cache entry for %s: refetching", host)
            return None
        self._remember(host, policy)
        return policy

    def put(self, host: str, policy: RobotsPolicy, ttl_s: float) -> None:
        self.frontier.robots_set(host, policy.to_bytes(), ttl_s)
        self._remember(host, policy, min(ttl_s, self.local_ttl_s))

    def _remember(self, host: str, policy: RobotsPolicy, ttl: float | None = None) -> None:
        with self._lock:
            if len(self._local) > 50_000:
                self._local.clear()
            self._local[host] = (time.monotonic() + (ttl or self.local_ttl_s), policy)


class WorkerContext:
    def __init__(self, redis_url: str, namespace: str) -> None:
        self.redis_url = redis_url
        self.client = client_from_url(redis_url, health_check_interval=30)
        self.config = load_config(self.client, namespace, redis_url)
        cfg = self.config
        self.frontier = Frontier(self.client, cfg)
        self.scope = Scope.from_config(cfg)
        self.strip = ParamStripper(cfg.session_id_params)
        #: Canonical URLs longer than this are invalid links (0 = the canonicalizer's cap).
        self.max_url_length = cfg.max_url_length or DEFAULT_MAX_LENGTH
        self.resolver = CachingResolver(ttl_s=cfg.dns_ttl_s, static=cfg.static_hosts,
                                        allow_private=cfg.allow_private_ips)
        self.user_agent = user_agent(cfg.user_agent_contact)
        self.fetcher = Fetcher(
            self.resolver, self.user_agent,
            connect_timeout_s=cfg.connect_timeout_s, read_timeout_s=cfg.read_timeout_s,
            total_timeout_s=cfg.total_timeout_s, max_bytes=cfg.max_body_bytes,
            allowed_content_types=tuple(cfg.allowed_content_types),
            allow_private=cfg.allow_private_ips,
        )
        self.robots = RobotsCache(self.frontier)
        self.soft404 = Soft404Cache(self.frontier)
        self.dedup = DedupService(self.client, cfg.namespace,
                                  DedupConfig(**{"enabled": cfg.dedup_enabled,
                                                 **cfg.dedup_settings}))
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


def get_context(redis_url: str, namespace: str) -> WorkerContext:
    global _context
    if _context is None:
        with _context_lock:
            if _context is None:
                _context = WorkerContext(redis_url, namespace)
    return _context


def close_context() -> None:
    global _context
    with _context_lock:
        if _context is not None:
            _context.close()
            _context = None
