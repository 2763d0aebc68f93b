"""The URL spaces of the sandbox's spider-trap hosts: what each trap URL answers.

:class:`TrapPages` builds every page from a hash of its URL: no state, nothing cached, so an
endless crawl costs the server a few microseconds per request and no memory. Which hosts exist,
where they are linked from and how they resolve is :mod:`sandbox.traps`.

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
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from urllib.parse import parse_qsl, urlencode

from .graph import Link
from .layout import rng_for
from .text import Vocabulary

FARM_FANOUT = 4
SESSION_PAGES = 30
SOFT404_PAGES = 20
#: The calendar's home page links to this month (years count from 1 and have no upper bound).
CALENDAR_START = (2026, 1)
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
class TrapPage:
    """A page of a trap host before it is rendered; ``legit``: a normal page the oracle follows."""

    title: str
    text: str
    links: tuple[Link, ...]
    legit: bool = False


def days_in_month(year: int, month: int) -> int:
    """Proleptic Gregorian, for any year (``calendar`` stops at 9999)."""
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def digest(*parts: object) -> bytes:
    return hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class FarmNames:
    """The farm's endless subdomains ``s<N>`` + ``suffix`` (``suffix`` starts with a dot)."""

    suffix: str

    def index(self, host: str) -> int | None:
        """N of a farm subdomain ``s<N>`` (no leading zeros), else None."""
        if not host.endswith(self.suffix):
            return None
        label = host[: -len(self.suffix)]
        digits = label[1:]
        if (label[:1] == "s" and digits.isascii() and digits.isdigit()
                and (digits == "0" or digits[0] != "0")):
            return int(digits)
        return None

    def host(self, n: int) -> str:
        return f"s{n}{self.suffix}"


