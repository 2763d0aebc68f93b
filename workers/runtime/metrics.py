"""Prometheus metrics of one worker (or scheduler) process, served in the standard text format.

One endpoint per process (``trawl worker --metrics-port``, workers/cli/metrics.py), not
prometheus-client's multiprocess mode: a worker is one process (Celery's ``threads`` pool), so
each endpoint is the whole truth of its process and Prometheus tells them apart by ``instance``
(``trawl_process_info`` names the member). Crawl-wide sums are ``sum()`` over instances.

Cost (why it is built so): what happens per page is bumping in-process counters, and it is
done by the completer thread once per write-back batch (:meth:`WorkerMetrics.count_results`),
never on the event loop. The counters reuse the crawl's own names (frontier/counters.py: an
``outcome`` label is an :class:`Outcome` value, an error ``kind`` a member of the ``err:``
family), so a sum over the processes can be checked against the crawl's summary. Values of the
crawl itself (queue sizes, leases in flight, Bloom fill per partition) are read from Redis at
scrape time, for the partitions this process owns (:class:`PartitionCollector`): never per page.
No label names a host or a URL; the only unbounded-looking label is ``partition`` (< P).
"""

from __future__ import annotations

import logging
import time
from collections import Counter as TallyCounter
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from frontier.counters import DUPLICATES, ERRORS, ROBOTS_POLICIES, Outcome

log = logging.getLogger(__name__)

#: Outcomes whose page set its host's politeness delay (the host-delay histogram).
_PAGES = frozenset({Outcome.FETCHED.value, Outcome.TRUNCATED.value})
_UNKNOWN = object()

#: Fetch durations (seconds): loopback answers in ms, the real web in 0.1-2 s, timeouts at 30+.
FETCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Host delays set after a fetch (seconds): sandbox 0.05 s, the real web's 2 s default, up to
#: max_delay_s (60 s) and robots Crawl-delay.
DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)


class WorkerMetrics:
    """The metrics of one process, in a registry of its own (so tests can make several)."""

    def __init__(self, role: str, name: str, crawl: str) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)  # process_cpu_seconds_total: CPU per page in Grafana
        info = Gauge("trawl_process_info", "This process: its role and member name (value 1)",
                     ["role", "name", "crawl"], registry=r)
        info.labels(role, name, crawl).set(1)
        self.leases = Counter("trawl_leases", "Leases ended by this process, by outcome "
                              "(frontier/counters.py Outcome: fetched, failed, retries, ...), "
                              "and queued URLs of dropped hosts it ended (dropped)",
                              ["outcome"], registry=r)
        self.bytes = Counter("trawl_response_bytes", "Response body bytes received, by the "
                             "outcome of the lease they came for", ["outcome"], registry=r)
        self.fetch_seconds = Histogram("trawl_fetch_duration_seconds", "Wall time of one HTTP "
                                       "fetch (with its redirects for robots.txt), by kind",
                                       ["kind"], buckets=FETCH_BUCKETS, registry=r)
        self.errors = Counter("trawl_fetch_errors", "Fetch attempts that ended in an error, by "
                              "kind (the err: family: timeout, connect_error, http_503, ...)",
                              ["kind"], registry=r)
        self.duplicates = Counter("trawl_duplicate_pages", "Pages found to duplicate one "
                                  "crawled before (dedup hits), by kind", ["kind"], registry=r)
        self.robots = Counter("trawl_robots_policies", "robots.txt fetched, by the policy it "
                              "gave", ["policy"], registry=r)
        self.host_delay = Histogram("trawl_politeness_host_delay_seconds", "Politeness wait set "
                                    "on a host after a page (delay, Crawl-delay, adaptive), "
                                    "as left at write-back", buckets=DELAY_BUCKETS, registry=r)
        self.links_admitted = Counter("trawl_links_admitted", "Links this process admitted "
                                      "into the frontier (new URLs)", registry=r)
        self.writeback_seconds = Histogram("trawl_writeback_duration_seconds", "Wall time of "
                                           "writing one batch of finished pages back to Redis",
                                           registry=r)
        self.dispatched = Counter("trawl_scheduler_urls_dispatched", "URLs this process's "
                                  "scheduler sent to workers", registry=r)
        self.tasks = Counter("trawl_scheduler_tasks_sent", "Celery tasks this process's "
                             "scheduler sent", registry=r)
        self.ip_deferred = Counter("trawl_politeness_ip_deferrals", "Leases sent back because "
                                   "their IP was busy (per-IP politeness)", registry=r)
        self.ip_wait = Counter("trawl_politeness_ip_wait_seconds", "Seconds those leases were "
                               "told to wait for their IP", registry=r)
        self.reaped = Counter("trawl_leases_requeued", "Expired leases this process's "
                              "scheduler put back in their queues", registry=r)
        self.replan_seconds = Histogram("trawl_revisit_replan_duration_seconds", "Wall time "
                                        "of one partition's revisit replan (continuous "
                                        "crawling; on the member's replan thread)",
                                        buckets=FETCH_BUCKETS, registry=r)
        # Children made once: labels() takes a lock and a dict lookup on every call.
        self._by_outcome = {o.value: (self.leases.labels(o.value), self.bytes.labels(o.value))
                            for o in Outcome}
        self._by_kind = {k: self.fetch_seconds.labels(k) for k in ("robots", "probe", "page")}
        #: stored counter name -> the labelled child it feeds, or None (see _family_child)
        self._families: dict[str, Any] = {}

    def count_results(self, results: Iterable[Any]) -> None:
        """One written-back batch: each ``LeaseResult``'s outcome, fetch and counters. Summed
        per batch first: a labelled counter is bumped once per batch and label, not per page
        (bench/metrics_cost.py); only the two histograms observe each page."""
        now = time.time()
        outcomes: TallyCounter[str] = TallyCounter()
        body: TallyCounter[str] = TallyCounter()
        families: TallyCounter[str] = TallyCounter()
        by_kind = self._by_kind
        for res in results:
            completion = res.completion
            outcome = completion.outcome.value
            outcomes[outcome] += 1
            fetched = res.fetched
            if fetched is not None:
                body[outcome] += fetched.body_bytes
                hist = by_kind.get(fetched.kind) or self.fetch_seconds.labels(fetched.kind)
                hist.observe(fetched.seconds)
                if outcome in _PAGES:
                    self.host_delay.observe(max(0.0, completion.next_allowed - now))
            if res.counters:
                families.update(res.counters)
        for outcome, n in outcomes.items():
            leases, bytes_ = self._by_outcome[outcome]
            leases.inc(n)
            if body[outcome]:
                bytes_.inc(body[outcome])
        for name, n in families.items():
            child = self._families.get(name, _UNKNOWN)
            if child is _UNKNOWN:
                child = self._families[name] = self._family_child(name)
            if child is not None:
                child.inc(n)

    def _family_child(self, name: str) -> Any:
        """The labelled counter a stored counter name feeds (err:, dup_, robots:), or None.
        Resolved once per name: the names are a small vocabulary."""
        for family, metric in ((ERRORS, self.errors), (DUPLICATES, self.duplicates),
                               (ROBOTS_POLICIES, self.robots)):
            member = family.member_of(name)
            if member is not None:
                return metric.labels(member)
        return None

    def count_outcome(self, outcome: Outcome, n: int = 1) -> None:
        """URLs ended outside a fetch: leases the scheduler ended itself (deferred, unsent),
        queued URLs of dropped hosts (workers/runtime/drop_sweep.py)."""
        if n:
            self._by_outcome[outcome.value][0].inc(n)


