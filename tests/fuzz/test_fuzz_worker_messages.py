"""Hostile task messages against a real ``trawl worker`` process: task bodies that are not
JSON, JSON that is not Celery's ``[args, kwargs, embed]``, and batches that are not fetch
orders. Each is refused (a log line, the ``err:bad_message`` counter for what reaches the
task), none stops the worker, and a good message after them is still served. The property
tests (test_fuzz_messages.py) cover the decoder on any input; this checks the process."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from kombu import Connection

from frontier.config import CrawlConfig
from frontier.counters import ERRORS
from frontier.keys import Keys, task_queue
from frontier.redisserver import EmbeddedRedis
from tests.brokerkit import started, trawl_cmd
from tests.waiting import wait_for
from workers.cli.crawl import init_crawl

pytestmark = pytest.mark.e2e

NS = "fuzzmsg"
#: Bodies that never reach the task: kombu or Celery refuse them first.
UNDECODABLE = [b"\xff\xfe not json", b"{", b"[1, 2", b"\x00" * 16, b"[" * 5000]
#: Bodies that decode but are not [args, kwargs, embed]: refused by the consumer. Before
#: workers/app/consumer.py refused them, ``5`` stopped the worker ("Unrecoverable error")
#: and ``[1, 2, 3]`` was never acked (back after every visibility timeout).
NOT_A_CALL = [b"5", b"null", b'"text"', b"{}", b'{"args": 5}', b"[]", b"[1, 2, 3]",
              b"[null, null, null]"]
#: Calls of trawl.fetch with the wrong arguments: they fail in the task, logged, acked.
WRONG_CALL = [b"[[], {}, {}]", b'[[1, 2], {"x": 1}, {}]']
#: trawl.fetch called with an argument that is not a batch of fetch orders (each counted).
BAD_BATCHES: list[Any] = [5, None, "x", {"a": 1}, [["garbage"]], [[1e400]], [["u", 0, "L",
                          "h", "0 http://h/", None, float("nan")]]]


def _publish(url: str, queue: str, body: bytes) -> None:
    """Raw ``body`` as a protocol-2 trawl.fetch message (JSON content type)."""
    amqp = Celery("probe", set_as_current=False).amqp
    msg = amqp.as_task_v2(str(uuid.uuid4()), "trawl.fetch", args=([],))
    with Connection(url) as conn:
        conn.Producer().publish(body, exchange="", routing_key=queue, headers=msg.headers,
                                content_type="application/json", content_encoding="utf-8",
                                **msg.properties)


def _call(batch: Any) -> bytes:
    return json.dumps([[batch], {}, {"callbacks": None, "errbacks": None, "chain": None,
                                     "chord": None}]).encode()


@pytest.fixture(scope="module")
def worker(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Any, Path, redis.Redis]]:
    out = tmp_path_factory.mktemp("fuzz-worker")
    client = redis.Redis.from_url(redis_server.url)
    init_crawl(client, CrawlConfig.from_dict({"namespace": NS, "partitions": 2,
                                              "output_dir": str(out)}), [])
    log = out / "worker.log"
    with started(trawl_cmd("worker", "--redis", redis_server.url, "--namespace", NS,
                           "--name", "wfuzz", "--loglevel", "INFO"), log) as proc:
        wait_for(lambda: b" ready." in log.read_bytes(), 40, "the worker to be ready", 0.2)
        yield proc, log, client
    client.close()


def test_hostile_bodies_and_batches_are_refused_and_the_worker_serves_on(
        worker: tuple[Any, Path, redis.Redis], redis_server: EmbeddedRedis) -> None:
    proc, log, client = worker
    queue = task_queue(NS)
    bad = Keys(NS).stats(0), ERRORS.name("bad_message")
    for body in UNDECODABLE + NOT_A_CALL + WRONG_CALL:
        _publish(redis_server.url, queue, body)
    for batch in BAD_BATCHES:
        _publish(redis_server.url, queue, _call(batch))
    # The bad batches reach the task: one rejection each (a batch of one bad order, or a
    # value that is no batch at all).
    wait_for(lambda: int(client.hget(*bad) or 0) >= len(BAD_BATCHES), 40,
             "the bad batches to be counted")
    # Every message acked or rejected: none waits in "unacked" to come back later.
    wait_for(lambda: client.llen(queue) == 0 and client.hlen("unacked") == 0, 20,
             "every message taken off the queue")
    assert proc.poll() is None, log.read_text()[-3000:]
    # Still serving: one more message runs the task.
    _publish(redis_server.url, queue, _call([["still-alive"]]))
    wait_for(lambda: int(client.hget(*bad) or 0) == len(BAD_BATCHES) + 1, 30,
             "a following message to run")
    assert proc.poll() is None
    text = log.read_text()
    assert "Unrecoverable error" not in text
    assert text.count("Can't decode message body") == len(UNDECODABLE)
    assert text.count("Received invalid task message") == len(NOT_A_CALL)
    assert text.count("raised unexpected: TypeError") == len(WRONG_CALL)
    assert text.count("malformed task message skipped") == len(BAD_BATCHES) + 1
