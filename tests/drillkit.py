"""Shared pieces of the fault drills: a crawl driven by hand, and its judgement from the log."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from frontier.config import CrawlConfig
from frontier.counters import accounted
from frontier.frontier import Frontier
from sandbox import RobotsKind, SandboxConfig, SandboxWeb
from tests.checks import crawler_entries, fetch_counts, overlaps, short_gaps
from workers.cli.crawl import CrawlWatcher, WorkerPool

WEB = SandboxConfig(seed=5, hosts=60, pages_per_host=100, ips=60, crawl_delay_s=0.3,
                    robots_slow_s=0.3, slow_page_s=0.3, hang_s=4.0)


def drill_config(web: SandboxWeb, namespace: str, out: Path, **kw: object) -> CrawlConfig:
    settings: dict[str, object] = dict(
        namespace=namespace, host_delay_s=DELAY_S, allow_private_ips=True,
        static_hosts=web.resolver_map, allowed_domains=[web.config.domain], ip_concurrency=0,
        connect_timeout_s=1.0, read_timeout_s=1.5, total_timeout_s=2.0,
        retry_backoff_s=0.2, partition_ttl_s=3.0, lease_ttl_s=10.0,
        output_dir=str(out), max_inflight=64,
        # 64 in flight over the drills' 8-16 threads: tasks of 8 keep every thread busy.
        task_batch=8,
    )
    settings.update(kw)
    return CrawlConfig(**settings).validate()  # type: ignore[arg-type]


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


def judge(d: Drill) -> tuple[Counter[str], dict[str, str]]:
    time.sleep(0.3)  # the server flushes its log every 0.1 s
    entries = crawler_entries(d.web.read_log())
    expected = d.web.site.expected_fetches(d.web.seeds)
    counts = fetch_counts(entries, d.web.port, d.web.https_port)
    missing = set(expected) - set(counts)
    assert not missing, f"{len(missing)} URLs never fetched, e.g. {sorted(missing)[:5]}"
    assert set(counts) <= set(expected)
    assert overlaps(entries, "host") == []
    slow = {h: d.web.site.config.crawl_delay_s
            for h in d.web.site.robots_hosts(RobotsKind.CRAWL_DELAY)}
    assert short_gaps(entries, slow, DELAY_S) == []
    st = d.frontier.stats()
    assert st["queued"] == 0 and st["inflight"] == 0
    assert accounted(st) == st["admitted"]
    return counts, expected


def refetched(counts: Counter[str], expected: dict[str, str]) -> list[str]:
    return [u for u, n in counts.items() if n > RETRIED.get(expected[u], 1)]


