"""What the sandbox server answers to each request: rendering, validators, the page cache."""

from __future__ import annotations

import hashlib
import multiprocessing
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate

from . import sitemaps
from .config import SandboxConfig
from .duplicates import Duplicates
from .graph import PageBuilder, PageSpec
from .layout import Layout, Special, SpecialKind, rng_for
from .pages import render_page, small_html
from .resources import CSS, pdf_bytes, png_bytes
from .robots import REAL_ROBOTS_PATH, RobotsKind, robots_reply
from .text import Vocabulary
from .traps import Traps

_REDIRECT_STATUS = {
    SpecialKind.MOVED: 301,
    SpecialKind.FOUND: 302,
    SpecialKind.CHAIN: 301,
    SpecialKind.LOOP: 302,
    SpecialKind.CROSS_HOST: 301,
}
_EPOCH = 1_700_000_000  # Last-Modified dates are spread over the year before this


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
    #: Whether If-None-Match / If-Modified-Since may turn it into a 304 (a lying host of the
    #: changing web ignores them).
    conditional: bool = True


_PRERENDER: SiteReplies | None = None


def _render_hosts_into(replies: SiteReplies, hosts: list[str]) -> None:
    for host in hosts:
        for path in replies.layout.page_of[host]:
            replies.respond(host, path)


def _render_share(hosts: list[str]) -> list[tuple[tuple[str, str], Reply]]:
    """In a forked child of :meth:`SiteReplies.prerender`: the cacheable replies of ``hosts``."""
    replies = _PRERENDER
    assert replies is not None
    replies.cache.clear()
    _render_hosts_into(replies, hosts)
    return list(replies.cache.items())


class SiteReplies:
    """The server side of a :class:`sandbox.site.SandboxSite`: renders the answer to
    ``GET target`` on a host, and keeps rendered pages in an LRU cache (``cache``).

    ``url(host, path)`` is the site's absolute URL of a path (Location headers use it)."""

    def __init__(self, config: SandboxConfig, layout: Layout, vocab: Vocabulary,
                 builder: PageBuilder, dups: Duplicates | None, traps: Traps | None,
                 url: Callable[[str, str], str]) -> None:
        self.config, self.layout, self.vocab, self.builder = config, layout, vocab, builder
        self.dups, self.traps, self._url = dups, traps, url
        self.cache: OrderedDict[tuple[str, str], Reply] = OrderedDict()
        self._cache_limit = config.page_cache

    def respond(self, host: str, target: str) -> Reply:
        """What the server answers to ``GET target`` (path and query) with this Host."""
        key = (host, target)
        reply = self.cache.get(key)
        if reply is not None:
            self.cache.move_to_end(key)
            return reply
        reply = self.answer(host, target)
        if reply.status == 200 and reply.first_status is None and not (
            self.traps is not None and self.traps.owns(host)  # cheap, endless: never cached
        ):
            self.cache[key] = reply
            if len(self.cache) > self._cache_limit:
                self.cache.popitem(last=False)
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
        global _PRERENDER
        _PRERENDER = self
        try:
            with multiprocessing.get_context("fork").Pool(processes) as pool:
                shares = [hosts[i::processes] for i in range(processes)]
                for replies in pool.imap_unordered(_render_share, shares):
                    for key, reply in replies:
                        self.cache[key] = reply
        finally:
            _PRERENDER = None
        return n_pages

    def answer(self, host: str, target: str) -> Reply:
        """What ``respond`` answers, rendered anew (no cache)."""
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
            headers = (("Location", self._url(host, rr.location)),) if rr.location else ()
            ctype = "text/plain" if rr.status == 200 else "text/html"
            delay = cfg.robots_slow_s if kind is RobotsKind.SLOW else 0.0
            body = rr.body
            if cfg.sitemaps and sitemaps.has_sitemap(lay, host):
                body += sitemaps.robots_line(self._url(host, ""))
            return Reply(rr.status, body, ctype, "robots", headers, delay)
        if cfg.sitemaps and sitemaps.has_sitemap(lay, host):
            if path == sitemaps.SITEMAP_PATH:
                urls = sitemaps.sitemap_urls(lay, self._url(host, ""), host)
                return Reply(200, sitemaps.sitemap_body(urls), sitemaps.SITEMAP_TYPE, "sitemap")
            if path == sitemaps.ORPHAN_PATH:
                return Reply(200, sitemaps.orphan_body(host), "text/html", "page")
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
            return self.special(special)
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

    def special(self, sp: Special) -> Reply:
        if sp.kind in _REDIRECT_STATUS:
            assert sp.location is not None
            loc = self._url(sp.location_host, sp.location) if sp.location_host else sp.location
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
