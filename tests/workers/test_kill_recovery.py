"""A worker SIGKILLed mid-crawl strands little: the crawl ends within its no-fault time plus
``partition_ttl_s`` plus ``total_timeout_s`` (the lease keeper's short deadlines bring the
dead worker's in-flight URLs back; before it, each came back a whole fetch budget later).

Two crawls of one sandbox web with two real worker processes: one without a fault, one where a
worker is SIGKILLed when 40% of the pages are fetched. Nothing may be lost in either.

The fault-free crawl also shows ``fetch_affinity``: each host's fetches come from the worker
that owns its partition (so they reuse that process's kept-alive connections), against a third
crawl with it off, where any worker fetches any host.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from frontier.counters import accounted
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxWeb
from tests.drillkit import drill_config
from tests.webs import SandboxWebs
from workers.cli.crawl import CrawlWatcher, WorkerPool, init_crawl

pytestmark = pytest.mark.e2e

WEB = SandboxConfig(seed=9, hosts=16, pages_per_host=30, ips=16, crawl_delay_s=0.3,
                    robots_slow_s=0.3, slow_page_s=0.3, hang_s=4.0)
SETTINGS = dict(host_delay_s=0.3, lease_keep_s=2.0, partition_ttl_s=3.0, total_timeout_s=2.0,
                max_inflight=256)
#: Scheduling slack on a busy machine: Celery start, the reaper's 1 s period, polling.
MARGIN_S = 6.0


@pytest.fixture(scope="module")
def web(module_webs: SandboxWebs) -> SandboxWeb:
    return module_webs.shared(WEB)


@dataclass
class Run:
    elapsed_s: float
    stats: dict[str, int]
    out: Path


def _run(web: SandboxWeb, redis_url: str, tmp: Path, namespace: str,
         kill_at: float | None, **settings: object) -> Run:
    client = redis.Redis.from_url(redis_url)
    config = drill_config(web, namespace, tmp / namespace, **{**SETTINGS, **settings})
    frontier = init_crawl(client, config, list(web.seeds))
    pool = WorkerPool(redis_url, namespace, 0, None, tmp / namespace / "logs")
    watcher = CrawlWatcher(frontier)
    pages = len(web.site.expected_fetches(web.seeds))
    try:
        start = time.monotonic()
        pool.start_one(0)
        pool.start_one(1)
        killed = False
        while not watcher.done(settle_s=1.0):
            assert time.monotonic() - start < 180, f"crawl did not finish: {watcher.last}"
            if kill_at is not None and not killed and \
                    frontier.stats()["fetched"] >= kill_at * pages:
                victim = pool.procs[0]
                os.killpg(victim.pid, signal.SIGKILL)
                victim.wait()
                killed = True
            time.sleep(0.1)
        elapsed = time.monotonic() - start - 1.0  # done() waits settle_s of quiet
    finally:
        pool.stop()
        client.close()
    assert kill_at is None or killed
    return Run(elapsed, frontier.stats(), tmp / namespace)


@pytest.fixture(scope="module")
def calm_run(web: SandboxWeb, redis_server: EmbeddedRedis,
             tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The fault-free crawl, with the defaults (fetch_affinity on)."""
    return _run(web, redis_server.url, tmp_path_factory.mktemp("calm"), "kr-calm", None)


def test_sigkilled_worker_costs_at_most_partition_ttl_plus_a_fetch(
        web: SandboxWeb, redis_server: EmbeddedRedis, tmp_path: Path, calm_run: Run) -> None:
    calm, calm_stats = calm_run.elapsed_s, calm_run.stats
    kill_run = _run(web, redis_server.url, tmp_path, "kr-kill", 0.4)
    hit, hit_stats = kill_run.elapsed_s, kill_run.stats
    for st in (calm_stats, hit_stats):  # nothing lost: every admitted URL ended
        assert st["queued"] == 0 and st["inflight"] == 0
        assert accounted(st) == st["admitted"]
    assert hit_stats["fetched"] == calm_stats["fetched"]
    bound = calm + SETTINGS["partition_ttl_s"] + SETTINGS["total_timeout_s"]
    print(json.dumps({"no_fault_s": round(calm, 1), "with_kill_s": round(hit, 1),
                      "bound_s": round(bound, 1), "requeued": hit_stats.get("requeued", 0)}))
    assert hit <= bound + MARGIN_S, (calm, hit, bound)
    # No task stays behind in a member's own queue: the survivor moved the killed member's
    # to the shared queue when its entry expired, and its own went there when it stopped.
    client = redis.Redis.from_url(redis_server.url)
    left = {k: client.llen(k) for k in client.scan_iter("kr-kill.fetch.*", _type="list")}
    client.close()
    assert not any(left.values()), left


def _worker_switches(out: Path) -> Counter[str]:
    """Per host, how often a fetch came from another worker process than the host's fetch
    before it (each worker writes its own JSONL records file)."""
    fetches = []
    for path in (out / "records").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("fetched_at"):
                fetches.append((record["fetched_at"], record["host"], path.stem))
    fetches.sort()
    switches: Counter[str] = Counter()
    last: dict[str, str] = {}
    for _, host, worker in fetches:
        switches[host] += int(last.get(host, worker) != worker)
        last[host] = worker
    return switches


def test_fetch_affinity_keeps_each_host_on_its_partition_owners_worker(
        web: SandboxWeb, redis_server: EmbeddedRedis, tmp_path: Path, calm_run: Run) -> None:
    """With fetch_affinity (the default) a host changes worker only when its partition
    changes owner (the second worker joining takes half of them from the first); with it off
    (the control), any worker takes any task, so a host's fetches alternate between the two."""
    on = _worker_switches(calm_run.out)
    off_run = _run(web, redis_server.url, tmp_path, "kr-shared", None, fetch_affinity=False)
    off = _worker_switches(off_run.out)
    hosts = len(on)
    assert set(on) == set(off) and hosts >= 8
    assert off_run.stats["fetched"] == calm_run.stats["fetched"]
    print(json.dumps({"hosts": hosts, "fetched": calm_run.stats["fetched"],
                      "worker_switches_affinity": sum(on.values()),
                      "worker_switches_shared_queue": sum(off.values())}))
    assert sum(on.values()) <= 2 * hosts, on
    assert sum(off.values()) >= 4 * hosts, off
