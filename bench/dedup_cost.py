"""Cost of near-duplicate detection: CPU per ~20 KB page (normalize, shingle, MinHash, LSH
query/insert in Redis) and Redis memory per indexed page. Not a test; prints the figures.

    /work/venv/bin/python bench/dedup_cost.py [--pages 20000]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dedup.service import DedupService, page_features
from dedup.text import parse
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxSite


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=20_000)
    args = ap.parse_args()
    site = SandboxSite(SandboxConfig(hosts=400, pages_per_host=100), 8000)
    trees = []
    for u in site.page_urls():
        p = urlsplit(u)
        body = site.respond(p.hostname or "", p.path).body
        if 18_000 <= len(body) <= 22_000:
            trees.append((u, p.netloc, parse(body), len(body)))
        if len(trees) >= 200:
            break
    avg = sum(t[3] for t in trees) / len(trees)
    with tempfile.TemporaryDirectory() as d:
        srv = EmbeddedRedis(d).start()
        try:
            client = redis.Redis.from_url(srv.url)
            svc = DedupService(client, "bench")
            n = 2000
            c0, w0 = cpu(), time.perf_counter()
            for i in range(n):
                url, host, root, _ = trees[i % len(trees)]
                page_features(root, svc.config, svc.hasher)
            feat = (cpu() - c0) / n
            c0, w0 = cpu(), time.perf_counter()
            s0 = float(client.info("cpu")["used_cpu_user"]) + float(
                client.info("cpu")["used_cpu_sys"])
            for i in range(n):
                url, host, root, _ = trees[i % len(trees)]
                svc.check(f"{url}?copy={i}", host, root)
            total = (cpu() - c0) / n
            wall = (time.perf_counter() - w0) / n
            s1 = float(client.info("cpu")["used_cpu_user"]) + float(
                client.info("cpu")["used_cpu_sys"])
            print(f"pages ~{avg / 1024:.1f} KB (lxml tree given, as from the worker)")
            print(f"normalize+shingle+MinHash  CPU {feat * 1e3:.3f} ms/page")
            print(f"+ LSH check (client side)  CPU {total * 1e3:.3f} ms/page, wall "
                  f"{wall * 1e3:.3f} ms/page, Redis server CPU {(s1 - s0) / n * 1e3:.3f} ms/page")
            # memory: index distinct pages (random text) and measure used_memory growth
            client.flushall()
            svc = DedupService(client, "mem")
            base_mem = int(client.info("memory")["used_memory"])
            import numpy as np

            rng = np.random.default_rng(1)
            words = ["".join(chr(97 + (i // 26**k) % 26) for k in range(3)) for i in range(5000)]
            for i in range(args.pages):
                text = " ".join(words[j] for j in rng.integers(0, 5000, 300))
                svc.check(f"http://h{i % 500}.example/p/{i}.html", f"h{i % 500}.example",
                          f"<html><body><p>{text}</p></body></html>".encode())
            used = int(client.info("memory")["used_memory"]) - base_mem
            per = used / args.pages
            print(f"Redis memory: {per:.0f} B per indexed canonical page "
                  f"({args.pages} pages); 100,000 pages ≈ {per * 1e5 / 2**20:.0f} MiB")
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
