"""Front-queue priorities (random, indegree, opic) and admission caps, on a real Redis.

Priority picks among due hosts and among a host's URLs, never past a host's politeness: a host
still holds at most one lease, and its delay still applies.
"""

from __future__ import annotations

import pytest
import redis

from frontier.frontier import AdmitLink, AdmitResult, Completion, Entry, Frontier
from tests.frontier.test_frontier import bloom_backend, check_invariants, make  # noqa: F401

#: Once per URL-seen backend (tests/frontier/test_frontier.py).
pytestmark = pytest.mark.usefixtures("bloom_backend")


def link(host: str, path: str, prio: float = 1.0) -> AdmitLink:
    url = f"http://{host}{path}"
    return AdmitLink(host, url, Entry(url, depth=2), prio)


def admit0(f: Frontier, links: list) -> AdmitResult:
    return f.admit(links, now=0.0)


def drain_host(f: Frontier, now: float = 0.0) -> list[str]:
    """Lease and complete URLs one by one (the queue's priority order)."""
    order = []
    while True:
        leases, _ = f.acquire(10, now=now)
        if not leases:
            return order
        for lease in leases:
            order.append(lease.entry.url)
        f.complete([Completion(le, now, "fetched") for le in leases])
        check_invariants(f)


def test_indegree_fetches_most_linked_first_and_keeps_depth(redis_client: redis.Redis) -> None:
    f = make(redis_client, ordering="indegree")
    admit0(f, [link("a.test", "/one"), link("a.test", "/three"), link("a.test", "/two")])
    # Links arriving later raise the in-degree of URLs still queued.
    res = admit0(f, [link("a.test", "/three"), link("a.test", "/three"), link("a.test", "/two")])
    assert res.admitted == 0
    assert f.stats()["reprioritized"] == 3
    check_invariants(f)
    leases, _ = f.acquire(10, now=0.0)
    assert [le.entry.url for le in leases] == ["http://a.test/three"]
    assert leases[0].priority == 3.0 and leases[0].entry.depth == 2
    f.complete([Completion(leases[0], 0.0, "fetched")])
    assert drain_host(f) == ["http://a.test/two", "http://a.test/one"]


def test_bfs_ignores_priorities(redis_client: redis.Redis) -> None:
    f = make(redis_client)
    admit0(f, [link("a.test", "/one", 1), link("a.test", "/two", 50)])
    admit0(f, [link("a.test", "/two", 50)])
    assert drain_host(f) == ["http://a.test/one", "http://a.test/two"]


def test_opic_cash_accumulates_and_travels_with_the_lease(redis_client: redis.Redis) -> None:
    f = make(redis_client, ordering="opic")
    admit0(f, [link("a.test", "/x", 0.25), link("a.test", "/y", 0.5)])
    admit0(f, [link("a.test", "/x", 0.5)])
    leases, _ = f.acquire(10, now=0.0)
    assert leases[0].entry.url == "http://a.test/x" and leases[0].priority == 0.75


def test_priority_chooses_among_due_hosts_not_past_their_delay(redis_client: redis.Redis) -> None:
    f = make(redis_client, ordering="indegree", partitions=1)
    admit0(f, [link("low.test", "/p", 1), link("high.test", "/p", 5), link("mid.test", "/p", 3)])
    (first,), _ = f.acquire(1, now=0.0)
    assert first.host == "high.test"
    # high.test gets a better URL while leased, but must wait out its delay (until t=10).
    admit0(f, [link("high.test", "/q", 9)])
    f.complete([Completion(first, 10.0, "fetched")])
    (second,), _ = f.acquire(1, now=1.0)
    assert second.host == "mid.test"
    f.complete([Completion(second, 1.0, "fetched")])
    (third,), _ = f.acquire(1, now=2.0)
    assert third.host == "low.test"
    f.complete([Completion(third, 2.0, "fetched")])
    assert f.acquire(1, now=9.9)[0] == []
    (fourth,), _ = f.acquire(1, now=10.0)
    assert fourth.entry.url == "http://high.test/q"
    check_invariants(f)


def test_random_order_differs_from_fifo_and_loses_nothing(redis_client: redis.Redis) -> None:
    f = make(redis_client, ordering="random")
    paths = [f"/p{i}" for i in range(40)]
    admit0(f, [link("a.test", p) for p in paths])
    order = drain_host(f)
    assert sorted(order) == sorted(f"http://a.test{p}" for p in paths)
    assert order != [f"http://a.test{p}" for p in paths]


def test_requeue_and_reap_keep_entry_and_priority(redis_client: redis.Redis) -> None:
    f = make(redis_client, ordering="indegree", lease_ttl_s=70.0)
    admit0(f, [link("a.test", "/x", 4), link("a.test", "/y", 2)])
    (lease,), _ = f.acquire(10, now=0.0)
    retry = Entry(lease.entry.url, lease.entry.depth, 1, 0)
    f.complete([Completion(lease, 0.0, "retries", requeue=retry)])
    (again,), _ = f.acquire(10, now=0.0)
    assert again.entry == retry and again.priority == 4
    assert f.reap(now=1000.0) == 1
    check_invariants(f)
    (third,), _ = f.acquire(10, now=1000.0)
    assert third.entry == retry and third.priority == 4


def test_per_host_cap_and_query_variant_cap(redis_client: redis.Redis) -> None:
    f = make(redis_client, max_pages_per_host=5, max_query_variants_per_path=3)
    res = admit0(f, [link("a.test", f"/p{i}") for i in range(8)] + [link("b.test", "/p")])
    assert res.admitted == 6
    res = admit0(f, [link("c.test", f"/s?page={i}") for i in range(6)]
                  + [link("c.test", f"/t?page={i}") for i in range(2)])
    assert res.admitted == 5
    st = f.stats()
    assert st["over_host_cap"] == 3 and st["trap_query_variants"] == 3
    # Refused URLs are counted once, not again each time they are linked.
    admit0(f, [link("a.test", "/p7"), link("c.test", "/s?page=5")])
    st = f.stats()
    assert st["over_host_cap"] == 3 and st["trap_query_variants"] == 3
    check_invariants(f)


def test_domain_budget_grows_with_linking_domains(redis_client: redis.Redis) -> None:
    f = make(redis_client, domain_budget_base=3, domain_budget_per_linking_domain=2)

    def admit(links: list, linkers: set[str]) -> int:
        allowance = f.domain_allowance({"trap.test": linkers})
        pipe = f.pipeline()
        batch = f.queue_admit(pipe, links, 0.0, allowance=allowance,
                              domain_of=lambda h: ".".join(h.split(".")[-2:]))
        res = batch.totals(pipe.execute())
        f.queue_domain_spent(pipe := f.pipeline(), res.by_domain)
        pipe.execute()
        return res.admitted

    farm = [link(f"s{i}.trap.test", "/") for i in range(20)]
    assert admit(farm[:10], {"trap.test"}) == 3  # its own links do not raise its budget
    assert f.stats()["over_domain_budget"] == 7
    assert admit(farm[10:], {"x.test", "y.test"}) == 4  # 3 + 2 x 2 = 7 in all
    # URLs refused for budget are not marked seen: offered again as the budget grows, all
    # are admitted, and the admitted total never exceeds the budget.
    linkers = {"x.test", "y.test"}
    for n in range(3, 20):
        linkers.add(f"l{n}.test")
        admit(farm[:10], linkers)
        assert f.stats()["admitted"] <= 3 + 2 * len(linkers)
        if f.stats()["admitted"] == 14:
            break
    assert f.stats()["admitted"] == 14
    check_invariants(f)
