"""The sweep of a newly dropped domain (workers/runtime/drop_sweep.py) in a real worker
context on a real Redis: a host whose next visit is an hour away has its queue emptied when
the worker first sees the drop, with a JSONL record per URL, once crawl-wide."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from frontier.config import CrawlConfig
from frontier.counters import accounted
from frontier.frontier import Completion, Frontier
from frontier.redisserver import EmbeddedRedis
from tests.frontier.test_dropped import _links
from tests.promtext import of_registry, value
from workers.app.celery_app import configure
from workers.cli.crawl import init_crawl
from workers.runtime import context, metrics
from workers.runtime.metrics import WorkerMetrics


def _far_off_crawl(redis_client: redis.Redis, tmp_path: Path, namespace: str
                   ) -> tuple[CrawlConfig, Frontier]:
    """far.gone.test with 5 URLs and keep.test with 2, both an hour from their next visit."""
    # TEST-NET-1 addresses: nothing here makes a request
    cfg = CrawlConfig(namespace=namespace, partitions=4, output_dir=str(tmp_path),
                      static_hosts={"far.gone.test": "192.0.2.1", "keep.test": "192.0.2.2"}
                      ).validate()
    frontier = init_crawl(redis_client, cfg, ["http://far.gone.test/", "http://keep.test/"])
    frontier.admit(_links(["far.gone.test"], 5) + _links(["keep.test"], 2), now=time.time())
    leases, _ = frontier.acquire(10)
    assert {le.host for le in leases} == {"far.gone.test", "keep.test"}
    hour = time.time() + 3600  # a Crawl-delay of an hour: no lease of either host meanwhile
    frontier.complete([Completion(le, hour, "fetched") for le in leases])
    assert frontier.stats()["queued"] == 7
    return cfg, frontier


def test_a_far_off_hosts_queue_is_swept_once_when_its_domain_is_dropped(
        redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    cfg, frontier = _far_off_crawl(redis_client, tmp_path, "sweep1")
    configure(redis_server.url, cfg.namespace)
    context.close_context()
    ctx = context.get_context(redis_server.url, cfg.namespace)
    counted = WorkerMetrics("worker", "w", cfg.namespace)
    metrics.activate(counted)
    try:
        frontier.dropped.add(["gone.test"])
        ctx.dropped.refresh(now=time.monotonic() + 10)  # the view's next re-read
        ctx.drop_sweeper.join(10)
        st = frontier.stats()
        assert st["dropped"] == 5 and st["queued"] == 2  # keep.test's stay queued
        # and Prometheus counts them with the leases that ended dropped
        assert value(of_registry(counted.registry), "trawl_leases_total", outcome="dropped") == 5
        assert accounted(st) + st["queued"] == st["admitted"] == 9
        # crawl-wide once: the claim stands, so another sweep (another worker's) ends nothing
        assert ctx.drop_sweeper.sweep(["gone.test"]) == 0
    finally:
        metrics.activate(None)
        context.close_context()
    records = [json.loads(line) for p in (tmp_path / "records").glob("*.jsonl")
               for line in p.read_text().splitlines()]
    dropped = [r for r in records if r["outcome"] == "dropped"]
    assert sorted(r["url"] for r in dropped) == [f"http://far.gone.test/p{i}" for i in range(5)]
    assert all("gone.test dropped" in r["reason"] for r in dropped)


@pytest.mark.parametrize("failures", [2, 99])
def test_a_sweep_tries_again_through_a_redis_outage_then_gives_its_claim_back(
        redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, failures: int) -> None:
    """Reading the queued hosts fails ``failures`` times: two failures are retried through
    and the queue is swept; a sweep that never gets through gives its claim back, so a worker
    that sees the drop later sweeps it (before, the claim held for 10 minutes)."""
    from workers.runtime import drop_sweep

    monkeypatch.setattr(drop_sweep, "SWEEP_RETRY_S", (0.01, 0.01, 0.01, 0.01))
    cfg, frontier = _far_off_crawl(redis_client, tmp_path, f"sweep-flaky{failures}")
    configure(redis_server.url, cfg.namespace)
    context.close_context()
    ctx = context.get_context(redis_server.url, cfg.namespace)
    real, calls = ctx.frontier.dropped.hosts_under, []

    def flaky(domain: str, partitions: object) -> dict[str, int]:
        calls.append(domain)
        if len(calls) <= failures:
            raise redis.ConnectionError("Redis away (test)")
        return real(domain, partitions)

    monkeypatch.setattr(ctx.frontier.dropped, "hosts_under", flaky)
    try:
        frontier.dropped.add(["gone.test"])
        ended = ctx.drop_sweeper.sweep(["gone.test"])
        st = frontier.stats()
        if failures == 2:
            assert ended == 5 and st["dropped"] == 5 and len(calls) == 3
            assert frontier.dropped.claim_sweep("gone.test", "w2") is False  # swept: kept
        else:
            assert ended == 0 and st["queued"] == 7
            assert len(calls) == len(drop_sweep.SWEEP_RETRY_S) + 1
            assert frontier.dropped.claim_sweep("gone.test", "w2") is True  # given back
    finally:
        context.close_context()
