"""The fixed skeleton of a sandbox web, derived from the seed: hosts, IPs, paths, special URLs.

Everything here is computed eagerly at start (it is small); link lists and HTML are generated
lazily per page elsewhere.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from bisect import bisect_right
from dataclasses import dataclass
from enum import StrEnum

from .config import SandboxConfig
from .robots import GUARANTEED, RobotsKind

SECTIONS = ("news", "blog", "docs", "shop", "wiki", "forum")
N_PDF = 2
N_PNG = 3


class SpecialKind(StrEnum):
    MOVED = "moved"  # 301, absolute Location
    FOUND = "found"  # 302, relative Location
    CHAIN = "chain"  # 301 hop of a 3-redirect chain
    LOOP = "loop"  # 302 A -> B -> A
    CROSS_HOST = "cross_host"  # 301 to another host
    ERROR = "error"  # always 500
    FLAKY = "flaky"  # 503 the first time (per server process), then 200


@dataclass(frozen=True, slots=True)
class Special:
    kind: SpecialKind
    host: str
    path: str
    #: Redirect target path, on ``location_host`` if set (an absolute Location), else on this
    #: host written as a bare path (a relative Location).
    location: str | None = None
    location_host: str | None = None


def rng_for(seed: int, *parts: object) -> random.Random:
    """A generator seeded from a string, so results never depend on PYTHONHASHSEED."""
    return random.Random(":".join(str(p) for p in (seed, *parts)))


class Zipf:
    """Draws ranks 0..n-1 with P(r) ∝ 1/(r+1)^alpha: the heavy-tailed in-degree of a
    preferential-attachment graph, but computable per page without building the whole graph."""

    def __init__(self, n: int, alpha: float = 1.0) -> None:
        self.cum = list(itertools.accumulate(1.0 / (r + 1) ** alpha for r in range(n)))

    def draw(self, rng: random.Random) -> int:
        return bisect_right(self.cum, rng.random() * self.cum[-1])


def share_draw(seed: int, *parts: object) -> float:
    """A uniform draw in [0, 1) from the seed and ``parts`` (no generator state)."""
    digest = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0 ** 64


def ip_address(index: int) -> str:
    return f"127.0.{1 + index // 250}.{1 + index % 250}"


class Layout:
    """Host names, IPs, robots variants, page paths and special URLs of one sandbox web."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        seed = config.seed
        width = max(3, len(str(config.hosts - 1)))
        self.hosts: list[str] = [f"h{i:0{width}d}.{config.domain}" for i in range(config.hosts)]
        self.host_index = {h: i for i, h in enumerate(self.hosts)}
        rng = rng_for(seed, "layout")

        order = list(range(config.hosts))
        rng.shuffle(order)
        self.ip_of: dict[str, str] = {
            self.hosts[h]: ip_address(k % config.ips) for k, h in enumerate(order)
        }

        self.popularity = list(range(config.hosts))  # rank -> host index
        rng.shuffle(self.popularity)
        self.host_zipf = Zipf(config.hosts)
        self.page_zipf = Zipf(config.pages_per_host)
        self._rank_cache: dict[str, list[int]] = {}

        self.robots: dict[str, RobotsKind] = self._assign_robots(rng)
        self.hang_host = next(h for h, k in self.robots.items() if k is RobotsKind.HANG)
        allow = [h for h in self.hosts if self.robots[h] is RobotsKind.ALLOW_ALL]
        rng.shuffle(allow)
        self.seed_hosts = sorted(allow[:3])

        self.paths: dict[str, list[str]] = {h: self._page_paths(h) for h in self.hosts}
        self.page_of: dict[str, dict[str, int]] = {
            h: {p: i for i, p in enumerate(ps)} for h, ps in self.paths.items()
        }
        self.specials: dict[tuple[str, str], Special] = {}
        #: Page (host, id) → extra targets (host, path) it must link to, so specials are reachable.
        self.extra_links: dict[tuple[str, int], list[tuple[str, str]]] = {}
        #: Page → absolute targets appended to its footer without drawing random numbers, so
        #: the page's other links stay the same (the links into trap hosts).
        self.footer_links: dict[tuple[str, int], list[tuple[str, str]]] = {}
        self._place_specials(rng, allow[3:] or allow)
        self.slow_pages, self.meta_nofollow, self.meta_noindex, self.header_nofollow = (
            self._flag_pages(rng)
        )
        #: Hosts served over HTTPS only. Drawn by hash, not from ``rng``: https_share 0 leaves
        #: the rest of the web as it was. A set: mirrors take their source's scheme (site.py).
        self.https_hosts: set[str] = {
            h for h in self.hosts if share_draw(seed, "https", h) < config.https_share}

    def origin(self, host: str, port: int, https_port: int) -> str:
        """``scheme://host:port`` of a host's URLs."""
        if host in self.https_hosts:
            return f"https://{host}:{https_port}"
        return f"http://{host}:{port}"

    # -- assignment -------------------------------------------------------------------------
    def _assign_robots(self, rng: random.Random) -> dict[str, RobotsKind]:
        order = list(self.hosts)
        rng.shuffle(order)
        kinds: dict[str, RobotsKind] = {order[0]: RobotsKind.HANG}
        for host, kind in zip(order[1:], GUARANTEED, strict=False):
            kinds[host] = kind
        rest = (
            [RobotsKind.ALLOW_ALL] * 60
            + [RobotsKind.DISALLOW] * 12
            + [RobotsKind.AGENT_SPECIFIC] * 6
            + [RobotsKind.CRAWL_DELAY] * 8
            + [RobotsKind.NOT_FOUND] * 8
            + [RobotsKind.SERVER_ERROR] * 3
            + [RobotsKind.REDIRECT] * 3
        )
        # Keep enough allow-all hosts for seeds and specials even in small webs.
        for i, host in enumerate(order[1 + len(GUARANTEED) :]):
            kinds[host] = RobotsKind.ALLOW_ALL if i < 6 else rng.choice(rest)
        return {h: kinds[h] for h in self.hosts}

    def _page_paths(self, host: str) -> list[str]:
        rng = rng_for(self.config.seed, "paths", host)
        paths = ["/"]
        for i in range(1, self.config.pages_per_host):
            sec = rng.choice(SECTIONS)
            if i % 17 == 5:
                paths.append(f"/private/{i}.html")
                continue
            r = rng.random()
            if r < 0.35:
                paths.append(f"/p/{i}.html")
            elif r < 0.70:
                paths.append(f"/a/{sec}/page-{i}.html")
            elif r < 0.85:
                paths.append(f"/d/{sec}/{i}/")
            else:
                sub = rng.choice(SECTIONS)
                paths.append(f"/a/{sec}/{sub}/item-{i}")
        return paths

    def _link_from(self, rng: random.Random, target: tuple[str, str], host: str) -> None:
        """Link target from host's home page and from one random page of a random host."""
        self.extra_links.setdefault((host, 0), []).append(target)
        other = self.hosts[rng.randrange(len(self.hosts))]
        page = rng.randrange(1, self.config.pages_per_host)
        self.extra_links.setdefault((other, page), []).append(target)

    def _add(self, rng: random.Random, special: Special, linked: bool = True) -> None:
        self.specials[(special.host, special.path)] = special
        if linked:
            self._link_from(rng, (special.host, special.path), special.host)

    def _place_specials(self, rng: random.Random, hosts: list[str]) -> None:
        def pick() -> str:
            return hosts[rng.randrange(len(hosts))]

        def page_path(host: str) -> str:
            return self.paths[host][rng.randrange(1, self.config.pages_per_host)]

        for k in range(3):
            h = pick()
            self._add(rng, Special(SpecialKind.MOVED, h, f"/r/moved-{k}.html", page_path(h), h))
            h = pick()
            self._add(rng, Special(SpecialKind.FOUND, h, f"/r/found-{k}.html", page_path(h)))
        h = pick()
        chain = SpecialKind.CHAIN
        self._add(rng, Special(chain, h, "/r/chain-1.html", "/r/chain-2.html", h))
        self._add(rng, Special(chain, h, "/r/chain-2.html", "/r/chain-3.html", h), False)
        self._add(rng, Special(SpecialKind.CHAIN, h, "/r/chain-3.html", page_path(h)), False)
        h = pick()
        self._add(rng, Special(SpecialKind.LOOP, h, "/r/loop-a.html", "/r/loop-b.html"))
        self._add(rng, Special(SpecialKind.LOOP, h, "/r/loop-b.html", "/r/loop-a.html"), False)
        h, other = pick(), pick()
        while other == h and len(hosts) > 1:
            other = pick()
        self._add(rng, Special(SpecialKind.CROSS_HOST, h, "/r/elsewhere.html",
                               page_path(other), other))
        self._add(rng, Special(SpecialKind.ERROR, pick(), "/err/always-500.html"))
        self._add(rng, Special(SpecialKind.FLAKY, pick(), "/err/flaky-503.html"))
        for k in range(4):  # links to paths nobody serves
            h = self.hosts[rng.randrange(len(self.hosts))]
            self._link_from(rng, (h, f"/gone/missing-{k}.html"), h)
        for _ in range(3):  # the hanging host is linked from a few pages
            src = (pick(), rng.randrange(self.config.pages_per_host))
            hang_path = self.paths[self.hang_host][rng.randrange(3)]
            self.extra_links.setdefault(src, []).append((self.hang_host, hang_path))

    def _flag_pages(self, rng: random.Random) -> tuple[set[tuple[str, int]], ...]:
        """Slow pages, meta nofollow / noindex pages and X-Robots-Tag: nofollow pages."""
        n_pages = self.config.hosts * self.config.pages_per_host
        flags: list[set[tuple[str, int]]] = [set(), set(), set(), set()]
        counts = (4, max(3, n_pages // 100), max(3, n_pages // 100), max(3, n_pages // 150))
        taken: set[tuple[str, int]] = set()
        for flag, count in zip(flags, counts, strict=True):
            while len(flag) < count:
                host = self.hosts[rng.randrange(len(self.hosts))]
                page = (host, rng.randrange(1, self.config.pages_per_host))
                if page in taken or host == self.hang_host:
                    continue
                taken.add(page)
                flag.add(page)
        return tuple(flags)

    # -- queries ------------------------------------------------------------------------------
    def popular_host(self, rng: random.Random) -> int:
        return self.popularity[self.host_zipf.draw(rng)]

    def popular_page(self, host: str, rng: random.Random) -> int:
        """Page rank 0 is the home page; other ranks map to ids through a per-host permutation."""
        rank = self.page_zipf.draw(rng)
        return self.page_ranks(host)[rank]

    def page_ranks(self, host: str) -> list[int]:
        """Popularity rank → page id on ``host`` (rank 0 is the home page)."""
        ranks = self._rank_cache.get(host)
        if ranks is None:
            rest = list(range(1, self.config.pages_per_host))
            rng_for(self.config.seed, "rank", host).shuffle(rest)
            ranks = self._rank_cache[host] = [0, *rest]
        return ranks

    def resources(self, host: str) -> list[tuple[str, str]]:
        """(path, content type) of the non-HTML resources every host serves."""
        return list(_RESOURCES)


_RESOURCES = [(f"/files/doc-{k}.pdf", "application/pdf") for k in range(N_PDF)] + [
    (f"/img/pic-{k}.png", "image/png") for k in range(N_PNG)
]
