"""Retry-After: a server that answers 429 or 503 with it holds its host back that long (at most
an hour), through the real pipeline on a real Redis and a loopback server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from email.utils import formatdate

import pytest
import redis

from frontier.config import CrawlConfig
from frontier.counters import Outcome
from frontier.politeness import RETRY_AFTER_MAX_S, retry_after
from frontier.redisserver import EmbeddedRedis
from tests.loopback import HTTPServerFactory, Reply, Request
from workers.app.celery_app import configure
from workers.cli.crawl import init_crawl
from workers.pipeline.lease import process_leases
from workers.pipeline.result import LeaseResult
from workers.runtime import context
from workers.runtime.completion import apply_results

#: host -> the Retry-After header its first answer (a 503) carries, or None (the control)
HOSTS = {"seconds.test": "30", "date.test": "DATE+40", "years.test": "999999999",
         "none.test": None}


def test_retry_after_reads_seconds_and_dates() -> None:
    now = time.time()
    assert retry_after("120", now) == 120.0
    assert retry_after(formatdate(now + 90, usegmt=True), now) == pytest.approx(90, abs=1.5)
    assert retry_after(formatdate(now - 90, usegmt=True), now) == 0.0  # already past
    assert retry_after("999999999", now) == RETRY_AFTER_MAX_S
    for bad in (None, "", "soon", "-5", "1e9", "Mon, 99 Foo 2026 99:99:99 GMT"):
        assert retry_after(bad, now) is None, bad


@pytest.fixture(scope="module")
def first_answers(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory,
                  http_server: HTTPServerFactory) -> Iterator[dict[str, tuple[LeaseResult, float]]]:
    """Each host's page fetched once (a 503): its result and when the fetch ended."""

    def respond(req: Request) -> Reply:
        if req.path == "/robots.txt":
            return Reply(404, b"", "text/plain")
        header = HOSTS[req.host]
        if header is None:
            return Reply(503, b"busy")
        if header.startswith("DATE+"):
            header = formatdate(time.time() + float(header[5:]), usegmt=True)
        return Reply(503, b"busy", headers=(("Retry-After", header),))

    server = http_server(respond=respond)
    cfg = CrawlConfig(namespace="retryafter", partitions=2,
                      output_dir=str(tmp_path_factory.mktemp("ra")), host_delay_s=0.5,
                      adaptive_delay_factor=0.0, allow_private_ips=True, soft404_probe=False,
                      max_retries=2, retry_backoff_s=1.0, allowed_domains=list(HOSTS),
                      static_hosts=dict.fromkeys(HOSTS, "127.0.0.1")).validate()
    client = redis.Redis.from_url(redis_server.url)
    urls = [f"http://{h}:{server.port}/page" for h in HOSTS]
    frontier = init_crawl(client, cfg, urls, fresh=True)
    configure(redis_server.url, cfg.namespace)
    context.close_context()
    ctx = context.get_context(redis_server.url, cfg.namespace)
    out: dict[str, tuple[LeaseResult, float]] = {}
    try:
        deadline = time.monotonic() + 30
        while len(out) < len(HOSTS) and time.monotonic() < deadline:
            leases, _ = frontier.acquire(8, now=time.time() + 3600 * (len(out) + 1))
            results = process_leases(ctx, [(le, None) for le in leases])
            for r in results:
                url = r.completion.lease.entry.url
                if r.completion.outcome is Outcome.RETRY:  # the page's 503, not robots.txt
                    out.setdefault(url.split("/")[2].split(":")[0], (r, time.time()))
            apply_results(ctx, [(r, None) for r in results], [])
    finally:
        context.close_context()
        client.close()
    yield out


def _held_s(first_answers: dict[str, tuple[LeaseResult, float]], host: str) -> float:
    result, ended = first_answers[host]
    return result.completion.next_allowed - ended


def test_a_503_with_retry_after_holds_the_host_that_long(
        first_answers: dict[str, tuple[LeaseResult, float]]) -> None:
    assert set(first_answers) == set(HOSTS)
    assert _held_s(first_answers, "seconds.test") == pytest.approx(30, abs=1.5)
    assert _held_s(first_answers, "date.test") == pytest.approx(40, abs=2.5)
    assert _held_s(first_answers, "years.test") == pytest.approx(RETRY_AFTER_MAX_S, abs=1.5)
    # the control: without the header only the retry backoff (1 s) holds the host
    assert _held_s(first_answers, "none.test") < 5
