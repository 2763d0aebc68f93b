"""The revisit schedule's member form (frontier/revisits.py): the host is left out when
lua/promote_revisits.lua finds the same host queue from the URL, and kept when it would not.
Each URL goes through the real scripts: admitted, leased, completed into the schedule
(complete.lua), promoted (promote_revisits.lua) and leased again from its own host queue."""

from __future__ import annotations

import time

import pytest
import redis

from frontier.config import CrawlConfig
from frontier.counters import Outcome
from frontier.frontier import AdmitLink, Entry, Frontier
from frontier.records import Completion
from frontier.revisits import member_entry, member_host, schedule_member, url_host
from frontier.urls import host_of

#: (host queue key, URL): the URL's own host, a port, userinfo, an IDNA host, a host key
#: that is not the URL's own (as a mirror or a redirect's queue would be).
CASES = [
    ("a.test", "https://a.test/x?q=1"),
    ("b.test:8443", "https://b.test:8443/p/q"),
    ("c.test", "https://user:pw@c.test/y"),
    ("xn--bcher-kva.test", "https://xn--bcher-kva.test/b%C3%BCcher"),
    ("d.test", "https://d.test"),
    ("mirror.test", "https://orig.test/z"),
]


def test_the_member_names_its_host_only_when_the_url_does_not() -> None:
    for host, url in CASES:
        member = schedule_member(host, Entry(url, 2))
        assert member_host(member) == host and member_entry(member) == Entry(url, 2)
        assert ("\t" in member) == (url_host(url) != host), member
        if host != "mirror.test":  # a canonical URL: the script's host is host_of's
            assert url_host(url) == host_of(url) == host
    assert url_host("no-scheme.test/x") is None
    assert "\t" in schedule_member("no-scheme.test", Entry("no-scheme.test/x"))
    # a URL whose netloc is not lower case is not its host key (host_of lowers): kept
    assert schedule_member("e.test", Entry("https://E.test/")) == "e.test\t0 https://E.test/"


def _frontier(client: redis.Redis, ordering: str) -> Frontier:
    cfg = CrawlConfig(partitions=4, bloom_capacity=10_000, allow_private_ips=True,
                      host_delay_s=0.0, continuous=True, ordering=ordering)
    return Frontier(client, cfg.validate())


@pytest.mark.parametrize("ordering", ["bfs", "indegree"])  # LIST and ZSET host queues
def test_a_revisit_comes_back_to_its_own_host_queue(redis_client: redis.Redis,
                                                     ordering: str) -> None:
    fr = _frontier(redis_client, ordering)
    now = time.time()
    fr.admit([AdmitLink(host, url, Entry(url, 2)) for host, url in CASES], now)
    leases, _ = fr.acquire(10, now + 1)
    assert sorted(lease.host for lease in leases) == sorted(h for h, _ in CASES)
    fr.complete(Completion(lease, now + 1, Outcome.FETCHED, revisit_at=now + 5)
                for lease in leases)
    members = {p: redis_client.zrange(fr.keys.revisits(p), 0, -1) for p in range(4)}
    stored = [m.decode() for ms in members.values() for m in ms]
    assert sorted(stored) == sorted(schedule_member(h, Entry(u, 2)) for h, u in CASES)
    assert sum("\t" in m for m in stored) == 1  # only the mirror's names its host
    shares = dict.fromkeys(range(4), 100.0)
    promoted = fr.revisits.promote(range(4), shares, now + 10)
    assert sum(r.promoted for r in promoted.values()) == len(CASES)
    again, _ = fr.acquire(10, now + 11)
    assert sorted((lease.host, lease.entry.url) for lease in again) == sorted(CASES)
    assert all(lease.entry.revisit and lease.entry.depth == 2 for lease in again)
    assert fr.revisits.status(now + 11).scheduled == 0


def test_a_member_without_its_host_goes_to_the_urls_host(redis_client: redis.Redis) -> None:
    """The negative control of keeping the mirror's host: the same entry without it is
    promoted into the queue of the URL's own host, not the mirror's."""
    fr = _frontier(redis_client, "bfs")
    url = "https://orig.test/z"
    part = fr.partition("mirror.test")
    redis_client.zadd(fr.keys.revisits(part), {Entry(url, 2).encode(): 1.0})
    fr.revisits.promote([part], {part: 100.0}, time.time())
    prefix = fr.keys.prefix(part)
    assert redis_client.llen(prefix + "q:orig.test") == 1
    assert redis_client.llen(prefix + "q:mirror.test") == 0
