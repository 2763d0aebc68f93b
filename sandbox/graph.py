"""Per-page link lists: generated lazily from the seed, shared by the HTML renderer and the oracle.

The renderer writes each ``Link.href``; the oracle reads each ``Link.target``. Both come from
the same object, so what is served and what the oracle expects cannot drift apart.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

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
    def __init__(self, layout: Layout, vocab: Vocabulary, port: int) -> None:
        self.layout = layout
        self.vocab = vocab
        self.port = port

    def origin(self, host: str) -> str:
        return f"http://{host}:{self.port}"

    def build(self, host: str, page_id: int, query: str = "") -> PageSpec:
        lay = self.layout
        seed = lay.config.seed
        rng = rng_for(seed, "page", host, page_id)
        n_pages = lay.config.pages_per_host
        path = lay.paths[host][page_id]
        url = self.origin(host) + path + (f"?{query}" if query else "")
        base_path = path
        base_href = None
        if page_id and rng.random() < 0.08:
            base_path = lay.paths[host][rng.randrange(n_pages)]
            base_href = self.origin(host) + base_path
        base_url = base_href or url
        base_dir = base_path.rsplit("/", 1)[0] + "/"
        links: list[Link] = []

        def word(n: int = 2) -> str:
            return self.vocab.phrase(rng, n)

        def to(th: str, tpath: str, section: str, tag: str = "a", q: str = "", frag: str = "",
               nofollow: bool = False) -> None:
            suffix = (f"?{q}" if q else "") + (f"#{frag}" if frag else "")
            target = self.origin(th) + tpath + (f"?{q}" if q else "")
            if th != host:
                href = (self.origin(th) if rng.random() < 0.85 else f"//{th}:{self.port}") + tpath
            else:
                r = rng.random()
                if r < 0.25:
                    href = self.origin(th) + tpath
                elif r < 0.6:
                    href = tpath
                else:
                    href = relative_ref(base_dir, tpath)
                    if not href.startswith(".") and rng.random() < 0.3:
                        href = "./" + href
            links.append(Link(tag, href + suffix, target, section, word(), nofollow))

        def page(th: str, tid: int, section: str, **kw: object) -> None:
            to(th, lay.paths[th][tid], section, **kw)  # type: ignore[arg-type]

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
        for _ in range(n_body):
            self._body_link(rng, host, page, to)
        if page_id and rng.random() < 0.03:  # a query-only self reference
            links.append(Link("a", f"?{QUERIES[0]}", base_url.split("?")[0] + f"?{QUERIES[0]}",
                              "body", word()))

        if query:
            links.append(Link("canonical", self.origin(host) + path, self.origin(host) + path,
                              "head"))
        elif rng.random() < 0.25:
            links.append(Link("canonical", url, url, "head"))
        links.append(Link("stylesheet", "/static/site.css", None, "head"))
        for _ in range(rng.randrange(3)):
            k = rng.randrange(3)
            links.append(Link("img", f"/img/pic-{k}.png", None, "body", word()))

        links.append(Link("a", "#top", base_url, "footer", "top"))
        links.append(Link("a", f"mailto:webmaster@{host}", None, "footer", "contact"))
        if rng.random() < 0.2:
            links.append(Link("a", OFFSITE, None, "footer", "elsewhere"))

        key = (host, page_id)
        meta = ("nofollow" if key in lay.meta_nofollow
                else "noindex" if key in lay.meta_noindex else None)
        return PageSpec(
            host=host, page_id=page_id, path=path, query=query, url=url,
            title=word(rng.randint(2, 5)).title(), base_href=base_href, meta_robots=meta,
            header_nofollow=key in lay.header_nofollow, slow=key in lay.slow_pages,
            size_target=rng.randint(11_500, 54_000), links=tuple(links),
        )

    def _body_link(self, rng: random.Random, host: str, page, to) -> None:  # type: ignore[no-untyped-def]
        lay = self.layout
        r = rng.random()
        tag = "a" if rng.random() < 0.9 else ("area" if rng.random() < 0.7 else "iframe")
        nofollow = tag != "iframe" and rng.random() < 0.05
        frag = f"sec{rng.randint(1, 5)}" if rng.random() < 0.08 else ""
        if r < 0.62 or r >= 0.92:
            if r < 0.62:
                q = rng.choice(QUERIES) if rng.random() < 0.005 else ""
                page(host, lay.popular_page(host, rng), "body", tag=tag, q=q, frag=frag,
                     nofollow=nofollow)
            elif r < 0.96:
                res_path, _ = rng.choice(lay.resources(host))
                to(host, res_path, "body", tag="a", nofollow=nofollow)
            else:
                to(host, f"/gone/{rng.randrange(4)}.html", "body", tag="a", nofollow=nofollow)
        else:
            th = lay.hosts[lay.popular_host(rng)]
            tid = lay.popular_page(th, rng) if rng.random() < 0.7 else 0
            page(th, tid, "body", tag=tag, frag=frag, nofollow=nofollow)
