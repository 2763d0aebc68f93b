"""Balanced rendezvous assignment: even loads, few moves on join/leave, and fenced ownership."""

from __future__ import annotations

import redis

from frontier.config import CrawlConfig
from frontier.frontier import AdmitLink, Entry, Frontier
from frontier.ownership import assign


def moved(a: dict[str, list[int]], b: dict[str, list[int]]) -> int:
    owner_a = {p: m for m, ps in a.items() for p in ps}
    owner_b = {p: m for m, ps in b.items() for p in ps}
    return sum(1 for p in owner_a if owner_a[p] != owner_b[p])


def test_every_partition_has_one_owner_and_loads_are_even() -> None:
    for n in range(1, 12):
        members = [f"worker-{i}@host{i % 3}" for i in range(n)]
        a = assign(members, 64)
        owned = sorted(p for ps in a.values() for p in ps)
        assert owned == list(range(64))
        loads = [len(ps) for ps in a.values()]
        assert max(loads) - min(loads) <= 1


def test_join_and_leave_move_about_one_nth() -> None:
    members = [f"w{i}" for i in range(8)]
    total_join = total_leave = 0
    for n in range(2, 8):
        before = assign(members[:n], 256)
        after = assign(members[: n + 1], 256)
        total_join += moved(before, after)
        ideal = 256 / (n + 1)
        assert moved(before, after) <= 1.6 * ideal + 4, (n, moved(before, after), ideal)
        total_leave += moved(after, before)
    # On average, well under 2x the minimum possible movement.
    ideal_total = sum(256 / (n + 1) for n in range(2, 8))
    assert total_join <= 1.4 * ideal_total
    assert assign(["a", "b"], 16) == assign(["b", "a", "a"], 16)  # order-free, deterministic


def test_fencing_rejects_an_ex_owner(redis_client: redis.Redis) -> None:
    cfg = CrawlConfig(partitions=2, allow_private_ips=True, host_delay_s=0).validate()
    f = Frontier(redis_client, cfg)
    host = next(f"h{i}.test" for i in range(100) if f.partition(f"h{i}.test") == 0)
    f.admit([AdmitLink(host, f"http://{host}/{i}", Entry(f"http://{host}/{i}")) for i in range(3)])
    tokens = f.claim_partitions("old", [0], ttl_s=0.05)
    assert tokens == {0: 1}
    assert f.claim_partitions("new", [0], ttl_s=5) == {}  # held by "old"
    old = {0: f"old|{tokens[0]}"}
    leases, _ = f.acquire(10, partitions=old)
    assert len(leases) == 1 and not f.fenced
    f.complete([])
    import time

    time.sleep(0.1)  # "old" is paused past its TTL; "new" takes over with a larger token
    new_tokens = f.claim_partitions("new", [0], ttl_s=5)
    assert new_tokens[0] > tokens[0]
    assert f.acquire(10, partitions=old) == ([], None) and f.fenced == {0}
    assert f.reap(now=time.time() + 10_000, partitions=old) == 0  # ex-owner cannot reap
    assert f.release_partitions(old) == 0  # nor release the new owner's lease
    assert f.reap(now=time.time() + 10_000, partitions={0: f"new|{new_tokens[0]}"}) == 1
    assert f.partition_owners()[0] == "new"


def _three_hosts_leased(f: Frontier, owner: dict[int, str]) -> list:
    hosts = [h for h in (f"o{i}.test" for i in range(200)) if f.partition(h) == 0][:3]
    f.admit([AdmitLink(h, f"http://{h}/", Entry(f"http://{h}/")) for h in hosts])
    leases, _ = f.acquire(10, partitions=owner)
    assert len(leases) == 3
    return leases


def test_a_lost_owners_undispatched_leases_come_back_at_once(redis_client: redis.Redis) -> None:
    """An owner that dies between acquiring leases and a worker beginning them (its scheduler
    held them, or the task it sent died with it) must not strand them for lease_ttl_s: the
    next owner's reaper re-queues every lease of the lost owner that no worker began, and
    leaves the begun one to its worker's keeper."""
    import time

    cfg = CrawlConfig(partitions=1, allow_private_ips=True, host_delay_s=0,
                      lease_ttl_s=300.0, lease_keep_s=10.0).validate()
    f = Frontier(redis_client, cfg)
    tokens = f.claim_partitions("dead", [0], ttl_s=0.05)
    leases = _three_hosts_leased(f, {0: f"dead|{tokens[0]}"})
    assert f.begin(leases[:1], cfg.lease_keep_s, stagger=False) == [True]  # a worker has it
    time.sleep(0.1)  # "dead" stops renewing: its claim expires, nobody released it
    new = {0: f"heir|{f.claim_partitions('heir', [0], ttl_s=5)[0]}"}
    assert f.reap(partitions=new) == 2  # now, not 300 s later
    assert f.stats()["queued"] == 2 and f.stats()["inflight"] == 1
    assert f.begin(leases[1:], cfg.lease_keep_s, stagger=False) == [False, False]  # late task
    assert f.begin(leases[:1], cfg.lease_keep_s, stagger=False) == [True]
    again, _ = f.acquire(10, partitions=new)
    assert sorted(le.host for le in again) == sorted(le.host for le in leases[1:])
    assert f.reap(partitions=new) == 0  # the heir's own leases are not orphans


def test_a_released_owners_leases_are_left_to_their_tasks(redis_client: redis.Redis) -> None:
    """The control: an owner that hands its partition over cleanly sent its tasks (they are
    on their way to workers), so the next owner does not re-queue its leases early."""
    cfg = CrawlConfig(partitions=1, allow_private_ips=True, host_delay_s=0,
                      lease_ttl_s=300.0, lease_keep_s=10.0).validate()
    f = Frontier(redis_client, cfg)
    tokens = f.claim_partitions("old", [0], ttl_s=5)
    old = {0: f"old|{tokens[0]}"}
    leases = _three_hosts_leased(f, old)
    assert f.release_partitions(old) == 1
    new = {0: f"new|{f.claim_partitions('new', [0], ttl_s=5)[0]}"}
    assert f.reap(partitions=new) == 0
    assert f.begin(leases, cfg.lease_keep_s, stagger=False) == [True, True, True]


def test_a_worker_restarted_under_the_same_name_does_not_inherit_the_dead_claims(
        redis_client: redis.Redis) -> None:
    """``trawl worker --name w1`` killed and started again (a container keeps its hostname):
    the new process is a new member, so the dead one's claims expire and are taken over
    (and its undispatched leases re-queued) instead of being renewed as if still alive."""
    import time

    from celery import Celery

    from workers.cluster.member import Member

    cfg = CrawlConfig(partitions=4, allow_private_ips=True, host_delay_s=0,
                      partition_ttl_s=0.5).validate()
    dead = Member(redis_client, cfg, Celery("restart-test"), name="w1")
    dead.heartbeat()
    assert sorted(dead.owned) == [0, 1, 2, 3]
    reborn = Member(redis_client, cfg, Celery("restart-test"), name="w1")
    assert reborn.id != dead.id and reborn.id.startswith("w1-")
    reborn.heartbeat()
    assert dict(reborn.owned) == {}  # still the dead process's, until their TTL runs out
    time.sleep(0.6)
    reborn.heartbeat()
    assert sorted(reborn.owned) == [0, 1, 2, 3]
    assert all(v.split("|")[1] != dead.owned[p].split("|")[1] for p, v in reborn.owned.items())
