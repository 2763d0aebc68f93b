"""The fetch task in-process on a real Redis: stale and malformed messages make no request."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from frontier.config import CrawlConfig
from frontier.redisserver import EmbeddedRedis
from workers import context
from workers.celery_app import configure
from workers.crawl import init_crawl


def test_stale_and_malformed_messages_are_skipped_and_counted(
        redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    # 192.0.2.1 (TEST-NET-1) would be refused anyway: no request can leave this test.
    cfg = CrawlConfig(namespace="tasks1", partitions=4, lease_ttl_s=10.0, total_timeout_s=0.5,
                      output_dir=str(tmp_path), static_hosts={"a.test": "192.0.2.1"}).validate()
    frontier = init_crawl(redis_client, cfg, ["http://a.test/"])
    (lease,), _ = frontier.acquire(10)
    assert frontier.reap(now=time.time() + 11) == 1  # the lease expires: the message is stale
    (fresh,), _ = frontier.acquire(10, now=time.time() + 11)
    configure(redis_server.url, cfg.namespace)
    context.close_context()
    from workers.tasks import fetch

    try:
        fetched = fetch.run([[*lease.to_message(), None], ["garbage"], [1, 2]])
    finally:
        context.close_context()
    assert fetched == 0
    st = frontier.stats()
    assert st["stale_messages"] == 1
    assert st["err:bad_message"] == 2
    assert st["inflight"] == 1  # the URL was re-leased (fresh): still in flight, not lost
    assert frontier.begin([lease], 5.0) == [False]
    assert frontier.begin([fresh], 5.0) == [True]
    assert frontier.reap(now=time.time() + 6) == 1  # begin's deadline, not lease_ttl_s
    assert frontier.stats()["queued"] == 1
    assert not list((tmp_path / "records").glob("*.jsonl")) or not any(
        p.read_text() for p in (tmp_path / "records").glob("*.jsonl"))