class TrapPages:
    """The answer of every trap URL, from the seed, the vocabulary and a hash of the URL.

    ``origin`` maps a host to its ``scheme://host:port``; ``outbound`` are normal hosts whose
    home pages the legitimate trap pages link to."""

    def __init__(self, seed: int, vocab: Vocabulary, origin: Callable[[str], str],
                 farm: FarmNames, outbound: list[str]) -> None:
        self.seed, self.vocab, self.origin, self.farm = seed, vocab, origin, farm
        self._outbound = outbound
        self.session_paths = ["/", *(f"/s/{k}.html" for k in range(1, SESSION_PAGES))]
        self.soft404_paths = ["/", *(f"/articles/{k}.html" for k in range(1, SOFT404_PAGES + 1))]
        self._session_index = {p: i for i, p in enumerate(self.session_paths)}
        self._soft404_index = {p: i for i, p in enumerate(self.soft404_paths)}
        self._soft404_text = vocab.passage(rng_for(seed, "trap", "soft404-frame"), 2000)
        self._farm_words = vocab.words[:50]
        self._by_kind: dict[str, Callable[[str, str, str], TrapPage | TrapAnswer | None]] = {
            "calendar": self._calendar, "session": self._session, "repeat": self._repeat,
            "deep": self._deep, "facets": self._facets, "soft404": self._soft404,
            "redirect": self._redirect, "farm": self._farm}

    def page(self, kind: str | None, host: str, path: str,
             query: str) -> TrapPage | TrapAnswer | None:
        """The page (or a redirect answer) at ``path?query`` of a ``kind`` host; None: 404."""
        make = self._by_kind.get(kind) if kind is not None else None
        return make(host, path, query) if make is not None else None

    def _text(self, *key: object, length: int = 700) -> str:
        return self.vocab.passage(rng_for(self.seed, "trap", *key), length)

    def _link(self, host: str, href: str, target: str, text: str) -> Link:
        return Link("a", href, self.origin(host) + target, "body", text)

    def _outbound_link(self, *key: object) -> Link:
        """A link from a legitimate page to a normal home page, so those pages are no closed
        community (a rank sink that slows PageRank's convergence to the damping rate)."""
        h = self._outbound[int.from_bytes(digest(self.seed, "out", *key)[:4], "big")
                           % len(self._outbound)]
        return Link("a", self.origin(h) + "/", self.origin(h) + "/", "footer", "friends")

    # calendar
    def _calendar(self, host: str, path: str, query: str) -> TrapPage | None:
        if path == "/" and not query:
            y, m = CALENDAR_START
            return TrapPage("Events calendar", self._text("calendar"),
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
            return TrapPage(f"Events on {y:04d}-{m:02d}-{d:02d}",
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
        h = digest(self.seed, "cal", y, m)
        n_days = days_in_month(y, m)
        for d in dict.fromkeys((1 + h[0] % n_days, 1 + h[1] % n_days)):
            hops.append((f"{month}{d:02d}/", f"day {d}"))
        hops.append(("/", "home"))
        links = tuple(self._link(host, p, p, t) for p, t in hops)
        return TrapPage(f"Events in {y:04d}-{m:02d}", self._text("cal", y, m, length=400), links)

    # session
    def _sid(self, request: str, i: int) -> str:
        h = digest(self.seed, "sid", request, i).hex()
        form = int(h[-1], 16) % 3
        if form == 0:
            return f"?sid={h[:16]}"
        if form == 1:
            return f"?PHPSESSID={h[:26]}"
        return f";jsessionid={h.upper()}"

    def _session(self, host: str, path: str, query: str) -> TrapPage | None:
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
        return TrapPage(f"Member area {k}", self._text("session", k), links,
                        legit=not query and not param)

    # repeat
    def _repeat(self, host: str, path: str, query: str) -> TrapPage | None:
        if query or _REPEAT.fullmatch(path) is None:
            return None
        links = tuple(self._link(host, rel, path + rel, rel) for rel in ("a/b/", "b/a/", "a/"))
        return TrapPage("Directory " + path, self._text("repeat", length=300), links)

    # deep
    def _deep(self, host: str, path: str, query: str) -> TrapPage | None:
        if query:
            return None
        if path == "/":
            return TrapPage("Archive", self._text("deep", length=300),
                            (self._link(host, "/deep/", "/deep/", "archive"),))
        if not path.startswith("/deep/") or not path.endswith("/") or "//" in path:
            return None
        depth = path.count("/") - 1
        words = self.vocab.words
        seg = words[int.from_bytes(digest(self.seed, "deep", path)[:4], "big") % len(words)]
        child = f"{path}{seg}{depth}/"
        parent = path[: path.rstrip("/").rfind("/") + 1]
        links = (self._link(host, child, child, "deeper"),
                 self._link(host, parent, parent, "up"), self._link(host, "/", "/", "home"))
        return TrapPage(f"Archive level {depth}", self._text("deep", depth % 50, length=300), links)

    # facets
    def _facets(self, host: str, path: str, query: str) -> TrapPage | None:
        if path == "/" and not query:
            return TrapPage("Shop", self._text("facets"),
                            (self._link(host, "/shop/list", "/shop/list", "all products"),))
        if path != "/shop/list":
            return None
        params: dict[str, str] = {}
        for k, v in parse_qsl(query, keep_blank_values=True):
            params.setdefault(k, v)
        page = int(params["page"]) if params.get("page", "").isdigit() else 1
        h = digest(self.seed, "facets", query)
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
        return TrapPage(f"Products, page {page}", self._text("facets", page % 40, length=400),
                        tuple(links))

    # soft404
    def _soft404(self, host: str, path: str, query: str) -> TrapPage:
        k = self._soft404_index.get(path)
        if k is not None and not query:
            n = len(self.soft404_paths)
            rng = rng_for(self.seed, "trap", "soft404-links", k)
            targets = range(1, n) if k == 0 else dict.fromkeys(
                [0, k % (n - 1) + 1, *(rng.randrange(n) for _ in range(2))])
            links = (*(self._link(host, self.soft404_paths[t], self.soft404_paths[t],
                                  f"article {t}") for t in targets if t != k),
                     self._outbound_link("soft404", k))
            return TrapPage(f"Article {k}" if k else "Articles",
                            self._text("soft404", k, length=2500), links, legit=True)
        words = self.vocab.words
        h = digest(self.seed, "soft404", path, query)
        fresh = [f"/{words[h[2 * i] * 11 % len(words)]}/{words[h[2 * i + 1] * 13 % len(words)]}"
                 f"-{h[8 + i]}.html" for i in range(4)]
        links = (self._link(host, "/", "/", "home"),
                 *(self._link(host, p, p, "you may like") for p in fresh))
        return TrapPage("Page not found", f"Sorry, {path} is not here. {self._soft404_text}", links)

    # redirect
    def _redirect(self, host: str, path: str, query: str) -> TrapPage | TrapAnswer | None:
        if path == "/" and not query:
            return TrapPage("Links", self._text("redirect", length=300),
                            (self._link(host, "/hop/1", "/hop/1", "go"),))
        match = _HOP.fullmatch(path)
        if match is None or query:
            return None
        loc = f"{self.origin(host)}/hop/{int(match[1]) + 1}"
        return TrapAnswer(302, b"", "trap", (("Location", loc),))

    # farm
    def _farm(self, host: str, path: str, query: str) -> TrapPage | None:
        n = self.farm.index(host)
        if n is None or query or path not in _FARM_PATHS:
            return None
        links = [self._link(host, p, p, "more") for p in _FARM_PATHS if p != path]
        for j in range(1, FARM_FANOUT + 1):
            child = self.farm.host(n * FARM_FANOUT + j)
            links.append(Link("a", self.origin(child) + "/", self.origin(child) + "/", "body",
                              "best deals"))
        word = self._farm_words[n % len(self._farm_words)]
        return TrapPage(f"Cheap {word} {n}", self._text("farm", n % 64, length=500), tuple(links))

    # html
    def html(self, host: str, title: str, text: str, links: tuple[Link, ...]) -> bytes:
        items = "".join(f'<li><a href="{escape(lk.href)}">{escape(lk.text)}</a></li>\n'
                        for lk in links)
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{escape(title)}</title>\n</head>\n<body>\n<h1>{escape(title)}</h1>\n"
            f"<main>\n<p>{escape(text)}</p>\n</main>\n<nav><ul>\n{items}</ul></nav>\n"
            f"<footer><p>&copy; {escape(host)}</p></footer>\n</body>\n</html>\n"
        ).encode()
