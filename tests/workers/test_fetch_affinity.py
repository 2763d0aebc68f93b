"""fetch_affinity: a member that runs in a worker sends its tasks to its own queue, and a
leaving one hands what is left there to the shared queue (real Redis as Celery's broker).

The end-to-end half (each host fetched by its partition owner's worker, against the shared
queue as the control) is in tests/workers/test_kill_recovery.py, which has the two-worker crawl.
"""

from __future__ import annotations

import base64
import json
import time

import pytest
import redis
from celery import Celery

from frontier.config import CrawlConfig
from frontier.redisserver import EmbeddedRedis
from workers.cluster.member import Member
from workers.runtime.figures import process_worker_id


def _config(**kw: object) -> CrawlConfig:
    return CrawlConfig(namespace="aff", partitions=4, allow_private_ips=True,  # type: ignore[arg-type]
                       host_delay_s=0, **kw).validate()


def _app(url: str) -> Celery:
    app = Celery("affinity-test", set_as_current=False)
    app.conf.update(broker_url=url, task_serializer="json", accept_content=["json"])
    return app


def _args(raw: bytes) -> object:
    """The task arguments of a message as kombu's Redis transport stores it."""
    body = json.loads(raw)["body"]
    return json.loads(base64.b64decode(body))[0][0]


def test_only_a_member_in_a_worker_gets_its_own_queue(redis_server: EmbeddedRedis,
                                                     redis_client: redis.Redis) -> None:
    app = _app(redis_server.url)
    worker = Member(redis_client, _config(), app, name="w", fetches_here=True)
    assert worker.direct_queue == f"aff.fetch.{worker.id}"
    assert worker.task_queues == ["aff.fetch", worker.direct_queue]
    assert worker.scheduler.queue == worker.direct_queue
    # its backlog gate counts only the engine of its own process (the id that engine's
    # figures are published under), since no other engine takes its tasks
    assert worker.scheduler.backlog.engine == process_worker_id()
    # a scheduler-only member (`trawl scheduler`) fetches nothing: the shared queue
    scheduler = Member(redis_client, _config(), app, name="s")
    assert scheduler.direct_queue is None and scheduler.scheduler.queue == "aff.fetch"
    assert scheduler.scheduler.backlog.engine is None  # gated on every engine
    # and the setting turns it off
    shared = Member(redis_client, _config(fetch_affinity=False), app, name="w",
                    fetches_here=True)
    assert shared.direct_queue is None and shared.task_queues == ["aff.fetch"]
    assert shared.scheduler.backlog.engine is None


def test_a_leaving_member_hands_its_queued_tasks_to_the_shared_queue(
        redis_server: EmbeddedRedis, redis_client: redis.Redis) -> None:
    app = _app(redis_server.url)
    member = Member(redis_client, _config(), app, name="w", fetches_here=True)
    assert member.direct_queue is not None
    app.send_task("trawl.fetch", args=["already shared"], queue="aff.fetch")
    for n in range(3):
        app.send_task("trawl.fetch", args=[f"own {n}"], queue=member.direct_queue)
    assert redis_client.llen(member.direct_queue) == 3
    member.stop()  # never started: stop still hands the tasks over
    assert redis_client.llen(member.direct_queue) == 0
    # kombu consumes from the right: the handed-over tasks come first, oldest first
    order = [_args(redis_client.rpop("aff.fetch")) for _ in range(4)]
    assert order == ["own 0", "own 1", "own 2", "already shared"]
    assert member.hand_back_tasks() == 0  # nothing left; a second stop moves nothing


