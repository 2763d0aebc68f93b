"""Frontier cost as the queue grows (issue 7): CPU per page, memory per URL, admission rate.

    /work/venv/bin/python bench/frontier_scale.py [--sizes 10000,100000,1000000[,10000000]]

For each size N, on a fresh EmbeddedRedis and frontier.frontier.Frontier (64 partitions,
default Bloom: 10M capacity, 1% FP):
  1. fill: admit N distinct URLs of 10,000 hosts through ``Frontier.admit`` in batches of
     ``--batch`` links -> links/s (wall, client + one Redis), Redis CPU per link; then the
     same path with links already seen (up to 200,000 of them again) and with a crawl's mix
     (19 seen : 1 new) -> links/s;
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
import multiprocessing as mp
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("TRAWL_SRC") or Path(__file__).resolve().parent.parent)  # a snapshot: see bench/run
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from frontier.config import CrawlConfig  # noqa: E402
from frontier.frontier import AdmitLink, Completion, Entry, Frontier  # noqa: E402
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


def links(start: int, n: int) -> list[AdmitLink]:
    out = []
    for i in range(start, start + n):
        host, u = url(i)
        out.append(AdmitLink(host, u, Entry(u, 1)))
    return out


def admit_all(fr: Frontier, todo: list[tuple[str, str, Entry]], batch: int) -> int:
    """Admit ``todo`` in calls of ``batch`` links; returns how many were admitted."""
    return sum(fr.admit(todo[start:start + batch]).admitted
               for start in range(0, len(todo), batch))


def admit_rate(fr: Frontier, todo: list[tuple[str, str, Entry]], batch: int,
               redis_pid: int) -> tuple[int, float, float]:
    """Links/s of one client admitting ``todo``, and Redis and client CPU (us) per link."""
    rcpu0, ccpu0, t0 = proc_cpu(redis_pid), time.process_time(), time.perf_counter()
    admit_all(fr, todo, batch)
    wall = time.perf_counter() - t0
    n = len(todo)
    return (round(n / wall), round(1e6 * (proc_cpu(redis_pid) - rcpu0) / n, 2),
            round(1e6 * (time.process_time() - ccpu0) / n, 2))


def _client(port: int, backend: str, todo: list[tuple[str, str, Entry]], batch: int,
            go: Any, out: Any) -> None:
    fr = Frontier(redis.Redis(port=port), CrawlConfig(
        namespace="scale", host_delay_s=0.0, allow_private_ips=True, bloom_backend=backend))
    go.wait(timeout=120)
    t0 = time.perf_counter()
    admit_all(fr, todo, batch)
    out.put((t0, time.perf_counter()))


def parallel_admit_rate(port: int, backend: str, streams: list[list[tuple[str, str, Entry]]],
                        batch: int, redis_pid: int) -> tuple[int, float]:
    """Links/s of len(streams) client processes admitting at once into one Redis (first start
    to last end), and Redis CPU per link."""
    ctx = mp.get_context("fork")
    go, out = ctx.Barrier(len(streams) + 1), ctx.Queue()
    procs = [ctx.Process(target=_client, args=(port, backend, todo, batch, go, out))
             for todo in streams]
    for p in procs:
        p.start()
    rcpu0 = proc_cpu(redis_pid)
    go.wait(timeout=120)  # a client that died before the start breaks the barrier
    spans = [out.get(timeout=600) for _ in procs]
    rcpu = proc_cpu(redis_pid) - rcpu0
    for p in procs:
        p.join()
    total = sum(len(t) for t in streams)
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    return round(total / wall), round(1e6 * rcpu / total, 2)


def mixed(n: int, first: int, count: int) -> list[tuple[str, str, Entry]]:
    """A crawl's mix: 19 links already seen (of the first n) to 1 new one."""
    return [x for i in range(first, first + count, 19)
            for x in links(i % n, 19) + links(n + 10_000_000 + i, 1)]


def one_size(n: int, batch: int, pages: int, work: Path, backend: str,
             clients: int) -> dict:
    data = work / f"redis-{n}"
    with EmbeddedRedis(data, redisbloom=backend != "lua") as red:
        client = redis.Redis(host=red.host, port=red.port)
        fr = Frontier(client, CrawlConfig(namespace="scale", host_delay_s=0.0,
                                          allow_private_ips=True, bloom_backend=backend))
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
        # Admission rates last: their new URLs would change the steady state's queue.
        seen_rate, seen_redis_us, seen_client_us = admit_rate(
            fr, links(0, min(n, 200_000)), batch, red.pid)
        mix = mixed(n, 0, min(n, 190_000))
        mix_rate, mix_redis_us, mix_client_us = admit_rate(fr, mix, batch, red.pid)
        streams = [mixed(n, 1_000_000 * (c + 1), 190_000) for c in range(clients)]
        par_rate, par_redis_us = parallel_admit_rate(red.port, backend, streams, batch, red.pid)
    shutil.rmtree(data, ignore_errors=True)
    return {
        "bloom_backend": fr.config.bloom_backend,
        "queued_urls": n, "admitted": admitted,
        "seen_links_per_s": seen_rate, "mixed_19_seen_1_new_links_per_s": mix_rate,
        "seen_redis_cpu_us_per_link": seen_redis_us, "seen_client_cpu_us_per_link": seen_client_us,
        "mixed_redis_cpu_us_per_link": mix_redis_us, "mixed_client_cpu_us_per_link": mix_client_us,
        "parallel_clients": clients, "parallel_mixed_links_per_s": par_rate,
        "parallel_redis_cpu_us_per_link": par_redis_us,
        # What one Redis core can take from any number of clients: 1 / its CPU per link.
        "mixed_links_per_redis_core_s": round(1e6 / mix_redis_us) if mix_redis_us else None,
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
    ap.add_argument("--clients", type=int, default=2,
                    help="client processes admitting at once in the parallel phase")
    ap.add_argument("--backends", default="lua,redisbloom",
                    help="URL-seen backends to measure, each at every size")
    a = ap.parse_args()
    work = ROOT / "bench" / "work" / f"scale-{os.getpid()}"
    rows = []
    for backend in a.backends.split(","):
        for n in [int(x) for x in a.sizes.split(",")]:
            row = one_size(n, a.batch, a.pages, work, backend, a.clients)
            rows.append(row)
            print(json.dumps(row), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"{'backend':>10} {'queued':>10} {'new links/s':>11} {'seen/s':>8} {'mix/s':>8} "
          f"{'CPU us/page':>11} {'vs first':>8} "
          f"{'queue B/URL':>11} {'URL len':>7} {'Bloom B/URL':>11} {'cmds/page':>9}")
    for r in rows:
        base = next(x for x in rows if x["bloom_backend"] == r["bloom_backend"])["cpu_us_per_page"]
        print(f"{r['bloom_backend']:>10} {r['queued_urls']:>10} {r['fill_links_per_s']:>11} "
              f"{r['seen_links_per_s']:>8} {r['mixed_19_seen_1_new_links_per_s']:>8} "
              f"{r['cpu_us_per_page']:>11} "
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
