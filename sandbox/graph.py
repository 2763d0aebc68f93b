"""Per-page link lists: generated lazily from the seed, shared by the HTML renderer and the oracle.

The renderer writes each ``Link.href``; the oracle reads each ``Link.target``. Both come from
the same object, so what is served and what the oracle expects cannot drift apart.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

from .layout import Layout, rng_for
from .text import Vocabulary

#: Tags whose URL a correct crawler follows (rel=canonical is emitted with tag "canonical").
FOLLOW_TAGS = frozenset({"a", "area", "iframe", "frame", "canonical"})
QUERIES = ("q=1", "q=2", "sort=asc")
OFFSITE = "http://offsite.invalid/"


@dataclass(frozen=True, slots=True)
class Link:
    tag: str  # a, area, iframe, canonical, img, stylesheet
    href: str  # exactly as written in the HTML
    target: str | None  # canonical absolute URL; None if not an http URL of this web
    section: str  # nav, body, head, footer
    text: str = ""
    nofollow: bool = False

    @property
    def followable(self) -> bool:
        return self.target is not None and self.tag in FOLLOW_TAGS and not self.nofollow


@dataclass(frozen=True, slots=True)
class PageSpec:
    host: str
    page_id: int
    path: str
    query: str
    url: str
    title: str
    base_href: str | None
    meta_robots: str | None  # "nofollow" or "noindex"
    header_nofollow: bool  # X-Robots-Tag: nofollow
    slow: bool
    size_target: int
    links: tuple[Link, ...]

    @property
    def nofollow(self) -> bool:
        return self.header_nofollow or self.meta_robots == "nofollow"

    def followed(self) -> list[str]:
        """Targets a correct crawler follows from this page, in document order, deduplicated."""
        if self.nofollow:
            return []
        return list(dict.fromkeys(lk.target for lk in self.links if lk.followable and lk.target))


@lru_cache(maxsize=1 << 16)
def relative_ref(from_dir: str, to_path: str) -> str:
    """A relative reference from directory ``from_dir`` (ends in '/') to absolute ``to_path``."""
    src = [s for s in from_dir.split("/") if s]
    to_dir, name = to_path.rsplit("/", 1)
    dst = [s for s in to_dir.split("/") if s]
    k = 0
    while k < len(src) and k < len(dst) and src[k] == dst[k]:
        k += 1
    ref = "../" * (len(src) - k) + "".join(d + "/" for d in dst[k:]) + name
    return ref or "./"


class PageBuilder:
    """Builds the :class:`PageSpec` of any page of a layout; caches each host's origin."""

    def __init__(self, layout: Layout, vocab: Vocabulary, port: int, https_port: int = 0) -> None:
        self.layout = layout
        self.vocab = vocab
        self.port = port
        self.https_port = https_port
        self._origins: dict[str, str] = {}

    def origin(self, host: str) -> str:
        return self.layout.origin(host, self.port, self.https_port)

    def cached_origin(self, host: str) -> str:
        origin = self._origins.get(host)
        if origin is None:
            origin = self._origins[host] = self.origin(host)
        return origin

    def build(self, host: str, page_id: int, query: str = "") -> PageSpec:
        """The page's spec: its links drawn section by section (nav, body, head and footer),
        then its title and size, in the one order that defines the web."""
        draw = _PageDraw(self, host, page_id, query)
        draw.nav_links()
        draw.body_links()
        draw.head_and_footer_links()
        return draw.spec()


