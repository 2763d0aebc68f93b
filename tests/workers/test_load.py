"""What limits a crawl (workers/cli/load.py): measured on a real Redis, and the diagnosis rules."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

import redis

from frontier.config import CrawlConfig
from frontier.counters import Outcome
from frontier.frontier import Completion
from workers.cli.crawl import init_crawl
from workers.cli.load import Limit, _diagnose, measure
from workers.runtime.figures import EngineFigures, publish_figures, read_engines


def _publish(client: redis.Redis, key: str, **kw: object) -> None:
    figures = {"worker": "w1", "capacity": 100, "in_flight": 0, "waiting": 0, "completed": 0,
               "cpu_load": 0.1, "at": time.time(), **kw}
    client.hset(key, str(figures["worker"]), json.dumps(asdict(EngineFigures(**figures))))


def _figures(**kw: object) -> EngineFigures:
    return EngineFigures(**{"worker": "w1", "capacity": 100, "in_flight": 0, "waiting": 0,
                            "completed": 0, "cpu_load": 0.1, "at": time.time(), **kw})


def test_measure_counts_ready_and_delayed_hosts_and_live_engines(
        redis_client: redis.Redis) -> None:
    cfg = CrawlConfig(namespace="load1", partitions=4, host_delay_s=30.0).validate()
    seeds = [f"http://h{i}.test/" for i in range(6)]
    frontier = init_crawl(redis_client, cfg, seeds)
    load = measure(frontier, 0)
    assert (load.hosts_ready, load.hosts_waiting) == (6, 0)
    assert load.limit is Limit.NO_WORKERS
    leases, _ = frontier.acquire(10)
    assert len(leases) == 6
    load = measure(frontier, len(leases))  # leased hosts are neither ready nor waiting
    assert (load.hosts_ready, load.hosts_waiting, load.leases_out) == (0, 0, 6)
    now = time.time()
    frontier.complete([Completion(le, now + 30 if i < 2 else now - 1, Outcome.ROBOTS_FETCH,
                                  requeue=le.entry, at_head=True)
                       for i, le in enumerate(leases)])
    _publish(redis_client, frontier.keys.engines, in_flight=95, waiting=3)
    _publish(redis_client, frontier.keys.engines, worker="gone", at=time.time() - 60)
    load = measure(frontier, 0)
    assert (load.hosts_ready, load.hosts_waiting) == (4, 2)
    assert (load.engines, load.in_flight, load.waiting, load.capacity) == (1, 95, 3, 100)
    assert load.limit is Limit.INFLIGHT_CAP
    # reading only reads; the next publication drops the stopped engine's entry
    assert sorted(redis_client.hkeys(frontier.keys.engines)) == [b"gone", b"w1"]
    publish_figures(redis_client, frontier.keys.engines, _figures(in_flight=90))
    assert redis_client.hkeys(frontier.keys.engines) == [b"w1"]
    assert [f.in_flight for f in read_engines(redis_client, frontier.keys.engines)] == [90]


def test_diagnosis_names_the_limit() -> None:
    # ready, waiting hosts, held, capacity, cpu, leases out, max_inflight, engines
    assert _diagnose(0, 50, 10, 1000, 0.2, 10, 4096, 2)[0] is Limit.POLITENESS
    assert _diagnose(500, 50, 300, 2000, 0.95, 300, 4096, 2)[0] is Limit.CPU
    assert _diagnose(500, 50, 1950, 2000, 0.5, 1950, 4096, 2)[0] is Limit.INFLIGHT_CAP
    assert _diagnose(500, 50, 100, 2000, 0.5, 4000, 4096, 2)[0] is Limit.INFLIGHT_CAP
    assert _diagnose(500, 50, 100, 2000, 0.5, 100, 4096, 2)[0] is Limit.DISPATCH
    # the same, but the backlog gate holds leasing back for the CPU
    assert _diagnose(500, 50, 100, 2000, 0.5, 500, 4096, 2, 400)[0] is Limit.CPU
    assert _diagnose(0, 0, 0, 2000, 0.0, 0, 4096, 2)[0] is Limit.IDLE
    assert _diagnose(5, 5, 0, 0, 0.0, 0, 4096, 0)[0] is Limit.NO_WORKERS
