"""Opt-in spider-trap hosts for the sandbox web (``SandboxConfig.traps``).

Off (the default), nothing here runs and the web is byte-identical to the web without the
option. On, eight hosts are added, one per trap kind, each under its own registered domain
``{kind}-trap.{tld}`` where ``tld`` is the last label of ``SandboxConfig.domain`` (``test`` for
both ``sandbox.test`` and ``test``). Under the Public Suffix List's default rule ``*`` each trap
is therefore its own registered domain, different from the normal hosts' (``sandbox.test``, or
``h007.test`` each with ``domain="test"``), and all farm subdomains share one.

Every trap host answers ``/robots.txt`` with allow-all rules (a trap a robots.txt forbids is no
trap), has its own loopback IP (``ip_address(config.ips + i)``, after the normal hosts' IPs; all
farm subdomains share one), and is linked from three normal pages (``Traps.entries``: footer
links of allow-all hosts' pages, never nofollow or slow ones, added without a random draw so
those pages' other links are unchanged). Pages are small (under 4 KB) and built
from a hash of the URL: no state, nothing cached, so an endless crawl of them costs the server
a few microseconds per request and no memory.

The URL space of each kind is described, and generated, in :mod:`sandbox.trap_pages`.

Farm resolution: ``resolver_map`` lists the first :data:`FARM_LISTED` (2,000) farm names
(``s0`` .. ``s1999``, depth 5 of the tree and part of depth 6); beyond them a resolver needs the
rule ``host.endswith(farm_suffix) → farm_ip`` (``Traps.resolve`` implements both).

Oracle (``SandboxSite.expected_fetches``): trap spaces are excluded, so it stays finite; the 30
session pages (canonical URLs, no session id) and the 21 soft404 pages are normal pages, with
their hosts' robots.txt. What a correct crawler with trap defences fetches from each host,
beyond the oracle:

* calendar: robots.txt, ``/`` and the months (with their day pages) inside its date window;
  never a year beyond now + window.
* session: nothing more: each page once, its session ids stripped.
* repeat: robots.txt and the few paths (``/a/b/``, ``/a/b/a/``, ...) below its repeat limit.
* deep: robots.txt and one page per level down to its path-depth limit.
* facets: robots.txt, ``/shop/list`` and at most its per-path query-variant budget.
* soft404: its probe of a random path and the soft-404 URLs linked from normal pages (one entry
  link), recognised as soft-404s, their links not followed.
* redirect: robots.txt and at most its redirect limit of hops per chain.
* farm: what its per-registered-domain budget admits for ``farm-trap.test`` (a robots.txt per
  fetched subdomain).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from .graph import PageSpec
from .layout import Layout, ip_address, rng_for
from .robots import RobotsKind
from .text import Vocabulary
from .trap_pages import FarmNames, TrapAnswer, TrapPage, TrapPages

TRAP_KINDS = ("calendar", "session", "repeat", "deep", "facets", "soft404", "redirect", "farm")
#: Farm subdomains listed in the resolver map; the rest resolve by suffix only.
FARM_LISTED = 2000
#: Normal pages linking to each trap host.
ENTRY_LINKS = 3
ENTRY_PATHS: dict[str, tuple[str, ...]] = {
    "calendar": ("/", "/cal/2026/01/"),
    "session": ("/", "/s/7.html"),
    "repeat": ("/a/b/", "/"),
    "deep": ("/deep/", "/"),
    "facets": ("/shop/list", "/shop/list?color=red"),
    "soft404": ("/", "/old/news-2019.html"),  # the second is missing: a soft-404 page
    "redirect": ("/hop/1", "/"),
    "farm": ("/",),
}
ROBOTS_BODY = b"User-agent: *\nDisallow:\n"


class Traps:
    """The trap hosts of one sandbox web: names, IPs, entry links, answers and the trap
    classification of a URL (the pages themselves are :class:`sandbox.trap_pages.TrapPages`)."""

    def __init__(self, layout: Layout, vocab: Vocabulary, port: int,
                 exclude: frozenset[str] = frozenset(), https_port: int = 0) -> None:
        cfg = layout.config
        self.layout, self.port, self.https_port = layout, port, https_port
        tld = cfg.domain.rsplit(".", 1)[-1]
        #: kind → registered domain; kind → host (the farm: its entry subdomain ``s0``).
        self.domains: dict[str, str] = {k: f"{k}-trap.{tld}" for k in TRAP_KINDS}
        normal_domain = ".".join(layout.hosts[0].split(".")[-2:])
        if normal_domain in self.domains.values():
            raise ValueError(f"domain={cfg.domain!r}: its hosts would share a registered domain "
                             "with a trap host")
        self.hosts: dict[str, str] = {
            k: (f"s0.{d}" if k == "farm" else f"www.{d}") for k, d in self.domains.items()}
        self._host_kind = {h: k for k, h in self.hosts.items() if k != "farm"}
        self.ips: dict[str, str] = {k: ip_address(cfg.ips + i) for i, k in enumerate(TRAP_KINDS)}
        self.farm = FarmNames("." + self.domains["farm"])
        # Entry links go on allow-all hosts' pages; legit trap-host pages link to their homes.
        linkable = [h for h in layout.hosts if layout.robots[h] is RobotsKind.ALLOW_ALL
                    and h != layout.hang_host and h not in exclude]
        self.pages = TrapPages(cfg.seed, vocab, self.origin, self.farm, linkable)
        self._legit = {"session": frozenset(self.pages.session_paths) | {"/robots.txt"},
                       "soft404": frozenset(self.pages.soft404_paths) | {"/robots.txt"}}
        #: (kind, normal page URL, trap URL) of every link leading into a trap host.
        self.entries: list[tuple[str, str, str]] = self._place_entries(layout, linkable)

    # -- placement ----------------------------------------------------------------------------
    def _place_entries(self, layout: Layout, hosts: list[str]) -> list[tuple[str, str, str]]:
        cfg = layout.config
        rng = rng_for(cfg.seed, "traps")
        flagged = layout.slow_pages | layout.meta_nofollow | layout.header_nofollow
        out = []
        for kind in TRAP_KINDS:
            for j in range(ENTRY_LINKS):
                page = (hosts[rng.randrange(len(hosts))], rng.randrange(cfg.pages_per_host))
                while page in flagged:
                    page = (hosts[rng.randrange(len(hosts))], rng.randrange(cfg.pages_per_host))
                path = ENTRY_PATHS[kind][j % len(ENTRY_PATHS[kind])]
                layout.footer_links.setdefault(page, []).append((self.hosts[kind], path))
                src = self.origin(page[0]) + layout.paths[page[0]][page[1]]
                out.append((kind, src, self.origin(self.hosts[kind]) + path))
        return out

    # -- names ----------------------------------------------------------------------------------
    def origin(self, host: str) -> str:
        return self.layout.origin(host, self.port, self.https_port)  # trap hosts: http

    def host_kind(self, host: str) -> str | None:
        """The trap kind a host belongs to, None for any other host."""
        kind = self._host_kind.get(host)
        if kind is None and self.farm.index(host) is not None:
            return "farm"
        return kind

    def owns(self, host: str) -> bool:
        return self.host_kind(host) is not None

    def resolver_map(self, farm_listed: int = FARM_LISTED) -> dict[str, str]:
        out = {h: self.ips[k] for h, k in self._host_kind.items()}
        out.update({self.farm.host(n): self.ips["farm"] for n in range(farm_listed)})
        return out

    def resolve(self, host: str) -> str | None:
        """The IP of a trap host: the listed names, and the farm by its suffix rule."""
        kind = self.host_kind(host)
        return self.ips[kind] if kind is not None else None

    def trap_kind(self, url: str) -> str | None:
        """The trap space of an absolute URL; None for normal URLs, including the legitimate
        session and soft404 pages (exact paths, no query, no ``;`` parameter)."""
        parts = urlsplit(url)
        kind = self.host_kind((parts.hostname or "").lower())
        if kind in self._legit and not parts.query and (parts.path or "/") in self._legit[kind]:
            return None
        return kind

    def legit_urls(self) -> list[str]:
        """The normal pages of the trap hosts (session and soft404), canonical URLs."""
        return ([self.origin(self.hosts["session"]) + p for p in self.pages.session_paths]
                + [self.origin(self.hosts["soft404"]) + p for p in self.pages.soft404_paths])

    # -- answers ------------------------------------------------------------------------------
    def respond(self, host: str, target: str) -> TrapAnswer:
        path, _, query = target.partition("?")
        if path == "/robots.txt":
            return TrapAnswer(200, ROBOTS_BODY, "robots", content_type="text/plain")
        page = self.pages.page(self.host_kind(host), host, path, query)
        if isinstance(page, TrapAnswer):
            return page
        if page is None:
            body = self.pages.html(host, "Not Found", f"Nothing at {path}.", ())
            return TrapAnswer(404, body, "not_found")
        return TrapAnswer(200, self.pages.html(host, page.title, page.text, page.links),
                          "page" if page.legit else "trap")

    def kind_of(self, host: str, path: str, query: str = "") -> str:
        return self.respond(host, path + (f"?{query}" if query else "")).kind

    def spec(self, host: str, path: str, query: str) -> PageSpec | None:
        """The PageSpec of a legitimate page (what the oracle follows), else None."""
        page = self.pages.page(self.host_kind(host), host, path, query)
        if not isinstance(page, TrapPage) or not page.legit:
            return None
        return PageSpec(host=host, page_id=-1, path=path, query="", url=self.origin(host) + path,
                        title=page.title, base_href=None, meta_robots=None,
                        header_nofollow=False, slow=False, size_target=0, links=page.links)
