"""The bare loop: the minimum work of a crawler, as a ceiling for this machine.

    python bench/bare_loop.py CONFIG.json

requests (one Session per thread, connecting to the mapped IP with the original Host) +
lxml link extraction + a Python set of seen URLs. PROCS processes each own the hosts with
hash(host) % PROCS == i; a link of a host owned elsewhere is sent to its owner's inbox. Politeness:
one request per host at a time and the per-host delay (end of a fetch -> next start), nothing
else (no robots.txt). Ends when no URL is queued, in flight or in transit anywhere.
CONFIG: seeds, resolver_map, domain, delay_s, procs, threads, user_agent, timeout_s.
"""

from __future__ import annotations

import heapq
import json
import multiprocessing as mp
import queue
import sys
import threading
import time
import zlib
from collections import deque
from urllib.parse import urldefrag, urljoin, urlsplit

import lxml.html
import requests


def owner(host: str, procs: int) -> int:
    return zlib.crc32(host.encode()) % procs


def worker(i: int, cfg: dict, inboxes: list, pending, lock, done_ev) -> None:
    procs, delay, domain = cfg["procs"], cfg["delay_s"], cfg["domain"]
    rmap = cfg["resolver_map"]
    seen: set[str] = set()
    hostq: dict[str, deque[str]] = {}
    ready: list[tuple[float, str]] = []  # heap of (next allowed, host) of idle hosts with URLs
    busy: set[str] = set()
    cond = threading.Condition()
    deadline = time.monotonic() + cfg["timeout_s"]

    def add_local(urls: list[str]) -> int:
        """Admit URLs of own hosts; returns how many were already seen (to un-count)."""
        dup = 0
        with cond:
            for url in urls:
                if url in seen:
                    dup += 1
                    continue
                seen.add(url)
                host = urlsplit(url).hostname or ""
                q = hostq.get(host)
                if q is None:
                    q = hostq[host] = deque()
                if not q and host not in busy:
                    heapq.heappush(ready, (0.0, host))
                q.append(url)
            cond.notify_all()
        return dup

    def uncount(n: int) -> None:
        if n:
            with lock:
                pending.value -= n
                if pending.value == 0:
                    done_ev.set()

    def route(urls: list[str]) -> None:
        """Count URLs as pending, then hand each to its owner."""
        if not urls:
            return
        with lock:
            pending.value += len(urls)
        groups: dict[int, list[str]] = {}
        for u in urls:
            groups.setdefault(owner(urlsplit(u).hostname or "", procs), []).append(u)
        for p, us in groups.items():
            if p == i:
                uncount(add_local(us))
            else:
                inboxes[p].put(us)

    def receiver() -> None:
        while not done_ev.is_set():
            try:
                us = inboxes[i].get(timeout=0.2)
            except queue.Empty:
                continue
            uncount(add_local(us))

    def fetcher() -> None:
        session = requests.Session()
        session.headers["User-Agent"] = cfg["user_agent"]
        while not done_ev.is_set() and time.monotonic() < deadline:
            with cond:
                now = time.monotonic()
                if not ready or ready[0][0] > now:
                    cond.wait(0.05 if not ready else min(0.05, ready[0][0] - now))
                    continue
                _, host = heapq.heappop(ready)
                url = hostq[host].popleft()
                busy.add(host)
            links: list[str] = []
            try:
                parts = urlsplit(url)
                target = f"http://{rmap[parts.hostname]}:{parts.port or 80}{parts.path or '/'}"
                if parts.query:
                    target += "?" + parts.query
                resp = session.get(target, headers={"Host": parts.netloc}, timeout=30,
                                   allow_redirects=False)
                body = resp.content
                if resp.is_redirect and "location" in resp.headers:
                    links.append(urljoin(url, resp.headers["location"]))
                elif resp.ok and "html" in resp.headers.get("content-type", "") and body:
                    doc = lxml.html.fromstring(body)
                    for el in doc.iter("a"):
                        href = el.get("href")
                        if href:
                            links.append(href)
                    base = url
                    out = []
                    for href in links:
                        absu = urldefrag(urljoin(base, href.strip()))[0]
                        h = urlsplit(absu).hostname or ""
                        if absu.startswith("http://") and (h == domain or h.endswith("." + domain)):
                            out.append(absu)
                    links = out
            except Exception:
                links = []
            route(links)
            with cond:
                busy.discard(host)
                if hostq[host]:
                    heapq.heappush(ready, (time.monotonic() + delay, host))
                cond.notify_all()
            uncount(1)

    if i == 0:
        route(list(cfg["seeds"]))
    threads = [threading.Thread(target=receiver, daemon=True)]
    threads += [threading.Thread(target=fetcher, daemon=True) for _ in range(cfg["threads"])]
    for t in threads:
        t.start()
    while not done_ev.is_set() and time.monotonic() < deadline:
        done_ev.wait(0.2)
    done_ev.set()
    for t in threads:
        t.join(5)


def main() -> None:
    cfg = json.loads(open(sys.argv[1]).read())
    ctx = mp.get_context("fork")
    inboxes = [ctx.Queue() for _ in range(cfg["procs"])]
    pending = ctx.Value("q", 0, lock=False)
    lock = ctx.Lock()
    done_ev = ctx.Event()
    # pending starts at 0; the seeds are counted by route() in process 0 before anything ends.
    ps = [ctx.Process(target=worker, args=(i, cfg, inboxes, pending, lock, done_ev))
          for i in range(cfg["procs"])]
    for p in ps:
        p.start()
    for p in ps:
        p.join()


if __name__ == "__main__":
    main()
