"""SandboxSite: the whole generated web — what each URL answers, and the crawl oracle."""

from __future__ import annotations

import hashlib
import multiprocessing
from collections import OrderedDict, deque
from dataclasses import dataclass
from email.utils import formatdate
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from .config import SandboxConfig
from .duplicates import DuplicatePair, Duplicates
from .graph import PageBuilder, PageSpec
from .layout import Layout, Special, SpecialKind, rng_for
from .pages import render_page, small_html
from .resources import CSS, pdf_bytes, png_bytes
from .robots import REAL_ROBOTS_PATH, RobotsKind, RobotsRules, robots_reply
from .text import Vocabulary
from .traps import Traps

if TYPE_CHECKING:
    from .pagerank import PageRankResult

_REDIRECT_STATUS = {
    SpecialKind.MOVED: 301,
    SpecialKind.FOUND: 302,
    SpecialKind.CHAIN: 301,
    SpecialKind.LOOP: 302,
    SpecialKind.CROSS_HOST: 301,
}
_EPOCH = 1_700_000_000  # Last-Modified dates are spread over the year before this


_PRERENDER_SITE: SandboxSite | None = None


def _render_hosts_into(site: SandboxSite, hosts: list[str]) -> None:
    for host in hosts:
        for path in site.layout.page_of[host]:
            site.respond(host, path)


def _render_share(hosts: list[str]) -> list[tuple[tuple[str, str], Reply]]:
    """In a forked child of :meth:`SandboxSite.prerender`: the cacheable replies of ``hosts``."""
    site = _PRERENDER_SITE
    assert site is not None
    site._cache.clear()
    _render_hosts_into(site, hosts)
    return list(site._cache.items())


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer of the server. ``kind`` is the oracle's name for it."""

    status: int
    body: bytes
    content_type: str
    kind: str
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    etag: str | None = None
    last_modified: str | None = None
    #: Status answered to the first request of this URL in a server process (flaky page).
    first_status: int | None = None


