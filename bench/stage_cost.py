"""CPU per page of each stage of a Trawl worker, one thread, no Celery (issue 7).

py-spy's ``--gil`` profile shows only Python time under the GIL; lxml parsing and zlib run
without it, so the profile misses about a third of a worker's CPU. This runs the worker's own
code (``Frontier.acquire`` -> ``begin`` -> ``process_leases`` -> ``apply_results``, in batches
of ``task_batch``) against the sandbox web and an embedded Redis, and times each stage with
``time.thread_time`` wrappers (their own cost, measured on an empty wrapper, is subtracted).
Run::

    .venv/bin/python bench/stage_cost.py [--pages 3000]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dedup.service as dedup_service
import workers.app.tasks as tasks
import workers.pipeline.lease as pipeline
from frontier.config import CrawlConfig
from frontier.redisclient import client_from_url
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxWeb
from workers.cli.crawl import init_crawl
from workers.runtime.context import WorkerContext

cpu: dict[str, float] = defaultdict(float)
calls: dict[str, int] = defaultdict(int)


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*a: Any, **kw: Any) -> Any:
        t0 = time.thread_time()
        try:
            return fn(*a, **kw)
        finally:
            cpu[name] += time.thread_time() - t0
            calls[name] += 1
    return wrapper


def wrapper_cost() -> float:
    f = timed("_empty", lambda: None)
    t0 = time.thread_time()
    for _ in range(100_000):
        f()
    per = (time.thread_time() - t0) / 100_000
    cpu.pop("_empty"), calls.pop("_empty")
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--cprofile", default="", help="also write cProfile stats of the loop here")
    args = ap.parse_args()
    web_cfg = SandboxConfig(seed=1, hosts=200, pages_per_host=100, ips=50, crawl_delay_s=0.0)
    with tempfile.TemporaryDirectory() as tmp, SandboxWeb(web_cfg, Path(tmp) / "w.log") as web:
        srv = EmbeddedRedis(Path(tmp) / "redis").start()
        try:
            client = client_from_url(srv.url)
            cfg = CrawlConfig(namespace="stage", output_dir=str(Path(tmp) / "out"),
                              host_delay_s=0.0, ip_delay_s=0.0, ip_concurrency=0,
                              allow_private_ips=True, static_hosts=web.resolver_map,
                              adaptive_delay_factor=0.0)
            init_crawl(client, cfg, web.seeds)
            ctx = WorkerContext(srv.url, "stage")
            per_call = wrapper_cost()
            pipeline.parse_html = timed("parse (lxml + links)", pipeline.parse_html)
            pipeline.content_fingerprint = timed("body digest", pipeline.content_fingerprint)
            pipeline.add_link = timed("canonicalize + scope (per link)", pipeline.add_link)
            dedup_service.page_features = timed("dedup: text+shingles+minhash",
                                                dedup_service.page_features)
            ctx.dedup.check_many = timed("dedup: LSH check (Redis)", ctx.dedup.check_many)
            ctx.fetcher.fetch = timed("fetch", ctx.fetcher.fetch)
            assert ctx.warc is not None
            ctx.warc.write = timed("warc write (gzip)", ctx.warc.write)
            ctx.records.write = timed("jsonl record", ctx.records.write)
            apply = timed("apply_results (Redis pipeline)", tasks.apply_results)
            begin = timed("begin (Redis)", ctx.frontier.begin)
            acquire = timed("acquire (scheduler, Redis)", ctx.frontier.acquire)
            process = timed("process_leases total", pipeline.process_leases)
            size = cfg.task_batch
            done = 0
            prof = cProfile.Profile() if args.cprofile else None
            if prof:
                prof.enable()
            client.config_resetstat()
            t0 = time.thread_time()
            while done < args.pages:
                leases, _ = acquire(1)
                if not leases:
                    time.sleep(0.01)
                    continue
                for start in range(0, len(leases), size):
                    chunk = leases[start:start + size]
                    ok = begin(chunk, cfg.fetch_lease_s)
                    todo = [(lease, None) for lease, good in zip(chunk, ok, strict=True) if good]
                    results = [(r, None) for r in process(ctx, todo)]
                    apply(ctx, results, [])
                    done += sum(1 for r, _ in results if r.completion.outcome == "fetched")
            total = time.thread_time() - t0
            redis_cmds = client.info("commandstats")
            if prof:
                prof.disable()
                prof.dump_stats(args.cprofile)
            ctx.close()
        finally:
            srv.stop()
    n = done
    rows = []
    for name in cpu:
        own = cpu[name] - calls[name] * per_call
        rows.append((name, 1e3 * own / n, calls[name] / n))
    print(f"{n} pages fetched, one thread; wrapper cost {per_call * 1e6:.2f} us/call subtracted")
    print(f"{'stage':40s} {'ms/page':>8s} {'calls/page':>11s}")
    for name, ms, c in sorted(rows, key=lambda r: -r[1]):
        print(f"{name:40s} {ms:8.3f} {c:11.2f}")
    print(f"{'whole loop (thread CPU)':40s} {1e3 * total / n:8.3f}")
    # Inside Redis (commandstats counts the commands scripts call too, and their time is also
    # in the script's own usec): per page, the costliest first.
    print(f"\n{'Redis command (server side)':40s} {'us/page':>8s} {'calls/page':>11s}")
    per_cmd = sorted(((k.removeprefix("cmdstat_"), v["usec"] / n, v["calls"] / n)
                      for k, v in redis_cmds.items()), key=lambda r: -r[1])
    for name, us, c in per_cmd[:15]:
        print(f"{name:40s} {us:8.1f} {c:11.2f}")
    print(json.dumps({"pages": n, "ms_per_page": {r[0]: round(r[1], 4) for r in rows},
                      "total_ms_per_page": round(1e3 * total / n, 4),
                      "redis_us_per_page": {r[0]: round(r[1], 2) for r in per_cmd}}))


if __name__ == "__main__":
    main()
