"""The scheduler on a real Redis when the broker refuses a task: nothing stays leased."""

from __future__ import annotations

import base64
import json
import time

import kombu.exceptions
import pytest
import redis
from celery import Celery

from frontier.config import CrawlConfig
from frontier.frontier import AdmitLink, Completion, Entry
from frontier.redisserver import free_port
from workers.cli.crawl import init_crawl
from workers.cluster.scheduler import Scheduler
from workers.fetch.order import FetchOrder

SWEEP_S = CrawlConfig.partition_sweep_s  # the tests' configs keep the defaults
LINGER_S = CrawlConfig.task_linger_s


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
        batch = frontier.queue_admit(pipe, [AdmitLink(host, url, Entry(url))])
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


def _sent_batches(client: redis.Redis, queue: str) -> list[list[list[object]]]:
    """The URL batches of the task messages waiting in the broker queue, oldest first."""
    out = []
    for raw in reversed(client.lrange(queue, 0, -1)):
        envelope = json.loads(raw)
        args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
        # Flower's view of the task: a short summary, not a repr of the whole batch
        first = args[0][0][0]
        assert envelope["headers"]["argsrepr"].startswith(f"[{len(args[0])} URLs: {first}")
        out.append(args[0])
    return out


def test_tasks_wait_for_a_full_batch_while_leases_are_out(redis_client: redis.Redis,
                                                          redis_server) -> None:
    hosts = {f"h{i}.test": "127.0.0.1" for i in range(24)}
    cfg = CrawlConfig(namespace="sched3", partitions=4, allow_private_ips=True,
                      ip_concurrency=0, host_delay_s=0.0, static_hosts=hosts, max_inflight=8,
                      task_batch=4).validate()
    frontier = init_crawl(redis_client, cfg, [f"http://{h}/" for h in hosts])
    app = Celery("full", broker=redis_server.url)
    scheduler = Scheduler(redis_client, cfg, app)
    queue = frontier.keys.task_queue
    assert scheduler.step().dispatched == 8
    sent = _sent_batches(redis_client, queue)
    assert [len(b) for b in sent] == [4, 4]
    leases = [FetchOrder.from_json(m).lease for b in sent for m in b]

    def finish(n: int) -> None:
        frontier.complete([Completion(le, time.time(), "fetched") for le in leases[:n]])
        del leases[:n]
        time.sleep(0.06)  # the scheduler re-reads the in-flight count every 50 ms

    finish(2)  # room for 2 URLs: not a whole task while 6 are still out
    assert scheduler.step().dispatched == 0
    finish(2)  # room for 4: one full task
    assert scheduler.step().dispatched == 4
    assert [len(b) for b in _sent_batches(redis_client, queue)] == [4, 4, 4]
    assert scheduler.tasks == 3
    # with fewer than a batch's URLs out, the room there is goes out at once, topped up to
    # a whole task
    cfg.max_inflight = 6
    leases += [FetchOrder.from_json(m).lease for m in _sent_batches(redis_client, queue)[-1]]
    finish(len(leases) - 3)
    time.sleep(SWEEP_S)  # a sweep: every partition may offer its due hosts
    assert scheduler.step().dispatched == 4


def test_a_short_task_is_topped_up_from_partitions_with_hosts_still_due(
        redis_client: redis.Redis, redis_server) -> None:
    cfg = CrawlConfig(namespace="sched4", partitions=4, allow_private_ips=True,
                      ip_concurrency=0, host_delay_s=0.0, max_inflight=4,
                      task_batch=4).validate()
    frontier = init_crawl(redis_client, cfg, [])
    # three hosts in each of two partitions, none in the other two
    by_part: dict[int, list[str]] = {}
    i = 0
    while sum(len(v) for v in by_part.values()) < 6:
        host = f"h{i}.test"
        i += 1
        p = frontier.partition(host)
        if p in (0, 1) and len(by_part.setdefault(p, [])) < 3:
            by_part[p].append(host)
    hosts = [h for hs in by_part.values() for h in hs]
    cfg.static_hosts = dict.fromkeys(hosts, "127.0.0.1")
    pipe = frontier.pipeline()
    frontier.queue_admit(pipe, [AdmitLink(h, f"http://{h}/", Entry(f"http://{h}/")) for h in hosts])
    pipe.execute()
    scheduler = Scheduler(redis_client, cfg, Celery("topup", broker=redis_server.url))
    # the sweep asks each of the 4 partitions for one host: 2 come back, 2 more top it up
    assert scheduler.step().dispatched == 4
    assert [len(b) for b in _sent_batches(redis_client, frontier.keys.task_queue)] == [4]
    assert scheduler.tasks == 1


