"""Requests/s of the sandbox server under a keep-alive Python client hitting pages across hosts.

    /work/venv/bin/python bench/sandbox_throughput.py [--seconds 10] [--procs 2] [--threads 8]

Prints req/s and the server process's CPU seconds (utime + stime from /proc/<pid>/stat).
Slow, hanging and flaky URLs are left out: they measure sleeps, not the server.
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


def main() -> None:
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
