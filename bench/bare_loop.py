"""The bare loop: the minimum work of a crawler, as a ceiling for this machine.

    python bench/bare_loop.py CONFIG.json

requests (one Session per thread, connecting to the mapped IP with the original Host) +
lxml link extraction + a Python set of seen URLs. PROCS processes each own the hosts with
hash(host) % PROCS == i; a link of a host owned elsewhere is sent to its owner's inbox. Politeness:
one request per host at a time and the per-host delay (end of a fetch -> next start), nothing
else (no robots.txt). Ends when no URL is queued, in flight or in transit anywhere.
CONFIG: seeds, resolver_map, domain, delay_s, procs, threads, user_agent, timeout_s; and for
the internet-like web (bench/internet.py) internet (bool: URLs fetched by name, http or https,
names pinned to resolver_map by a patched getaddrinfo, certificates checked against ca_path;
robots.txt obeyed as in bench/async_loop.py, fetched as a polite request of its own).
"""

from __future__ import annotations

import heapq
import json
import multiprocessing as mp
import queue
import socket
import sys
import threading
import time
import zlib
from collections import deque
from urllib.parse import urldefrag, urljoin, urlsplit

import lxml.html
import requests
from protego import Protego

ROBOTS_LIMIT = 500 * 1024


def owner(host: str, procs: int) -> int:
    return zlib.crc32(host.encode()) % procs


def pin_names(rmap: dict[str, str]) -> None:
    """getaddrinfo answers the sandbox names from the map (this process only)."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kw):
        return real(rmap.get(host, host) if isinstance(host, str) else host, *args, **kw)

    socket.getaddrinfo = getaddrinfo


def robots_visit(session: requests.Session, url: str, token: str, verify) -> tuple[object, str]:
    """One polite robots.txt request: (rules or None if redirected, next robots URL)."""
    try:
        resp = session.get(url, timeout=30, allow_redirects=False, verify=verify, stream=True)
        body = resp.raw.read(ROBOTS_LIMIT, decode_content=True)
        resp.close()
    except Exception:
        return "deny", ""
    loc = resp.headers.get("location")
    if resp.is_redirect and loc:
        return None, urljoin(url, loc)
    if resp.status_code == 200:
        return Protego.parse(body.decode("utf-8", "replace")), ""
    return ("allow" if resp.status_code < 500 else "deny"), ""


def worker(i: int, cfg: dict, inboxes: list, pending, lock, done_ev) -> None:
    procs, delay, domain = cfg["procs"], cfg["delay_s"], cfg["domain"]
    rmap = cfg["resolver_map"]
    internet = bool(cfg.get("internet"))
    verify = cfg.get("ca_path") or True
    token = cfg["user_agent"].split("/")[0].lower()
    robots: dict[str, object] = {}  # host -> Protego | "allow" | "deny"
    robots_next: dict[str, tuple[str, int]] = {}
    schemes = ("http://", "https://") if internet else ("http://",)
    if internet:
        pin_names(rmap)
    seen: set[str] = set()
    hostq: dict[str, deque[str]] = {}
    ready: list[tuple[float, str]] = []  # heap of (next allowed, host) of idle hosts with URLs
    busy: set[str] = set()
    #: when each host's last request ended: a host idle with no URL queued that is given one
    #: is due a delay after it, not at once
    last_end: dict[str, float] = {}
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
                    heapq.heappush(ready, (last_end.get(host, -delay) + delay, host))
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

    def get(session: requests.Session, url: str) -> requests.Response:
        if internet:
            return session.get(url, timeout=30, allow_redirects=False, verify=verify)
        parts = urlsplit(url)
        target = f"http://{rmap[parts.hostname]}:{parts.port or 80}{parts.path or '/'}"
        if parts.query:
            target += "?" + parts.query
        return session.get(target, headers={"Host": parts.netloc}, timeout=30,
                           allow_redirects=False)

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
                robots_now = internet and host not in robots  # this visit fetches robots.txt
                url = hostq[host][0] if robots_now else hostq[host].popleft()
                busy.add(host)
            links: list[str] = []
            counted = 1
            if robots_now:
                counted = 0
                parts = urlsplit(url)
                rurl, hops = robots_next.pop(host, (f"{parts.scheme}://{parts.netloc}/robots.txt", 0))
                rules, nxt = robots_visit(session, rurl, token, verify)
                if rules is None and hops < 5:
                    robots_next[host] = (nxt, hops + 1)
                else:
                    robots[host] = rules if rules is not None else "allow"
                url = ""
            rules = robots.get(host, "allow")
            if url and (rules == "deny" or (isinstance(rules, Protego)
                                            and not rules.can_fetch(url, token))):
                url = ""  # disallowed: no request
            requested = counted == 0 or bool(url)
            try:
                resp = get(session, url) if url else None
                body = resp.content if resp is not None else b""
                if resp is None:
                    pass
                elif resp.is_redirect and "location" in resp.headers:
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
                        if absu.startswith(schemes) and (h == domain or h.endswith("." + domain)):
                            out.append(absu)
                    links = out
            except Exception:
                links = []
            route(links)
            with cond:
                busy.discard(host)
                if requested:
                    last_end[host] = time.monotonic()
                if hostq[host]:  # (a URL robots.txt disallowed made no request: no delay)
                    heapq.heappush(ready, (time.monotonic() + (delay if requested else 0), host))
                cond.notify_all()
            uncount(counted)

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