def canonical_url(url: str) -> str:
    """Lowercase host, explicit port, no fragment, path as sent (empty → '/'), query kept."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path or "/"
    return f"{parts.scheme.lower()}://{host}:{port}{path}" + (f"?{parts.query}" if parts.query
                                                            else "")


class SandboxSite:
    def __init__(self, config: SandboxConfig, port: int, https_port: int = 0) -> None:
        """``https_port``: where the HTTPS hosts (config.https_share) answer; their URLs
        carry it."""
        self.config = config
        self.port = port
        self.https_port = https_port
        self.layout = Layout(config)
        self.vocab = Vocabulary(config.seed)
        self.builder = PageBuilder(self.layout, self.vocab, port, https_port)
        self._cache: OrderedDict[tuple[str, str], Reply] = OrderedDict()
        self._cache_limit = config.page_cache
        self.dups = (Duplicates(self.layout, self.vocab, port, https_port) if config.duplicates
                     else None)
        self.traps: Traps | None = None
        if config.traps:  # entry links go on pages of hosts that are no mirror or mirrored
            mirrors = self.dups.mirrors if self.dups is not None else {}
            self.traps = Traps(self.layout, self.vocab, port,
                               frozenset(mirrors) | frozenset(mirrors.values()), https_port)
        self._pagerank: PageRankResult | None = None

    # -- listings -------------------------------------------------------------------------
    @property
    def hosts(self) -> list[str]:
        return list(self.layout.hosts)

    @property
    def hang_host(self) -> str:
        return self.layout.hang_host

    def resolver_map(self) -> dict[str, str]:
        """Host name → loopback IP, in host-name order (then the trap hosts, if any)."""
        out = {h: self.layout.ip_of[h] for h in self.layout.hosts}
        if self.traps is not None:
            out.update(self.traps.resolver_map())
        return out

    def url(self, host: str, path: str) -> str:
        return self.layout.origin(host, self.port, self.https_port) + path

    def https_hosts(self) -> list[str]:
        """Hosts served over HTTPS only (on https_port), sorted; [] with https_share 0."""
        return sorted(self.layout.https_hosts)

    def is_https(self, host: str) -> bool:
        return host in self.layout.https_hosts

    def seeds(self) -> list[str]:
        return [self.url(h, "/") for h in self.layout.seed_hosts]

    def robots_kind(self, host: str) -> RobotsKind:
        return self.layout.robots[host]

    def robots_hosts(self, kind: RobotsKind) -> list[str]:
        return [h for h, k in self.layout.robots.items() if k is kind]

    def specials(self) -> list[Special]:
        return list(self.layout.specials.values())

    def special_urls(self, kind: SpecialKind | None = None) -> list[str]:
        return [self.url(s.host, s.path) for s in self.layout.specials.values()
                if kind is None or s.kind is kind]

    def page_urls(self) -> list[str]:
        """Every generated HTML page (with traps: also the session and soft404 hosts' pages)."""
        out = [self.url(h, p) for h in self.layout.hosts for p in self.layout.paths[h]]
        return out + self.traps.legit_urls() if self.traps is not None else out

    def resource_urls(self) -> list[str]:
        return [self.url(h, p) for h in self.layout.hosts for p, _ in self.layout.resources(h)]

    def all_urls(self) -> list[str]:
        """Every URL answering 2xx/3xx/5xx by design (pages, resources, specials), no robots."""
        return self.page_urls() + self.resource_urls() + self.special_urls()

    def _flagged(self, pages: set[tuple[str, int]]) -> list[str]:
        return sorted(self.url(h, self.layout.paths[h][i]) for h, i in pages)

    def slow_urls(self) -> list[str]:
        return self._flagged(self.layout.slow_pages)

    def meta_nofollow_urls(self) -> list[str]:
        return self._flagged(self.layout.meta_nofollow)

    def meta_noindex_urls(self) -> list[str]:
        return self._flagged(self.layout.meta_noindex)

    def header_nofollow_urls(self) -> list[str]:
        return self._flagged(self.layout.header_nofollow)

    def hosts_on_ip(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for h, ip in self.layout.ip_of.items():
            out.setdefault(ip, []).append(h)
        return out

    def duplicate_pairs(self) -> list[DuplicatePair]:
        """Labelled (base, variant) pairs with their true Jaccard; [] without duplicates."""
        if self.dups is None:
            return []
        pairs = list(self.dups.pairs)
        for mirror, source in self.dups.mirrors.items():
            pairs += [DuplicatePair(self.url(source, p), self.url(mirror, p), "mirror", 1.0)
                      for p in self.layout.paths[source]]
        return pairs

    def mirror_hosts(self) -> dict[str, str]:
        """Mirror host → the host it copies; {} without duplicates."""
        return dict(self.dups.mirrors) if self.dups else {}

    # -- pages ------------------------------------------------------------------------------
    def page(self, url: str) -> PageSpec | None:
        """The generated page behind an absolute URL, or None if it is not an HTML page."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if self.traps is not None and self.traps.owns(host):
            return self.traps.spec(host, parts.path or "/", parts.query)
        if self.dups is not None:
            fam = self.dups.family_page(host, parts.path or "/")
            if fam is not None:
                return self.dups.spec(fam)
        page_id = self.layout.page_of.get(host, {}).get(parts.path or "/")
        if page_id is None or host == self.layout.hang_host:
            return None
        return self._build(host, page_id, parts.query)

    def _build(self, host: str, page_id: int, query: str) -> PageSpec:
        source = self.dups.mirror_source(host) if self.dups is not None else None
        if source is None:
            return self.builder.build(host, page_id, query)
        assert self.dups is not None
        return self.dups.mirror_spec(self.builder.build(source, page_id, query), host)

    def outlinks(self, url: str) -> list[str]:
        """Canonical URLs a correct crawler follows from the page at ``url``."""
        spec = self.page(url)
        return spec.followed() if spec else []

    # -- serving ----------------------------------------------------------------------------
    def respond(self, host: str, target: str) -> Reply:
        """What the server answers to ``GET target`` (path and query) with this Host."""
        key = (host, target)
        reply = self._cache.get(key)
        if reply is not None:
            self._cache.move_to_end(key)
            return reply
        reply = self._respond(host, target)
        if reply.status == 200 and reply.first_status is None and not (
            self.traps is not None and self.traps.owns(host)  # cheap, endless: never cached
        ):
            self._cache[key] = reply
            if len(self._cache) > self._cache_limit:
                self._cache.popitem(last=False)
        return reply

    def prerender(self, processes: int = 1) -> int:
        """Render every page of every host into the cache, kept whole (the limit grows to fit).

        For benchmarks: a crawler then measures against a server that only sends bytes, instead
        of one rendering ~1 ms of Python per page on the same cores. Answers do not change.
        ``processes`` > 1 renders in that many forked children (each a share of the hosts),
        ~18 s -> ~14 s for 20,000 pages on 2 cores (measured). Returns the number of pages cached.
        """
        hosts = list(self.layout.hosts)
        n_pages = sum(len(self.layout.page_of[h]) for h in hosts)
        self._cache_limit = max(self._cache_limit, n_pages + self.config.page_cache)
        if processes <= 1:
            _render_hosts_into(self, hosts)
            return n_pages
        # fork: the children inherit this site as it is; only the rendered replies (our own
        # dataclasses, between our own processes) come back pickled.
        global _PRERENDER_SITE
        _PRERENDER_SITE = self
        try:
            with multiprocessing.get_context("fork").Pool(processes) as pool:
                shares = [hosts[i::processes] for i in range(processes)]
                for replies in pool.imap_unordered(_render_share, shares):
                    for key, reply in replies:
                        self._cache[key] = reply
        finally:
            _PRERENDER_SITE = None
        return n_pages

    def _respond(self, host: str, target: str) -> Reply:
        path, _, query = target.partition("?")
        lay = self.layout
        if host not in lay.host_index:
            if self.traps is not None and self.traps.owns(host):
                return self._trap_reply(host, target)
            return Reply(404, small_html("Unknown host", host), "text/html", "not_found")
        reply = self._respond_known(host, path, query)
        if host == lay.hang_host:
            return Reply(reply.status, reply.body, reply.content_type, "timeout", reply.headers,
                         self.config.hang_s)
        return reply

    def _respond_known(self, host: str, path: str, query: str) -> Reply:
        lay, cfg = self.layout, self.config
        kind = lay.robots[host]
        if path == "/robots.txt" or (path == REAL_ROBOTS_PATH and kind is RobotsKind.REDIRECT):
            if path == REAL_ROBOTS_PATH:
                body = robots_reply(RobotsKind.DISALLOW, cfg.crawl_delay_s,
                                    cfg.oversized_robots_bytes).body
                return Reply(200, body, "text/plain", "robots")
            rr = robots_reply(kind, cfg.crawl_delay_s, cfg.oversized_robots_bytes)
            headers = (("Location", self.url(host, rr.location)),) if rr.location else ()
            ctype = "text/plain" if rr.status == 200 else "text/html"
            delay = cfg.robots_slow_s if kind is RobotsKind.SLOW else 0.0
            return Reply(rr.status, rr.body, ctype, "robots", headers, delay)
        page_id = lay.page_of[host].get(path)
        if self.dups is not None:
            fam = self.dups.family_page(host, path)
            if fam is not None:
                body = self.dups.html(fam)
                return Reply(200, body, "text/html; charset=utf-8", "page", (), 0.0,
                             *self._validators(host, path, body))
        if page_id is not None:
            spec, body = self._render(host, page_id, query)
            headers = (("X-Robots-Tag", "nofollow"),) if spec.header_nofollow else ()
            return Reply(200, body, "text/html; charset=utf-8", "page", headers,
                         cfg.slow_page_s if spec.slow else 0.0, *self._validators(host, path, body))
        special = lay.specials.get((host, path))
        if special is not None:
            return self._special(special)
        for res_path, ctype in lay.resources(host):
            if path == res_path:
                make = pdf_bytes if ctype == "application/pdf" else png_bytes
                body = make(cfg.seed, host, path)
                return Reply(200, body, ctype, "resource", (), 0.0,
                             *self._validators(host, path, body))
        if path == "/static/site.css":
            return Reply(200, CSS, "text/css", "resource", (), 0.0,
                         *self._validators(host, path, CSS))
        return Reply(404, small_html("404 Not Found", path), "text/html", "not_found")

    def _trap_reply(self, host: str, target: str) -> Reply:
        assert self.traps is not None
        a = self.traps.respond(host, target)
        validators = self._validators(host, target, a.body) if a.kind == "page" else (None, None)
        return Reply(a.status, a.body, a.content_type, a.kind, a.headers, 0.0, *validators)

    def _render(self, host: str, page_id: int, query: str) -> tuple[PageSpec, bytes]:
        source = self.dups.mirror_source(host) if self.dups is not None else None
        if source is None:
            spec = self.builder.build(host, page_id, query)
            return spec, render_page(spec, self.vocab, self.config.seed)
        assert self.dups is not None
        src_spec = self.builder.build(source, page_id, query)
        body = self.dups.mirror_body(render_page(src_spec, self.vocab, self.config.seed),
                                     source, host)
        return self.dups.mirror_spec(src_spec, host), body

    def _special(self, sp: Special) -> Reply:
        if sp.kind in _REDIRECT_STATUS:
            assert sp.location is not None
            loc = self.url(sp.location_host, sp.location) if sp.location_host else sp.location
            return Reply(_REDIRECT_STATUS[sp.kind], b"", "text/html", "redirect",
                         (("Location", loc),))
        if sp.kind is SpecialKind.ERROR:
            return Reply(500, small_html("500", "always broken"), "text/html", "error")
        return Reply(200, small_html("Flaky", "fine on the second try"), "text/html", "flaky",
                     first_status=503)

    def _validators(self, host: str, path: str, body: bytes) -> tuple[str, str]:
        etag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
        days = rng_for(self.config.seed, "mtime", host, path).randrange(365 * 86400)
        return etag, formatdate(_EPOCH - days, usegmt=True)

    # -- oracle -----------------------------------------------------------------------------
    def robots_rules(self, host: str) -> RobotsRules:
        cfg = self.config
        if self.traps is not None and self.traps.owns(host):
            kind = RobotsKind.ALLOW_ALL  # what every trap host's robots.txt says
        else:
            kind = self.layout.robots[host]
        if kind is RobotsKind.REDIRECT:
            kind = RobotsKind.DISALLOW  # what /robots-real.txt says
        return RobotsRules(kind, cfg.crawl_delay_s, cfg.oversized_robots_bytes)

    def kind_of(self, host: str, path: str, query: str = "") -> str:
        """The oracle kind of a path, without rendering anything (kept equal to respond().kind;
        the query matters on trap hosts only)."""
        lay = self.layout
        if host not in lay.host_index:
            if self.traps is not None and self.traps.owns(host):
                return self.traps.kind_of(host, path, query)
            return "not_found"
        if host == lay.hang_host:
            return "timeout"
        if path == "/robots.txt" or (
            path == REAL_ROBOTS_PATH and lay.robots[host] is RobotsKind.REDIRECT
        ):
            return "robots"
        if path in lay.page_of[host] or (
            self.dups is not None and self.dups.family_page(host, path) is not None
        ):
            return "page"
        special = lay.specials.get((host, path))
        if special is not None:
            return self._special(special).kind
        if path == "/static/site.css" or any(path == p for p, _ in lay.resources(host)):
            return "resource"
        return "not_found"

    def redirect_target(self, url: str) -> str | None:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        reply = self._respond(host, parts.path + (f"?{parts.query}" if parts.query else ""))
        loc = dict(reply.headers).get("Location")
        return canonical_url(urljoin(url, loc)) if loc and 300 <= reply.status < 400 else None

    def expected_fetches(self, seeds: list[str], user_agent_token: str = "trawl",
                         links: dict[str, list[str]] | None = None) -> dict[str, str]:
        """Every canonical URL a correct polite crawler starting at ``seeds`` must request.

        Values: page, resource, redirect, not_found, error, flaky (503 then 200), robots,
        timeout (the hanging host's robots.txt; its pages are then disallowed, RFC 9309 §2.3.1.4).
        Trap spaces (``trap_kind``) are never entered. ``links``, if given, receives each
        fetched page's outlinks and each redirect's target (the graph PageRank runs on).
        """
        out: dict[str, str] = {}
        rules: dict[str, RobotsRules] = {}
        queue = deque(canonical_url(s) for s in seeds)
        seen: set[str] = set()
        while queue:
            url = queue.popleft()
            if url in seen:
                continue
            seen.add(url)
            parts = urlsplit(url)
            host = parts.hostname or ""
            if (self.resolve(host) is None or f"{parts.scheme}://{host}:{parts.port}"
                    != self.layout.origin(host, self.port, self.https_port)):
                continue
            if self.traps is not None and self.traps.trap_kind(url) is not None:
                continue
            if host not in rules:
                rules[host] = self.robots_rules(host)
                kind = self.layout.robots.get(host, RobotsKind.ALLOW_ALL)
                robots_url = self.url(host, "/robots.txt")
                out[robots_url] = "timeout" if kind is RobotsKind.HANG else "robots"
                if kind is RobotsKind.REDIRECT:
                    out[self.url(host, REAL_ROBOTS_PATH)] = "robots"
            if url in out or not rules[host].allowed(url, user_agent_token):
                continue
            kind = out[url] = self.kind_of(host, parts.path, parts.query)
            if kind == "page":
                outs = self.outlinks(url)
                queue.extend(outs)
                if links is not None:
                    links[url] = outs
            elif kind == "redirect":
                nxt = self.redirect_target(url)
                if nxt:
                    queue.append(nxt)
                    if links is not None:
                        links[url] = [nxt]
        return out

    # -- traps ------------------------------------------------------------------------------
    def trap_kind(self, url: str) -> str | None:
        """Which trap space an absolute URL belongs to (sandbox/traps.py), None if normal."""
        return self.traps.trap_kind(url) if self.traps is not None else None

    def trap_hosts(self) -> dict[str, str]:
        """Trap kind → its host (the farm: its entry subdomain); {} without traps."""
        return dict(self.traps.hosts) if self.traps is not None else {}

    def trap_domains(self) -> dict[str, str]:
        """Trap kind → its registered domain; {} without traps."""
        return dict(self.traps.domains) if self.traps is not None else {}

    def trap_entries(self) -> list[tuple[str, str, str]]:
        """(kind, normal page URL, trap URL) of each link into a trap host; [] without traps."""
        return list(self.traps.entries) if self.traps is not None else []

    def farm_rule(self) -> tuple[str, str] | None:
        """(suffix, IP): every ``s<N>`` + suffix host is served on IP; None without traps."""
        return (self.traps.farm_suffix, self.traps.ips["farm"]) if self.traps else None

    def static_hosts(self) -> dict[str, str]:
        """A crawler's static host map for this web: ``resolver_map()`` plus, with traps, the
        wildcard entry ``*.farm-trap.<tld>`` → farm IP (a form CachingResolver accepts,
        workers/pipeline/dns.py), so subdomains past the listed ones resolve too."""
        out = self.resolver_map()
        if self.traps is not None:
            out["*" + self.traps.farm_suffix] = self.traps.ips["farm"]
        return out

    def resolve(self, host: str) -> str | None:
        """IP of any host of this web: the resolver map plus the farm's suffix rule."""
        ip = self.layout.ip_of.get(host)
        if ip is None and self.traps is not None:
            ip = self.traps.resolve(host)
        return ip

    # -- PageRank ---------------------------------------------------------------------------
    def pagerank_result(self) -> PageRankResult:
        """PageRank over what a correct crawler from ``seeds()`` fetches (sandbox/pagerank.py),
        with its iteration count and timing; computed once per site."""
        if self._pagerank is None:
            from .pagerank import site_pagerank

            self._pagerank = site_pagerank(self)
        return self._pagerank

    def pagerank(self) -> dict[str, float]:
        """Canonical URL → PageRank score, best first; sums to 1."""
        return dict(self.pagerank_result().scores)

    def top_urls(self, fraction: float) -> list[str]:
        """The ceil(fraction x N) URLs of highest PageRank, best first (ties by URL)."""
        from .pagerank import top_urls

        return top_urls(self.pagerank_result().scores, fraction)
