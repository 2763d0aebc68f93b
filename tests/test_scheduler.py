"""The scheduler on a real Redis when the broker refuses a task: nothing stays leased."""

from __future__ import annotations

import time

import kombu.exceptions
import pytest
import redis
from celery import Celery

from frontier.config import CrawlConfig
from frontier.frontier import Entry
from frontier.redisserver import free_port
from workers.crawl import init_crawl
from workers.scheduler import SWEEP_S, Scheduler


def test_leases_go_back_when_the_broker_refuses_the_task(redis_client: redis.Redis) -> None:
    cfg = CrawlConfig(namespace="sched1", partitions=4, allow_private_ips=True,
                      static_hosts={f"h{i}.test": "127.0.0.1" for i in range(6)}).validate()
    frontier = init_crawl(redis_client, cfg, [f"http://h{i}.test/" for i in range(6)])
    app = Celery("unreachable", broker=f"redis://127.0.0.1:{free_port()}/0")
    app.conf.update(task_publish_retry=False, broker_connection_retry=False,
                    broker_connection_max_retries=0)
    scheduler = Scheduler(redis_client, cfg, app)
    with pytest.raises((kombu.exceptions.OperationalError, OSError)):
        scheduler.step()
    st = frontier.stats()
    # one IP, one connection: one lease granted (and refused by the broker), five deferred
    assert (st["queued"], st["inflight"], st["unsent"], st["deferred"]) == (6, 0, 1, 5)
    # the per-IP token went back too: the next (working) step may lease the IP again
    assert frontier.ip_acquire([("127.0.0.1", "probe")]) == [0.0]


def test_due_hints_bring_partitions_back_between_sweeps(redis_client: redis.Redis,
                                                        redis_server) -> None:
    hosts = {f"h{i}.test": "127.0.0.1" for i in range(3)}
    cfg = CrawlConfig(namespace="sched2", partitions=4, allow_private_ips=True,
                      ip_concurrency=0, host_delay_s=0.0, static_hosts=hosts).validate()
    frontier = init_crawl(redis_client, cfg, ["http://h0.test/"])
    app = Celery("hints", broker=redis_server.url)
    scheduler = Scheduler(redis_client, cfg, app)
    assert scheduler.step().dispatched == 1  # the first step sweeps every partition

    def admit(host: str) -> dict[int, float]:
        pipe = frontier.pipeline()
        url = f"http://{host}/"
        batch = frontier.queue_admit(pipe, [(host, url, Entry(url))])
        return batch.woken(pipe.execute())

    woken = admit("h1.test")
    assert list(woken) == [frontier.partition("h1.test")]
    # unhinted, the new host waits for the next sweep ...
    assert scheduler.step().dispatched == 0
    pipe = frontier.pipeline()
    frontier.queue_due_hints(pipe, woken)
    pipe.execute()
    # ... hinted, it goes out at the next step; the hint is used up
    assert scheduler.step().dispatched == 1
    assert redis_client.zcard(frontier.due_key) == 0
    admit("h2.test")
    assert scheduler.step().dispatched == 0
    time.sleep(SWEEP_S + 0.05)
    assert scheduler.step().dispatched == 1  # the sweep finds it anyway
    assert frontier.stats()["inflight"] == 3
    # a hint not due yet stays, and take_due says when it will be
    pipe = frontier.pipeline()
    frontier.queue_due_hints(pipe, {1: 50.0, 2: 40.0})
    pipe.execute()
    assert frontier.take_due([1, 3], now=10.0) == (set(), 50.0)
    assert frontier.take_due([1, 2], now=45.0) == ({2}, 50.0)
    assert frontier.take_due([1, 2], now=60.0) == ({1}, None)
