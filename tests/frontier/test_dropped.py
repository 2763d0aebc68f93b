"""Dropping domains from a running crawl (frontier/dropped.py, lua/drop_queued.lua) on a real
Redis: the queues of dropped hosts end counted and returned, a leased host is left to its
lease, the frontier's invariants hold, and a worker's view and scope follow the set."""

from __future__ import annotations

import pytest
import redis

from frontier import dropped as dropped_mod
from frontier.config import ConfigError
from frontier.counters import accounted
from frontier.dropped import DroppedView, covering, domain_name
from frontier.frontier import AdmitLink, Completion, Entry
from frontier.scope import Scope
from tests.frontier.test_frontier import check_invariants, make


def _links(hosts: list[str], per_host: int) -> list[AdmitLink]:
    return [AdmitLink(h, f"http://{h}/p{i}", Entry(f"http://{h}/p{i}", depth=1))
            for h in hosts for i in range(per_host)]


def _partitions(f, hosts: list[str]) -> dict[str, int]:
    return {h: f.partition(h) for h in hosts}


@pytest.mark.parametrize("ordering", ["bfs", "indegree"])
def test_a_dropped_hosts_queue_ends_counted_and_a_leased_host_waits_for_its_lease(
        redis_client: redis.Redis, ordering: str) -> None:
    f = make(redis_client, ordering=ordering)
    hosts = ["a.drop.test", "b.drop.test", "keep.test"]
    f.admit(_links(hosts, 5), now=0.0)
    # b.drop.test holds a lease: its queue is left alone (the lease ends first)
    leases, _ = f.acquire(100, now=0.0)
    leased = next(le for le in leases if le.host == "b.drop.test")
    f.complete([Completion(le, 0.0, "fetched") for le in leases if le is not leased])
    before = f.stats()
    taken = f.dropped.drain(_partitions(f, ["a.drop.test", "b.drop.test"]))
    assert sorted(t.entry.url for t in taken) == [f"http://a.drop.test/p{i}" for i in range(1, 5)]
    assert {t.host for t in taken} == {"a.drop.test"}
    st = f.stats()
    assert st["dropped"] == 4 and st["queued"] == before["queued"] - 4
    check_invariants(f)
    # the lease ends dropped; the next drain takes the rest of that host's queue
    f.complete([Completion(leased, 0.0, "dropped")])
    again = f.dropped.drain(_partitions(f, ["b.drop.test"]))
    assert len(again) == 4 and f.stats()["dropped"] == 9
    check_invariants(f)
    # the host not dropped is untouched, and every admitted URL is accounted or queued
    rest, _ = f.acquire(100, now=1.0)
    assert [le.host for le in rest] == ["keep.test"]
    f.complete([Completion(le, 1.0, "fetched") for le in rest])
    st = f.stats()
    assert accounted(st) + st["queued"] == st["admitted"] == 15


def test_a_long_queue_is_taken_in_batches(redis_client: redis.Redis,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dropped_mod, "DROP_BATCH", 3)
    f = make(redis_client)
    f.admit(_links(["long.test"], 10), now=0.0)
    taken = f.dropped.drain(_partitions(f, ["long.test"]))
    assert [t.entry.url for t in taken] == [f"http://long.test/p{i}" for i in range(10)]
    assert f.stats()["queued"] == 0 and f.stats()["dropped"] == 10
    check_invariants(f)


def test_a_queued_revisit_is_dropped_from_the_schedule_not_counted_again(
        redis_client: redis.Redis) -> None:
    f = make(redis_client)
    f.admit(_links(["rv.test"], 2), now=0.0)
    (lease,), _ = f.acquire(10, now=0.0)
    f.complete([Completion(lease, 0.0, "fetched",
                           requeue=Entry(lease.entry.url, 1, revisit=True), at_head=True)])
    taken = f.dropped.drain(_partitions(f, ["rv.test"]))
    assert [t.entry.revisit for t in taken] == [True, False]
    st = f.stats()
    assert st["dropped"] == 1 and st["revisit_dropped"] == 1
    assert accounted(st) == st["admitted"] == 2
    check_invariants(f)


def test_the_set_takes_domain_names_only(redis_client: redis.Redis) -> None:
    f = make(redis_client)
    assert f.dropped.add(["Example.COM.", "bücher.example"]) == 2
    assert f.dropped.add(["example.com"]) == 0
    assert f.dropped.members() == {"example.com", "xn--bcher-kva.example"}
    for bad in ("http://example.com/", "example.com:8080", "", "a b"):
        with pytest.raises(ConfigError):
            f.dropped.add([bad])
    assert f.dropped.remove(["example.com", "other.test"]) == 1
    assert domain_name(" Sub.Example.org ") == "sub.example.org"


