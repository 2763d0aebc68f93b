"""Per-process state of a crawl worker: config, Redis, frontier, fetcher, stores, caches.

Built once per worker process (lazily, on the first task) from the crawl's config in Redis, so
a worker that joins a running crawl needs only the Redis URL and the crawl's namespace.
"""

from __future__ import annotations

import gc
import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis
from redis.cluster import RedisCluster

from dedup.service import DedupService
from frontier.config import ConfigError, CrawlConfig
from frontier.dropped import DroppedView
from frontier.frontier import Frontier
from frontier.keys import Keys
from frontier.memo import BoundedMemo
from frontier.redisclient import client_from_url, redacted
from frontier.scope import Scope
from frontier.urls import DEFAULT_MAX_LENGTH, ParamStripper
from frontier.useragent import user_agent
from workers.components.api import ComponentSetup
from workers.components.builtin import JSONL_RECORDS, WARC_STORE, Dedup
from workers.components.chain import Components
from workers.components.loader import build_components
from workers.dns.pool import worker_resolver
from workers.fetch import Fetcher
from workers.pipeline.caches import LINK_MEMO_LINKS, HostVerdicts, SeenMemo
from workers.pipeline.revisit_state import VisitStore
from workers.runtime.drop_sweep import DropSweeper
from workers.runtime.fdlimit import KEPT_POOLS_PER_SLOT
from workers.runtime.figures import process_worker_id
from workers.runtime.revisit_plans import PlanCache
from workers.storage.jsonl import RecordWriter
from workers.storage.warc import WarcWriter, crawl_warcinfo

log = logging.getLogger(__name__)

E_NO_CRAWL = (
    "No crawl named {ns!r} in Redis at {url}: start one with 'trawl crawl' (or 'trawl demo') "
    "first, or pass the right --namespace."
)


def load_config(client: redis.Redis, namespace: str, url: str = "") -> CrawlConfig:
    raw = client.get(Keys(namespace).config)
    if raw is None:
        raise ConfigError(E_NO_CRAWL.format(ns=namespace, url=redacted(url)))
    return CrawlConfig.from_json(raw.decode())


def fetcher_settings(cfg: CrawlConfig) -> dict[str, Any]:
    """The crawl's limits and trust for a fetcher (``Fetcher`` and ``AsyncFetcher`` alike)."""
    return dict(
        connect_timeout_s=cfg.connect_timeout_s, read_timeout_s=cfg.read_timeout_s,
        total_timeout_s=cfg.total_timeout_s, max_bytes=cfg.max_body_bytes,
        allowed_content_types=tuple(cfg.allowed_content_types),
        allow_private=cfg.allow_private_ips, allowed_networks=tuple(cfg.allowed_networks),
        # One request per host at a time, so one kept-alive connection per host; keep the
        # connections of the hosts in rotation (a crawl of 5,000 hosts at 1 s delays visits
        # each every few seconds) so keep-alive survives between their fetches. Internal
        # sizing that follows from the politeness rule, so not settings.
        pool_connections=max(1000, KEPT_POOLS_PER_SLOT * cfg.fetch_concurrency),
        extra_ca=cfg.ca_bundle or None,
    )


class WorkerContext:
    """Everything a worker process holds for the crawl; it is the pipeline's
    :class:`workers.pipeline.services.PipelineServices`."""

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
        #: Domains an operator dropped (``trawl drop``): re-read every few seconds; a change
        #: reaches the scope and empties the link memo, whose scope answers it may change.
        self.dropped = DroppedView(self.frontier.dropped, on_change=self._dropped_changed)
        #: Empties, once per newly dropped domain, its hosts' queues crawl-wide.
        self.drop_sweeper = DropSweeper(self)
        self.seen = (SeenMemo() if cfg.ordering in ("bfs", "random")
                     and not self.frontier.budgets_on
                     and not isinstance(self.client, RedisCluster) else None)
        #: Canonical URLs longer than this are invalid links (0 = the canonicalizer's cap).
        self.max_url_length = cfg.max_url_length or DEFAULT_MAX_LENGTH
        self.resolver = worker_resolver(cfg)
        self.user_agent = user_agent(cfg.user_agent_contact)
        self.fetcher = Fetcher(self.resolver, self.user_agent, **fetcher_settings(cfg))
        self.hosts = HostVerdicts(self.frontier, cfg.host_cache_local_ttl_s)
        out = Path(cfg.output_dir)
        self.worker_id = process_worker_id()
        # The built-in pipelines' writers exist only when the config lists those pipelines.
        self.warc = (WarcWriter(out / "warc", prefix=f"trawl-{self.worker_id}",
                                max_bytes=cfg.warc_max_bytes,
                                warc_version=str(cfg.warc_version),  # 1.0 from --set
                                warcinfo=crawl_warcinfo(cfg.namespace, cfg.user_agent_contact,
                                                        self.user_agent))
                     if cfg.store_warc and WARC_STORE in cfg.pipelines else None)
        self.records = (RecordWriter(out / "records" / f"{self.worker_id}.jsonl")
                        if JSONL_RECORDS in cfg.pipelines else None)
        built = build_components(cfg, ComponentSetup(cfg, {}, self.worker_id, out, self.warc))
        self.components = Components(cfg, built)
        dedup_cfg = cfg.dedup_config()
        if not any(isinstance(p, Dedup) for p in built.pipelines):
            dedup_cfg = replace(dedup_cfg, enabled=False)  # left out: no page is checked
        self.dedup = DedupService(self.client, cfg.namespace, dedup_cfg)
        self.visits = VisitStore(self.client, cfg) if cfg.continuous else None
        self.plans = PlanCache(self.client, cfg) if cfg.continuous else None

    def _dropped_changed(self, domains: frozenset[str]) -> None:
        log.warning("dropped from the crawl now: %s", ", ".join(sorted(domains)) or "none")
        self.scope.set_dropped(domains)
        self.links.clear()
        self.drop_sweeper.domains_changed(domains)

    def close(self) -> None:
        # a sweep under way writes records of URLs it already ended in Redis: let it finish
        self.drop_sweeper.join(SWEEP_JOIN_S)
        self.components.close()
        if self.warc:
            self.warc.close()
        if self.records:
            self.records.close()


#: How long closing a worker waits for a drop sweep under way (its records are written after
#: the URLs ended in Redis).
SWEEP_JOIN_S = 30.0

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
