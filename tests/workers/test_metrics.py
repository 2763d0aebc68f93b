"""Prometheus metrics (issue 20): a real crawl of a sandbox web by two real ``trawl worker``
processes and a ``trawl scheduler``, each serving /metrics on its own port. The endpoints are
scraped live, during the crawl and after it, parsed with prometheus_client's text parser, and
checked against the crawl's own counters in Redis (the summary), its JSONL records and each
other.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from frontier.counters import DUPLICATES, ERRORS, ROBOTS_POLICIES
from frontier.redisclient import client_from_url
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig
from tests.drillkit import drill_config
from tests.promtext import Families, of_registry, parse, value
from tests.webs import SandboxWebs
from workers.cli.crawl import CrawlWatcher, WorkerPool, init_crawl, summarize
from workers.cli.main import build_parser

pytestmark = pytest.mark.e2e

WEB = SandboxConfig(seed=3, hosts=16, pages_per_host=10, ips=16, crawl_delay_s=0.05,
                    robots_slow_s=0.1, slow_page_s=0.1, hang_s=3.0, duplicates=True)
WORKERS = 2
CONCURRENCY = 16
PARTITIONS = 8
#: Label names that would put a host or a URL into the series (one series per host: no).
FORBIDDEN_LABELS = {"host", "url", "ip", "domain", "path"}



@dataclass
class Scrapes:
    """What the fixture saw: the endpoints during and after the crawl, and the crawl's truth."""

    during: list[list[Families]]
    #: the workers' endpoints, then the scheduler's
    after: list[Families]
    stats: dict[str, int]
    summary: dict
    seeds_admitted: int
    partition_admitted: list[int]
    bloom_capacity: int
    records: list[dict]


