"""How many fetches one worker process keeps in flight, and at what memory, when the web
allows it: a sandbox web of many hosts with the latency model on and a long server time, so
that thousands of fetches can be waiting at once; one worker process, host delay 1 s.

Prints the mean and peak fetches in flight at the server (from its request log), the worker's
peak RSS and RSS per in-flight fetch, and pages/s.

    .venv/bin/python bench/inflight.py [--hosts 20000] [--median 8] [--concurrency 2500]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from frontier.config import CrawlConfig
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxWeb
from workers.cli.crawl import WorkerPool, init_crawl

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_of_tree(pid: int) -> int:
    """RSS bytes of ``pid`` and its children (the worker is a child of the pool's process)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or int(stat[1]) == pid:
            total += int(stat[21]) * PAGE
    return total


def in_flight(entries: list, t0: float, t1: float) -> tuple[float, int]:
    """Time-averaged and peak number of requests in flight at the server in [t0, t1]."""
    events = []
    busy = 0.0
    for e in entries:
        a, b = max(e.start, t0), min(e.end, t1)
        if b > a:
            busy += b - a
        events += [(e.start, 1), (e.end, -1)]
    peak = cur = 0
    for _, d in sorted(events):
        cur += d
        peak = max(peak, cur)
    return busy / (t1 - t0), peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", type=int, default=20000)
    ap.add_argument("--median", type=float, default=8.0, help="median server time (s)")
    ap.add_argument("--concurrency", type=int, default=CrawlConfig.fetch_concurrency,
                    help="fetch_concurrency (default: Trawl's default)")
    ap.add_argument("--seconds", type=float, default=60.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="inflight-") as d:
        tmp = Path(d)
        server = EmbeddedRedis(tmp / "redis").start()
        web_cfg = SandboxConfig.internet(seed=2, hosts=a.hosts, pages_per_host=20, ips=250,
                                         latency_median_s=a.median, latency_shape=0.3,
                                         fail_share=0.0)
        try:
            with SandboxWeb(web_cfg, tmp / "requests.log", start_timeout_s=120) as web:
                config = CrawlConfig(
                    namespace="inflight", host_delay_s=1.0, adaptive_delay_factor=0.0,
                    allow_private_ips=True, ip_concurrency=0, static_hosts=web.resolver_map,
                    allowed_domains=[web_cfg.domain], fetch_concurrency=a.concurrency,
                    max_inflight=max(CrawlConfig.max_inflight, 2 * a.concurrency), output_dir=str(tmp / "out"),
                    store_warc=False).validate()
                client = redis.Redis.from_url(server.url)
                # every host's start page is a seed: the web allows one fetch per host at once
                init_crawl(client, config, [f"http://{h}:{web.port}/" for h in web.resolver_map])
                pool = WorkerPool(server.url, "inflight", 1, None, tmp / "logs").start()
                start, peak_rss = time.time(), 0
                try:
                    while time.time() - start < a.seconds:
                        peak_rss = max(peak_rss, rss_of_tree(pool.procs[0].pid))
                        time.sleep(0.5)
                finally:
                    end = time.time()
                    pool.stop()
                time.sleep(0.3)
                entries = [e for e in web.read_log() if e.ua.startswith("Trawl/")]
        finally:
            server.stop()
    mean, peak = in_flight(entries, start + 10, end)  # after the first 10 s of ramp-up
    done = sum(1 for e in entries if start + 10 <= e.end <= end and e.status)
    print(json.dumps({"hosts": a.hosts, "median_s": a.median, "fetch_concurrency": a.concurrency,
                      "mean_in_flight": round(mean, 1), "peak_in_flight": peak,
                      "pages_per_s": round(done / (end - start - 10), 1),
                      "worker_peak_rss_mb": round(peak_rss / 2**20, 1),
                      "rss_kb_per_in_flight": round(peak_rss / 1024 / max(1.0, mean), 1)},
                     indent=1))


if __name__ == "__main__":
    main()
