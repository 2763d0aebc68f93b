"""Bodies cut short by a hostile server, through the whole pipeline on a real Redis and a real
loopback server (tests/loopback.py CutBodyHandler): what the JSONL record, the counters and
the WARC say, that the network's cuts are retried with backoff and then recorded as
``truncated``, and that no cut body reaches near-duplicate detection or the content digest.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from warcio.archiveiterator import ArchiveIterator

from frontier.config import CrawlConfig
from frontier.counters import accounted
from frontier.redisserver import EmbeddedRedis
from frontier.useragent import user_agent
from tests.loopback import CUT_PAGE, CutBodyHandler, HTTPServerFactory
from workers.app.celery_app import configure
from workers.cli.crawl import init_crawl
from workers.dns.resolver import CachingResolver
from workers.fetch import Fetcher, LoopFetcher
from workers.pipeline.lease import LeaseResult, process_leases
from workers.runtime import context
from workers.runtime.completion import apply_results

#: host -> (path, WARC-Truncated reason or None, fetches expected) of the crawl below
CASES = {
    "short.test": ("/short", "disconnect", 3),  # (a) 18 of 100,000 bytes, then FIN
    "reset.test": ("/reset?n=3000", "disconnect", 3),  # (b) RST after 3,000 bytes
    "trickle.test": ("/trickle?n=3000", "time", 3),  # (c) 1 byte/s past total_timeout_s
    "big.test": ("/big", "length", 1),  # 300,000 bytes over max_body_bytes: our own cap
    "whole.test": ("/whole", None, 1),  # the negative control: the same page, whole
}
BACKOFF_S = 5.0


@pytest.fixture(scope="module")
def crawl(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory,
          http_server: HTTPServerFactory) -> Iterator[dict[str, Any]]:
    """One crawl of the five URLs by acquire → pipeline → apply_results until nothing is left,
    the backoffs skipped (``acquire(now=...)`` in the future) but recorded."""
    tmp_path = tmp_path_factory.mktemp("cut")
    server = http_server(CutBodyHandler)
    urls = {h: f"http://{h}:{server.port}{path}" for h, (path, _, _) in CASES.items()}
    cfg = CrawlConfig(namespace="cut1", partitions=2, output_dir=str(tmp_path),
                      host_delay_s=0.0, adaptive_delay_factor=0.0, allow_private_ips=True,
                      soft404_probe=False, max_retries=2, retry_backoff_s=BACKOFF_S,
                      connect_timeout_s=1.0, read_timeout_s=2.0, total_timeout_s=1.5,
                      max_body_bytes=200_000, allowed_domains=list(CASES),
                      static_hosts=dict.fromkeys(CASES, "127.0.0.1")).validate()
    client = redis.Redis.from_url(redis_server.url)
    frontier = init_crawl(client, cfg, list(urls.values()), fresh=True)
    configure(redis_server.url, cfg.namespace)
    context.close_context()
    ctx = context.get_context(redis_server.url, cfg.namespace)
    fed: list[str] = []  # URLs whose page went to near-duplicate detection
    check_many = ctx.dedup.check_many

    def spy(pages: Any, record: bool = True) -> Any:
        fed.extend(url for url, _, _ in pages)
        return check_many(pages, record)

    ctx.dedup.check_many = spy  # type: ignore[method-assign]
    #: url -> (result, time before its batch, time after), lease by lease
    ends: dict[str, list[tuple[LeaseResult, float, float]]] = defaultdict(list)
    try:
        skip = 0.0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            skip += 3600  # past any backoff
            leases, _ = frontier.acquire(8, now=time.time() + skip)
            st = frontier.stats()
            if not leases and st["queued"] == 0 and st["inflight"] == 0:
                break
            before = time.time()
            results = process_leases(ctx, [(le, None) for le in leases])
            for r in results:
                ends[r.completion.lease.entry.url].append((r, before, time.time()))
            apply_results(ctx, [(r, None) for r in results], [])
    finally:
        context.close_context()
    stats = frontier.stats()
    client.close()
    records = {}
    for path in (tmp_path / "records").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            assert rec["url"] not in records, rec  # one final record per URL
            records[rec["url"]] = rec
    warc: dict[str, list[Any]] = defaultdict(list)
    for path in sorted((tmp_path / "warc").glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "response" and not rec.rec_headers.get_header(
                        "WARC-Target-URI").endswith("/robots.txt"):
                    warc[rec.rec_headers.get_header("WARC-Target-URI")].append(
                        (rec.rec_headers.get_header("WARC-Truncated"),
                         rec.content_stream().read()))
    yield {"urls": urls, "records": records, "stats": stats, "warc": warc,
           "fed": fed, "ends": ends, "requests": Counter(r.target for r in server.requests)}


def test_cut_bodies_are_retried_then_recorded_as_truncated(crawl: dict[str, Any]) -> None:
    urls, records, ends = crawl["urls"], crawl["records"], crawl["ends"]
    for host, (path, reason, fetches) in CASES.items():
        rec, url = records[urls[host]], urls[host]
        assert crawl["requests"][path] == fetches, (host, crawl["requests"])
        assert rec["attempts"] == fetches and rec["status"] == 200, rec
        assert rec.get("truncated") == reason, rec
        if reason in ("disconnect", "time"):
            assert rec["outcome"] == "truncated", rec
            assert rec["error"] == ("timeout" if reason == "time" else "connection_reset")
            assert rec["reason"] and rec["bytes"] < len(CUT_PAGE)
            # the network's cut is a failed try: twice again after the backoff, then kept
            outcomes = [r.completion.outcome for r, _, _ in ends[url]]
            assert outcomes == ["robots_fetches", "retries", "retries", "truncated"], outcomes
            for k, (r, before, after) in enumerate(ends[url][1:3]):
                assert r.completion.requeue is not None
                assert r.completion.requeue.attempts == k + 1
                backoff = BACKOFF_S * 2 ** k  # retry_backoff_s * 2**(n-1)
                assert before + backoff <= r.completion.next_allowed <= after + backoff
        else:
            assert rec["outcome"] == "fetched", rec
            assert [r.completion.outcome for r, _, _ in ends[url]] == ["robots_fetches",
                                                                       "fetched"]
    short = records[urls["short.test"]]
    assert short["bytes"] == 18 and "IncompleteRead(18 bytes read" in short["reason"]
    assert records[urls["big.test"]]["error"] == "too_large"
    assert records[urls["big.test"]]["bytes"] == 200_000
    whole = records[urls["whole.test"]]
    assert whole["bytes"] == len(CUT_PAGE) and "error" not in whole


def test_cut_bodies_are_counted(crawl: dict[str, Any]) -> None:
    st = crawl["stats"]
    assert st["truncated"] == 3 and st["fetched"] == 2 and st["failed"] == 0
    assert st["retries"] == 6
    assert st["err:connection_reset"] == 6 and st["err:timeout"] == 3
    assert st["err:too_large"] == 1
    assert (st["cut:disconnect"], st["cut:time"], st["cut:length"]) == (6, 3, 1)
    assert accounted(st) == st["admitted"] == len(CASES)


def test_cut_bodies_carry_warc_truncated(crawl: dict[str, Any]) -> None:
    """Every try is archived; a cut one says why in WARC-Truncated, the whole page does not."""
    for host, (_, reason, fetches) in CASES.items():
        stored = crawl["warc"][crawl["urls"][host]]
        assert [r for r, _ in stored] == [reason] * fetches, (host, stored)
        for _, payload in stored:
            assert payload == (CUT_PAGE * 3)[:len(payload)]
            assert (len(payload) < 100_000) == (reason in ("disconnect", "time"))
    assert crawl["records"][crawl["urls"]["whole.test"]]["warc"]


def test_cut_bodies_never_reach_dedup_or_the_digest(crawl: dict[str, Any]) -> None:
    records, urls = crawl["records"], crawl["urls"]
    assert crawl["fed"] == [urls["whole.test"]]
    whole = records[urls["whole.test"]]
    assert whole["dup_kind"] == "unique" and len(whole["digest"]) == 32
    for host in ("short.test", "reset.test", "trickle.test", "big.test"):
        rec = records[urls[host]]
        assert "digest" not in rec and "dup_kind" not in rec and "minhash" not in rec, rec
    # the links of a cut page are still read (all out of scope here)
    assert records[urls["reset.test"]]["links_found"] > 0


@pytest.mark.parametrize("cls", [Fetcher, LoopFetcher], ids=["urllib3", "aiohttp"])
def test_each_fetcher_names_the_cut_alike(http_server: HTTPServerFactory, cls: type[Any]) -> None:
    """The fetch alone, on both fetchers: each hostile body gets the error and WARC-Truncated
    reason the crawl above records (the aiohttp fetcher must not change a page's outcome)."""
    server = http_server(CutBodyHandler)
    errors = {"disconnect": "connection_reset", "time": "timeout", "length": "too_large",
              None: None}
    f = cls(CachingResolver(static=dict.fromkeys(CASES, "127.0.0.1"), allow_private=True),
            user_agent(), allow_private=True, connect_timeout_s=1.0, read_timeout_s=2.0,
            total_timeout_s=0.6, max_bytes=200_000)
    try:
        for host, (path, reason, _) in CASES.items():
            r = f.fetch(f"http://{host}:{server.port}{path}")
            assert (r.status, r.error, r.truncation) == (200, errors[reason], reason), (
                host, r.error_detail)
            assert r.body == (CUT_PAGE * 3)[:len(r.body)]
            assert (len(r.body) < len(CUT_PAGE)) == (reason in ("disconnect", "time"))
    finally:
        f.close()
