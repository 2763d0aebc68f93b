"""CPU cost of the Prometheus metrics (issue 20): per page, per scheduled URL, per scrape.

What a worker adds per page when ``--metrics-port`` is on: a ``FetchFigures`` made in
``finish_lease`` and ``WorkerMetrics.count_results`` at write-back (outcome, bytes, histogram,
host delay, the error/robots/duplicate families), plus ``links_admitted`` once per batch; the
scheduler adds two counter bumps per task. With metrics off every hook is one ``active()`` call
returning None. A scrape reads the owned partitions' figures from a real Redis (embedded) and
renders the text format. Timed with ``time.thread_time`` over many repetitions, best of 5.
Run::

    .venv/bin/python bench/metrics_cost.py [--pages 20000] [--partitions 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import disable_created_metrics, generate_latest

from frontier.config import CrawlConfig
from frontier.counters import Outcome
from frontier.frontier import Completion, Entry, Frontier, Lease
from frontier.redisclient import client_from_url
from frontier.redisserver import EmbeddedRedis
from workers.pipeline.result import FetchFigures, LeaseResult
from workers.runtime import metrics
from workers.runtime.metrics import PartitionCollector, WorkerMetrics

BATCH = 64


def sample_results(n: int) -> list[LeaseResult]:
    """Results shaped like a sandbox crawl's: mostly pages with a few link counters, some
    retries with an error, robots fetches, duplicates."""
    out = []
    for i in range(n):
        lease = Lease(i % 64, f"l{i}", f"h{i % 200}.example",
                      Entry(f"http://h{i % 200}.example/p/{i}", 1))
        outcome = (Outcome.RETRY if i % 50 == 0 else Outcome.ROBOTS_FETCH if i % 25 == 0
                   else Outcome.FETCHED)
        res = LeaseResult(Completion(lease, time.time() + 2.0, outcome))
        res.counters = Counter({"links_nofollow": 3, "links_out_of_scope": 1})
        if outcome is Outcome.RETRY:
            res.counters["err:timeout"] += 1
        elif outcome is Outcome.ROBOTS_FETCH:
            res.counters["robots:parsed"] += 1
        elif i % 10 == 0:
            res.counters["dup_near"] += 1
        res.fetched = FetchFigures("robots" if outcome is Outcome.ROBOTS_FETCH else "page",
                                   12_000, 0.150)
        out.append(res)
    return out


def best_of(runs: int, fn: Any) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best


def per_page_us(pages: int) -> dict[str, float]:
    results = sample_results(pages)
    batches = [results[i:i + BATCH] for i in range(0, len(results), BATCH)]
    m = WorkerMetrics("worker", "bench", "bench")

    def count() -> None:
        for batch in batches:
            m.count_results(batch)
            m.links_admitted.inc(40)
            m.writeback_seconds.observe(0.01)

    def figures() -> None:
        for _ in range(pages):
            FetchFigures("page", 12_000, 0.15)

    def hooks_off() -> None:  # what every hook costs with metrics off
        for _ in range(pages):
            if metrics.active() is not None:
                raise AssertionError

    def scheduler() -> None:  # per task of 16 URLs: dispatched + tasks
        for _ in range(pages // 16):
            m.dispatched.inc(16)
            m.tasks.inc()

    return {name: round(best_of(5, fn) / pages * 1e6, 3) for name, fn in (
        ("count_results_per_page_us", count), ("fetch_figures_per_page_us", figures),
        ("hooks_off_per_page_us", hooks_off), ("scheduler_per_url_us", scheduler))}


class _Member:
    def __init__(self, frontier: Frontier, partitions: int) -> None:
        self.frontier = frontier
        self.owned = dict.fromkeys(range(partitions), "")


def scrape_ms(partitions: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp)).start()
        try:
            client = client_from_url(server.url)
            frontier = Frontier(client, CrawlConfig(namespace="mbench", partitions=partitions))
            for p in range(partitions):
                client.hset(frontier.keys.stats(p), mapping={"queued": 10, "inflight": 2,
                                                             "bloom_fill": 5, "admitted": 5})
            m = WorkerMetrics("worker", "bench", "bench")
            m.count_results(sample_results(500))
            m.registry.register(PartitionCollector(_Member(frontier, partitions)))
            runs = 200
            t0 = time.perf_counter()
            cpu0 = time.thread_time()
            for _ in range(runs):
                text = generate_latest(m.registry)
            return {"scrape_wall_ms": round((time.perf_counter() - t0) / runs * 1e3, 3),
                    "scrape_cpu_ms": round((time.thread_time() - cpu0) / runs * 1e3, 3),
                    "scrape_bytes": len(text), "partitions_owned": partitions}
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=64)
    args = parser.parse_args()
    disable_created_metrics()
    out = per_page_us(args.pages)
    out["total_on_per_page_us"] = round(out["count_results_per_page_us"]
                                        + out["fetch_figures_per_page_us"]
                                        + out["scheduler_per_url_us"], 3)
    out.update(scrape_ms(args.partitions))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
