"""Frontier scripts on a real Redis: admission, leases, completion, expiry, invariants."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from frontier.config import CrawlConfig
from frontier.frontier import AdmitLink, Completion, Entry, Frontier

#: URL-seen backend of the Frontiers ``make`` builds (set per test by ``bloom_backend``).
_BACKEND = {"name": "auto"}


@pytest.fixture(params=["lua", "redisbloom"])
def bloom_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a test once per URL-seen backend (modules opt in with usefixtures)."""
    _BACKEND["name"] = request.param
    yield request.param
    _BACKEND["name"] = "auto"


pytestmark = pytest.mark.usefixtures("bloom_backend")


def make(client: redis.Redis, **kw: object) -> Frontier:
    settings: dict[str, object] = {"partitions": 8, "bloom_capacity": 100_000,
                                   "allow_private_ips": True, "host_delay_s": 0.0,
                                   "bloom_backend": _BACKEND["name"], **kw}
    cfg = CrawlConfig(**settings)  # type: ignore[arg-type]
    return Frontier(client, cfg.validate())


def links(hosts: int, per_host: int) -> list[AdmitLink]:
    out = []
    for h in range(hosts):
        host = f"h{h}.test"
        for i in range(per_host):
            url = f"http://{host}/p{i}"
            out.append(AdmitLink(host, url, Entry(url, depth=1)))
    return out


def check_invariants(f: Frontier) -> None:
    """The invariants of frontier.frontier's docstring, read straight from Redis."""
    r, total_q, total_leases = f.r, 0, 0
    for p in range(f.partitions):
        pre = f.keys.prefix(p)
        ready = {k.decode() for k in r.zrange(pre + "r", 0, -1)}
        due = {k.decode() for k in r.zrange(pre + "pr", 0, -1)}
        assert not ready & due
        ready |= due
        busy = {k.decode(): v.decode() for k, v in r.hgetall(pre + "hb").items()}
        size = r.llen if f.mode == "l" else r.zcard
        queues = {k.decode()[len(pre) + 2:]: size(k) for k in r.scan_iter(pre + "q:*")}
        if f.mode != "l":
            assert r.hlen(pre + "qe") == sum(queues.values())
        for host, n in queues.items():
            total_q += n
            assert (host in ready) == (n > 0 and host not in busy), host
        assert not ready & set(busy)
        leases = r.hgetall(pre + "L")
        assert len(leases) == r.zcard(pre + "D") == len(busy)
        total_leases += len(leases)
    st = f.stats()
    assert st["queued"] == total_q
    assert st["inflight"] == total_leases


def test_admission_dedups_in_one_batch_and_across_batches(redis_client: redis.Redis) -> None:
    f = make(redis_client)
    batch = links(5, 10)
    res = f.admit(batch + batch[:7])
    assert (res.admitted, res.rejected) == (50, 7)
    assert f.admit(batch).admitted == 0
    st = f.stats()
    assert st["queued"] == 50 and st["admitted"] == 50 and st["seen_rejected"] == 57
    check_invariants(f)


def test_one_lease_per_host_and_fifo_order(redis_client: redis.Redis) -> None:
    f = make(redis_client)
    f.admit(links(3, 4))
    leases, _ = f.acquire(per_partition=100)
    assert sorted(le.host for le in leases) == ["h0.test", "h1.test", "h2.test"]
    assert all(le.entry.url.endswith("/p0") for le in leases)
    again, _ = f.acquire(per_partition=100)
    assert again == []  # every host is leased: nothing else may go out
    check_invariants(f)


def test_completion_sets_delay_and_host_returns_when_due(redis_client: redis.Redis) -> None:
    f = make(redis_client)
    f.admit(links(1, 3), now=1000.0)
    leases, _ = f.acquire(10, now=1000.0)
    assert len(leases) == 1
    f.complete([Completion(leases[0], next_allowed=1005.0, outcome="fetched")])
    check_invariants(f)
    early, earliest = f.acquire(10, now=1004.9)
    assert early == [] and earliest == 1005.0
    due, _ = f.acquire(10, now=1005.0)
    assert [le.entry.url for le in due] == ["http://h0.test/p1"]


def test_requeue_at_head_and_tail(redis_client: redis.Redis) -> None:
    f = make(redis_client)
    f.admit(links(1, 2), now=0.0)
    (lease,), _ = f.acquire(10, now=0.0)
    retry = Entry(lease.entry.url, lease.entry.depth, attempts=1)
    f.complete([Completion(lease, 0.0, "retries", requeue=retry)])
    (second,), _ = f.acquire(10, now=0.0)
    assert second.entry.url.endswith("/p1")
    f.complete([Completion(second, 0.0, "robots_fetches", requeue=second.entry, at_head=True)])
    (third,), _ = f.acquire(10, now=0.0)
    assert third.entry.url.endswith("/p1")
    f.complete([Completion(third, 0.0, "fetched")])
    (fourth,), _ = f.acquire(10, now=0.0)
    assert fourth.entry == retry
    check_invariants(f)


