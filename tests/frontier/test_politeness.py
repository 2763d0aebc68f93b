"""frontier.politeness: how long a host waits between fetches and before a retry, and, on a real
Redis, that the frontier holds a completed host back until exactly end + that delay."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import redis

from frontier.config import CrawlConfig
from frontier.counters import Outcome
from frontier.frontier import Completion, Frontier
from frontier.politeness import host_delay, retry_backoff
from workers.cli.crawl import init_crawl

CFG = CrawlConfig(host_delay_s=2.0, adaptive_delay_factor=2.0, max_delay_s=60.0,
                  retry_backoff_s=1.0)


def test_the_configured_delay_is_the_floor() -> None:
    assert host_delay(CFG, None, None) == 2.0
    # a shorter Crawl-delay and a fast answer never shorten it
    assert host_delay(CFG, 0.5, 0.1) == 2.0


def test_robots_crawl_delay_raises_the_delay() -> None:
    assert host_delay(CFG, 5.0, None) == 5.0
    assert host_delay(CFG, 5.0, 0.1) == 5.0


def test_adaptive_delay_is_k_times_the_last_response_time() -> None:
    assert host_delay(CFG, None, 3.0) == 6.0
    assert host_delay(CFG, 7.0, 3.0) == 7.0  # the larger of Crawl-delay and the adaptive rule
    assert host_delay(CFG, 4.0, 3.0) == 6.0
    assert host_delay(replace(CFG, adaptive_delay_factor=0.0), None, 3.0) == 2.0  # rule off


def test_every_delay_is_bounded_by_max_delay() -> None:
    assert host_delay(CFG, 3600.0, None) == 60.0  # a hostile Crawl-delay cannot stall a host
    assert host_delay(CFG, None, 100.0) == 60.0
    assert host_delay(replace(CFG, host_delay_s=90.0), None, None) == 60.0


def test_retry_backoff_doubles_from_its_base_up_to_max_delay() -> None:
    assert [retry_backoff(CFG, n) for n in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert retry_backoff(CFG, 0) == 1.0  # attempts count from 1; 0 is not a shorter wait
    assert retry_backoff(CFG, 7) == 60.0
    assert retry_backoff(CFG, 60) == 60.0


# -- through the frontier on a real Redis ------------------------------------------------------

def _fetched_once(client: redis.Redis, cfg: CrawlConfig, next_allowed_in_s: float
                  ) -> tuple[Frontier, float]:
    """A crawl of two pages of one host; the first is leased and completed now, its host's
    next fetch ``next_allowed_in_s`` later. Returns the frontier and the completion time."""
    frontier = init_crawl(client, cfg, ["http://polite.test/1", "http://polite.test/2"])
    (lease,), _ = frontier.acquire(1)
    end = time.time()
    frontier.complete([Completion(lease, end + next_allowed_in_s, Outcome.FETCHED)])
    return frontier, end


def _leased_again_within(frontier: Frontier, end: float, gap_s: float) -> bool:
    """Would the scheduler lease the host again less than ``gap_s`` after ``end``?"""
    leases, _ = frontier.acquire(1, now=end + gap_s - 0.001)
    return bool(leases)


@pytest.mark.parametrize(("crawl_delay_s", "elapsed_s"), [(None, None), (1.5, None), (None, 0.9),
                                                          (0.5, 0.2)])
def test_frontier_holds_a_completed_host_back_for_its_delay(
        redis_client: redis.Redis, crawl_delay_s: float | None, elapsed_s: float | None) -> None:
    cfg = CrawlConfig(namespace="polite", partitions=2, host_delay_s=1.0,
                      adaptive_delay_factor=2.0, allow_private_ips=True).validate()
    delay = host_delay(cfg, crawl_delay_s, elapsed_s)
    frontier, end = _fetched_once(redis_client, cfg, delay)
    leases, earliest = frontier.acquire(1, now=end)
    assert leases == [] and earliest == pytest.approx(end + delay, abs=1e-3)
    assert not _leased_again_within(frontier, end, delay)
    (lease,), _ = frontier.acquire(1, now=end + delay)
    assert lease.host == "polite.test" and lease.entry.url == "http://polite.test/2"


def test_negative_control_without_a_delay_the_host_is_leased_again_at_once(
        redis_client: redis.Redis) -> None:
    """The hold-back check can fail: with every delay off, the host comes straight back."""
    polite = CrawlConfig(namespace="polite", partitions=2, host_delay_s=1.0,
                         allow_private_ips=True).validate()
    off = replace(polite, namespace="off", host_delay_s=0.0, adaptive_delay_factor=0.0)
    frontier, end = _fetched_once(redis_client, off, host_delay(off, None, 0.5))
    assert _leased_again_within(frontier, end, host_delay(polite, None, 0.5))
