"""Fault drills with real worker processes: SIGKILL every 15 s, and live rebalancing.

Judged, like every end-to-end test, from the sandbox server's request log.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from frontier.config import CrawlConfig
from frontier.frontier import Frontier
from frontier.redisserver import EmbeddedRedis
from sandbox import RobotsKind, SandboxConfig, SandboxWeb
from tests.checks import crawler_entries, fetch_counts, overlaps, short_gaps
from workers.crawl import CrawlWatcher, WorkerPool, init_crawl

pytestmark = pytest.mark.e2e

DELAY_S = 0.1
RETRIED = {"error": 3, "flaky": 2}


@dataclass
class Drill:
    web: SandboxWeb
    frontier: Frontier
    pool: WorkerPool
    out: Path

    def settle_assignment(self, members: int, timeout_s: float = 20.0) -> list[int]:
        """Wait until exactly ``members`` members own all partitions; returns their loads."""
        deadline = time.monotonic() + timeout_s
        loads: list[int] = []
        while time.monotonic() < deadline:
            owners = self.frontier.partition_owners()
            counts = Counter(owners)
            loads = sorted(counts.values())
            if None not in counts and len(counts) == members and loads[-1] - loads[0] <= 1:
                return loads
            time.sleep(0.2)
        raise AssertionError(f"assignment did not settle on {members} members: {loads}")

    def wait_done(self, timeout_s: float = 240.0, each: float = 0.5,
                  tick: object = None) -> None:
        watcher = CrawlWatcher(self.frontier)
        deadline = time.monotonic() + timeout_s
        while not watcher.done(settle_s=1.0):
            assert time.monotonic() < deadline, f"crawl did not finish: {watcher.last}"
            if callable(tick):
                tick()
            time.sleep(each)

    def fetched(self) -> int:
        return self.frontier.stats()["fetched"]


@pytest.fixture
def drill(tmp_path: Path, redis_server: EmbeddedRedis) -> Iterator[Drill]:
    cfg = SandboxConfig(seed=5, hosts=60, pages_per_host=100, ips=60, crawl_delay_s=0.3,
                        robots_slow_s=0.3, slow_page_s=0.3, hang_s=4.0)
    with SandboxWeb(cfg, tmp_path / "requests.log") as web:
        client = redis.Redis.from_url(redis_server.url)
        config = CrawlConfig(
            namespace=tmp_path.name, host_delay_s=DELAY_S, allow_private_ips=True,
            static_hosts=web.resolver_map, allowed_domains=[cfg.domain], ip_concurrency=0,
            connect_timeout_s=1.0, read_timeout_s=1.5, total_timeout_s=2.0,
            retry_backoff_s=0.2, partition_ttl_s=3.0, lease_ttl_s=10.0,
            output_dir=str(tmp_path / "out"), max_inflight=64,
        ).validate()
        frontier = init_crawl(client, config, list(web.seeds))
        pool = WorkerPool(redis_server.url, config.namespace, 0, 4, tmp_path / "logs")
        try:
            yield Drill(web, frontier, pool, tmp_path / "out")
        finally:
            pool.stop()
            client.close()


def judge(d: Drill) -> tuple[Counter[str], dict[str, str]]:
    time.sleep(0.3)  # the server flushes its log every 0.1 s
    entries = crawler_entries(d.web.read_log())
    expected = d.web.site.expected_fetches(d.web.seeds)
    counts = fetch_counts(entries, d.web.port)
    missing = set(expected) - set(counts)
    assert not missing, f"{len(missing)} URLs never fetched, e.g. {sorted(missing)[:5]}"
    assert set(counts) <= set(expected)
    assert overlaps(entries, "host") == []
    slow = {h: d.web.site.config.crawl_delay_s
            for h in d.web.site.robots_hosts(RobotsKind.CRAWL_DELAY)}
    assert short_gaps(entries, slow, DELAY_S) == []
    st = d.frontier.stats()
    assert st["queued"] == 0 and st["inflight"] == 0
    assert st["fetched"] + st["failed"] + st["robots_blocked"] + st["out_of_scope"] \
        == st["admitted"]
    return counts, expected


def refetched(counts: Counter[str], expected: dict[str, str]) -> list[str]:
    return [u for u, n in counts.items() if n > RETRIED.get(expected[u], 1)]


def test_crash_drill_sigkill_every_15s(drill: Drill) -> None:
    """4 workers; every 15 s a random one is SIGKILLed and replaced. Nothing lost."""
    for i in range(4):
        drill.pool.start_one(i)
    rng = random.Random(4)
    kills = []
    next_kill = [time.monotonic() + 15.0]
    started = [4]

    def tick() -> None:
        if time.monotonic() < next_kill[0]:
            return
        victim = rng.choice([p for p in drill.pool.procs if p.poll() is None])
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        kills.append(drill.fetched())
        drill.pool.start_one(started[0])
        started[0] += 1
        next_kill[0] = time.monotonic() + 15.0

    drill.wait_done(timeout_s=300, tick=tick)
    counts, expected = judge(drill)
    pages = sum(1 for k in expected.values() if k == "page")
    assert pages >= 5000
    assert len(kills) >= 2, "the crawl ended before two workers were killed"
    dupes = refetched(counts, expected)
    assert len(dupes) <= 0.005 * len(expected), (len(dupes), dupes[:10])
    st = drill.frontier.stats()
    print(json.dumps({"drill": "crash", "kills": len(kills), "urls": len(expected),
                      "refetched": len(dupes), "requeued_leases": st.get("requeued", 0),
                      "stale": st.get("stale", 0)}))


def test_rebalancing_join_and_clean_leave(drill: Drill) -> None:
    """1 worker, then 4, then 2 (two SIGTERMed): even spread each time, nothing lost or doubled."""
    rates: list[float] = []

    def rate(seconds: float) -> float:
        a, t = drill.fetched(), time.monotonic()
        time.sleep(seconds)
        return (drill.fetched() - a) / (time.monotonic() - t)

    drill.pool.start_one(0)
    assert drill.settle_assignment(1) == [64]
    rates.append(rate(6.0))
    for i in (1, 2, 3):
        drill.pool.start_one(i)
    loads4 = drill.settle_assignment(4)
    rates.append(rate(6.0))
    for proc in drill.pool.procs[:2]:
        os.killpg(proc.pid, signal.SIGTERM)
    for proc in drill.pool.procs[:2]:
        proc.wait(30)
    loads2 = drill.settle_assignment(2, timeout_s=10.0)
    rates.append(rate(4.0))
    drill.wait_done()
    counts, expected = judge(drill)
    assert refetched(counts, expected) == []  # clean leaves hand everything over
    assert loads4 == [16, 16, 16, 16] and loads2 == [32, 32]
    assert rates[1] > rates[0] * 1.2, rates  # more workers, more throughput
    print(json.dumps({"drill": "rebalance", "pages_per_s_1_4_2": [round(r, 1) for r in rates]}))
