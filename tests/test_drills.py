"""Fault drills with real worker processes: SIGKILL every 15 s, and live rebalancing.

Judged, like every end-to-end test, from the sandbox server's request log.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from frontier.redisserver import EmbeddedRedis
from tests.drillkit import WEB, Drill, drill_config, judge, refetched
from tests.webs import SandboxWebs
from workers.cli.crawl import WorkerPool, init_crawl

pytestmark = pytest.mark.e2e


@pytest.fixture
def drill(tmp_path: Path, redis_server: EmbeddedRedis, webs: SandboxWebs) -> Iterator[Drill]:
    with webs.running(WEB) as web:
        client = redis.Redis.from_url(redis_server.url)
        config = drill_config(web, tmp_path.name, tmp_path / "out")
        frontier = init_crawl(client, config, list(web.seeds))
        pool = WorkerPool(redis_server.url, config.namespace, 0, 4, tmp_path / "logs")
        try:
            yield Drill(web, frontier, pool, tmp_path / "out")
        finally:
            pool.stop()
            client.close()



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
    # A clean leave hands its partitions back before it exits: no partition is still owned by
    # a leaver when it is gone (an expiry would leave 4 owners for up to partition_ttl_s).
    assert len({o for o in drill.frontier.partition_owners() if o}) <= 2
    for i in (0, 1):
        log_text = (drill.pool.log_dir / f"worker-{i}.log").read_text(errors="replace")
        assert re.search(r"left: released (\d+) of its \1 partitions", log_text), i
    loads2 = drill.settle_assignment(2, timeout_s=10.0)
    rates.append(rate(4.0))
    drill.wait_done()
    counts, expected = judge(drill)
    assert refetched(counts, expected) == []  # clean leaves hand everything over
    assert loads4 == [16, 16, 16, 16] and loads2 == [32, 32]
    assert rates[1] > rates[0] * 1.2, rates  # more workers, more throughput
    print(json.dumps({"drill": "rebalance", "pages_per_s_1_4_2": [round(r, 1) for r in rates]}))
