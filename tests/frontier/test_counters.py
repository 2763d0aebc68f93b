"""The counter registry (frontier/counters.py): every counter name written anywhere, in the
Python and the Lua source and in the stats hashes after a real crawl, is registered; none is
built outside the registry; the readers (summary, status) agree with what they did before.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from frontier import counters
from frontier.config import CrawlConfig
from frontier.counters import (
    COUNTERS,
    FAMILIES,
    FINAL,
    FIXED,
    LINKS_REFUSED,
    ROBOTS_POLICIES,
    Outcome,
    Shown,
    lookup,
    shown_in,
    unregistered,
)
from frontier.frontier import Frontier
from frontier.redisserver import EmbeddedRedis
from frontier.scope import REASONS
from sandbox import SandboxConfig, SandboxWeb
from tests.inprocess import crawl_until_done
from workers.cli.crawl import init_crawl, summarize
from workers.pipeline.robots import KINDS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("workers", "frontier", "dedup")


# -- the static scan --------------------------------------------------------------------------
def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _built(node: ast.AST) -> bool:
    """A name made from pieces in place: an f-string, ``+`` or ``%`` of strings, ``.format``."""
    return (isinstance(node, ast.JoinedStr | ast.BinOp)
            or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "format"))


def _name_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """The expressions used as counter names: ``counters[NAME]``, ``Counter({NAME: n})``,
    ``batch.count(NAME, n)``, ``hincrby(<stats key>, NAME, n)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            target = node.value
            owner = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if owner == "counters":
                yield node.slice
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            receiver = getattr(func, "value", None)
            if fname == "Counter" and node.args and isinstance(node.args[0], ast.Dict):
                yield from (k for k in node.args[0].keys if k is not None)
            elif fname == "count" and getattr(receiver, "id", "") == "batch" and node.args:
                yield node.args[0]
            elif (fname == "hincrby" and len(node.args) >= 2
                  and "stats(" in ast.unparse(node.args[0])):
                yield node.args[1]


def scan_python(source: str) -> tuple[set[str], list[str]]:
    """Counter names written literally in ``source``, and the names it builds itself."""
    names, built = set(), []
    todo = list(_name_nodes(ast.parse(source)))
    for node in todo:  # grows while it runs: both names of counters["a" if x else "b"]
        if isinstance(node, ast.IfExp):
            todo += [node.body, node.orelse]
            continue
        if _literal(node) is not None:
            names.add(_literal(node))
        elif _built(node):
            built.append(ast.unparse(node))
    return names, built


_LUA_WRITE = re.compile(r"redis\.call\('(?:HINCRBY|HSET)',\s*st,\s*([^)]*)\)")


def scan_lua(source: str) -> set[str]:
    """Fields a script writes in the stats hash (``st``) by name; a variable field (the
    completion's ``outcome``) is one of :class:`Outcome`, checked on its own."""
    names = set()
    for m in _LUA_WRITE.finditer(source):
        args = [a.strip() for a in m.group(1).split(",")]
        names.update(a.strip("'") for a in args[0::2] if a.startswith("'"))
    return names


def _sources(pattern: str) -> Iterator[Path]:
    for top in SOURCES:
        yield from sorted((ROOT / top).rglob(pattern))


def test_every_counter_written_in_the_source_is_registered_and_none_is_built() -> None:
    written: dict[str, str] = {}
    built: list[str] = []
    for path in _sources("*.py"):
        names, made = scan_python(path.read_text())
        written.update((n, str(path.relative_to(ROOT))) for n in names)
        built += [f"{path.relative_to(ROOT)}: {m}" for m in made]
    for path in _sources("*.lua"):
        written.update((n, str(path.relative_to(ROOT))) for n in scan_lua(path.read_text()))
    # The scan finds the writers it must (so an empty scan cannot pass).
    assert {"stale_messages", "seen_memo_hits", "parse_errors", "soft404_clean_hosts", "fenced",
            "admitted",
            "requeued", "bloom_layer", "seq"} <= set(written), sorted(written)
    assert not built, built
    assert unregistered(written) == [], {n: written[n] for n in unregistered(written)}


def test_the_scan_catches_an_unregistered_or_built_name() -> None:
    """Negative control: the scanners flag what the test above must reject."""
    py = ('def f(result, batch, kind, pipe, keys):\n'
          '    result.counters["pages_fetchd"] += 1\n'
          '    result.counters[f"err:{kind}"] += 1\n'
          '    result.counters["links_" + kind] += 1\n'
          '    batch.count("stale_mesages", 1)\n'
          '    pipe.hincrby(keys.stats(0), "fenced_leases", 1)\n')
    names, built = scan_python(py)
    assert unregistered(names) == ["fenced_leases", "pages_fetchd", "stale_mesages"]
    assert built == ["f'err:{kind}'", "'links_' + kind"]
    lua = "redis.call('HINCRBY', st, 'admited', 1)\nredis.call('HSET', st, 'seq', 1, 'x', 2)\n"
    assert unregistered(scan_lua(lua)) == ["admited", "x"]