def test_expired_lease_is_requeued_and_stale_completion_ignored(redis_client: redis.Redis) -> None:
    f = make(redis_client, lease_ttl_s=10.0, total_timeout_s=0.5)
    f.admit(links(2, 2), now=0.0)
    leases, _ = f.acquire(10, now=0.0)
    assert len(leases) == 2
    assert f.reap(now=5.0) == 0
    assert f.reap(now=10.5) == 2
    check_invariants(f)
    assert f.stats()["requeued"] == 2 and f.stats()["inflight"] == 0
    assert f.lease_alive(leases) == [False, False]
    # The old owner finishes late: its completion must change nothing.
    assert f.complete([Completion(le, 99.0, "fetched") for le in leases]) == 2
    assert f.stats()["fetched"] == 0
    again, _ = f.acquire(10, now=11.0)
    assert sorted(le.entry.url for le in again) == sorted(le.entry.url for le in leases)
    assert f.lease_alive(again) == [True, True]
    check_invariants(f)


def test_busy_host_gets_new_links_without_entering_heap(redis_client: redis.Redis) -> None:
    f = make(redis_client)
    f.admit(links(1, 1), now=0.0)
    (lease,), _ = f.acquire(10, now=0.0)
    f.admit([AdmitLink("h0.test", "http://h0.test/new", Entry("http://h0.test/new"))], now=0.0)
    check_invariants(f)
    assert f.acquire(10, now=0.0)[0] == []
    f.complete([Completion(lease, 2.0, "fetched")])
    (nxt,), _ = f.acquire(10, now=2.0)
    assert nxt.entry.url == "http://h0.test/new"


def test_ip_gate_limits_concurrency_and_delay(redis_client: redis.Redis) -> None:
    f = make(redis_client, ip_concurrency=1)
    assert f.ip_acquire([("127.0.0.5", "a"), ("127.0.0.5", "b"), ("127.0.0.6", "c")],
                        now=0.0) == [0.0, 0.05, 0.0]
    pipe = f.pipeline()
    f.queue_ip_release(pipe, [("127.0.0.5", "a", 3.0)])
    pipe.execute()
    assert f.ip_acquire([("127.0.0.5", "b")], now=1.0) == [2.0]
    assert f.ip_acquire([("127.0.0.5", "b")], now=3.0) == [0.0]


def test_entry_codec_roundtrip() -> None:
    for e in (Entry("http://a/b c", 3), Entry("http://x/", 0, 2, 1)):
        assert Entry.decode(e.encode()) == e


def test_begin_of_a_batch_staggers_deadlines(redis_client: redis.Redis) -> None:
    f = make(redis_client)
    f.admit(links(3, 1), now=0.0)
    leases, _ = f.acquire(10, now=0.0)
    assert len(leases) == 3
    # One round trip for the task: the i-th fetch may start after the i before it.
    assert f.begin(leases, 5.0, now=0.0) == [True, True, True]
    assert f.reap(now=5.5) == 1
    assert f.begin(leases, 5.0, now=5.5) == [False, True, True]
    assert f.reap(now=5.5 + 10.5) == 1  # renewed at 5.5: 5.5 + 2 x 5 for the second
    assert f.reap(now=5.5 + 15.5) == 1
    check_invariants(f)


def test_bfs_takes_the_last_come_due_first_and_one_in_32_oldest(
        redis_client: redis.Redis) -> None:
    """Warm hosts first: of the hosts due, the ones whose delay ended last (their kept-alive
    connection still open) go out first, and one lease in 32 (counted over calls) goes to
    the longest waiting, so none starves while the crawl runs at capacity."""
    f = make(redis_client, partitions=1)
    f.admit(links(40, 3), now=0.0)
    first, _ = f.acquire(100, now=0.0)  # 100 asked so far
    assert len(first) == 40
    f.complete([Completion(le, next_allowed=100.0 + int(le.host[1:-5]), outcome="fetched")
                for le in first])
    taken, _ = f.acquire(28, now=200.0)  # all 40 due; 128 asked: the 4th of 32 falls here
    hosts = sorted(int(le.host[1:-5]) for le in taken)
    # 27 of the newest (39 .. 13) and the oldest (0); oldest-first would give 0 .. 27
    assert hosts == [0, *range(13, 40)]
    f.complete([Completion(le, next_allowed=200.5, outcome="fetched") for le in taken])
    # 1 .. 12 waited longest; one of them goes out each 32 asked, oldest first, even while
    # 28 warm hosts come due every step (last-come-first alone would never reach 1 .. 3)
    waited = []
    for step in range(1, 4):
        now = 200.0 + step
        got, _ = f.acquire(32, now=now)
        waited += [int(le.host[1:-5]) for le in got]
        f.complete([Completion(le, next_allowed=now + 0.5, outcome="fetched") for le in got])
    assert {1, 2, 3} <= set(waited)
    check_invariants(f)
