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

======== ============================= ===================================================
kind     host                          URL space
======== ============================= ===================================================
calendar ``www.calendar-trap.test``    ``/cal/YYYY/MM/``: links to the previous and next
                                       month and year and to two day pages
                                       ``/cal/YYYY/MM/DD/``; from year 0001 to any year (5+
                                       digits after 9999). ``/`` links to 2026-01.
session  ``www.session-trap.test``     30 pages (``/`` and ``/s/1.html`` .. ``/s/29.html``);
                                       every link carries a session id, ``?sid=<16 hex>``,
                                       ``?PHPSESSID=<26 hex>`` or ``;jsessionid=<32 HEX>``,
                                       derived from the requested URL, so each distinct URL
                                       links to new ones (deterministic per seed, so the web
                                       stays reproducible). Same page whatever the id.
repeat   ``www.repeat-trap.test``      every path of ``a/`` and ``b/`` segments answers 200
                                       with relative links ``a/b/``, ``b/a/``, ``a/``:
                                       ``/a/b/`` → ``/a/b/a/b/`` → ``/a/b/a/b/a/b/`` ...
deep     ``www.deep-trap.test``        ``/deep/x1/y2/z3/...``: every page links one level
                                       deeper with a fresh segment (a word + its depth).
facets   ``www.facets-trap.test``      ``/shop/list?...``: links change or add each of 10
                                       facet parameters and ``page=n+1`` (up to 11 params,
                                       page numbers unbounded).
soft404  ``www.soft404-trap.test``     21 real pages (``/`` and ``/articles/1.html`` ..
                                       ``/articles/20.html``); every other URL answers 200
                                       with one "page not found" template (only the path and
                                       four links to new random paths vary).
redirect ``www.redirect-trap.test``    ``/hop/1`` → 302 ``/hop/2`` → 302 ... (absolute
                                       Location), never ending. ``/`` links to ``/hop/1``.
farm     ``s<N>.farm-trap.test``       every page (``/``, ``/p/1.html``, ``/p/2.html``) of
                                       ``s<N>`` links to ``s<4N+1>`` .. ``s<4N+4>``: endless
                                       subdomains. Entry: ``s0``.
======== ============================= ===================================================

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

import hashlib
import re
from dataclasses import dataclass
from html import escape
from urllib.parse import parse_qsl, urlencode, urlsplit

from .graph import Link, PageSpec
from .layout import Layout, ip_address, rng_for
from .robots import RobotsKind
from .text import Vocabulary

TRAP_KINDS = ("calendar", "session", "repeat", "deep", "facets", "soft404", "redirect", "farm")
#: Farm subdomains listed in the resolver map; the rest resolve by suffix only.
FARM_LISTED = 2000
FARM_FANOUT = 4
SESSION_PAGES = 30
SOFT404_PAGES = 20
#: The calendar's home page links to this month (years count from 1 and have no upper bound).
CALENDAR_START = (2026, 1)
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
FACETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("color", ("red", "blue", "green", "black", "white")),
    ("size", ("s", "m", "l", "xl")),
    ("sort", ("price", "name", "new", "rating")),
    ("brand", ("acme", "globex", "initech", "umbrella")),
    ("material", ("wool", "cotton", "linen", "silk")),
    ("price_max", ("10", "20", "50", "100", "200")),
    ("rating", ("1", "2", "3", "4")),
    ("view", ("grid", "list")),
    ("lang", ("en", "de", "fr")),
    ("per_page", ("12", "24", "48")),
)
ROBOTS_BODY = b"User-agent: *\nDisallow:\n"
HTML = "text/html; charset=utf-8"

_CAL = re.compile(r"/cal/(\d{4,})/(\d{2})/(?:(\d{2})/)?")
_REPEAT = re.compile(r"/(?:[ab]/)*")
_HOP = re.compile(r"/hop/([1-9][0-9]*)")
_FARM_PATHS = ("/", "/p/1.html", "/p/2.html")


@dataclass(frozen=True, slots=True)
class TrapAnswer:
    """What a trap host answers. ``kind``: page (a legitimate page), trap, robots, not_found."""

    status: int
    body: bytes
    kind: str
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = HTML


@dataclass(frozen=True, slots=True)
class _Page:
    title: str
    text: str
    links: tuple[Link, ...]
    legit: bool = False


def days_in_month(year: int, month: int) -> int:
    """Proleptic Gregorian, for any year (``calendar`` stops at 9999)."""
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _digest(*parts: object) -> bytes:
    return hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=16).digest()


