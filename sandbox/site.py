"""SandboxSite: the whole generated web: its URLs, its pages and the crawl oracle."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from . import sitemaps
from .config import SandboxConfig
from .duplicates import DuplicatePair, Duplicates
from .graph import PageBuilder, PageSpec
from .layout import Layout, Special, SpecialKind
from .replies import Reply, SiteReplies
from .robots import REAL_ROBOTS_PATH, RobotsKind, RobotsRules
from .text import Vocabulary
from .traps import Traps

if TYPE_CHECKING:
    from .pagerank import PageRankResult


def canonical_url(url: str) -> str:
    """Lowercase host, explicit port, no fragment, path as sent (empty → '/'), query kept."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path or "/"
    return f"{parts.scheme.lower()}://{host}:{port}{path}" + (f"?{parts.query}" if parts.query
                                                            else "")


class SandboxSite:
    """The generated web: its hosts and URLs, the pages behind them, what the server answers
    (:class:`sandbox.replies.SiteReplies`) and the oracle of what a correct crawler fetches."""

    def __init__(self, config: SandboxConfig, port: int, https_port: int = 0) -> None:
        """``https_port``: where the HTTPS hosts (config.https_share) answer; their URLs
        carry it."""
        self.config = config
        self.port = port
        self.https_port = https_port
        self.layout = Layout(config)
        self.vocab = Vocabulary(config.seed)
        self.builder = PageBuilder(self.layout, self.vocab, port, https_port)
        self.dups = (Duplicates(self.layout, self.vocab, port, https_port) if config.duplicates
                     else None)
        self.traps: Traps | None = None
        if config.traps:  # entry links go on pages of hosts that are no mirror or mirrored
            mirrors = self.dups.mirrors if self.dups is not None else {}
            self.traps = Traps(self.layout, self.vocab, port,
                               frozenset(mirrors) | frozenset(mirrors.values()), https_port)
        self.replies = SiteReplies(config, self.layout, self.vocab, self.builder, self.dups,
                                   self.traps, self.url)
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
        return self.replies.respond(host, target)

    def prerender(self, processes: int = 1) -> int:
        """Render every page into the reply cache (:meth:`SiteReplies.prerender`)."""
        return self.replies.prerender(processes)

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
        if self.config.sitemaps and sitemaps.has_sitemap(lay, host):
            if path == sitemaps.SITEMAP_PATH:
                return "sitemap"
            if path == sitemaps.ORPHAN_PATH:
                return "page"
        special = lay.specials.get((host, path))
        if special is not None:
            return self.replies.special(special).kind
        if path == "/static/site.css" or any(path == p for p, _ in lay.resources(host)):
            return "resource"
        return "not_found"

    def redirect_target(self, url: str) -> str | None:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        reply = self.replies.answer(host, parts.path + (f"?{parts.query}" if parts.query else ""))
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
                if self.config.sitemaps and sitemaps.has_sitemap(self.layout, host):
                    # robots.txt's Sitemap: line is a seed; the sitemap lists every page
                    queue.append(self.url(host, sitemaps.SITEMAP_PATH))
            if url in out or not rules[host].allowed(url, user_agent_token):
                continue
            kind = out[url] = self.kind_of(host, parts.path, parts.query)
            if kind == "page":
                outs = self.outlinks(url)
                queue.extend(outs)
                if links is not None:
                    links[url] = outs
            elif kind == "sitemap":
                queue.extend(sitemaps.sitemap_urls(self.layout, self.url(host, ""), host))
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
        return (self.traps.farm.suffix, self.traps.ips["farm"]) if self.traps else None

    def static_hosts(self) -> dict[str, str]:
        """A crawler's static host map for this web: ``resolver_map()`` plus, with traps, the
        wildcard entry ``*.farm-trap.<tld>`` → farm IP (a form CachingResolver accepts,
        workers/dns/resolver.py), so subdomains past the listed ones resolve too."""
        out = self.resolver_map()
        if self.traps is not None:
            out["*" + self.traps.farm.suffix] = self.traps.ips["farm"]
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