def test_short_task_waits_to_be_filled_while_plenty_is_in_flight(
        redis_client: redis.Redis, redis_server) -> None:
    hosts = [f"h{i}.test" for i in range(46)]
    cfg = CrawlConfig(namespace="sched5", partitions=4, allow_private_ips=True,
                      ip_concurrency=0, host_delay_s=0.0, max_inflight=64, task_batch=4,
                      static_hosts=dict.fromkeys(hosts, "127.0.0.1")).validate()
    frontier = init_crawl(redis_client, cfg, [f"http://{h}/" for h in hosts[:42]])
    scheduler = Scheduler(redis_client, cfg, Celery("linger", broker=redis_server.url))
    queue = frontier.keys.task_queue

    def admit(new: list[str]) -> None:
        pipe = frontier.pipeline()
        batch = frontier.queue_admit(pipe, [AdmitLink(h, f"http://{h}/", Entry(f"http://{h}/"))
                                            for h in new])
        woken = batch.woken(pipe.execute())
        pipe = frontier.pipeline()
        frontier.queue_due_hints(pipe, woken)
        pipe.execute()

    # 42 due hosts: ten full tasks go out, the last 2 wait for company
    assert scheduler.step().dispatched == 40
    sent = _sent_batches(redis_client, queue)
    assert [len(b) for b in sent] == [4] * 10
    waiting = set(hosts[:42]) - {m[3] for b in sent for m in b}
    assert len(waiting) == 2
    admit(hosts[42:44])  # two more hosts: with the 2 waiting, one full task
    assert scheduler.step().dispatched == 4
    sent = _sent_batches(redis_client, queue)
    assert [len(b) for b in sent] == [4] * 11
    assert {m[3] for m in sent[-1]} == waiting | set(hosts[42:44])
    admit(hosts[44:45])  # one more: it waits ...
    assert scheduler.step().dispatched == 0
    time.sleep(LINGER_S)
    scheduler.step()  # ... at most LINGER_S, then goes out alone
    assert [len(b) for b in _sent_batches(redis_client, queue)] == [4] * 11 + [1]
    admit(hosts[45:46])  # and what waits when the scheduler stops is sent
    assert scheduler.step().dispatched == 0
    scheduler.run(lambda: True)
    assert [len(b) for b in _sent_batches(redis_client, queue)] == [4] * 11 + [1, 1]
    assert frontier.stats()["inflight"] == 46


def test_sweep_interval_is_the_crawl_setting(redis_client: redis.Redis, redis_server) -> None:
    """partition_sweep_s decides when a step next asks every partition: an unhinted host is
    found after it (here 0.2 s, well before the default 1 s)."""
    hosts = {f"h{i}.test": "127.0.0.1" for i in range(2)}
    cfg = CrawlConfig(namespace="sched6", partitions=4, allow_private_ips=True,
                      ip_concurrency=0, host_delay_s=0.0, static_hosts=hosts,
                      partition_sweep_s=0.2).validate()
    frontier = init_crawl(redis_client, cfg, ["http://h0.test/"])
    scheduler = Scheduler(redis_client, cfg, Celery("sweep", broker=redis_server.url))
    assert scheduler.step().dispatched == 1  # the first step sweeps every partition
    pipe = frontier.pipeline()
    frontier.queue_admit(pipe, [AdmitLink("h1.test", "http://h1.test/", Entry("http://h1.test/"))])
    pipe.execute()
    assert scheduler.step().dispatched == 0  # unhinted: it waits for the next sweep ...
    time.sleep(0.25)
    assert scheduler.step().dispatched == 1  # ... which comes after partition_sweep_s
