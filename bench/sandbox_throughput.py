"""Requests/s of the sandbox server under a keep-alive Python client hitting pages across hosts.

    .venv/bin/python bench/sandbox_throughput.py [--seconds 10] [--procs 2] [--threads 8]

Prints req/s and the server process's CPU seconds (utime + stime from /proc/<pid>/stat).
Slow, hanging and flaky URLs are left out: they measure sleeps, not the server.

    .venv/bin/python bench/sandbox_throughput.py --internet [--hosts 10000] [--pages-per-host 10]

The internet-like web at scale: prerendered, latency model on, half the hosts on HTTPS; an
asyncio client (sandbox/loadgen.py) in other processes visits hosts like a crawler (a
connection per visit, the host's pages in turn over it, TLS verified against the CA). Prints
pages/s, the server's CPU (it is one process: one core at most), its RSS and prerender time.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox import SandboxConfig, SandboxWeb
from sandbox.loadgen import LoadResult, Visit, run_load_process


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client(targets: list[tuple[str, str, str]], port: int, seconds: float, threads: int,
           seed: int, out: mp.Queue) -> None:  # type: ignore[type-arg]
    counts = [0] * threads
    errors = [0] * threads

    def run(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        conns: dict[str, http.client.HTTPConnection] = {}
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ip, host, path = rng.choice(targets)
            conn = conns.get(ip) or conns.setdefault(ip, http.client.HTTPConnection(ip, port))
            try:
                conn.request("GET", path, headers={"Host": f"{host}:{port}",
                                                   "User-Agent": "sandbox-bench"})
                resp = conn.getresponse()
                resp.read()
                counts[i] += 1
            except (OSError, http.client.HTTPException):
                errors[i] += 1
                conn.close()
                conns.pop(ip, None)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put((sum(counts), sum(errors)))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _load_child(visits: list[Visit], seconds: float, concurrency: int, ca: str | None,
                seed: int, out: mp.Queue) -> None:  # type: ignore[type-arg]
    out.put(run_load_process(visits, seconds, concurrency, ca, seed))


def internet_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="sandbox_throughput.py --internet")
    p.add_argument("--hosts", type=int, default=10_000)
    p.add_argument("--pages-per-host", type=int, default=10)
    p.add_argument("--ips", type=int, default=1000)
    p.add_argument("--https-share", type=float, default=0.5)
    p.add_argument("--no-latency", action="store_true", help="the latency model off")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--warmup", type=float, default=5.0, help="load before measuring (s)")
    p.add_argument("--procs", type=int, default=2, help="client processes")
    p.add_argument("--concurrency", type=int, default=400, help="connections per process")
    a = p.parse_args(argv)
    # hang_s 5: a hanging request holds a client connection until its 4 s timeout
    config = SandboxConfig.internet(hosts=a.hosts, pages_per_host=a.pages_per_host, ips=a.ips,
                                    https_share=a.https_share, latency=not a.no_latency,
                                    hang_s=5.0)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, SandboxWeb(
            config, Path(tmp) / "log.jsonl", prerender=True, start_timeout_s=900) as web:
        start_s = time.monotonic() - t0
        site = web.site
        assert site is not None
        visits = [Visit(h, web.resolver_map[h], web.https_port if site.is_https(h) else web.port,
                        site.is_https(h), tuple(site.layout.paths[h]))
                  for h in site.hosts if h != site.hang_host]
        rss0 = rss_mb(web.pid)
        out: mp.Queue = mp.Queue()  # type: ignore[type-arg]
        total = a.warmup + a.seconds
        procs = [mp.Process(target=_load_child,
                            args=(visits, total, a.concurrency, web.ca_path, i, out))
                 for i in range(a.procs)]
        for pr in procs:
            pr.start()
        time.sleep(a.warmup)
        log0 = len(web.read_log())
        cpu0, t1 = cpu_seconds(web.pid), time.monotonic()
        time.sleep(a.seconds)
        cpu, wall = cpu_seconds(web.pid) - cpu0, time.monotonic() - t1
        time.sleep(0.3)
        entries = web.read_log()
        results: list[tuple[LoadResult, float]] = [out.get() for _ in procs]
        for pr in procs:
            pr.join()
        rss1 = rss_mb(web.pid)
    window = [e for e in entries[log0:] if t1 - 1 <= e.end]
    done = [e for e in entries[log0:] if e.status == 200]
    https = sum(1 for e in done if e.scheme == "https")
    n_https = sum(1 for v in visits if v.https)
    pages = sum(r.pages for r, _ in results)
    print(f"web: {a.hosts} hosts x {a.pages_per_host} pages on {a.ips} IPs, {n_https} on HTTPS "
          f"(port {web.https_port}), latency {'off' if a.no_latency else 'on'}; started in "
          f"{start_s:.1f} s, prerender {web.prerendered}")
    print(f"server: {len(done) / wall:.0f} pages/s (200s in its log over the {wall:.1f} s "
          f"window, {https / max(1, len(done)):.0%} over TLS; {len(window)} log lines), "
          f"CPU {cpu:.1f} s = {cpu / wall:.0%} of one core, "
          f"{cpu / max(1, len(done)) * 1e6:.0f} us CPU a page; RSS {rss0:.0f} -> {rss1:.0f} MB")
    print(f"clients: {a.procs} x {a.concurrency} connections, {pages} responses in "
          f"{total:.0f} s, {sum(r.errors for r, _ in results)} errors, "
          f"{sum(r.handshakes for r, _ in results)} connections, "
          f"CPU {sum(c for _, c in results):.1f} s")


def main() -> None:
    if "--internet" in sys.argv[1:]:
        internet_main([x for x in sys.argv[1:] if x != "--internet"])
        return
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--urls", type=int, default=3000, help="distinct URLs in the mix")
    a = p.parse_args()
    config = SandboxConfig()
    with tempfile.TemporaryDirectory() as tmp, SandboxWeb(config, Path(tmp) / "log.jsonl") as web:
        site = web.site
        assert site is not None
        avoid = set(site.slow_urls()) | set(site.special_urls())
        urls = [u for u in site.page_urls() + site.resource_urls()
                if u not in avoid and urlsplit(u).hostname != site.hang_host]
        random.Random(7).shuffle(urls)
        targets = []
        for u in urls[: a.urls]:
            parts = urlsplit(u)
            assert parts.hostname
            targets.append((web.resolver_map[parts.hostname], parts.hostname, parts.path))
        out: mp.Queue = mp.Queue()  # type: ignore[type-arg]
        cpu0 = cpu_seconds(web.pid)
        t0 = time.monotonic()
        procs = [mp.Process(target=client, args=(targets, web.port, a.seconds, a.threads, i, out))
                 for i in range(a.procs)]
        for pr in procs:
            pr.start()
        results = [out.get() for _ in procs]
        for pr in procs:
            pr.join()
        wall = time.monotonic() - t0
        cpu = cpu_seconds(web.pid) - cpu0
        done = sum(r[0] for r in results)
        errors = sum(r[1] for r in results)
        time.sleep(0.3)
        logged = len(web.read_log())
    print(f"{done} requests in {wall:.1f} s = {done / wall:.0f} req/s "
          f"({errors} errors, {a.procs} procs x {a.threads} threads, {len(targets)} URLs, "
          f"{len({t[1] for t in targets})} hosts)")
    print(f"server CPU {cpu:.2f} s over {wall:.1f} s wall ({cpu / wall:.0%} of one core); "
          f"log lines {logged}")


if __name__ == "__main__":
    main()