def test_a_domain_covers_its_subdomains_and_ports_not_its_look_alikes() -> None:
    domains = frozenset({"example.com"})
    assert covering(domains, "example.com") == "example.com"
    assert covering(domains, "a.b.example.com:8443") == "example.com"
    assert covering(domains, "notexample.com") is None
    assert covering(domains, "example.com.evil.test") is None
    assert covering(frozenset(), "example.com") is None


def test_a_workers_view_rereads_the_set_when_due_and_tells_the_scope(
        redis_client: redis.Redis) -> None:
    f = make(redis_client)
    scope = Scope(["crawl.test"], 0)
    seen: list[frozenset[str]] = []

    def changed(domains: frozenset[str]) -> None:
        seen.append(domains)
        scope.set_dropped(domains)

    view = DroppedView(f.dropped, on_change=changed, refresh_s=10.0)
    assert view.covering("a.crawl.test") is None  # first read, at time 0 of the view
    assert scope.check("http://a.crawl.test/x", "a.crawl.test", 1) is None
    f.dropped.add(["a.crawl.test"])
    assert view.refresh(now=view._next - 0.1) == frozenset()  # not due: the last copy
    assert view.refresh(now=view._next) == {"a.crawl.test"}
    assert seen == [frozenset({"a.crawl.test"})]
    # the scope's host memo was emptied: the memoized "in scope" answer is gone
    assert scope.check("http://a.crawl.test/x", "a.crawl.test", 1) == "dropped_domain"
    assert scope.check("http://b.crawl.test/x", "b.crawl.test", 1) is None
    f.dropped.remove(["a.crawl.test"])
    view.refresh(now=view._next)
    assert scope.check("http://a.crawl.test/x", "a.crawl.test", 1) is None
    assert len(seen) == 2


def test_a_view_keeps_its_copy_when_redis_is_away(redis_client: redis.Redis) -> None:
    f = make(redis_client)
    f.dropped.add(["gone.test"])
    view = DroppedView(f.dropped)
    assert view.covering("www.gone.test") == "gone.test"
    broken = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    view._dropped = dropped_mod.Dropped(dropped_mod.Store(broken, f.config, f.keys))
    assert view.refresh(now=view._next) == {"gone.test"}


def test_a_sweep_finds_a_domains_queued_hosts_due_or_waiting_but_not_leased_ones(
        redis_client: redis.Redis) -> None:
    """``hosts_under`` reads the ready heaps: a host waiting an hour on its delay is found, a
    leased host (not in them) and look-alike names are not; one worker claims the sweep."""
    f = make(redis_client)
    hosts = ["sw.test", "a.sw.test", "b.sw.test:8080", "waiting.sw.test", "leased.sw.test",
             "notsw.test", "sw.test.evil.test", "other.test"]
    f.admit(_links(hosts, 3), now=0.0)
    leases, _ = f.acquire(100, now=0.0)
    by_host = {le.host: le for le in leases}
    held = by_host.pop("leased.sw.test")
    f.complete([Completion(le, 3600.0 if le.host == "waiting.sw.test" else 0.0, "fetched")
                for le in by_host.values()])
    found = f.dropped.hosts_under("sw.test", range(f.partitions))
    assert found == _partitions(f, ["sw.test", "a.sw.test", "b.sw.test:8080", "waiting.sw.test"])
    assert f.dropped.hosts_under("none.test", range(f.partitions)) == {}
    taken = f.dropped.drain(found)
    assert len(taken) == 4 * 2 and f.stats()["dropped"] == 8
    check_invariants(f)
    f.complete([Completion(held, 0.0, "fetched")])
    # the sweep is claimed once; undoing the drop frees the claim for a later drop
    f.dropped.add(["sw.test"])
    assert f.dropped.claim_sweep("sw.test", "w1") is True
    assert f.dropped.claim_sweep("sw.test", "w2") is False
    f.dropped.remove(["sw.test"])
    assert f.dropped.claim_sweep("sw.test", "w2") is True
    # a failed sweep gives back only its own claim, not one another worker took since
    assert f.dropped.release_sweep("sw.test", "w1") is False
    assert f.dropped.claim_sweep("sw.test", "w3") is False
    assert f.dropped.release_sweep("sw.test", "w2") is True
    assert f.dropped.claim_sweep("sw.test", "w3") is True
