"""Offline bookkeeping over duplicate pairs: union-find clusters and mirror hosts."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from frontier.urls import host_of


class UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        parent = self.parent
        parent.setdefault(x, x)
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def clusters(self) -> list[list[str]]:
        """Groups of two or more members, largest first."""
        groups: dict[str, list[str]] = defaultdict(list)
        for x in self.parent:
            groups[self.find(x)].append(x)
        return sorted((sorted(g) for g in groups.values() if len(g) > 1),
                      key=lambda g: (-len(g), g[0]))


def clusters_of(pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
    uf = UnionFind()
    for a, b in pairs:
        uf.union(a, b)
    return uf.clusters()


@dataclass(frozen=True)
class Mirror:
    """Host ``host`` mirrors ``of_host``: ``duplicates`` of its ``pages`` duplicate pages of
    ``of_host``. Found online by the dedup index (``DedupService.mirrors``) and offline from
    a crawl's records (:func:`mirror_pairs`)."""

    host: str
    of_host: str
    duplicates: int
    pages: int

    @property
    def fraction(self) -> float:
        return self.duplicates / self.pages if self.pages else 0.0


def mirror_pairs(pages_per_host: Counter[str], pairs: Iterable[tuple[str, str]],
                 min_pages: int = 10, min_fraction: float = 0.8) -> list[Mirror]:
    """Host A mirrors host B when at least ``min_fraction`` of A's pages (and ``min_pages``)
    duplicate pages of B. ``pairs``: (duplicate url, canonical url), canonical URLs as the
    crawl's records hold them (hosts are their politeness keys, ``host[:port]``)."""
    counts: Counter[tuple[str, str]] = Counter()
    for dup, canon in pairs:
        a, b = host_of(dup), host_of(canon)
        if a != b:
            counts[(a, b)] += 1
    best: dict[str, tuple[str, int]] = {}
    for (a, b), c in counts.items():
        if c > best.get(a, ("", 0))[1]:
            best[a] = (b, c)
    out = [Mirror(a, b, c, pages_per_host[a]) for a, (b, c) in best.items()
           if c >= min_pages and c >= min_fraction * pages_per_host[a]]
    return sorted(out, key=lambda m: (-m.fraction, m.host))