def free_base_port(count: int) -> int:
    """A port P with P .. P + count - 1 free now (the workers bind them a second later)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + count >= 65536:
            continue
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def scrape(port: int) -> Families:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain")
        text = reply.read().decode()
    return parse(text)


def by_label(families: list[Families], sample: str, label: str) -> dict[str, int]:
    """``{label value: sum over the processes}`` of a labelled counter, zeros left out."""
    out: dict[str, int] = {}
    for fams in families:
        family = fams.get(re.sub(r"_total$", "", sample))
        for s in family.samples if family else []:
            if s.name == sample and s.value:
                out[s.labels[label]] = out.get(s.labels[label], 0) + int(s.value)
    return out


def total(families: list[Families], sample: str, **labels: str) -> float:
    return sum(value(f, sample, **labels) for f in families)


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory, redis_server: EmbeddedRedis,
          module_webs: SandboxWebs) -> Iterator[Scrapes]:
    tmp = tmp_path_factory.mktemp("metrics")
    web = module_webs.shared(WEB)
    client = client_from_url(redis_server.url)
    config = drill_config(web, "metrics1", tmp / "out", partitions=PARTITIONS, max_retries=2,
                          host_delay_s=0.05, adaptive_delay_factor=0.0,
                          max_pages_per_host=40)
    frontier = init_crawl(client, config, list(web.seeds))
    seeds_admitted = frontier.stats()["admitted"]
    base = free_base_port(WORKERS + 1)
    ports = [base + i for i in range(WORKERS + 1)]
    pool = WorkerPool(redis_server.url, "metrics1", WORKERS, CONCURRENCY, tmp / "logs",
                      metrics=(base, "127.0.0.1")).start()
    with open(tmp / "logs" / "scheduler.log", "wb") as log:
        scheduler = subprocess.Popen(
            [sys.executable, "-m", "workers.cli", "scheduler", "--namespace", "metrics1",
             "--forever", "--metrics-port", str(ports[-1])], stdout=log,
            stderr=subprocess.STDOUT, env={**os.environ, "TRAWL_REDIS": redis_server.url})
    try:
        during: list[list[Families]] = []
        watcher = CrawlWatcher(frontier)
        started = time.monotonic()
        while not watcher.done(settle_s=1.0):
            assert time.monotonic() - started < 90, f"crawl did not finish: {watcher.last}"
            try:
                during.append([scrape(p) for p in ports])
            except OSError:  # a worker still starting
                assert time.monotonic() - started < 20, "metrics endpoints never answered"
            time.sleep(0.3)
        elapsed = time.monotonic() - started
        after = [scrape(p) for p in ports]
        stats = watcher.poll()
        pool.stop()  # the workers flush their JSONL records as they stop
        scheduler.terminate()
        assert scheduler.wait(15) == 0
        records = [json.loads(line) for path in (tmp / "out" / "records").glob("*.jsonl")
                   for line in path.read_text().splitlines()]
        print(json.dumps({"metrics_crawl_s": round(elapsed, 1), "fetched": stats["fetched"],
                          "scrapes": len(during)}))
        yield Scrapes(during, after, stats, summarize(stats, elapsed, WORKERS, PARTITIONS),
                      seeds_admitted, [p.get("admitted", 0) for p in frontier.partition_stats()],
                      frontier.bloom_layers[0].capacity, records)
    finally:
        pool.stop()
        if scheduler.poll() is None:
            scheduler.kill()
            scheduler.wait()
        client.close()


def test_pages_and_outcomes_summed_over_processes_match_the_summary(crawl: Scrapes) -> None:
    s, after = crawl.summary, crawl.after
    assert s["pages_fetched"] > 100 and s["accounted"] == s["urls_admitted"]
    for outcome, line in (("fetched", "pages_fetched"), ("failed", "pages_failed"),
                          ("truncated", "pages_truncated"), ("robots_blocked", "robots_blocked"),
                          ("retries", "retries"), ("robots_fetches", "robots_fetches")):
        assert total(after, "trawl_leases_total", outcome=outcome) == s[line], outcome
    assert s["pages_failed"] and s["robots_blocked"] and s["retries"]  # the checks bite
    # Each process did a share, none all of it: the crawl's figure is the sum, not either one.
    shares = [value(f, "trawl_leases_total", outcome="fetched") for f in after[:WORKERS]]
    assert all(0 < n < s["pages_fetched"] for n in shares), shares


def test_errors_robots_and_duplicates_by_kind_match_the_counters(crawl: Scrapes) -> None:
    after, stats = crawl.after, crawl.stats
    assert by_label(after, "trawl_fetch_errors_total", "kind") == ERRORS.members(stats) != {}
    assert (by_label(after, "trawl_robots_policies_total", "policy")
            == ROBOTS_POLICIES.members(stats) != {})
    assert by_label(after, "trawl_duplicate_pages_total", "kind") == DUPLICATES.members(stats)
    assert DUPLICATES.total(stats) > 0
    admitted = total(after, "trawl_links_admitted_total")
    assert admitted == crawl.summary["urls_admitted"] - crawl.seeds_admitted > 0


def test_fetch_histogram_counts_every_fetch_and_bytes_match_the_records(crawl: Scrapes) -> None:
    after, st = crawl.after, crawl.stats
    pages = st["fetched"] + st["truncated"] + st["failed"] + st["retries"]
    assert total(after, "trawl_fetch_duration_seconds_count", kind="page") == pages
    assert (total(after, "trawl_fetch_duration_seconds_count", kind="robots")
            == st["robots_fetches"])
    assert (total(after, "trawl_fetch_duration_seconds_count")
            == pages + st["robots_fetches"] + st.get("soft404_probes", 0))
    # The +Inf bucket holds every observation; the sum is wall time, positive.
    assert (total(after, "trawl_fetch_duration_seconds_bucket", le="+Inf")
            == total(after, "trawl_fetch_duration_seconds_count"))
    assert total(after, "trawl_fetch_duration_seconds_sum") > 0
    body = sum(r.get("bytes", 0) for r in crawl.records if r["outcome"] == "fetched")
    assert total(after, "trawl_response_bytes_total", outcome="fetched") == body > 0
    # Every lease a scheduler sent was ended by a worker (deferred/unsent: by a scheduler).
    by_worker = sum(n for o, n in by_label(after, "trawl_leases_total", "outcome").items()
                    if o not in ("deferred", "unsent"))
    assert total(after, "trawl_scheduler_urls_dispatched_total") == by_worker
    assert (total(after, "trawl_politeness_host_delay_seconds_count")
            == st["fetched"] + st["truncated"])


def test_partition_gauges_cover_the_crawl_once(crawl: Scrapes) -> None:
    owned = [{s.labels["partition"] for s in f["trawl_frontier_queued_urls"].samples}
             for f in crawl.after]
    assert all(owned)  # every member (workers and scheduler) owns some partitions
    assert sum(map(len, owned)) == PARTITIONS  # none twice
    assert set.union(*owned) == {str(p) for p in range(PARTITIONS)}
    assert total(crawl.after, "trawl_frontier_queued_urls") == 0
    assert total(crawl.after, "trawl_frontier_inflight_leases") == 0
    assert all(value(f, "trawl_frontier_read_ok") == 1 for f in crawl.after)
    # Seen mid-crawl: URLs queued and leases out, summed over the endpoints of one scrape.
    assert max(total(pair, "trawl_frontier_queued_urls") for pair in crawl.during) > 0
    assert max(total(pair, "trawl_frontier_inflight_leases") for pair in crawl.during) > 0
    # One layer, every admitted URL in it once: fill * capacity = the partition's admitted.
    for fams in crawl.after:
        for s in fams["trawl_bloom_fill_ratio"].samples:
            admitted = crawl.partition_admitted[int(s.labels["partition"])]
            assert s.value * crawl.bloom_capacity == pytest.approx(admitted)
    assert sum(crawl.partition_admitted) == crawl.summary["urls_admitted"]


def test_live_scrapes_during_the_crawl_only_grow(crawl: Scrapes) -> None:
    assert len(crawl.during) >= 3
    for i in range(WORKERS):
        seen = [value(pair[i], "trawl_leases_total") for pair in crawl.during]
        seen.append(value(crawl.after[i], "trawl_leases_total"))
        assert seen == sorted(seen) and seen[0] < seen[-1]
    for i in range(WORKERS + 1):
        sent = [value(pair[i], "trawl_scheduler_urls_dispatched_total") for pair in crawl.during]
        assert sent == sorted(sent)
    assert value(crawl.after[-1], "trawl_scheduler_urls_dispatched_total") > 0
    assert all(value(f, "trawl_engine_capacity") == CONCURRENCY for f in crawl.after[:WORKERS])
    assert "trawl_engine_capacity" not in crawl.after[-1]  # a scheduler fetches nothing
    info = [next(iter(f["trawl_process_info"].samples)).labels for f in crawl.after]
    assert [i["role"] for i in info] == ["worker"] * WORKERS + ["scheduler"]
    assert len({i["name"] for i in info}) == WORKERS + 1


def naming_problems(families: Families) -> list[str]:
    """Names, units, types and labels the Prometheus conventions (and issue 20) refuse."""
    bad = []
    for name, family in families.items():
        if not name.startswith(("trawl_", "process_")):
            bad.append(f"{name}: not trawl_*")
        for s in family.samples:
            if family.type == "counter" and not s.name.endswith("_total"):
                bad.append(f"{s.name}: a counter's sample without _total")
            if family.type != "counter" and s.name.endswith("_total"):
                bad.append(f"{s.name}: _total on a {family.type}")
            if set(s.labels) & FORBIDDEN_LABELS:
                bad.append(f"{s.name}: labels {sorted(s.labels)}")
            if any("://" in v or ".test" in v or v.startswith("127.") for v in s.labels.values()):
                bad.append(f"{s.name}: a label value names a host or URL: {s.labels}")
        timed = re.search(r"(duration|_seconds|delay|_wait($|_)|_time($|_))", name)
        if timed and not name.endswith("_seconds"):
            bad.append(f"{name}: a time not in seconds")
        if "bytes" in name and not name.endswith("_bytes"):
            bad.append(f"{name}: a size not in bytes")
        if family.type == "histogram" and not name.endswith("_seconds"):
            bad.append(f"{name}: histogram without its unit")
    return bad


def test_names_units_types_and_labels(crawl: Scrapes) -> None:
    for fams in crawl.after:
        assert naming_problems(fams) == []
        assert fams["trawl_leases"].type == "counter"
        assert fams["trawl_fetch_duration_seconds"].type == "histogram"
        assert fams["trawl_frontier_queued_urls"].type == "gauge"


def test_negative_control_the_naming_check_flags_bad_series() -> None:
    text = ("# TYPE trawl_pages counter\ntrawl_pages_total{host=\"h001.sandbox.test\"} 3\n"
            "# TYPE trawl_fetch_time_ms gauge\ntrawl_fetch_time_ms 12\n"
            "# TYPE trawl_queue_total gauge\ntrawl_queue_total 1\n")
    fams = parse(text)
    problems = naming_problems(fams)
    assert any("labels" in p for p in problems) and any("names a host" in p for p in problems)
    assert any("_total on a gauge" in p for p in problems)


def test_flags_and_a_port_that_cannot_be_bound(tmp_path: Path) -> None:
    from frontier.config import ConfigError
    from workers.cli.metrics import serve_metrics

    args = build_parser().parse_args(["worker", "--redis", "redis://x", "--metrics-port",
                                      "9400", "--metrics-addr", "0.0.0.0"])
    assert (args.metrics_port, args.metrics_addr) == (9400, "0.0.0.0")
    assert build_parser().parse_args(["scheduler", "--redis", "redis://x"]).metrics_port == 0
    crawl_args = build_parser().parse_args(["crawl", "http://a.test/", "--metrics-port", "9500"])
    assert (crawl_args.metrics_port, crawl_args.metrics_addr) == (9500, "127.0.0.1")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        args.metrics_port, args.metrics_addr = held.getsockname()[1], "127.0.0.1"
        with pytest.raises(ConfigError, match="--metrics-port"):
            serve_metrics(args, "worker", "w", "ns")


ROOT = Path(__file__).resolve().parents[2]


def test_grafana_dashboard_asks_only_for_metrics_the_endpoints_serve(crawl: Scrapes) -> None:
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "trawl-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    asked = {m for e in exprs for m in re.findall(r"\b(?:trawl|process)_[a-z_]+\b", e)}
    served = {s.name for fams in crawl.after for f in fams.values() for s in f.samples}
    assert len(asked) >= 15 and asked <= served, sorted(asked - served)
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def test_prometheus_scrapes_the_port_compose_gives_the_workers() -> None:
    import yaml

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    prom = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    assert compose["prometheus"]["profiles"] == ["metrics"]  # optional, not started by default
    scraped = {sd["names"][0]: sd["port"] for job in prom["scrape_configs"]
               for sd in job["dns_sd_configs"]}
    assert set(scraped) == {"worker", "scheduler"}
    for service, port in scraped.items():
        args = build_parser().parse_args([*compose[service]["command"][1:], "--redis", "r://"])
        assert (args.metrics_port, args.metrics_addr) == (port, "0.0.0.0"), service


def test_a_scrape_answers_with_redis_away(tmp_path: Path) -> None:
    """Partition figures come from Redis at scrape time: with Redis gone the endpoint still
    answers, saying so in trawl_frontier_read_ok (control: 1 while Redis runs)."""

    from frontier.config import CrawlConfig
    from frontier.frontier import Frontier
    from workers.runtime.metrics import PartitionCollector, WorkerMetrics

    server = EmbeddedRedis(tmp_path / "r").start()
    try:
        frontier = Frontier(client_from_url(server.url), CrawlConfig(namespace="away",
                                                                     partitions=4))

        @dataclass
        class Owner:  # what PartitionCollector reads of a Member
            frontier: Frontier
            owned: dict[int, str]

        metrics = WorkerMetrics("worker", "w", "away")
        metrics.registry.register(PartitionCollector(Owner(frontier, {0: "", 2: ""})))

        def families() -> Families:
            return of_registry(metrics.registry)

        up = families()
        assert value(up, "trawl_frontier_read_ok") == 1
        assert {s.labels["partition"] for s in up["trawl_frontier_queued_urls"].samples} == {
            "0", "2"}
    finally:
        server.stop()
    down = families()
    assert value(down, "trawl_frontier_read_ok") == 0
    assert "trawl_frontier_queued_urls" not in down and "trawl_leases" in down
