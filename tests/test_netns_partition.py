"""Network-partition drill: one worker cut off from Redis for 30 s in the middle of a crawl.

Topology from ``deploy/netns-cluster``: Redis, the sandbox web and three worker nodes, each in
its own network namespace; every worker a real ``trawl worker`` (member + Celery worker, Redis
as the broker too). Mid-crawl, while w1 owns partitions and the crawl has URL leases out, every
packet between w1 and Redis is dropped for 30 s (blackhole routes both ways; w1 still reaches
the web, so it could go on fetching if anything let it). Then the link comes back.

Checked:
  * w1 stops scheduling (its member lapses: logged) and each of its partitions gets a new owner
    with a newer fencing token once its lease TTL (``partition_ttl_s``, the default 15 s) ran
    out; the new owners reap the URL leases left behind (``requeued`` grows during the cut);
  * the fencing holds against w1's stale state: acquire with the owner values w1 held at the
    cut ("w1|<token>", what a late packet or a resumed thread of w1 would carry) is refused for
    every one of its partitions; what w1 really sent late is counted too (``stale``
    completions, tasks skipped by ``begin`` as ``stale_messages``, ``fenced`` acquires) and
    printed with the drill's figures;
  * w1's process survives the cut, rejoins and owns its share again (even loads over 3);
  * judged like every drill (``tests/drillkit.judge``) from the sandbox's request log: every
    URL fetched (0 lost), refetches within the crash drill's bound, never two requests to one
    host in flight at once, host delays and Crawl-delay kept.

The member's side of it (lapse, rejoin, fenced replies) is also tested on its own, without
namespaces, on the embedded Redis of the other tests.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from frontier.config import CrawlConfig
from frontier.frontier import Frontier
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig
from tests.checks import crawler_entries
from tests.drillkit import Drill, drill_config, judge, refetched
from tests.netns import NetnsCluster, NetnsRedis, NetnsWeb, NetnsWorkerPool, netns_unavailable
from tests.waiting import wait_for
from workers.cli.crawl import init_crawl
from workers.cluster.member import Member

REASON = netns_unavailable()
needs_netns = pytest.mark.skipif(REASON is not None, reason=f"netns harness: {REASON}")

PASSWORD = "partition-pass"
# The drill web of tests/drillkit.py, smaller (~4,400 pages), one web address per host.
WEB = SandboxConfig(seed=5, hosts=40, pages_per_host=100, ips=40, crawl_delay_s=0.3,
                    robots_slow_s=0.3, slow_page_s=0.3, hang_s=4.0)
WORKERS = 3
CONCURRENCY = 4
CUT_S = 30.0
PARTITION_TTL_S = 15.0  # the default, spelled out: the drill is about this number
CUT_AT_FETCHED = 600  # cut once the crawl is well under way (queue long, all workers busy)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[tuple[NetnsCluster, NetnsRedis]]:
    net = NetnsCluster(prefix=f"tp{os.getpid() % 100000}", workers=WORKERS, web_ips=WEB.ips)
    with net:
        server = net.start_redis(tmp_path / "redis", PASSWORD)
        try:
            yield net, server
        finally:
            server.stop()


def own_values(d: Drill, parts: list[int]) -> dict[int, str]:
    pipe = d.frontier.pipeline()
    for p in parts:
        pipe.command("get", d.frontier.keys.prefix(p) + "own")
    return {p: v.decode() if v else "" for p, v in zip(parts, pipe.execute(), strict=True)}


CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()\n"
           "    print('OPEN')\n"
           "except OSError as exc:\n"
           "    print('FAIL', exc)\n")


def reachable(net: NetnsCluster, node: str, host: str, port: int) -> bool:
    res = net.run(node, [sys.executable, "-c", CONNECT, host, str(port)], timeout=20)
    return res.stdout.startswith("OPEN")


def wait_for_leases_of(frontier: Frontier, parts: list[int], timeout_s: float) -> dict[str, int]:
    """The crawl's totals at an instant when ``parts`` hold URL leases in flight. Between
    tasks (every due host waiting out its delay) a partition can have none, so one sample
    is not enough: poll until one shows, within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        per_part = frontier.partition_stats()
        if sum(per_part[p].get("inflight", 0) for p in parts) > 0:
            totals = frontier.stats()
            assert totals["queued"] > 0, totals
            return totals
        assert time.monotonic() < deadline, f"no lease in flight on {parts}: {per_part}"
        time.sleep(0.02)


