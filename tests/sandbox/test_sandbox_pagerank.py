"""PageRank ground truth of the sandbox web (sandbox/pagerank.py): the power iteration on graphs
checkable by hand, the graph of the web a correct crawler sees, and the CLI that writes it."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

from sandbox import SandboxConfig, SandboxSite, SpecialKind
from sandbox.pagerank import DAMPING, pagerank, top_urls, web_graph
from tests.webs import SandboxWebs

CONFIG = SandboxConfig(seed=3, hosts=30, pages_per_host=30, ips=8, robots_slow_s=0.3,
                       slow_page_s=0.3, hang_s=4.0, crawl_delay_s=0.25)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site() -> SandboxSite:
    return SandboxSite(CONFIG, 4242)


def dense_pagerank(graph: dict[str, list[str]], d: float = DAMPING) -> dict[str, float]:
    """The same definition solved exactly: r = (1-d)/N + d (M r + D(r)/N), sum r = 1."""
    nodes = list(graph)
    n = len(nodes)
    idx = {u: i for i, u in enumerate(nodes)}
    m = np.zeros((n, n))
    for u, outs in graph.items():
        targets = {idx[t] for t in outs if t in idx} - {idx[u]}
        for t in targets:
            m[t, idx[u]] = 1.0 / len(targets)
        if not targets:
            m[:, idx[u]] = 1.0 / n  # dangling: spread uniformly
    r = np.linalg.solve(np.eye(n) - d * m, np.full(n, (1 - d) / n))
    return {u: float(r[i] / r.sum()) for i, u in enumerate(nodes)}


# -- power iteration ---------------------------------------------------------------------------
def test_page_nobody_links_to_gets_the_teleport_share() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "x": ["a"]}
    res = pagerank(graph)
    assert res.scores["x"] == pytest.approx((1 - DAMPING) / 4, abs=1e-12)
    assert sum(res.scores.values()) == pytest.approx(1.0, abs=1e-12)
    # a = (1-d)/N + d (c + x), b = (1-d)/N + d a, c = (1-d)/N + d b
    s = res.scores
    assert s["b"] == pytest.approx((1 - DAMPING) / 4 + DAMPING * s["a"], abs=1e-10)
    assert s["a"] == pytest.approx((1 - DAMPING) / 4 + DAMPING * (s["c"] + s["x"]), abs=1e-10)
    assert list(s) == ["a", "b", "c", "x"]  # best first
    assert res.residual < 1e-10 and res.dangling == 0  # a 3-cycle: ~150 iterations


def test_dangling_mass_is_spread_and_dead_links_dropped() -> None:
    graph = {"x": ["a", "nowhere"], "a": ["b", "a"], "b": [], "c": ["b", "b"]}
    res = pagerank(graph)
    exact = dense_pagerank({"x": ["a"], "a": ["b"], "b": [], "c": ["b"]})
    for u, score in exact.items():
        assert res.scores[u] == pytest.approx(score, abs=1e-9), u
    dangling_mass = res.scores["b"]
    for u in ("x", "c"):  # no in-links: teleport share plus the spread dangling rank
        assert res.scores[u] == pytest.approx((1 - DAMPING + DAMPING * dangling_mass) / 4,
                                              abs=1e-10)
    assert res.edges == 3 and res.dangling == 1


def test_random_graph_matches_the_exact_solution() -> None:
    rng = np.random.default_rng(5)
    graph = {f"n{i}": [f"n{j}" for j in rng.choice(60, size=rng.integers(0, 6))]
             for i in range(60)}
    res, exact = pagerank(graph), dense_pagerank(graph)
    assert max(abs(res.scores[u] - exact[u]) for u in graph) < 1e-9


def test_top_urls() -> None:
    scores = {"a": 0.4, "b": 0.3, "c": 0.3}
    assert top_urls(scores, 0.5) == ["a", "b"] and top_urls(scores, 1.0) == ["a", "b", "c"]
    assert top_urls(scores, 0.01) == ["a"]
    with pytest.raises(ValueError):
        top_urls(scores, 0.0)


# -- the sandbox web -------------------------------------------------------------------------
def test_site_pagerank_covers_what_a_crawler_fetches(site: SandboxSite) -> None:
    scores = site.pagerank()
    assert math.isclose(sum(scores.values()), 1.0, abs_tol=1e-9)
    expected = site.expected_fetches(site.seeds())
    assert set(scores) == {u for u, k in expected.items() if k in ("page", "resource", "flaky")}
    res = site.pagerank_result()
    assert res.residual < 1e-10 and res.iterations < 100
    assert list(scores.values()) == sorted(scores.values(), reverse=True)
    # home pages are linked from every page of their host: well above the median
    median = statistics.median(scores.values())
    homes = [u for u in scores if urlsplit(u).path == "/" and not urlsplit(u).query]
    assert len(homes) >= 20 and all(scores[u] > 2 * median for u in homes)
    # redirects are not nodes; their targets are
    for url in site.special_urls(SpecialKind.MOVED) + site.special_urls(SpecialKind.CHAIN):
        if url in expected:
            assert url not in scores
            target = site.redirect_target(url)
            while target is not None and target not in scores:
                target = site.redirect_target(target)
            assert target in scores
    # resources are dangling nodes, and nothing links to a page of the hanging host
    graph = web_graph(site)
    assert all(graph[u] == [] for u, k in expected.items() if k == "resource")
    assert not [u for u in scores if urlsplit(u).hostname == site.hang_host]
    top = site.top_urls(0.05)
    assert len(top) == math.ceil(0.05 * len(scores)) and top == list(scores)[: len(top)]


def test_deterministic_per_seed_different_across_seeds(site: SandboxSite) -> None:
    again = SandboxSite(CONFIG, 4242).pagerank()
    assert again == site.pagerank()
    other = SandboxSite(SandboxConfig(**{**CONFIG.to_dict(), "seed": 4}), 4242).pagerank()
    assert other != again and list(other)[:10] != list(again)[:10]


def test_with_traps_legit_pages_count_and_trap_spaces_do_not() -> None:
    on = SandboxSite(SandboxConfig(**{**CONFIG.to_dict(), "traps": True}), 4242)
    scores = on.pagerank()
    assert math.isclose(sum(scores.values()), 1.0, abs_tol=1e-9)
    legit = [u for u in on.page_urls() if urlsplit(u).hostname in on.trap_hosts().values()]
    assert len(legit) == 51 and all(u in scores for u in legit)
    assert all(on.trap_kind(u) is None for u in scores)
    assert on.pagerank_result().residual < 1e-10


# -- the CLI -------------------------------------------------------------------------------------
def test_cli_writes_pagerank_without_serving(tmp_path: Path) -> None:
    cfg = SandboxConfig(seed=3, hosts=12, pages_per_host=20, ips=4)
    out = tmp_path / "pr.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "sandbox", "--seed", "3", "--hosts", "12",
                    "--pages-per-host", "20", "--ips", "4", "--port", "4242", "--no-serve",
                    "--pagerank-out", str(out)], check=True, env=env, timeout=120)
    doc = json.loads(out.read_text())
    assert doc["port"] == 4242 and doc["config"] == cfg.to_dict() and doc["damping"] == DAMPING
    assert doc["scores"] == SandboxSite(cfg, 4242).pagerank()
    assert list(doc["scores"]) == list(SandboxSite(cfg, 4242).pagerank())  # best first
    bad = subprocess.run([sys.executable, "-m", "sandbox", "--no-serve"], env=env,
                         capture_output=True, timeout=60)
    assert bad.returncode == 2 and b"--no-serve needs" in bad.stderr


def test_served_web_writes_pagerank_for_its_port(tmp_path: Path, webs: SandboxWebs) -> None:
    cfg = SandboxConfig(seed=3, hosts=12, pages_per_host=20, ips=4, traps=True)
    out = tmp_path / "pr.json"
    with webs.running(cfg, pagerank_out=out, start_timeout_s=120) as web:
        assert web.site is not None
        doc = json.loads(out.read_text())
        assert doc["port"] == web.port and doc["scores"] == web.site.pagerank()
        assert all(f":{web.port}/" in u for u in list(doc["scores"])[:50])
        assert web.traps["domains"] == web.site.trap_domains()