class _PageDraw:
    """The random draws of one page. Hot path of the oracle and of PageRank: the draws are made
    with ``Random._randbelow`` (what ``choice``/``randrange`` call) and locals, so the sequence
    (hence the web) is the one the plain calls give, in ~40% less time."""

    def __init__(self, builder: PageBuilder, host: str, page_id: int, query: str) -> None:
        lay = self.lay = builder.layout
        self.builder, self.host, self.page_id, self.query = builder, host, page_id, query
        rng = self.rng = rng_for(lay.config.seed, "page", host, page_id)
        rand, below = self.rand, self.below = rng.random, rng._randbelow
        self.n_pages = n_pages = lay.config.pages_per_host
        self.path = path = lay.paths[host][page_id]
        self.here = here = builder.cached_origin(host)
        self.url = here + path + (f"?{query}" if query else "")
        base_path = path
        self.base_href: str | None = None
        if page_id and rand() < 0.08:
            base_path = lay.paths[host][below(n_pages)]
            self.base_href = here + base_path
        self.base_url = self.base_href or self.url
        self.base_dir = base_path.rsplit("/", 1)[0] + "/"
        self.links: list[Link] = []
        self.words = builder.vocab.words
        self.here_https = host in lay.https_hosts
        self.port_tail = f":{builder.https_port if self.here_https else builder.port}"

    def word(self) -> str:
        words, below = self.words, self.below
        return words[below(len(words))] + " " + words[below(len(words))]

    def to(self, th: str, tpath: str, section: str, tag: str = "a", q: str = "",
           frag: str = "", nofollow: bool = False) -> None:
        """Append a link to ``tpath`` on host ``th``, written absolute, scheme-relative,
        root-relative or relative as the draws decide."""
        rand = self.rand
        origin = self.builder.cached_origin(th)
        if q:
            target = origin + tpath + "?" + q
            suffix = "?" + q + ("#" + frag if frag else "")
        else:
            target = origin + tpath
            suffix = "#" + frag if frag else ""
        if th != self.host:  # scheme-relative only to a host of the same scheme
            href = (origin if rand() < 0.85 or (th in self.lay.https_hosts) != self.here_https
                    else "//" + th + self.port_tail) + tpath
        else:
            r = rand()
            if r < 0.25:
                href = origin + tpath
            elif r < 0.6:
                href = tpath
            else:
                href = relative_ref(self.base_dir, tpath)
                if not href.startswith(".") and rand() < 0.3:
                    href = "./" + href
        self.links.append(Link(tag, href + suffix, target, section, self.word(), nofollow))

    def nav_links(self) -> None:
        """Home, neighbours, two popular pages; on a home page a ring over home pages (keeps
        every host reachable); then the layout's extra links."""
        lay, host, page_id, n_pages, paths = (self.lay, self.host, self.page_id, self.n_pages,
                                              self.lay.paths)
        for tid in (0, (page_id + 1) % n_pages, (page_id - 1) % n_pages):
            self.to(host, paths[host][tid], "nav")
        for _ in range(2):
            self.to(host, paths[host][lay.popular_page(host, self.rng)], "nav")
        hi = lay.host_index[host]
        if page_id == 0:
            for step in (1, 7, 31):
                th = lay.hosts[(hi + step) % len(lay.hosts)]
                self.to(th, paths[th][0], "nav")
        for th, tpath in lay.extra_links.get((host, page_id), ()):
            self.to(th, tpath, "body")

    def body_links(self) -> None:
        """The body's links: own pages by rank, other hosts by popularity, resources, gone
        pages (the order of the draws is the web)."""
        lay, host, rand, below, to = self.lay, self.host, self.rand, self.below, self.to
        n_body = max(5, self.rng.randint(26, 140) - len(self.links) - 2)
        paths = lay.paths
        own_paths = paths[host]
        ranks = lay.page_ranks(host)
        page_cum, host_cum = lay.page_zipf.cum, lay.host_zipf.cum
        page_total, host_total = page_cum[-1], host_cum[-1]
        resources = lay.resources(host)
        n_resources = len(resources)
        hosts, popularity = lay.hosts, lay.popularity
        n_queries = len(QUERIES)
        for _ in range(n_body):
            r = rand()
            tag = "a" if rand() < 0.9 else ("area" if rand() < 0.7 else "iframe")
            nofollow = tag != "iframe" and rand() < 0.05
            frag = f"sec{below(5) + 1}" if rand() < 0.08 else ""
            if r < 0.62:
                q = QUERIES[below(n_queries)] if rand() < 0.005 else ""
                tid = ranks[bisect_right(page_cum, rand() * page_total)]
                to(host, own_paths[tid], "body", tag, q, frag, nofollow)
            elif r >= 0.92:
                if r < 0.96:
                    res_path = resources[below(n_resources)][0]
                    to(host, res_path, "body", "a", "", "", nofollow)
                else:
                    to(host, f"/gone/{below(4)}.html", "body", "a", "", "", nofollow)
            else:
                th = hosts[popularity[bisect_right(host_cum, rand() * host_total)]]
                if rand() < 0.7:
                    tid = lay.page_ranks(th)[bisect_right(page_cum, rand() * page_total)]
                else:
                    tid = 0
                to(th, paths[th][tid], "body", tag, "", frag, nofollow)
        if self.page_id and rand() < 0.03:  # a query-only self reference
            self.links.append(Link("a", f"?{QUERIES[0]}",
                                   self.base_url.split("?")[0] + f"?{QUERIES[0]}", "body",
                                   self.word()))

    def head_and_footer_links(self) -> None:
        """Canonical, stylesheet and images; the footer's fixed links, then the trap entries
        (placed without draws, so the rest of the web stays as it was)."""
        host, rand, below, append = self.host, self.rand, self.below, self.links.append
        if self.query:
            append(Link("canonical", self.here + self.path, self.here + self.path, "head"))
        elif rand() < 0.25:
            append(Link("canonical", self.url, self.url, "head"))
        append(Link("stylesheet", "/static/site.css", None, "head"))
        for _ in range(below(3)):
            k = below(3)
            append(Link("img", f"/img/pic-{k}.png", None, "body", self.word()))
        append(Link("a", "#top", self.base_url, "footer", "top"))
        append(Link("a", f"mailto:webmaster@{host}", None, "footer", "contact"))
        if rand() < 0.2:
            append(Link("a", OFFSITE, None, "footer", "elsewhere"))
        for th, tpath in self.lay.footer_links.get((host, self.page_id), ()):
            t = self.builder.cached_origin(th) + tpath
            append(Link("a", t, t, "footer", "partner"))

    def spec(self) -> PageSpec:
        lay, key, words, below = self.lay, (self.host, self.page_id), self.words, self.below
        meta = ("nofollow" if key in lay.meta_nofollow
                else "noindex" if key in lay.meta_noindex else None)
        return PageSpec(
            host=self.host, page_id=self.page_id, path=self.path, query=self.query, url=self.url,
            title=" ".join(words[below(len(words))]
                           for _ in range(self.rng.randint(2, 5))).title(),
            base_href=self.base_href, meta_robots=meta,
            header_nofollow=key in lay.header_nofollow, slow=key in lay.slow_pages,
            size_target=self.rng.randint(11_500, 54_000), links=tuple(self.links),
        )