class Traps:
    """The trap hosts of one sandbox web: names, IPs, answers and the trap classification."""

    def __init__(self, layout: Layout, vocab: Vocabulary, port: int,
                 exclude: frozenset[str] = frozenset(), https_port: int = 0) -> None:
        cfg = layout.config
        self.layout, self.vocab, self.port, self.seed = layout, vocab, port, cfg.seed
        self.https_port = https_port
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
        self.farm_suffix = "." + self.domains["farm"]
        self.session_paths = ["/", *(f"/s/{k}.html" for k in range(1, SESSION_PAGES))]
        self.soft404_paths = ["/", *(f"/articles/{k}.html" for k in range(1, SOFT404_PAGES + 1))]
        self._session_index = {p: i for i, p in enumerate(self.session_paths)}
        self._soft404_index = {p: i for i, p in enumerate(self.soft404_paths)}
        self._legit = {"session": frozenset(self.session_paths) | {"/robots.txt"},
                       "soft404": frozenset(self.soft404_paths) | {"/robots.txt"}}
        words = vocab.words
        self._soft404_text = vocab.passage(rng_for(cfg.seed, "trap", "soft404-frame"), 2000)
        self._farm_words = words[:50]
        #: (kind, normal page URL, trap URL) of every link leading into a trap host.
        self.entries: list[tuple[str, str, str]] = self._place_entries(layout, exclude)

    # -- placement ----------------------------------------------------------------------------
    def _place_entries(self, layout: Layout, exclude: frozenset[str]) -> list[tuple[str, str, str]]:
        cfg = layout.config
        rng = rng_for(cfg.seed, "traps")
        hosts = [h for h in layout.hosts if layout.robots[h] is RobotsKind.ALLOW_ALL
                 and h != layout.hang_host and h not in exclude]
        self._outbound = hosts  # legit trap-host pages link to these home pages
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

    def farm_index(self, host: str) -> int | None:
        """N of a farm subdomain ``s<N>`` (no leading zeros), else None."""
        if not host.endswith(self.farm_suffix):
            return None
        label = host[: -len(self.farm_suffix)]
        digits = label[1:]
        if (label[:1] == "s" and digits.isascii() and digits.isdigit()
                and (digits == "0" or digits[0] != "0")):
            return int(digits)
        return None

    def farm_host(self, n: int) -> str:
        return f"s{n}{self.farm_suffix}"

    def host_kind(self, host: str) -> str | None:
        """The trap kind a host belongs to, None for any other host."""
        kind = self._host_kind.get(host)
        if kind is None and self.farm_index(host) is not None:
            return "farm"
        return kind

    def owns(self, host: str) -> bool:
        return self.host_kind(host) is not None

    def resolver_map(self, farm_listed: int = FARM_LISTED) -> dict[str, str]:
        out = {h: self.ips[k] for h, k in self._host_kind.items()}
        out.update({self.farm_host(n): self.ips["farm"] for n in range(farm_listed)})
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
        return ([self.origin(self.hosts["session"]) + p for p in self.session_paths]
                + [self.origin(self.hosts["soft404"]) + p for p in self.soft404_paths])

    # -- answers ------------------------------------------------------------------------------
    def respond(self, host: str, target: str) -> TrapAnswer:
        path, _, query = target.partition("?")
        if path == "/robots.txt":
            return TrapAnswer(200, ROBOTS_BODY, "robots", content_type="text/plain")
        kind = self.host_kind(host)
        page = self._page(kind, host, path, query)
        if isinstance(page, TrapAnswer):
            return page
        if page is None:
            body = self._html(host, "Not Found", f"Nothing at {path}.", ())
            return TrapAnswer(404, body, "not_found")
        return TrapAnswer(200, self._html(host, page.title, page.text, page.links),
                          "page" if page.legit else "trap")

    def kind_of(self, host: str, path: str, query: str = "") -> str:
        return self.respond(host, path + (f"?{query}" if query else "")).kind

    def spec(self, host: str, path: str, query: str) -> PageSpec | None:
        """The PageSpec of a legitimate page (what the oracle follows), else None."""
        page = self._page(self.host_kind(host), host, path, query)
        if not isinstance(page, _Page) or not page.legit:
            return None
        return PageSpec(host=host, page_id=-1, path=path, query="", url=self.origin(host) + path,
                        title=page.title, base_href=None, meta_robots=None,
                        header_nofollow=False, slow=False, size_target=0, links=page.links)

    def _page(self, kind: str | None, host: str, path: str,
              query: str) -> _Page | TrapAnswer | None:
        if kind == "calendar":
            return self._calendar(host, path, query)
        if kind == "session":
            return self._session(host, path, query)
        if kind == "repeat":
            return self._repeat(host, path, query)
        if kind == "deep":
            return self._deep(host, path, query)
        if kind == "facets":
            return self._facets(host, path, query)
        if kind == "soft404":
            return self._soft404(host, path, query)
        if kind == "redirect":
            return self._redirect(host, path, query)
        if kind == "farm":
            return self._farm(host, path, query)
        return None

    def _text(self, *key: object, length: int = 700) -> str:
        return self.vocab.passage(rng_for(self.seed, "trap", *key), length)

    def _link(self, host: str, href: str, target: str, text: str) -> Link:
        return Link("a", href, self.origin(host) + target, "body", text)

    def _outbound_link(self, *key: object) -> Link:
        """A link from a legitimate page to a normal home page, so those pages are no closed
        community (a rank sink that slows PageRank's convergence to the damping rate)."""
        h = self._outbound[int.from_bytes(_digest(self.seed, "out", *key)[:4], "big")
                           % len(self._outbound)]
        return Link("a", self.origin(h) + "/", self.origin(h) + "/", "footer", "friends")

    # calendar
    def _calendar(self, host: str, path: str, query: str) -> _Page | None:
        if path == "/" and not query:
            y, m = CALENDAR_START
            return _Page("Events calendar", self._text("calendar"),
                         (self._link(host, f"/cal/{y:04d}/{m:02d}/", f"/cal/{y:04d}/{m:02d}/",
                                     "this month"),))
        match = _CAL.fullmatch(path)
        if match is None or query:
            return None
        y, m = int(match[1]), int(match[2])
        if match[1] != f"{y:04d}" or y < 1 or not 1 <= m <= 12:
            return None
        month = f"/cal/{y:04d}/{m:02d}/"
        if match[3] is not None:
            d = int(match[3])
            if not 1 <= d <= days_in_month(y, m):
                return None
            links = [self._link(host, month, month, "month"), self._link(host, "/", "/", "home")]
            return _Page(f"Events on {y:04d}-{m:02d}-{d:02d}",
                         self._text("cal", y, m, d, length=300), tuple(links))
        hops = []
        if (y, m) > (1, 1):
            py, pm = (y, m - 1) if m > 1 else (y - 1, 12)
            hops.append((f"/cal/{py:04d}/{pm:02d}/", "previous month"))
        ny, nm = (y, m + 1) if m < 12 else (y + 1, 1)
        hops.append((f"/cal/{ny:04d}/{nm:02d}/", "next month"))
        if y > 1:
            hops.append((f"/cal/{y - 1:04d}/{m:02d}/", "previous year"))
        hops.append((f"/cal/{y + 1:04d}/{m:02d}/", "next year"))
        h = _digest(self.seed, "cal", y, m)
        n_days = days_in_month(y, m)
        for d in dict.fromkeys((1 + h[0] % n_days, 1 + h[1] % n_days)):
            hops.append((f"{month}{d:02d}/", f"day {d}"))
        hops.append(("/", "home"))
        links = tuple(self._link(host, p, p, t) for p, t in hops)
        return _Page(f"Events in {y:04d}-{m:02d}", self._text("cal", y, m, length=400), links)

    # session
    def _sid(self, request: str, i: int) -> str:
        h = _digest(self.seed, "sid", request, i).hex()
        form = int(h[-1], 16) % 3
        if form == 0:
            return f"?sid={h[:16]}"
        if form == 1:
            return f"?PHPSESSID={h[:26]}"
        return f";jsessionid={h.upper()}"

    def _session(self, host: str, path: str, query: str) -> _Page | None:
        base, _, param = path.partition(";")
        k = self._session_index.get(base)
        if k is None:
            return None
        n = len(self.session_paths)
        rng = rng_for(self.seed, "trap", "session-links", k)
        targets = dict.fromkeys([0, (k + 1) % n, (k - 1) % n,
                                 *(rng.randrange(n) for _ in range(3))])
        request = path + (f"?{query}" if query else "")
        links = (*(self._link(host, self.session_paths[t] + self._sid(request, i),
                              self.session_paths[t], f"page {t}") for i, t in enumerate(targets)),
                 self._outbound_link("session", k))
        return _Page(f"Member area {k}", self._text("session", k), links,
                     legit=not query and not param)

    # repeat
    def _repeat(self, host: str, path: str, query: str) -> _Page | None:
        if query or _REPEAT.fullmatch(path) is None:
            return None
        links = tuple(self._link(host, rel, path + rel, rel) for rel in ("a/b/", "b/a/", "a/"))
        return _Page("Directory " + path, self._text("repeat", length=300), links)

    # deep
    def _deep(self, host: str, path: str, query: str) -> _Page | None:
        if query:
            return None
        if path == "/":
            return _Page("Archive", self._text("deep", length=300),
                         (self._link(host, "/deep/", "/deep/", "archive"),))
        if not path.startswith("/deep/") or not path.endswith("/") or "//" in path:
            return None
        depth = path.count("/") - 1
        words = self.vocab.words
        seg = words[int.from_bytes(_digest(self.seed, "deep", path)[:4], "big") % len(words)]
        child = f"{path}{seg}{depth}/"
        parent = path[: path.rstrip("/").rfind("/") + 1]
        links = (self._link(host, child, child, "deeper"),
                 self._link(host, parent, parent, "up"), self._link(host, "/", "/", "home"))
        return _Page(f"Archive level {depth}", self._text("deep", depth % 50, length=300), links)

    # facets
    def _facets(self, host: str, path: str, query: str) -> _Page | None:
        if path == "/" and not query:
            return _Page("Shop", self._text("facets"),
                         (self._link(host, "/shop/list", "/shop/list", "all products"),))
        if path != "/shop/list":
            return None
        params: dict[str, str] = {}
        for k, v in parse_qsl(query, keep_blank_values=True):
            params.setdefault(k, v)
        page = int(params["page"]) if params.get("page", "").isdigit() else 1
        h = _digest(self.seed, "facets", query)
        variants = [{**params, "page": str(page + 1)}]
        for i, (name, values) in enumerate(FACETS):
            if name in params:
                cur = params[name]
                nxt = values[(values.index(cur) + 1) % len(values)] if cur in values else values[0]
                variants.append({**params, name: nxt})
            else:
                variants.append({**params, name: values[h[i] % len(values)]})
        links = []
        for v in variants:
            q = "/shop/list?" + urlencode(list(v.items()))
            links.append(self._link(host, q, q, " ".join(f"{a} {b}" for a, b in v.items())))
        return _Page(f"Products, page {page}", self._text("facets", page % 40, length=400),
                     tuple(links))

    # soft404
    def _soft404(self, host: str, path: str, query: str) -> _Page:
        k = self._soft404_index.get(path)
        if k is not None and not query:
            n = len(self.soft404_paths)
            rng = rng_for(self.seed, "trap", "soft404-links", k)
            targets = range(1, n) if k == 0 else dict.fromkeys(
                [0, k % (n - 1) + 1, *(rng.randrange(n) for _ in range(2))])
            links = (*(self._link(host, self.soft404_paths[t], self.soft404_paths[t],
                                  f"article {t}") for t in targets if t != k),
                     self._outbound_link("soft404", k))
            return _Page(f"Article {k}" if k else "Articles", self._text("soft404", k, length=2500),
                         links, legit=True)
        words = self.vocab.words
        h = _digest(self.seed, "soft404", path, query)
        fresh = [f"/{words[h[2 * i] * 11 % len(words)]}/{words[h[2 * i + 1] * 13 % len(words)]}"
                 f"-{h[8 + i]}.html" for i in range(4)]
        links = (self._link(host, "/", "/", "home"),
                 *(self._link(host, p, p, "you may like") for p in fresh))
        return _Page("Page not found", f"Sorry, {path} is not here. {self._soft404_text}", links)

    # redirect
    def _redirect(self, host: str, path: str, query: str) -> _Page | TrapAnswer | None:
        if path == "/" and not query:
            return _Page("Links", self._text("redirect", length=300),
                         (self._link(host, "/hop/1", "/hop/1", "go"),))
        match = _HOP.fullmatch(path)
        if match is None or query:
            return None
        loc = f"{self.origin(host)}/hop/{int(match[1]) + 1}"
        return TrapAnswer(302, b"", "trap", (("Location", loc),))

    # farm
    def _farm(self, host: str, path: str, query: str) -> _Page | None:
        n = self.farm_index(host)
        if n is None or query or path not in _FARM_PATHS:
            return None
        links = [self._link(host, p, p, "more") for p in _FARM_PATHS if p != path]
        for j in range(1, FARM_FANOUT + 1):
            child = self.farm_host(n * FARM_FANOUT + j)
            links.append(Link("a", self.origin(child) + "/", self.origin(child) + "/", "body",
                              "best deals"))
        word = self._farm_words[n % len(self._farm_words)]
        return _Page(f"Cheap {word} {n}", self._text("farm", n % 64, length=500), tuple(links))

    # html
    def _html(self, host: str, title: str, text: str, links: tuple[Link, ...]) -> bytes:
        items = "".join(f'<li><a href="{escape(lk.href)}">{escape(lk.text)}</a></li>\n'
                        for lk in links)
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{escape(title)}</title>\n</head>\n<body>\n<h1>{escape(title)}</h1>\n"
            f"<main>\n<p>{escape(text)}</p>\n</main>\n<nav><ul>\n{items}</ul></nav>\n"
            f"<footer><p>&copy; {escape(host)}</p></footer>\n</body>\n</html>\n"
        ).encode()
