"""The scheduler on a real Redis when the broker refuses a task: nothing stays leased."""

from __future__ import annotations

import kombu.exceptions
import pytest
import redis
from celery import Celery

from frontier.config import CrawlConfig
from frontier.redisserver import free_port
from workers.crawl import init_crawl
from workers.scheduler import Scheduler


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