class EngineCollector(Collector):
    """The fetch engine's capacity, fetches in flight and URLs waiting, read at scrape time."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from workers.runtime.engine import current_engine

        engine = current_engine()
        capacity, in_flight, waiting = (0, 0, 0) if engine is None else (
            engine.capacity, *engine.occupancy())
        yield GaugeMetricFamily("trawl_engine_capacity", "Fetches this process may have in "
                                "flight (fetch_concurrency)", value=capacity)
        yield GaugeMetricFamily("trawl_engine_fetches_in_flight", "Fetches running in this "
                                "process now", value=in_flight)
        yield GaugeMetricFamily("trawl_engine_waiting_urls", "URLs handed to this process "
                                "waiting for a fetch slot", value=waiting)


class PartitionCollector(Collector):
    """Per partition this process owns (a ``Member``'s), read from Redis at scrape time: URLs
    queued, leases in flight, and how full the URL-seen filter's current layer is. Owners are
    disjoint, so ``sum by (partition)`` over the instances is the crawl."""

    def __init__(self, member: Any) -> None:
        self.member = member

    def collect(self) -> Iterator[GaugeMetricFamily]:
        frontier = self.member.frontier
        parts = sorted(self.member.owned)
        ok = GaugeMetricFamily("trawl_frontier_read_ok", "1 if this scrape could read the "
                               "partitions' figures from Redis")
        queued = GaugeMetricFamily("trawl_frontier_queued_urls", "URLs in the host queues of "
                                   "a partition this process owns", labels=["partition"])
        inflight = GaugeMetricFamily("trawl_frontier_inflight_leases", "Leases out of a "
                                     "partition this process owns", labels=["partition"])
        fill = GaugeMetricFamily("trawl_bloom_fill_ratio", "URLs in the partition's current "
                                 "Bloom layer / that layer's capacity (over 1: it grew)",
                                 labels=["partition"])
        layers = GaugeMetricFamily("trawl_bloom_layers", "Layers of the partition's scalable "
                                   "Bloom filter in use", labels=["partition"])
        try:
            rows = self._read(frontier, parts)
        except Exception as exc:  # a scrape must answer even with Redis away
            log.debug("partition figures not read: %s", exc)
            ok.add_metric([], 0)
            yield ok
            return
        ok.add_metric([], 1)
        specs = frontier.bloom_layers
        for p, (q, inf, layer, in_layer, admitted) in zip(parts, rows, strict=True):
            label = [str(p)]
            queued.add_metric(label, q)
            inflight.add_metric(label, inf)
            if frontier.config.bloom_backend == "redisbloom":
                # RedisBloom keeps its own layers: every admitted URL went in once.
                fill.add_metric(label, admitted / specs[0].capacity)
                layers.add_metric(label, 1)
            else:
                fill.add_metric(label, in_layer / specs[min(layer, len(specs) - 1)].capacity)
                layers.add_metric(label, layer + 1)
        yield from (ok, queued, inflight, fill, layers)

    @staticmethod
    def _read(frontier: Any, parts: list[int]) -> list[tuple[int, ...]]:
        pipe = frontier.r.pipeline(transaction=False)
        fields = ("queued", "inflight", "bloom_layer", "bloom_fill", "admitted")
        for p in parts:
            pipe.hmget(frontier.keys.stats(p), *fields)
        return [tuple(int(v or 0) for v in row) for row in pipe.execute()]


_active: WorkerMetrics | None = None


def activate(metrics: WorkerMetrics | None) -> None:
    """Make ``metrics`` this process's (None: metrics off, every hook a no-op)."""
    global _active
    _active = metrics


def active() -> WorkerMetrics | None:
    """This process's metrics, or None when they are off (the hooks test this)."""
    return _active
