"""dedup.clusters: duplicate pairs grouped into clusters (union-find) and whole mirror hosts,
on hand-made pairs and on the sandbox web's labelled duplicates (its ground truth)."""

from __future__ import annotations

from collections import Counter

import pytest

from dedup.clusters import Mirror, UnionFind, clusters_of, mirror_pairs
from frontier.urls import host_of
from sandbox import SandboxConfig, SandboxSite

CONFIG = SandboxConfig(seed=5, hosts=60, pages_per_host=20, duplicates=True)


def test_pairs_chain_into_one_cluster_largest_first() -> None:
    pairs = [("b", "a"), ("c", "b"), ("x", "y"), ("d", "c"), ("y", "z"), ("q", "q")]
    assert clusters_of(pairs) == [["a", "b", "c", "d"], ["x", "y", "z"]]
    assert clusters_of([]) == []
    assert clusters_of([("q", "q")]) == []  # a page is not a cluster with itself


def test_ties_in_size_are_ordered_by_first_member() -> None:
    assert clusters_of([("n", "m"), ("b", "a")]) == [["a", "b"], ["m", "n"]]


def test_union_find_roots_at_the_smallest_member_and_compresses_paths() -> None:
    uf = UnionFind()
    for a, b in [("e", "d"), ("d", "c"), ("c", "b"), ("b", "a")]:
        uf.union(a, b)
    assert uf.find("e") == "a"
    assert uf.parent["e"] == "a"  # the path from e was compressed onto the root
    assert uf.find("z") == "z" and uf.clusters() == [["a", "b", "c", "d", "e"]]


def test_host_of_keeps_the_port_and_ignores_case() -> None:
    assert host_of("http://Example.ORG:8080/a?b") == "example.org:8080"
    assert host_of("https://example.org/") == "example.org"


def _pairs(dup_host: str, canon_host: str, n: int) -> list[tuple[str, str]]:
    return [(f"http://{dup_host}/p{i}", f"http://{canon_host}/p{i}") for i in range(n)]


def test_a_host_whose_pages_mostly_copy_another_is_its_mirror() -> None:
    pages = Counter({"m.test": 20, "src.test": 20, "half.test": 20, "few.test": 5})
    pairs = (_pairs("m.test", "src.test", 18) + _pairs("half.test", "src.test", 10)
             + _pairs("few.test", "src.test", 5) + _pairs("src.test", "src.test", 3))
    found = mirror_pairs(pages, pairs)
    assert found == [Mirror("m.test", "src.test", 18, 20)]
    assert found[0].fraction == 0.9
    assert Mirror("h", "g", 0, 0).fraction == 0.0


def test_a_mirror_is_named_after_the_host_it_copies_most() -> None:
    pages = Counter({"m.test": 20})
    pairs = _pairs("m.test", "a.test", 6) + [(f"http://m.test/q{i}", f"http://b.test/q{i}")
                                             for i in range(14)]
    assert mirror_pairs(pages, pairs, min_fraction=0.5) == [Mirror("m.test", "b.test", 14, 20)]


def test_negative_control_without_thresholds_partial_copies_count_as_mirrors() -> None:
    """The thresholds are what keep partial copiers out: with them off, they are reported."""
    pages = Counter({"m.test": 20, "half.test": 20, "few.test": 5})
    pairs = _pairs("m.test", "src.test", 18) + _pairs("half.test", "src.test", 10) \
        + _pairs("few.test", "src.test", 5)
    assert {m.host for m in mirror_pairs(pages, pairs)} == {"m.test"}
    loose = mirror_pairs(pages, pairs, min_pages=0, min_fraction=0.0)
    assert {m.host for m in loose} == {"m.test", "half.test", "few.test"}


@pytest.fixture(scope="module")
def site() -> SandboxSite:
    return SandboxSite(CONFIG, 8080)


def test_sandbox_mirror_hosts_found_from_their_labelled_pairs(site: SandboxSite) -> None:
    truth = site.duplicate_pairs()
    pages = Counter(host_of(u) for u in site.page_urls())
    # (duplicate, canonical): the variant or mirror page, then the page it copies
    pairs = [(p.url_b, p.url_a) for p in truth]
    found = {(m.host, m.of_host) for m in mirror_pairs(pages, pairs)}
    assert found == {(f"{m}:8080", f"{s}:8080") for m, s in site.mirror_hosts().items()}
    # every family and every mirrored page is one cluster, as many as the labelled groups
    groups = {p.url_a for p in truth}
    clusters = clusters_of(pairs)
    assert len(clusters) == len(groups)
    assert sorted(u for c in clusters for u in c) == sorted(groups | {p.url_b for p in truth})
