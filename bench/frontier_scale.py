"""Frontier cost as the queue grows (issue 7): CPU per page, memory per URL, admission rate.

    /work/venv/bin/python bench/frontier_scale.py [--sizes 10000,100000,1000000[,10000000]]

For each size N, on a fresh EmbeddedRedis and frontier.frontier.Frontier (64 partitions,
default Bloom: 10M capacity, 1% FP):
  1. fill: admit N distinct URLs of 10,000 hosts through ``Frontier.admit`` in batches of
     ``--batch`` links -> links/s (wall, client + one Redis), Redis CPU per link;
  2. memory: INFO used_memory delta over the fill, MEMORY USAGE of the Bloom keys; queue bytes
     per URL = (delta - Bloom) / N, next to the mean URL length;
  3. steady state at ~N queued: rounds of acquire (2 hosts per partition) + complete +
     admit 20 links per page (1 new, 19 already seen, so the queue stays at ~N) -> CPU per page (client process +
     redis-server, from /proc), for ``--pages`` pages.
Writes bench/results/frontier-scale-*.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(os.environ.get("TRAWL_SRC") or Path(__file__).resolve().parent.parent)  # a snapshot: see bench/run
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from frontier.config import CrawlConfig  # noqa: E402
from frontier.frontier import Completion, Entry, Frontier  # noqa: E402
from frontier.redisserver import EmbeddedRedis  # noqa: E402

HOSTS = 10_000
CLK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / CLK


def url(i: int) -> tuple[str, str]:
    h = i % HOSTS
    host = f"www.host{h:05d}.example.com"
    return host, f"http://{host}/section/{i // HOSTS % 97}/page-{i:09d}.html"


def links(start: int, n: int) -> list[tuple[str, str, Entry]]:
    out = []
    for i in range(start, start + n):
        host, u = url(i)
        out.append((host, u, Entry(u, 1)))
    return out


def one_size(n: int, batch: int, pages: int, work: Path) -> dict:
    data = work / f"redis-{n}"
    with EmbeddedRedis(data) as red:
        client = redis.Redis(host=red.host, port=red.port)
        fr = Frontier(client, CrawlConfig(namespace="scale", host_delay_s=0.0,
                                          allow_private_ips=True))
        client.config_resetstat()
        mem0 = int(client.info("memory")["used_memory"])
        rcpu0, ccpu0, t0 = proc_cpu(red.pid), time.process_time(), time.perf_counter()
        admitted = 0
        for start in range(0, n, batch):
            admitted += fr.admit(links(start, min(batch, n - start))).admitted
        fill_s = time.perf_counter() - t0
        rcpu_fill = proc_cpu(red.pid) - rcpu0
        ccpu_fill = time.process_time() - ccpu0
        mem1 = int(client.info("memory")["used_memory"])
        bloom = 0
        for key in client.scan_iter(match="scale:*:b*", count=1000):
            k = key.decode()
            if k.rsplit(":", 1)[1].startswith("b") and not k.rsplit(":", 1)[1].startswith("hb"):
                bloom += int(client.memory_usage(key, samples=0) or 0)
        mean_len = sum(len(url(i)[1]) for i in range(0, n, max(1, n // 10000))) / len(
            range(0, n, max(1, n // 10000)))
        queue_bytes = (mem1 - mem0 - bloom) / max(1, admitted)
        bloom_capacity = fr.config.bloom_capacity

        # steady state
        next_new = n
        done = 0
        rcpu0, ccpu0, t0 = proc_cpu(red.pid), time.process_time(), time.perf_counter()
        calls0 = sum(v["calls"] for v in client.info("commandstats").values())
        while done < pages:
            now = time.time()
            leases, _ = fr.acquire(2, now=now)
            if not leases:
                break
            fr.complete([Completion(le, now, "fetched") for le in leases])
            batch_links = links(next_new, len(leases))  # one new URL per page: queue stays ~N
            next_new += len(leases)
            seen = [(le.host, le.entry.url, le.entry) for le in leases for _ in range(19)]
            fr.admit(batch_links + seen, now=now)
            done += len(leases)
        wall = time.perf_counter() - t0
        rcpu = proc_cpu(red.pid) - rcpu0
        ccpu = time.process_time() - ccpu0
        calls = sum(v["calls"] for v in client.info("commandstats").values()) - calls0
        stats = fr.stats()
    shutil.rmtree(data, ignore_errors=True)
    return {
        "queued_urls": n, "admitted": admitted,
        "fill_links_per_s": round(n / fill_s), "fill_s": round(fill_s, 2),
        "fill_redis_cpu_us_per_link": round(1e6 * rcpu_fill / n, 2),
        "fill_client_cpu_us_per_link": round(1e6 * ccpu_fill / n, 2),
        "used_memory_delta": mem1 - mem0, "bloom_bytes": bloom,
        "bloom_bytes_per_url": round(bloom / n, 3),
        "bloom_bytes_per_capacity_url": round(bloom / bloom_capacity, 3),
        "bloom_capacity": bloom_capacity,
        "queue_bytes_per_url": round(queue_bytes, 1), "mean_url_len": round(mean_len, 1),
        "queue_overhead_bytes_per_url": round(queue_bytes - mean_len, 1),
        "steady_pages": done, "steady_wall_s": round(wall, 2),
        "steady_pages_per_s": round(done / wall, 1) if wall else 0,
        "cpu_us_per_page": round(1e6 * (rcpu + ccpu) / max(1, done), 1),
        "redis_cpu_us_per_page": round(1e6 * rcpu / max(1, done), 1),
        "client_cpu_us_per_page": round(1e6 * ccpu / max(1, done), 1),
        "redis_commands_per_page_incl_lua": round(calls / max(1, done), 1),
        "queued_after": stats.get("queued"),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--batch", type=int, default=1000, help="links per Frontier.admit call")
    ap.add_argument("--pages", type=int, default=20000, help="steady-state pages per size")
    a = ap.parse_args()
    work = ROOT / "bench" / "work" / f"scale-{os.getpid()}"
    rows = []
    for n in [int(x) for x in a.sizes.split(",")]:
        row = one_size(n, a.batch, a.pages, work)
        rows.append(row)
        print(json.dumps(row), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    base = rows[0]["cpu_us_per_page"]
    print()
    print(f"{'queued':>10} {'admit links/s':>13} {'CPU us/page':>11} {'vs first':>8} "
          f"{'queue B/URL':>11} {'URL len':>7} {'Bloom B/URL':>11} {'cmds/page':>9}")
    for r in rows:
        print(f"{r['queued_urls']:>10} {r['fill_links_per_s']:>13} {r['cpu_us_per_page']:>11} "
              f"{r['cpu_us_per_page'] / base:>8.2f} {r['queue_bytes_per_url']:>11} "
              f"{r['mean_url_len']:>7} {r['bloom_bytes_per_capacity_url']:>11} "
              f"{r['redis_commands_per_page_incl_lua']:>9}")
    out = Path(__file__).resolve().parent / "results" / f"frontier-scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": {"cores": os.cpu_count(),
                                           "platform": platform.platform()},
                               "batch": a.batch, "hosts": HOSTS, "rows": rows}, indent=1))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
