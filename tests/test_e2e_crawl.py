"""End to end: `trawl crawl` on the sandbox web with real Celery workers and a real Redis.

Everything is judged from the sandbox server's own request log.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frontier.redisserver import EmbeddedRedis
from sandbox import RobotsKind, SandboxConfig, SandboxWeb
from tests.checks import crawler_entries, fetch_counts, overlaps, short_gaps
from tests.webs import SandboxWebs
from workers.cli.main import main

pytestmark = pytest.mark.e2e

DELAY_S = 0.1


def crawl(web: SandboxWeb, redis_url: str, out: Path, *extra: str) -> dict:
    summary_path = out / "summary.json"
    argv = [
        "crawl", *web.seeds, "--redis", redis_url, "--workers", "2", "--concurrency", "6",
        "--allow", web.config.domain, "--output", str(out), "--summary-json", str(summary_path),
        "--no-progress", "--namespace", out.name,
        "--set", "allow_private_ips=true",
        "--set", f"static_hosts={json.dumps(web.resolver_map)}",
        "--set", "connect_timeout_s=1.0", "--set", "read_timeout_s=1.5",
        "--set", "total_timeout_s=2.0", "--set", "retry_backoff_s=0.2",
        "--set", "max_retries=2", *extra,
    ]
    assert main(argv) == 0
    return json.loads(summary_path.read_text())


@pytest.fixture(scope="module", params=["bfs", "indegree", "opic", "random"])
def big_crawl(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
              redis_server: EmbeddedRedis, module_webs: SandboxWebs):
    """One crawl per ordering: priority must never break politeness or lose a URL."""
    tmp = tmp_path_factory.mktemp(f"e2e-{request.param}")
    cfg = SandboxConfig(seed=7, hosts=60, pages_per_host=40, ips=20, crawl_delay_s=0.3,
                        robots_slow_s=0.4, slow_page_s=0.4, hang_s=5.0)
    with module_webs.running(cfg) as web:
        out = tmp / f"crawl1-{request.param}"
        summary = crawl(web, redis_server.url, out, "--delay", str(DELAY_S),
                        "--ip-concurrency", "1", "--ordering", request.param)
        entries = web.read_log()
        expected = web.site.expected_fetches(web.seeds)
        site = web.site
        port = web.port
    yield summary, crawler_entries(entries), expected, site, port, out


def test_every_reachable_allowed_url_fetched_exactly_once(big_crawl) -> None:
    summary, entries, expected, _site, port, _out = big_crawl
    counts = fetch_counts(entries, port)
    assert set(counts) == set(expected), (
        f"missing {sorted(set(expected) - set(counts))[:10]} "
        f"unexpected {sorted(set(counts) - set(expected))[:10]}")
    retried = {"error": 3, "flaky": 2}  # max_retries=2: 500 forever -> 3 tries; 503 once -> 2
    for url, n in counts.items():
        assert n == retried.get(expected[url], 1), (url, expected[url], n)
    pages = sum(1 for k in expected.values() if k == "page")
    assert pages >= 2000
    assert len({e.host for e in entries}) >= 50
    assert summary["pages_fetched"] >= 2000


def test_no_url_disallowed_by_robots_fetched(big_crawl) -> None:
    _summary, entries, _expected, site, port, _out = big_crawl
    for e in entries:
        if e.path in ("/robots.txt", "/robots-real.txt"):
            continue
        rules = site.robots_rules(e.host)
        assert rules.allowed(f"http://{e.host}:{port}{e.path}", "trawl"), e
    unavailable = site.robots_hosts(RobotsKind.SERVER_ERROR)
    assert unavailable
    assert not [e for e in entries if e.host in unavailable and e.path != "/robots.txt"]


def test_one_request_per_host_and_per_ip_at_a_time(big_crawl) -> None:
    _summary, entries, *_ = big_crawl
    assert overlaps(entries, "host") == []
    assert overlaps(entries, "ip") == []


def test_delay_and_crawl_delay_honoured(big_crawl) -> None:
    _summary, entries, _expected, site, _port, _out = big_crawl
    slow = {h: site.config.crawl_delay_s for h in site.robots_hosts(RobotsKind.CRAWL_DELAY)}
    assert slow
    assert short_gaps(entries, slow, DELAY_S) == []


def test_robots_fetched_once_per_host(big_crawl) -> None:
    _summary, entries, *_ = big_crawl
    robots = [e.host for e in entries if e.path == "/robots.txt"]
    assert len(robots) == len(set(robots))
    assert set(robots) == {e.host for e in entries}


def test_summary_counts_add_up_and_records_match(big_crawl) -> None:
    summary, _entries, expected, _site, _port, out = big_crawl
    assert summary["accounted"] == summary["urls_admitted"]
    assert summary["queued"] == 0 and summary["inflight"] == 0
    records = []
    for path in (out / "records").glob("*.jsonl"):
        records += [json.loads(line) for line in path.read_text().splitlines()]
    outcomes: dict[str, list[str]] = {}
    for rec in records:
        outcomes.setdefault(rec["url"], []).append(rec["outcome"])
    assert all(len(v) == 1 for v in outcomes.values())  # one final record per admitted URL
    assert len(records) == summary["urls_admitted"]
    fetched = {u for u, (o,) in outcomes.items() if o == "fetched"}
    assert len(fetched) == summary["pages_fetched"]
    failed = {u for u, (o,) in outcomes.items() if o == "failed"}
    assert failed == {u for u, k in expected.items() if k == "error"}
    assert summary["redirects"] > 0 and summary["robots_blocked"] > 0
    assert list((out / "warc").glob("*.warc.gz"))


def test_negative_control_zero_delay_breaks_the_gap_check(tmp_path: Path,
                                                          redis_server: EmbeddedRedis,
                                                          webs: SandboxWebs) -> None:
    """The gap check must be able to fail: with delay 0 the same check finds short gaps."""
    cfg = SandboxConfig(seed=11, hosts=12, pages_per_host=20, ips=12, crawl_delay_s=0.0,
                        robots_slow_s=0.1, slow_page_s=0.1, hang_s=3.0)
    with webs.running(cfg) as web:
        crawl(web, redis_server.url, tmp_path / "crawl0", "--delay", "0",
              "--set", "adaptive_delay_factor=0")
        entries = crawler_entries(web.read_log())
    assert short_gaps(entries, {}, DELAY_S)
    assert overlaps(entries, "host") == []  # one connection per host holds even at delay 0