# -- the registry's own invariants ----------------------------------------------------------
def test_registry_invariants() -> None:
    names = [c.name for c in FIXED]
    assert len(names) == len(set(names))
    assert all(c.meaning and c.written_by for c in FIXED)
    # Every outcome is a counter (complete.lua bumps it by the outcome's value).
    assert all(isinstance(lookup(o.value), counters.CounterSpec) for o in Outcome)
    assert [o for o in Outcome if o.final] == [o for o in Outcome if o in FINAL]
    assert set(COUNTERS) <= set(names)
    prefixes = [f.prefix for f in FAMILIES]
    assert not [(a, b) for a in prefixes for b in prefixes if a != b and b.startswith(a)]
    # Members the code produces land in their family, not on a fixed counter of the prefix.
    assert all(lookup(LINKS_REFUSED.name(r)) is LINKS_REFUSED for r in REASONS)
    assert all(lookup(ROBOTS_POLICIES.name(k)) is ROBOTS_POLICIES for k in KINDS)
    # Negative control: near misses are not registered.
    assert unregistered(["fetchd", "err_timeout", "dup-exact", "robots", "err:", ""]) == [
        "", "dup-exact", "err:", "err_timeout", "fetchd", "robots"]


def _old_links(stats: dict[str, int]) -> dict[str, int]:
    """The summary's ``links`` as workers/cli/crawl.py chose them before the registry."""
    return {k: v for k, v in sorted(stats.items())
            if k.startswith("links_") or k.startswith("robots:")
            or k in ("parse_errors", "deferred", "stale", "stale_messages",
                     "skipped_content_type", "fenced", "over_host_cap",
                     "over_domain_budget", "trap_query_variants",
                     "soft404_pages", "soft404_hosts", "reprioritized", "unsent")}


def test_summary_sections_are_what_they_were() -> None:
    stats = {c.name: i + 1 for i, c in enumerate(FIXED) if c.shown is not Shown.INTERNAL}
    for i, family in enumerate(FAMILIES):
        stats[family.name("timeout" if family.shown is Shown.ERRORS else "exact")] = 100 + i
    stats.update({LINKS_REFUSED.name(r): 200 + i for i, r in enumerate(REASONS)})
    assert shown_in(stats, Shown.LINKS) == _old_links(stats)
    summary = summarize(stats, 2.0, 1, 4)
    assert summary["errors"] == {"timeout": stats["err:timeout"]}
    assert summary["accounted"] == sum(stats[o.value] for o in FINAL)
    assert summary["pages_fetched"] == stats["fetched"]
    assert summary["requeued_leases"] == stats["requeued"]


# -- a real crawl ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory, redis_server: EmbeddedRedis
            ) -> Iterator[Frontier]:
    """A small crawl in-process (robots, redirects, errors, soft 404s), run by
    acquire → pipeline → apply_results until nothing is queued or leased."""
    tmp = tmp_path_factory.mktemp("counters")
    web_cfg = SandboxConfig(seed=5, hosts=12, pages_per_host=10, ips=4, crawl_delay_s=0.0,
                            robots_slow_s=0.2, slow_page_s=0.2, hang_s=2.0)
    with SandboxWeb(web_cfg, tmp / "requests.log") as web:
        cfg = CrawlConfig(namespace="counters", partitions=4, host_delay_s=0.0,
                          adaptive_delay_factor=0.0, allow_private_ips=True, max_retries=1,
                          retry_backoff_s=0.01, static_hosts=web.resolver_map,
                          connect_timeout_s=1.0, read_timeout_s=1.0, total_timeout_s=1.5,
                          output_dir=str(tmp / "out")).validate()
        frontier = init_crawl(redis.Redis.from_url(redis_server.url), cfg, web.seeds)
        crawl_until_done(redis_server.url, frontier, timeout_s=120, skip_delays=True)
        yield frontier


def _fields(frontier: Frontier) -> list[set[str]]:
    pipe = frontier.r.pipeline()
    for p in range(frontier.partitions):
        pipe.hkeys(frontier.keys.stats(p))
    return [{k.decode() for k in keys} for keys in pipe.execute()]


def test_every_field_of_the_stats_hashes_after_a_crawl_is_registered(crawled: Frontier
                                                                     ) -> None:
    st = crawled.stats()
    assert st["fetched"] > 50 and st["queued"] == 0 and st["inflight"] == 0, st
    assert counters.accounted(st) == st["admitted"]
    fields = _fields(crawled)
    everything = set().union(*fields)
    # The crawl wrote counters of every kind of writer the scan above looks at.
    assert {"robots_fetches", "redirects_seen", "links_nofollow"} <= everything, everything
    assert any(n.startswith(ROBOTS_POLICIES.prefix) for n in everything), everything
    assert unregistered(everything) == []
    # The workers' counters are spread over the partitions, not all in partition 0.
    robots_parts = [p for p, f in enumerate(fields) if any(n.startswith("robots:") for n in f)]
    assert len(robots_parts) >= 2, fields


def test_the_hash_scan_catches_an_unregistered_field(crawled: Frontier) -> None:
    """Negative control: a field written outside the registry is found by the same scan."""
    key = crawled.keys.stats(3)
    crawled.r.hincrby(key, "pages_lost", 1)
    try:
        assert unregistered(set().union(*_fields(crawled))) == ["pages_lost"]
    finally:
        crawled.r.hdel(key, "pages_lost")