def test_without_a_broker_the_tasks_stay_and_stop_still_leaves(
        redis_server: EmbeddedRedis, redis_client: redis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    """The broker is away at the stop: the hand-over is given up with a warning (the leases
    then expire after lease_ttl_s), and the member still releases its partitions."""
    member = Member(redis_client, _config(), _app("redis://127.0.0.1:1/0"), name="w",
                    fetches_here=True)
    member.heartbeat()
    assert len(member.owned) == 4
    member.stop()
    assert "could not hand the tasks left in its queue" in caplog.text
    assert all(owner is None for owner in member.frontier.partition_owners())


def _beat(member: Member) -> None:
    """One heartbeat, and the sweep it may have started ended: a sweep still running when
    the test puts a task in a queue would take that task too."""
    member.heartbeat()
    member.wait_for_sweep()


def test_the_tasks_a_killed_member_left_in_its_queue_go_to_the_shared_queue(
        redis_server: EmbeddedRedis, redis_client: redis.Redis) -> None:
    """A member killed without a stop leaves tasks in its own queue, which no worker consumes
    any more. The member whose heartbeat removes the dead one's expired entry moves them to
    the shared queue (where a stale one is skipped, a current one fetched), so none stays in
    the broker for the rest of the crawl. A live member's queue is left alone."""
    config = CrawlConfig(namespace="aff-gone", partitions=4, allow_private_ips=True,
                         host_delay_s=0).validate()
    shared = "aff-gone.fetch"
    app = _app(redis_server.url)
    alive = Member(redis_client, config, app, name="alive", fetches_here=True)
    dead = Member(redis_client, config, app, name="dead", fetches_here=True)
    observer = Member(redis_client, config, app, name="observer", fetches_here=True)
    for member in (alive, dead, observer):
        member.heartbeat()
    for n in range(3):
        app.send_task("trawl.fetch", args=[f"left {n}"], queue=dead.direct_queue)
    app.send_task("trawl.fetch", args=["alive's"], queue=alive.direct_queue)
    _beat(observer)  # control: every entry current, nothing moves
    assert redis_client.llen(dead.direct_queue) == 3 and redis_client.llen(shared) == 0

    # "dead" stops renewing: its entry expires, and the next heartbeat removes it
    redis_client.zadd(observer.members_key, {dead.id: time.time() - 1})
    _beat(observer)
    assert redis_client.llen(dead.direct_queue) == 0
    assert [_args(redis_client.rpop(shared)) for _ in range(3)] == ["left 0", "left 1",
                                                                   "left 2"]
    assert redis_client.llen(alive.direct_queue) == 1
    for member in (alive, observer):
        member.stop()


def test_a_dead_members_queue_is_swept_until_the_broker_gave_back_its_unacked_tasks(
        redis_server: EmbeddedRedis, redis_client: redis.Redis) -> None:
    """The tasks a killed worker had prefetched (unacked, ``acks_late``) come back to its own
    queue only after the broker's visibility timeout, long after its entry expired: the
    queue is swept at every heartbeat until then, and left alone after (and never while a
    member of that id is live)."""
    config = CrawlConfig(namespace="aff-late", partitions=4, allow_private_ips=True,
                         host_delay_s=0).validate()
    shared = "aff-late.fetch"
    app = _app(redis_server.url)
    dead = Member(redis_client, config, app, name="dead", fetches_here=True)
    observer = Member(redis_client, config, app, name="observer", fetches_here=True)
    for member in (dead, observer):
        member.heartbeat()
    redis_client.zadd(observer.members_key, {dead.id: time.time() - 1})
    before = time.time()
    _beat(observer)  # finds it dead: notes it, its (empty) queue swept
    keep_until = redis_client.zscore(observer.gone_key, dead.id)
    # swept until the broker's visibility timeout (300 s at least) has passed
    assert keep_until is not None and keep_until >= before + 300

    # the broker restores an unacked task to the dead member's queue, minutes later
    app.send_task("trawl.fetch", args=["restored"], queue=dead.direct_queue)
    _beat(observer)
    assert redis_client.llen(dead.direct_queue) == 0
    assert _args(redis_client.rpop(shared)) == "restored"

    # a member of that id live again (it rejoined after a cut): its queue is its own
    dead.heartbeat()
    app.send_task("trawl.fetch", args=["its own"], queue=dead.direct_queue)
    _beat(observer)
    assert redis_client.llen(dead.direct_queue) == 1
    redis_client.delete(dead.direct_queue)

    # past the timeout the entry goes, and the queue is no longer read
    redis_client.zrem(observer.members_key, dead.id)
    redis_client.zadd(observer.gone_key, {dead.id: time.time() - 1})
    _beat(observer)
    assert redis_client.zscore(observer.gone_key, dead.id) is None
    app.send_task("trawl.fetch", args=["too late"], queue=dead.direct_queue)
    _beat(observer)
    assert redis_client.llen(dead.direct_queue) == 1
    observer.stop()