def token(value: str) -> int:
    return int(value.split("|")[1]) if "|" in value else 0


@pytest.mark.e2e
@needs_netns
@pytest.mark.timeout(300)
def test_partition_drill_worker_cut_off_from_redis_for_30s(
        harness: tuple[NetnsCluster, NetnsRedis], tmp_path: Path) -> None:
    net, server = harness
    client = server.client()
    t_begin = time.monotonic()
    with NetnsWeb(net, WEB, tmp_path / "requests.log") as web:
        config = drill_config(web, "part", tmp_path / "out", partition_ttl_s=PARTITION_TTL_S)
        frontier = init_crawl(client, config, list(web.seeds))
        pool = NetnsWorkerPool(server.url, config.namespace, 0, CONCURRENCY, tmp_path / "logs",
                               net=net, loglevel=os.environ.get("DRILL_LOGLEVEL", "WARNING"))
        d = Drill(web, frontier, pool, tmp_path / "out")
        try:
            for i in range(WORKERS):
                pool.start_one(i)
            d.settle_assignment(WORKERS, timeout_s=60.0)
            deadline = time.monotonic() + 90.0
            while d.fetched() < CUT_AT_FETCHED:
                assert time.monotonic() < deadline, f"crawl too slow: {frontier.stats()}"
                assert pool.alive() == WORKERS, pool.log_text(0)[-3000:]
                time.sleep(0.2)
            w1_parts = [p for p, o in enumerate(frontier.partition_owners())
                        if o and o.startswith("w1-")]
            assert w1_parts, frontier.partition_owners()
            held = own_values(d, w1_parts)
            before = wait_for_leases_of(frontier, w1_parts, timeout_s=30.0)

            net.cut("w1", "drop", peers=["redis"])
            t_cut, cut_wall = time.monotonic(), time.time()
            # Cut off from Redis only: the web (any of its addresses) still answers w1.
            assert not reachable(net, "w1", net.ip("redis"), 6379)
            assert reachable(net, "w1", net.web_addresses()[-1], web.port)
            first_moved: float | None = None
            all_moved: float | None = None
            while (elapsed := time.monotonic() - t_cut) < CUT_S:
                if all_moved is None:
                    now_held = own_values(d, w1_parts)
                    moved = [p for p in w1_parts
                             if now_held[p] and not now_held[p].startswith("w1|")]
                    if moved and first_moved is None:
                        first_moved = elapsed
                    if len(moved) == len(w1_parts):
                        all_moved = elapsed
                time.sleep(0.25)
            during = frontier.stats()
            at_restore = own_values(d, w1_parts)
            # The fencing against w1's stale state: its owner values of before the cut.
            frontier.acquire(0, partitions=held)
            refused = sorted(frontier.fenced)
            net.restore("w1")
            t_restore = time.monotonic()

            assert all_moved is not None, f"w1's partitions did not all move: {at_restore}"
            assert all(not v.startswith("w1|") and token(v) > token(held[p])
                       for p, v in at_restore.items()), (held, at_restore)
            assert refused == w1_parts, (refused, w1_parts)
            assert during["requeued"] > before["requeued"], \
                "no URL lease was left behind by w1 (nothing in flight at the cut?)"

            loads = d.settle_assignment(WORKERS, timeout_s=40.0)  # w1 is back, evenly
            rejoin_s = time.monotonic() - t_restore
            d.wait_done(timeout_s=max(30.0, 250.0 - (time.monotonic() - t_begin)))
            assert pool.alive() == WORKERS, "a worker died: " + pool.log_text(0)[-3000:]
            counts, expected = judge(d)
        finally:
            pool.stop()
            client.close()
    st = frontier.stats()
    w1_log = pool.log_text(0)
    assert "stopped scheduling its" in w1_log and "rejoined" in w1_log, w1_log[-3000:]
    dupes = refetched(counts, expected)
    assert len(dupes) <= 0.005 * len(expected), (len(dupes), dupes[:10])
    w1_hosts_after = sorted(e.start - cut_wall for e in crawler_entries(web.read_log())
                            if e.start > cut_wall + (first_moved or 0.0)
                            and frontier.partition(f"{e.host}:{web.port}") in w1_parts)
    figures = {
        "drill": "partition", "cut_s": CUT_S, "partition_ttl_s": PARTITION_TTL_S,
        "urls": len(expected), "pages": sum(1 for k in expected.values() if k == "page"),
        "lost": 0, "refetched": len(dupes), "fetched_at_cut": before["fetched"],
        "inflight_at_cut": before["inflight"], "w1_partitions": len(w1_parts),
        "takeover_first_s": round(first_moved or 0.0, 2), "takeover_all_s": round(all_moved, 2),
        "first_fetch_of_w1_hosts_after_takeover_s":
            round(w1_hosts_after[0], 2) if w1_hosts_after else None,
        "requeued_during_cut": during["requeued"] - before["requeued"],
        "requeued": st.get("requeued", 0), "old_tokens_refused": len(refused),
        "stale": st.get("stale", 0), "stale_messages": st.get("stale_messages", 0),
        "fenced": st.get("fenced", 0), "rejoin_s": round(rejoin_s, 2),
        "loads_after_rejoin": loads, "elapsed_s": round(time.monotonic() - t_begin, 1),
    }
    print(json.dumps(figures))
    (tmp_path / "figures.json").write_text(json.dumps(figures, indent=1) + "\n")


