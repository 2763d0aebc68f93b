"""The bare loop for a web with latency: one asyncio event loop per process, aiohttp, lxml.

    python bench/async_loop.py CONFIG.json

The minimum a polite crawler of the internet-like web must do, as a ceiling: fetch (aiohttp,
host names pinned to the sandbox's resolver map, HTTPS verified against the sandbox CA), parse
``<a href>`` with lxml, remember seen URLs in a Python set. Politeness: one request in flight per
host and ``delay_s`` from the end of one request to the start of the next (robots.txt fetches
included); robots.txt obeyed simply (RFC 9309: fetched first, redirects followed as separate
polite fetches, 4xx = allow all, 5xx or no answer = disallow all, the first 500 KiB parsed by
protego, a longer Crawl-delay honoured). PROCS processes each own the hosts with
crc32(host) % PROCS == i; a link to a host owned elsewhere goes to its owner's inbox, as in
bench/bare_loop.py. Ends when no URL is queued, in flight or in transit anywhere, or at
timeout_s.

CONFIG: seeds, resolver_map, domain, delay_s, procs, max_in_flight (per process), user_agent,
timeout_s, ca_path (PEM or null), robots (bool).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import queue
import resource
import socket
import ssl
import sys
import threading
import time
import zlib
from collections import deque
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import aiohttp
import lxml.html
from aiohttp.abc import AbstractResolver
from protego import Protego

ROBOTS_LIMIT = 500 * 1024
MAX_ROBOTS_REDIRECTS = 5
ALLOW_ALL, DISALLOW_ALL = "allow", "deny"


async def read_capped(stream: aiohttp.StreamReader, limit: int) -> bytes:
    """The body up to ``limit`` bytes. ``StreamReader.read(n)`` returns what has arrived so
    far, not n bytes: a trickled robots.txt read once lost its later rules. A line cut at the
    limit is dropped, so a cut ``Disallow: /private`` cannot become ``Disallow: /p``."""
    body = b""
    while len(body) < limit:
        chunk = await stream.read(limit - len(body))
        if not chunk:
            return body
        body += chunk
    return body[:body.rfind(b"\n") + 1]


def owner(host: str, procs: int) -> int:
    return zlib.crc32(host.encode()) % procs


class PinnedResolver(AbstractResolver):
    """Host names of the sandbox web -> their loopback IP; anything else fails (no DNS)."""

    def __init__(self, rmap: dict[str, str]) -> None:
        self.rmap = rmap

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[dict[str, Any]]:
        ip = self.rmap.get(host)
        if ip is None:
            raise OSError(f"{host}: not in the sandbox's resolver map")
        return [{"hostname": host, "host": ip, "port": port, "family": socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST}]

    async def close(self) -> None:
        return None


class Loop:
    """One process's share of the crawl."""

    def __init__(self, i: int, cfg: dict, inboxes: list, pending, lock, done_ev) -> None:
        self.i, self.cfg = i, cfg
        self.inboxes, self.pending, self.lock, self.done_ev = inboxes, pending, lock, done_ev
        self.procs = cfg["procs"]
        self.delay = float(cfg["delay_s"])
        self.domain = cfg["domain"]
        self.ua = cfg["user_agent"]
        self.token = self.ua.split("/")[0].lower()
        self.obey_robots = bool(cfg.get("robots", True))
        self.limit = int(cfg.get("max_in_flight", 1000))
        self.seen: set[str] = set()
        self.hostq: dict[str, deque[str]] = {}
        self.active: set[str] = set()  # hosts scheduled, waiting for a slot, or in flight
        self.waiting: deque[str] = deque()  # due hosts held back by the in-flight limit
        self.last_end: dict[str, float] = {}
        self.host_delay: dict[str, float] = {}
        self.robots: dict[str, Any] = {}  # host -> Protego | ALLOW_ALL | DISALLOW_ALL
        self.robots_next: dict[str, tuple[str, int]] = {}  # host -> (robots URL, redirects)
        self.in_flight = 0
        self.stopping = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.session: aiohttp.ClientSession | None = None

    # -- bookkeeping shared with the other processes -----------------------------------------
    def uncount(self, n: int) -> None:
        if n:
            with self.lock:
                self.pending.value -= n
                if self.pending.value == 0:
                    self.done_ev.set()

    def route(self, urls: list[str]) -> None:
        if not urls:
            return
        with self.lock:
            self.pending.value += len(urls)
        groups: dict[int, list[str]] = {}
        for u in urls:
            groups.setdefault(owner(urlsplit(u).hostname or "", self.procs), []).append(u)
        for p, us in groups.items():
            if p == self.i:
                self.uncount(self.add_local(us))
            else:
                self.inboxes[p].put(us)

    def add_local(self, urls: list[str]) -> int:
        """Admit URLs of own hosts; returns how many were seen before (to un-count)."""
        dup = 0
        for url in urls:
            if url in self.seen:
                dup += 1
                continue
            self.seen.add(url)
            host = urlsplit(url).hostname or ""
            q = self.hostq.get(host)
            if q is None:
                q = self.hostq[host] = deque()
            q.append(url)
            if host not in self.active:
                self.active.add(host)
                assert self.loop is not None
                due = self.last_end.get(host, 0.0) + self.host_delay.get(host, self.delay)
                wait = due - self.loop.time()
                if wait > 0:
                    self.loop.call_later(wait, self.offer, host)
                else:
                    self.offer(host)
        return dup

    # -- scheduling -------------------------------------------------------------------------
    def offer(self, host: str) -> None:
        """``host`` is due: fetch from it now, or as soon as a slot frees."""
        if self.stopping:
            return
        if self.in_flight < self.limit:
            self.in_flight += 1
            assert self.loop is not None
            self.loop.create_task(self.visit(host))
        else:
            self.waiting.append(host)

    async def visit(self, host: str) -> None:
        q = self.hostq[host]
        counted = 0
        try:
            if self.obey_robots and not isinstance(self.robots.get(host), (Protego, str)):
                await self.fetch_robots(host, q[0])
            else:
                url = q.popleft()
                counted = 1
                rules = self.robots.get(host, ALLOW_ALL)
                if rules == DISALLOW_ALL or (
                        isinstance(rules, Protego) and not rules.can_fetch(url, self.token)):
                    self.last_end.setdefault(host, 0.0)
                    return  # no request made: the host's clock does not move
                self.route(await self.fetch_page(url))
        finally:
            assert self.loop is not None
            self.in_flight -= 1
            if q:
                due = self.last_end.get(host, 0.0) + self.host_delay.get(host, self.delay)
                self.loop.call_at(max(due, self.loop.time()), self.offer, host)
            else:
                self.active.discard(host)
            while self.waiting and self.in_flight < self.limit:
                self.offer(self.waiting.popleft())
            self.uncount(counted)

    async def fetch_robots(self, host: str, any_url: str) -> None:
        parts = urlsplit(any_url)
        url, hops = self.robots_next.pop(host, (f"{parts.scheme}://{parts.netloc}/robots.txt", 0))
        assert self.session is not None and self.loop is not None
        rules: Any = None
        try:
            async with self.session.get(url, allow_redirects=False) as resp:
                body = await read_capped(resp.content, ROBOTS_LIMIT)
                status, location = resp.status, resp.headers.get("Location")
            if 300 <= status < 400 and location and hops < MAX_ROBOTS_REDIRECTS:
                self.robots_next[host] = (urljoin(url, location), hops + 1)
            elif status == 200:
                rules = Protego.parse(body.decode("utf-8", "replace"))
            elif 400 <= status < 500 or 300 <= status < 400:
                rules = ALLOW_ALL
            else:
                rules = DISALLOW_ALL
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError, RuntimeError):
            rules = DISALLOW_ALL
        finally:
            self.last_end[host] = self.loop.time()
        if rules is not None:
            self.robots[host] = rules
            if isinstance(rules, Protego):
                cd = rules.crawl_delay(self.token)
                if cd is not None and float(cd) > self.delay:
                    self.host_delay[host] = float(cd)

    async def fetch_page(self, url: str) -> list[str]:
        assert self.session is not None and self.loop is not None
        host = urlsplit(url).hostname or ""
        links: list[str] = []
        try:
            async with self.session.get(url, allow_redirects=False) as resp:
                body = await resp.read()
                status, ctype = resp.status, resp.headers.get("Content-Type", "")
                location = resp.headers.get("Location")
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError, RuntimeError):
            return []
        finally:
            self.last_end[host] = self.loop.time()
        if 300 <= status < 400 and location:
            links.append(urljoin(url, location))
        elif 200 <= status < 300 and "html" in ctype and body:
            try:
                doc = lxml.html.fromstring(body)
            except (ValueError, lxml.etree.ParserError):
                return []
            for el in doc.iter("a"):
                href = el.get("href")
                if href:
                    links.append(href)
        out = []
        dom, sub = self.domain, "." + self.domain
        for href in links:
            absu = urldefrag(urljoin(url, href.strip()))[0]
            if absu.startswith(("http://", "https://")):
                h = urlsplit(absu).hostname or ""
                if h == dom or h.endswith(sub):
                    out.append(absu)
        return out

    # -- the process ------------------------------------------------------------------------
    def _receiver(self) -> None:
        assert self.loop is not None
        while not self.done_ev.is_set():
            try:
                us = self.inboxes[self.i].get(timeout=0.2)
            except queue.Empty:
                continue
            self.loop.call_soon_threadsafe(lambda us=us: self.uncount(self.add_local(us)))

    async def main(self) -> None:
        self.loop = asyncio.get_running_loop()
        ca = self.cfg.get("ca_path")
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
        conn = aiohttp.TCPConnector(limit=0, limit_per_host=0, ssl=ctx,
                                    resolver=PinnedResolver(self.cfg["resolver_map"]),
                                    use_dns_cache=False, keepalive_timeout=30)
        timeout = aiohttp.ClientTimeout(total=30, connect=10)
        async with aiohttp.ClientSession(connector=conn, timeout=timeout,
                                         headers={"User-Agent": self.ua},
                                         cookie_jar=aiohttp.DummyCookieJar()) as session:
            # aiohttp resends an idempotent request at once when a reused keep-alive
            # connection turns out closed (RFC 9112 9.3.1.1): the server may already have
            # seen the first one (the sandbox resets ~1% of requests after logging them), so
            # the resend is a second request to the host with no delay and, for a page, a
            # duplicate fetch. A polite ceiling does not do that; there is no public switch.
            session._retry_connection = False
            self.session = session
            threading.Thread(target=self._receiver, daemon=True).start()
            if self.i == 0:
                self.route(list(self.cfg["seeds"]))
            deadline = self.loop.time() + float(self.cfg["timeout_s"])
            while not self.done_ev.is_set() and self.loop.time() < deadline:
                await asyncio.sleep(0.1)
            self.done_ev.set()
            self.stopping = True


def worker(i: int, cfg: dict, inboxes: list, pending, lock, done_ev) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = Loop(i, cfg, inboxes, pending, lock, done_ev)
    try:
        asyncio.run(loop.main())
    except KeyboardInterrupt:
        done_ev.set()


def main() -> None:
    cfg = json.loads(open(sys.argv[1]).read())
    ctx = mp.get_context("fork")
    inboxes = [ctx.Queue() for _ in range(cfg["procs"])]
    pending = ctx.Value("q", 0, lock=False)
    lock = ctx.Lock()
    done_ev = ctx.Event()
    t0 = time.time()
    ps = [ctx.Process(target=worker, args=(i, cfg, inboxes, pending, lock, done_ev))
          for i in range(cfg["procs"])]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    print(f"async loop: {cfg['procs']} processes, {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
