"""The worker-death drill of issue 17, with `trawl demo`'s settings: a 100-host x 60-page
sandbox web crawled by two worker processes, once without a fault and once with one worker
SIGKILLed 25 s in. Prints both times and the target: no-fault + partition_ttl_s +
total_timeout_s.

    .venv/bin/python bench/kill_drill.py [--hosts 100] [--pages-per-host 60] [--kill-at 25]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from frontier.config import CrawlConfig
from frontier.counters import accounted
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxWeb
from workers.cli.crawl import CrawlWatcher, WorkerPool, init_crawl


def demo_config(web: SandboxWeb, namespace: str, out: Path) -> CrawlConfig:
    """What `trawl demo` sets (workers/cli/main.py cmd_demo), nothing else."""
    return CrawlConfig(
        namespace=namespace, host_delay_s=0.05, adaptive_delay_factor=0.0,
        allow_private_ips=True, ip_concurrency=0, static_hosts=web.resolver_map,
        allowed_domains=[web.config.domain], connect_timeout_s=2.0, read_timeout_s=3.0,
        total_timeout_s=5.0, retry_backoff_s=0.5, robots_error_ttl_s=3600.0,
        output_dir=str(out)).validate()


def run(web: SandboxWeb, redis_url: str, tmp: Path, namespace: str,
        kill_at_s: float | None) -> dict[str, float]:
    client = redis.Redis.from_url(redis_url)
    config = demo_config(web, namespace, tmp / namespace)
    frontier = init_crawl(client, config, list(web.seeds))
    pool = WorkerPool(redis_url, namespace, 2, None, tmp / namespace / "logs")
    watcher = CrawlWatcher(frontier)
    start = time.monotonic()
    pool.start()
    killed_at = None
    try:
        while not watcher.done(settle_s=0.5):
            now = time.monotonic() - start
            if kill_at_s is not None and killed_at is None and now >= kill_at_s:
                os.killpg(pool.procs[0].pid, signal.SIGKILL)
                pool.procs[0].wait()
                killed_at = now
            if now > 900:
                raise SystemExit(f"{namespace}: not done after 900 s: {watcher.last}")
            time.sleep(0.1)
    finally:
        pool.stop()
    st = watcher.last
    ended = accounted(st)
    return {"elapsed_s": round(time.monotonic() - start - 0.5, 1), "fetched": st["fetched"],
            "admitted": st["admitted"], "accounted": ended,
            "requeued_leases": st.get("requeued", 0), "killed_at_s": killed_at or 0.0,
            "partition_ttl_s": config.partition_ttl_s, "total_timeout_s": config.total_timeout_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--pages-per-host", type=int, default=60)
    ap.add_argument("--kill-at", type=float, default=25.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kill-drill-") as d:
        tmp = Path(d)
        server = EmbeddedRedis(tmp / "redis").start()
        try:
            web_cfg = SandboxConfig(seed=1, hosts=a.hosts, pages_per_host=a.pages_per_host,
                                    ips=min(50, a.hosts))
            with SandboxWeb(web_cfg, tmp / "requests.log") as web:
                calm = run(web, server.url, tmp, "calm", None)
                hit = run(web, server.url, tmp, "kill", a.kill_at)
        finally:
            server.stop()
    bound = calm["elapsed_s"] + calm["partition_ttl_s"] + calm["total_timeout_s"]
    print(json.dumps({"no_fault": calm, "one_worker_killed": hit, "target_s": round(bound, 1),
                      "met": hit["elapsed_s"] <= bound}, indent=1))


if __name__ == "__main__":
    main()
