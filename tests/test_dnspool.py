"""Name resolution never blocks other fetches: a real DNS server on loopback (dnspython) that
answers some names only after 300 ms, the crawl's resolver asking it directly (dns_servers),
and the scheduler dispatching hosts whose IP is known while the slow names are looked up."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import dns.message
import dns.rcode
import dns.rrset
import pytest
import redis
from celery import Celery

from frontier.config import CrawlConfig
from frontier.redisserver import EmbeddedRedis
from workers.crawl import init_crawl
from workers.dnspool import Pending, ResolverPool, worker_resolver
from workers.messages import FetchOrder
from workers.scheduler import Scheduler

SLOW_S = 0.3


class SlowDNS:
    """UDP DNS server: every A query answers 127.0.0.1, after SLOW_S for names starting with
    'slow', at once otherwise; AAAA gets an empty answer. Counts queries."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.queries = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                wire, peer = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            query = dns.message.from_wire(wire)
            self.queries += 1
            reply = dns.message.make_response(query)
            q = query.question[0]
            if q.rdtype == dns.rdatatype.A:
                reply.answer.append(dns.rrset.from_text(q.name, 60, "IN", "A", "127.0.0.1"))
            delay = SLOW_S if q.name.to_text().startswith("slow") else 0.0
            threading.Timer(delay, self._send, (reply.to_wire(), peer)).start()

    def _send(self, wire: bytes, peer: tuple[str, int]) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendto(wire, peer)

    def close(self) -> None:
        self._stop = True
        self._thread.join(1)
        self.sock.close()


@pytest.fixture(scope="module")
def server() -> Iterator[SlowDNS]:
    srv = SlowDNS()
    yield srv
    srv.close()


def _config(server: SlowDNS, namespace: str) -> CrawlConfig:
    return CrawlConfig(namespace=namespace, partitions=4, allow_private_ips=True,
                       ip_concurrency=0, host_delay_s=0.0, dns_timeout_s=2.0,
                       dns_servers=[f"127.0.0.1:{server.port}"]).validate()


def test_known_names_answer_at_once_while_slow_ones_are_looked_up(server: SlowDNS) -> None:
    resolver = worker_resolver(_config(server, "dns1"))
    fast = [f"fast{i}.test" for i in range(10)]
    for name in fast:
        assert resolver.resolve(name) == "127.0.0.1"
    # The control: resolving slow names one after another takes SLOW_S each.
    start = time.monotonic()
    for i in range(4):
        resolver.resolve(f"slowctl{i}.test")
    assert time.monotonic() - start >= 4 * SLOW_S * 0.9
    pool = ResolverPool(resolver, timeout_s=2.0)
    try:
        start = time.monotonic()
        pending = [pool.lookup_nowait(f"slow{i}.test") for i in range(30)]
        known = [pool.lookup_nowait(name) for name in fast]
        assert time.monotonic() - start < 0.1
        assert all(isinstance(p, Pending) for p in pending) and known == ["127.0.0.1"] * 10
        answers: list[object] = [None] * len(pending)
        while any(a is None for a in answers):
            answers = [a if a is not None else pool.result(p)  # type: ignore[arg-type]
                       for a, p in zip(answers, pending, strict=True)]
            assert time.monotonic() - start < 3.0, answers
            time.sleep(0.01)
        took = time.monotonic() - start
        assert answers == ["127.0.0.1"] * 30
        assert SLOW_S * 0.9 <= took < 30 * SLOW_S / 4  # looked up side by side, not in turn
    finally:
        pool.close()


def _sent_urls(client: redis.Redis, queue: str) -> list[str]:
    urls = []
    for raw in client.lrange(queue, 0, -1):
        args = json.loads(base64.b64decode(json.loads(raw)["body"]))[0]
        urls += [FetchOrder.from_json(m).lease.entry.url for m in args[0]]
    return urls


def test_scheduler_sends_resolved_hosts_without_waiting_for_slow_names(
        server: SlowDNS, redis_client: redis.Redis, redis_server: EmbeddedRedis) -> None:
    cfg = _config(server, "dns2")
    fast = [f"http://fasthost{i}.test/" for i in range(10)]
    slow = [f"http://slowhost{i}.test/" for i in range(10)]
    frontier = init_crawl(redis_client, cfg, fast + slow)
    scheduler = Scheduler(redis_client, cfg, Celery("dns", broker=redis_server.url))
    for url in fast:  # already resolved (cached), as a crawl's known hosts are
        scheduler.resolver.resolve(url.split("/")[2])
    start = time.monotonic()
    first = scheduler.step()
    step_s = time.monotonic() - start
    scheduler.flush()
    assert first.dispatched == 10 and scheduler.dns_waiting == 10
    assert step_s < SLOW_S / 2, step_s  # the step did not wait for a name server
    assert sorted(_sent_urls(redis_client, frontier.keys.task_queue)) == sorted(fast)
    while scheduler.dns_waiting:
        scheduler.step()
        assert time.monotonic() - start < 3.0
        time.sleep(0.01)
    scheduler.flush()
    assert time.monotonic() - start >= SLOW_S * 0.9
    sent = _sent_urls(redis_client, frontier.keys.task_queue)
    assert sorted(sent) == sorted(fast + slow)  # each exactly once: nothing lost or doubled
    assert frontier.stats()["inflight"] == 20
    scheduler.dns.close()
