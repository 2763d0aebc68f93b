"""The same crawl on a Redis Cluster of 3 masters (state) plus one Redis as Celery's broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from frontier.redisbloom import module_path
from frontier.redisclient import client_from_url
from frontier.redisserver import EmbeddedRedis
from tests.drillkit import WEB, Drill, drill_config, judge, refetched
from tests.rediscluster import redis_cluster
from tests.webs import SandboxWebs
from workers.cli.crawl import WorkerPool, init_crawl

pytestmark = pytest.mark.e2e


def test_crawl_on_a_three_master_cluster(tmp_path: Path, redis_server: EmbeddedRedis,
                                         webs: SandboxWebs) -> None:
    with redis_cluster(tmp_path / "cluster", masters=3) as cluster, \
            webs.running(WEB) as web:
        state_url = cluster.urls[0].replace("redis://", "redis-cluster://")
        client = client_from_url(state_url)
        config = drill_config(web, "cl1", tmp_path / "out")
        frontier = init_crawl(client, config, list(web.seeds))
        pool = WorkerPool(state_url, "cl1", 2, 4, tmp_path / "logs",
                          broker_url=redis_server.url).start()
        try:
            d = Drill(web, frontier, pool, tmp_path / "out")
            d.wait_done(timeout_s=240)
            counts, expected = judge(d)
            assert refetched(counts, expected) == []
            # The state really is spread: every master holds some partitions' keys.
            keys = [redis.Redis(port=node.port).dbsize() for node in cluster.nodes[:3]]
            assert all(keys)
            # Each master was checked for the BF commands: RedisBloom where it is loaded.
            assert frontier.config.bloom_backend == ("redisbloom" if module_path() else "lua")
            bf_keys = [len(redis.Redis(port=node.port).keys("*:bf")) for node in cluster.nodes]
            assert all(bf_keys) == (frontier.config.bloom_backend == "redisbloom")
            print(json.dumps({"drill": "cluster", "urls": len(expected),
                              "fetched": sum(counts.values()), "keys_per_master": keys}))
        finally:
            pool.stop()
            client.close()
