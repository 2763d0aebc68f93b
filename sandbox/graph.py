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
    def __init__(self, layout: Layout, vocab: Vocabulary, port: int, https_port: int = 0) -> None:
        self.layout = layout
        self.vocab = vocab
        self.port = port
        self.https_port = https_port
        self._origins: dict[str, str] = {}

    def origin(self, host: str) -> str:
        return self.layout.origin(host, self.port, self.https_port)

    def build(self, host: str, page_id: int, query: str = "") -> PageSpec:
        """The page's spec. Hot path of the oracle and of PageRank: the random draws are made
        with ``Random._randbelow`` (what ``choice``/``randrange`` call) and locals, so the
        sequence (hence the web) is the one the plain calls give, in ~40% less time."""
        lay = self.layout
        seed = lay.config.seed
        rng = rng_for(seed, "page", host, page_id)
        rand, below = rng.random, rng._randbelow
        n_pages = lay.config.pages_per_host
        paths = lay.paths
        path = paths[host][page_id]
        origins = self._origins
        here = origins.get(host) or self._origin_of(host)
        url = here + path + (f"?{query}" if query else "")
        base_path = path
        base_href = None
        if page_id and rand() < 0.08:
            base_path = paths[host][below(n_pages)]
            base_href = here + base_path
        base_url = base_href or url
        base_dir = base_path.rsplit("/", 1)[0] + "/"
        links: list[Link] = []
        append = links.append
        words = self.vocab.words
        n_words = len(words)
        https = lay.https_hosts
        here_https = host in https
        port_tail = f":{self.https_port if here_https else self.port}"

        def word() -> str:
            return words[below(n_words)] + " " + words[below(n_words)]

        def to(th: str, tpath: str, section: str, tag: str = "a", q: str = "", frag: str = "",
               nofollow: bool = False) -> None:
            origin = origins.get(th) or self._origin_of(th)
            if q:
                target = origin + tpath + "?" + q
                suffix = "?" + q + ("#" + frag if frag else "")
            else:
                target = origin + tpath
                suffix = "#" + frag if frag else ""
            if th != host:  # scheme-relative only to a host of the same scheme
                href = (origin if rand() < 0.85 or (th in https) != here_https
                        else "//" + th + port_tail) + tpath
            else:
                r = rand()
                if r < 0.25:
                    href = origin + tpath
                elif r < 0.6:
                    href = tpath
                else:
                    href = relative_ref(base_dir, tpath)
                    if not href.startswith(".") and rand() < 0.3:
                        href = "./" + href
            append(Link(tag, href + suffix, target, section, word(), nofollow))

        def page(th: str, tid: int, section: str, **kw: object) -> None:
            to(th, paths[th][tid], section, **kw)  # type: ignore[arg-type]

        # nav: home, neighbours, two popular pages
        for tid in (0, (page_id + 1) % n_pages, (page_id - 1) % n_pages):
            page(host, tid, "nav")
        for _ in range(2):
            page(host, lay.popular_page(host, rng), "nav")
        hi = lay.host_index[host]
        if page_id == 0:  # a ring over home pages keeps every host reachable
            for step in (1, 7, 31):
                page(lay.hosts[(hi + step) % len(lay.hosts)], 0, "nav")
        for th, tpath in lay.extra_links.get((host, page_id), ()):
            to(th, tpath, "body")

        n_body = max(5, rng.randint(26, 140) - len(links) - 2)
        own_paths = paths[host]
        ranks = lay.page_ranks(host)
        page_cum, host_cum = lay.page_zipf.cum, lay.host_zipf.cum
        page_total, host_total = page_cum[-1], host_cum[-1]
        resources = lay.resources(host)
        n_resources = len(resources)
        hosts, popularity = lay.hosts, lay.popularity
        n_queries = len(QUERIES)
        for _ in range(n_body):  # body links (the order of the draws is the web)
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
        if page_id and rand() < 0.03:  # a query-only self reference
            append(Link("a", f"?{QUERIES[0]}", base_url.split("?")[0] + f"?{QUERIES[0]}",
                        "body", word()))

        if query:
            append(Link("canonical", here + path, here + path, "head"))
        elif rand() < 0.25:
            append(Link("canonical", url, url, "head"))
        append(Link("stylesheet", "/static/site.css", None, "head"))
        for _ in range(below(3)):
            k = below(3)
            append(Link("img", f"/img/pic-{k}.png", None, "body", word()))

        append(Link("a", "#top", base_url, "footer", "top"))
        append(Link("a", f"mailto:webmaster@{host}", None, "footer", "contact"))
        if rand() < 0.2:
            append(Link("a", OFFSITE, None, "footer", "elsewhere"))
        key = (host, page_id)
        for th, tpath in lay.footer_links.get(key, ()):  # no draws: the rest stays as it was
            t = (origins.get(th) or self._origin_of(th)) + tpath
            append(Link("a", t, t, "footer", "partner"))

        meta = ("nofollow" if key in lay.meta_nofollow
                else "noindex" if key in lay.meta_noindex else None)
        return PageSpec(
            host=host, page_id=page_id, path=path, query=query, url=url,
            title=" ".join(words[below(n_words)] for _ in range(rng.randint(2, 5))).title(),
            base_href=base_href, meta_robots=meta,
            header_nofollow=key in lay.header_nofollow, slow=key in lay.slow_pages,
            size_target=rng.randint(11_500, 54_000), links=tuple(links),
        )

    def _origin_of(self, host: str) -> str:
        origin = self._origins[host] = self.layout.origin(host, self.port, self.https_port)
        return origin
