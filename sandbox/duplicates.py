"""Opt-in duplicates for the sandbox web (SandboxConfig.duplicates): labelled near-duplicate
families at controlled Jaccard levels, exact copies, date/counter-only changes, a different
boilerplate frame, and whole mirror hosts.

A *family* lives under ``/dup/f{k}/`` on one host: ``base.html`` and one variant per label.
Variants are made by replacing words of the base article at random positions until the
Jaccard of the normalized 4-shingle sets (dedup.text + dedup.shingles, what the crawler sees)
is close to the target; the label list records the measured value, not the target.
A *mirror host* serves its source host's pages at the same paths, with the host name swapped.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from functools import cached_property
from html import escape

from .graph import Link, PageSpec
from .layout import Layout, rng_for
from .robots import RobotsKind
from .text import Vocabulary

#: Target Jaccard of each near-duplicate variant to its family's base.
LEVELS = (0.99, 0.97, 0.95, 0.93, 0.9, 0.87, 0.85, 0.8, 0.7, 0.5, 0.3)
#: Variants whose normalized text equals the base's: byte copy, other date/counter, other frame.
SAME_TEXT = ("exact", "date", "frame")
ARTICLE_WORDS = 1400
N_MIRRORS = 2


@dataclass(frozen=True, slots=True)
class DuplicatePair:
    url_a: str  # the family's base page (or the mirrored source page)
    url_b: str
    label: str  # exact, date, frame, j0.95, ..., mirror
    jaccard: float  # of the normalized shingle sets, as the crawler computes them


@dataclass(frozen=True, slots=True)
class _Page:
    host: str
    path: str
    family: int
    label: str  # base or a variant label
    frame_host: str
    words: tuple[str, ...]
    date: str


def _label(level: float) -> str:
    return f"j{level:.2f}"


class Duplicates:
    def __init__(self, layout: Layout, vocab: Vocabulary, port: int, https_port: int = 0
                 ) -> None:
        self.layout, self.vocab, self.port, self.https_port = layout, vocab, port, https_port
        seed = layout.config.seed
        rng = rng_for(seed, "duplicates")
        busy = {h for (h, _) in layout.specials} | {
            s.location_host for s in layout.specials.values() if s.location_host}
        busy |= {h for (h, _) in layout.extra_links} | {h for lst in layout.extra_links.values()
                                                        for h, _ in lst}
        free = [h for h in layout.hosts if layout.robots[h] is RobotsKind.ALLOW_ALL
                and h not in layout.seed_hosts and h != layout.hang_host]
        quiet = [h for h in free if h not in busy]
        rng.shuffle(quiet)
        #: mirror host → source host (both allow-all; the mirror's own pages are replaced).
        self.mirrors: dict[str, str] = {}
        # a mirror pair only while two free hosts stay homes for the families (a tiny web
        # has few allow-all hosts; it gets fewer mirrors, not a crash)
        while (len(self.mirrors) < N_MIRRORS and len(quiet) >= 2
               and len(free) - 2 * (len(self.mirrors) + 1) >= 2):
            self.mirrors[quiet.pop()] = quiet.pop()
        for mirror, source in self.mirrors.items():
            # same scheme as the source: its pages are copied with the host name swapped
            if source in layout.https_hosts:
                layout.https_hosts.add(mirror)
            else:
                layout.https_hosts.discard(mirror)
            layout.paths[mirror] = list(layout.paths[source])
            layout.page_of[mirror] = dict(layout.page_of[source])
        homes = [h for h in free if h not in self.mirrors and h not in self.mirrors.values()]
        if not homes:
            raise ValueError(f"duplicates=True needs an allow-all host that is not a seed; "
                             f"this web of {len(layout.hosts)} hosts has none: use more hosts")
        n_families = max(12, len(layout.hosts) // 4)
        self._pages: dict[tuple[str, str], _Page] = {}
        self._families: list[list[_Page]] = []
        for k in range(n_families):
            self._families.append(self._family(k, homes, rng_for(seed, "dupfamily", k)))
        for fam in self._families:
            base = fam[0]
            layout.extra_links.setdefault((base.host, 0), []).append((base.host, base.path))
            for p in fam:
                self._pages[(p.host, p.path)] = p

    # -- generation -------------------------------------------------------------------------
    def _family(self, k: int, homes: list[str], rng: random.Random) -> list[_Page]:
        host = homes[rng.randrange(len(homes))]
        other = homes[rng.randrange(len(homes))]
        while other == host and len(homes) > 1:
            other = homes[rng.randrange(len(homes))]
        words = tuple(self.vocab.passage(rng, ARTICLE_WORDS * 7).split(" ")[:ARTICLE_WORDS])
        y, m, day = rng.randint(2001, 2024), rng.randint(1, 12), rng.randint(1, 27)
        date, later = f"{y}-{m:02d}-{day:02d}", f"{y}-{m:02d}-{day + 1:02d}"
        d = f"/dup/f{k}/"
        base = _Page(host, d + "base.html", k, "base", host, words, date)
        pages = [base,
                 replace(base, path=d + "exact.html", label="exact"),
                 replace(base, path=d + "date.html", label="date", date=later),
                 replace(base, host=other, path=d + "frame.html", label="frame",
                         frame_host=other)]
        base_set = self._shingles_of(words)
        for level in LEVELS:
            pages.append(replace(base, path=d + f"{_label(level)}.html", label=_label(level),
                                 words=self._edit(words, base_set, level, rng)))
        return pages

    def _edit(self, words: tuple[str, ...], base_set: object, target: float,
              rng: random.Random) -> tuple[str, ...]:
        """Replace words at random positions; binary search the count for the target Jaccard."""
        from dedup.shingles import jaccard

        order = list(range(len(words)))
        rng.shuffle(order)
        subs = [rng.choice(self.vocab.words) + "x" for _ in order]  # never an original word

        def edited(m: int) -> tuple[str, ...]:
            out = list(words)
            for i in range(m):
                out[order[i]] = subs[i]
            return tuple(out)

        # Levels >= 0.9 land just above their target, lower ones just below, so "J >= 0.95"
        # and "J <= 0.8" (the judging buckets) hold exactly the variants labelled so.
        above = target >= 0.9
        lo, hi = 0, len(words)
        while lo < hi:  # smallest m with J(m) < target (above) or <= target (below)
            mid = (lo + hi) // 2
            j = jaccard(base_set, self._shingles_of(edited(mid)))  # type: ignore[arg-type]
            if j < target or (not above and j <= target):
                hi = mid
            else:
                lo = mid + 1
        return edited(max(0, lo - 1) if above else lo)

    def _shingles_of(self, words: tuple[str, ...]) -> object:
        from dedup.shingles import shingle_hashes
        from dedup.text import normalize_text

        return shingle_hashes(normalize_text(" ".join(words)))

    def _shingles(self, page: _Page) -> object:
        from dedup.shingles import shingle_hashes
        from dedup.text import tokens

        return shingle_hashes(tokens(self.html(page)))

    # -- serving ------------------------------------------------------------------------------
    def origin(self, host: str) -> str:
        return self.layout.origin(host, self.port, self.https_port)

    def family_page(self, host: str, path: str) -> _Page | None:
        return self._pages.get((host, path))

    def _nav(self, page: _Page) -> list[Link]:
        fam = self._families[page.family]
        out = [Link("a", "/", self.origin(page.host) + "/", "nav", "home")]
        out += [Link("a", self.origin(p.host) + p.path, self.origin(p.host) + p.path, "nav",
                     p.label) for p in fam if p is not page]
        return out

    def spec(self, page: _Page) -> PageSpec:
        url = self.origin(page.host) + page.path
        return PageSpec(host=page.host, page_id=-1, path=page.path, query="", url=url,
                        title=f"Story {page.family}", base_href=None, meta_robots=None,
                        header_nofollow=False, slow=False, size_target=0,
                        links=tuple(self._nav(page)))

    def html(self, page: _Page) -> bytes:
        frng = rng_for(self.layout.config.seed, "dupframe", page.frame_host)
        slogan = self.vocab.phrase(frng, 12)
        blurb = self.vocab.phrase(frng, 40)
        nav = "".join(f'<li><a href="{escape(lk.href)}">{escape(lk.text)}</a></li>\n'
                      for lk in self._nav(page))
        paras = [" ".join(page.words[i : i + 90]) for i in range(0, len(page.words), 90)]
        views = sum(map(ord, page.date)) * 7
        body = "".join(f"<p>{escape(p)}</p>\n" for p in paras)
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>Story {page.family} - {escape(page.frame_host)}</title>\n</head>\n<body>\n"
            f"<header><h1>{escape(page.frame_host)}</h1><p>{slogan}</p></header>\n"
            f"<nav><ul>\n{nav}</ul></nav>\n<main>\n<h2>Story {page.family}</h2>\n"
            f"<p>Updated {page.date}, {views} views</p>\n{body}</main>\n"
            f"<aside><p>{blurb}</p></aside>\n"
            f"<footer><p>&copy; {escape(page.frame_host)} {slogan}</p></footer>\n"
            "</body>\n</html>\n"
        ).encode()

    # mirrors
    def mirror_source(self, host: str) -> str | None:
        return self.mirrors.get(host)

    def mirror_spec(self, spec: PageSpec, mirror: str) -> PageSpec:
        src = spec.host

        def swap(s: str | None) -> str | None:
            return s.replace(src, mirror) if s is not None else None

        links = tuple(replace(lk, href=swap(lk.href) or "", target=swap(lk.target))
                      for lk in spec.links)
        return replace(spec, host=mirror, url=swap(spec.url) or "",
                       base_href=swap(spec.base_href), links=links)

    @staticmethod
    def mirror_body(body: bytes, source: str, mirror: str) -> bytes:
        return body.replace(source.encode(), mirror.encode())

    # -- truth ----------------------------------------------------------------------------------
    @cached_property
    def pairs(self) -> list[DuplicatePair]:
        from dedup.shingles import jaccard

        out = []
        for fam in self._families:
            base = fam[0]
            a = self._shingles(base)
            for p in fam[1:]:
                j = jaccard(a, self._shingles(p))  # type: ignore[arg-type]
                out.append(DuplicatePair(self.origin(base.host) + base.path,
                                         self.origin(p.host) + p.path, p.label, j))
        return out
