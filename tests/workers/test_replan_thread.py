"""A member replans its partitions (continuous crawling) on a thread of its own: a replan of a
large partition takes seconds, and the scheduler's leasing goes on meanwhile."""

from __future__ import annotations

import threading
import time

import redis
from celery import Celery

from frontier.config import CrawlConfig
from frontier.redisserver import EmbeddedRedis
from workers.cluster.member import Member
from workers.cluster.scheduler import StepResult


def test_the_scheduler_steps_while_a_replan_is_under_way(
        redis_server: EmbeddedRedis, redis_client: redis.Redis) -> None:
    cfg = CrawlConfig(namespace="replanthread", partitions=2, allow_private_ips=True,
                      continuous=True, revisit_policy="freshness",
                      revisit_expected_urls=1000).validate()
    member = Member(redis_client, cfg, Celery("replan", broker=redis_server.url), name="m")
    revisits = member.scheduler.revisits
    assert revisits is not None
    entered, release = threading.Event(), threading.Event()
    replanned_on: list[str] = []

    def slow_replan(partition: int) -> int:  # a replan of a huge partition, held open
        replanned_on.append(threading.current_thread().name)
        entered.set()
        release.wait(20)
        return 0

    steps: list[float] = []
    real_step = member.scheduler.step

    def counted_step(owners: object = None) -> StepResult:
        steps.append(time.monotonic())
        return real_step(owners)  # type: ignore[arg-type]

    revisits.replan = slow_replan  # type: ignore[method-assign]
    member.scheduler.step = counted_step  # type: ignore[method-assign]
    member.start()
    try:
        assert entered.wait(15), "no partition was replanned"
        held_at = len(steps)
        deadline = time.monotonic() + 10
        while len(steps) < held_at + 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        # the scheduler went on stepping with the replan stuck (inline, it would be stuck too)
        assert len(steps) >= held_at + 5
        assert replanned_on == ["trawl-_replan_loop"]
    finally:
        release.set()
        member.stop()
    # the thread ends with the member (Member.stop joins it)
    assert not any(t.name == "trawl-_replan_loop" and t.is_alive()
                   for t in threading.enumerate())