# -- the member alone: lapse without Redis, rejoin, fenced acquires ------------------------------

def test_member_lapses_without_redis_then_rejoins(redis_server: EmbeddedRedis,
                                                  redis_client: redis.Redis,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    config = CrawlConfig(namespace="lapse", partition_ttl_s=3.0).validate()
    m1 = Member(redis_client, config, Celery("lapse-test"), name="m1").start(schedule=False)
    m2: Member | None = None
    try:
        assert len(m1.owners()) == config.partitions
        held = dict(m1.owners())
        real = m1.heartbeat

        def cut() -> None:
            raise redis.ConnectionError("link cut (test)")

        monkeypatch.setattr(m1, "heartbeat", cut)
        t0 = time.monotonic()
        wait_for(lambda: m1.lapses == 1, 5.0)
        # It gives up 0.9 x TTL after its last good heartbeat started: before Redis expires
        # its claims, never after.
        assert time.monotonic() - t0 <= config.partition_ttl_s
        assert m1.owners() == {} and m1.owned == {}
        wait_for(lambda: all(o is None for o in m1.frontier.partition_owners()), 5.0)
        m2 = Member(redis_client, config, Celery("lapse-test"), name="m2").start(schedule=False)
        assert len(m2.owners()) == config.partitions
        # Writes with m1's old tokens are refused by the owner-only scripts.
        m2.frontier.acquire(0, partitions=held)
        assert m2.frontier.fenced == set(held)
        m2.frontier.fenced = set()
        monkeypatch.setattr(m1, "heartbeat", real)  # the link is back
        wait_for(lambda: m1.rejoins == 1, 5.0)
        wait_for(lambda: sorted([len(m1.owners()), len(m2.owners())]) == [32, 32], 10.0)
        tokens = {p: int(v.split("|")[1]) for p, v in m1.owners().items()}
        assert all(t > int(held[p].split("|")[1]) for p, t in tokens.items())
        assert set(m1.owners()).isdisjoint(m2.owners())
    finally:
        m1.stop()
        if m2:
            m2.stop()


def test_fenced_acquire_drops_the_partition_and_is_counted(redis_server: EmbeddedRedis,
                                                          redis_client: redis.Redis) -> None:
    config = CrawlConfig(namespace="fence", partition_ttl_s=1.5).validate()
    m = Member(redis_client, config, Celery("fence-test"), name="m").start(schedule=False)
    try:
        owned = dict(m.owners())
        # Another member took partitions 3 and 5 behind m's back (as after a pause of m).
        for p in (3, 5):
            redis_client.set(m.frontier.keys.prefix(p) + "own", "other|999", px=60_000)
        m.frontier.acquire(1, partitions=owned)  # what the scheduler does next
        assert m.frontier.fenced == {3, 5}
        after = m.owners()
        assert 3 not in after and 5 not in after and len(after) == len(owned) - 2
        assert m.fenced == 2
        wait_for(lambda: m.frontier.stats().get("fenced", 0) == 2, 5.0)  # next heartbeat
    finally:
        m.stop()
