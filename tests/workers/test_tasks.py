"""The fetch task in-process on a real Redis: stale and malformed messages make no request."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from frontier.config import CrawlConfig
from frontier.redisserver import EmbeddedRedis
from tests.webs import SandboxWebs
from workers.app.celery_app import configure
from workers.cli.crawl import init_crawl
from workers.runtime import context


def _worker_context(redis_url: str, namespace: str) -> context.WorkerContext:
    """This process as a freshly started worker of the crawl: the Celery app configured and
    no context left over from an earlier test."""
    configure(redis_url, namespace)
    context.close_context()
    return context.get_context(redis_url, namespace)


def test_stale_and_malformed_messages_are_skipped_and_counted(
        redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    # 192.0.2.1 (TEST-NET-1) would be refused anyway: no request can leave this test.
    cfg = CrawlConfig(namespace="tasks1", partitions=4, lease_ttl_s=10.0, total_timeout_s=0.5,
                      output_dir=str(tmp_path), static_hosts={"a.test": "192.0.2.1"}).validate()
    frontier = init_crawl(redis_client, cfg, ["http://a.test/"])
    (lease,), _ = frontier.acquire(10)
    assert frontier.reap(now=time.time() + 11) == 1  # the lease expires: the message is stale
    (fresh,), _ = frontier.acquire(10, now=time.time() + 11)
    configure(redis_server.url, cfg.namespace)
    context.close_context()
    from workers.app.tasks import fetch
    from workers.fetch.order import FetchOrder

    try:
        fetched = fetch.run([FetchOrder(lease).to_json(), ["garbage"], [1, 2]])
    finally:
        context.close_context()
    assert fetched == 0
    st = frontier.stats()
    assert st["stale_messages"] == 1
    assert st["err:bad_message"] == 2
    assert st["inflight"] == 1  # the URL was re-leased (fresh): still in flight, not lost
    assert frontier.begin([lease], 5.0) == [False]
    assert frontier.begin([fresh], 5.0) == [True]
    assert frontier.reap(now=time.time() + 6) == 1  # begin's deadline, not lease_ttl_s
    assert frontier.stats()["queued"] == 1
    assert not list((tmp_path / "records").glob("*.jsonl")) or not any(
        p.read_text() for p in (tmp_path / "records").glob("*.jsonl"))


def test_seen_memo_skips_known_links_and_resends_them_after_a_redis_restart(
        tmp_path: Path) -> None:
    """Links this worker already had answered go to Redis once (Mercator's cache in front of
    the URL-seen test); a Redis that restarted (new run_id, here with its data lost) gets
    them again, so the memo never hides a URL the server no longer has."""
    from frontier.frontier import AdmitLink, Completion, Entry
    from frontier.redisserver import free_port
    from workers.app.tasks import apply_results
    from workers.pipeline.lease import LeaseResult

    port = free_port()
    srv = EmbeddedRedis(tmp_path / "redis", port=port).start()
    hosts = {"a.test": "192.0.2.1", "b.test": "192.0.2.2", "c.test": "192.0.2.3"}
    cfg = CrawlConfig(namespace="memo1", partitions=4, output_dir=str(tmp_path),
                      static_hosts=hosts).validate()
    nav = [AdmitLink("a.test", f"http://a.test/nav/{i}", Entry(f"http://a.test/nav/{i}", 1))
           for i in range(10)]
    try:
        client = redis.Redis(host=srv.host, port=port)
        frontier = init_crawl(client, cfg, ["http://a.test/", "http://b.test/"])
        configure(srv.url, cfg.namespace)
        context.close_context()
        ctx = context.get_context(srv.url, cfg.namespace)
        assert ctx.seen is not None
        leases, _ = frontier.acquire(10)
        assert len(leases) == 2
        now = time.time()
        apply_results(ctx, [(LeaseResult(Completion(leases[0], now, "fetched"), links=nav),
                             None)], [])
        assert len(ctx.seen) == 10
        new = AdmitLink("b.test", "http://b.test/x", Entry("http://b.test/x", 1))
        apply_results(ctx, [(LeaseResult(Completion(leases[1], now, "fetched"),
                                         links=[*nav, new]), None)], [])
        st = frontier.stats()
        assert st["seen_memo_hits"] == 10 and st["seen_rejected"] == 10
        assert st["admitted"] == 2 + 10 + 1 and st["queued"] == 11

        srv.stop()  # no persistence: the restarted server has lost everything
        srv = EmbeddedRedis(tmp_path / "redis", port=port).start()
        client = redis.Redis(host=srv.host, port=port)
        frontier = init_crawl(client, cfg, ["http://c.test/"])
        (lease_c,), _ = frontier.acquire(10)
        for attempt in range(2):  # the first call may meet the dead pooled connection
            try:
                apply_results(ctx, [(LeaseResult(Completion(lease_c, time.time(), "fetched"),
                                                 links=nav), None)], [])
                break
            except redis.exceptions.ConnectionError:
                assert attempt == 0
        st = frontier.stats()
        assert st["admitted"] == 1 + 10 and st["queued"] == 10, st  # all 10 back in
        assert st.get("seen_memo_hits", 0) == 0

        # Links the pipeline set aside as known (LeaseResult.known) count as memo hits while
        # the server is the same, and go to Redis after it restarted.
        (lease_c2,), _ = frontier.acquire(10, now=time.time() + 60)
        side = [("c.test", f"http://c.test/side/{i}", 1, 0) for i in range(4)]
        res = LeaseResult(Completion(lease_c2, time.time(), "fetched"))
        res.known = [*side, side[0]]
        apply_results(ctx, [(res, None)], [])
        st = frontier.stats()
        assert st["seen_memo_hits"] == 4 and st["queued"] == 9  # one per URL, none sent
        srv.stop()
        srv = EmbeddedRedis(tmp_path / "redis", port=port).start()
        client = redis.Redis(host=srv.host, port=port)
        frontier = init_crawl(client, cfg, ["http://c.test/"])
        (lease_c3,), _ = frontier.acquire(10)
        res = LeaseResult(Completion(lease_c3, time.time(), "fetched"))
        res.known = side
        for attempt in range(2):
            try:
                apply_results(ctx, [(res, None)], [])
                break
            except redis.exceptions.ConnectionError:
                assert attempt == 0
        st = frontier.stats()
        assert st["admitted"] == 1 + 4 and st["queued"] == 4, st
        assert st.get("seen_memo_hits", 0) == 0
    finally:
        context.close_context()
        srv.stop()


def test_pages_whose_near_duplicate_check_fails_are_retried_not_lost(
        redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path,
        webs: SandboxWebs) -> None:
    """The pages of a task wait for one batched dedup round trip; when it fails (here the
    dedup client's Redis is a closed port) each of them ends as a retry, queued again."""
    from frontier.redisserver import free_port
    from sandbox import SandboxConfig
    from workers.app.tasks import apply_results
    from workers.pipeline.lease import process_leases

    try:
        with webs.running(SandboxConfig(seed=3, hosts=12, pages_per_host=20, ips=2,
                                        crawl_delay_s=0.0)) as web:
            cfg = CrawlConfig(namespace="dd1", partitions=2, output_dir=str(tmp_path / "out"),
                              host_delay_s=0.0, allow_private_ips=True, soft404_probe=False,
                              static_hosts=web.resolver_map).validate()
            frontier = init_crawl(redis_client, cfg, web.seeds[:1])
            ctx = _worker_context(redis_server.url, cfg.namespace)
            (robots,), _ = frontier.acquire(1)  # the host's first lease fetches robots.txt
            apply_results(ctx, [(r, None) for r in process_leases(ctx, [(robots, None)])], [])
            (page,), _ = frontier.acquire(1, now=time.time() + 60)  # past any delay
            dead = redis.Redis(port=free_port(), socket_connect_timeout=1)
            ctx.dedup.client = ctx.dedup.index.client = dead
            (res,) = process_leases(ctx, [(page, None)])
            assert res.completion.outcome == "retries"
            assert res.completion.requeue is not None
            assert res.completion.requeue.url == page.entry.url
            assert res.completion.requeue.attempts == 1
            assert res.counters["err:internal_error"] == 1 and res.pending is None
            apply_results(ctx, [(res, None)], [])
            st = frontier.stats()
            assert st["retries"] == 1 and st["inflight"] == 0 and st["queued"] >= 1
    finally:
        context.close_context()


def test_apply_results_leaves_due_hints_for_completions_and_wake_ups(
        redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    """A completed host's partition is hinted due at its next allowed time (sent with the
    completion), a host an admission woke at the time the admission reported."""
    from frontier.frontier import AdmitLink, Completion, Entry
    from workers.app.tasks import apply_results
    from workers.pipeline.lease import LeaseResult

    hosts = {"a.test": "192.0.2.1", "b.test": "192.0.2.2"}
    cfg = CrawlConfig(namespace="hints1", partitions=8, output_dir=str(tmp_path),
                      static_hosts=hosts).validate()
    frontier = init_crawl(redis_client, cfg, ["http://a.test/", "http://a.test/2"])
    try:
        ctx = _worker_context(redis_server.url, cfg.namespace)
        (lease,), _ = frontier.acquire(10)
        later = time.time() + 300
        link = AdmitLink("b.test", "http://b.test/", Entry("http://b.test/", 1))
        redis_client.delete(frontier.due_key)
        apply_results(ctx, [(LeaseResult(Completion(lease, later, "fetched"), links=[link]),
                             None)], [])
        pa, pb = frontier.partition("a.test"), frontier.partition("b.test")
        assert pa != pb
        assert redis_client.zscore(frontier.due_key, pa) == pytest.approx(later)
        woken = redis_client.zscore(frontier.due_key, pb)
        assert woken is not None and woken < later  # b.test is due now, not in 300 s
    finally:
        context.close_context()


def test_worker_context_tunes_the_cyclic_gc(redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    """A worker's first context freezes what exists and raises the GC thresholds."""
    import gc

    cfg = CrawlConfig(namespace="gctune", output_dir=str(tmp_path)).validate()
    client = redis.Redis.from_url(redis_server.url)
    init_crawl(client, cfg, ["http://a.test/"])
    before = gc.get_threshold()
    context.close_context()
    try:
        context.get_context(redis_server.url, cfg.namespace)
        assert gc.get_threshold() == context.GC_THRESHOLDS
        assert gc.get_freeze_count() > 0
    finally:
        context.close_context()
        gc.unfreeze()
        gc.set_threshold(*before)


def test_host_verdicts_reach_redis_with_the_completion_and_come_back_in_one_read(
        redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path,
        webs: SandboxWebs) -> None:
    """What a fetch learns about its host (robots.txt, the soft-404 probe) is written to
    Redis in the completion pipeline, not from the fetcher thread; another process then reads
    both in one MGET."""
    from frontier.counters import Outcome
    from sandbox import SandboxConfig
    from workers.app.tasks import apply_results
    from workers.pipeline.lease import process_leases

    def calls(command: str) -> int:
        return int(redis_client.info("commandstats").get(f"cmdstat_{command}", {})
                   .get("calls", 0))

    try:
        with webs.running(SandboxConfig(seed=3, hosts=12, pages_per_host=20, ips=2,
                                        crawl_delay_s=0.0)) as web:
            cfg = CrawlConfig(namespace="hv1", partitions=2, output_dir=str(tmp_path / "out"),
                              host_delay_s=0.0, allow_private_ips=True,
                              static_hosts=web.resolver_map).validate()
            frontier = init_crawl(redis_client, cfg, web.seeds[:1])
            ctx = _worker_context(redis_server.url, cfg.namespace)
            (lease,), _ = frontier.acquire(1)  # the host's first lease fetches robots.txt
            host, part = lease.host, frontier.partition(lease.host)
            robots_key = frontier.keys.robots(part, host)
            soft404_key = frontier.keys.soft404(part, host)
            (res,) = process_leases(ctx, [(lease, None)])
            assert res.completion.outcome is Outcome.ROBOTS_FETCH
            assert [w.kind.value for w in res.host_writes] == ["robots"]
            assert not redis_client.exists(robots_key)  # not written by the fetcher thread
            apply_results(ctx, [(res, None)], [])
            assert redis_client.exists(robots_key)
            (lease,), _ = frontier.acquire(1, now=time.time() + 60)  # then the probe
            (res,) = process_leases(ctx, [(lease, None)])
            assert res.completion.outcome is Outcome.SOFT404_PROBE
            assert [w.kind.value for w in res.host_writes] == ["soft404"]
            assert not redis_client.exists(soft404_key)
            apply_results(ctx, [(res, None)], [])
            assert redis_client.exists(soft404_key)

            context.close_context()  # a new process: nothing known locally
            fresh = context.get_context(redis_server.url, cfg.namespace)
            mget, get = calls("mget"), calls("get")
            state = fresh.hosts.get(host)
            assert state.robots is not None and state.soft404 is not None
            assert (calls("mget") - mget, calls("get") - get) == (1, 0)
            assert fresh.hosts.get(host) == state  # now from the process: no read at all
            assert (calls("mget") - mget, calls("get") - get) == (1, 0)
            context.close_context()
            only_robots = context.get_context(redis_server.url, cfg.namespace)
            mget, get = calls("mget"), calls("get")
            assert only_robots.hosts.get(host, with_soft404=False).soft404 is None
            assert (calls("mget") - mget, calls("get") - get) == (0, 1)  # the counters move
    finally:
        context.close_context()


def test_a_refused_address_is_its_own_outcome_naming_the_setting(
        redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    """A host on a loopback address with the default config ends as ``address_refused``, its
    record naming allow_private_ips, nothing sent and no robots.txt policy cached (it used to
    end as ``robots_blocked``, reason "unavailable"); with the setting on, the same host's
    robots.txt is fetched (the control)."""
    import json

    from frontier.counters import Outcome
    from tests.loopback import LoopbackServer, Reply, serving
    from workers.app.tasks import apply_results
    from workers.pipeline.lease import process_leases

    with serving(LoopbackServer(respond=lambda _r: Reply(200, b"User-agent: *\nDisallow:\n",
                                                         "text/plain"))) as srv:
        for allow, ns in ((False, "addr1"), (True, "addr2")):
            cfg = CrawlConfig(namespace=ns, partitions=2, output_dir=str(tmp_path / ns),
                              allow_private_ips=allow,
                              static_hosts={"local.test": "127.0.0.1"}).validate()
            frontier = init_crawl(redis_client, cfg, [f"http://local.test:{srv.port}/"])
            try:
                ctx = _worker_context(redis_server.url, cfg.namespace)
                (lease,), _ = frontier.acquire(1)
                (res,) = process_leases(ctx, [(lease, None)])
                apply_results(ctx, [(res, None)], [])
            finally:
                context.close_context()
            if allow:
                assert res.completion.outcome is Outcome.ROBOTS_FETCH
                assert [r.path for r in srv.requests] == ["/robots.txt"]
                continue
            assert res.completion.outcome is Outcome.ADDRESS_REFUSED and not res.host_writes
            assert srv.requests == []
            st = frontier.stats()
            assert st["address_refused"] == 1 and st["robots_blocked"] == 0
            assert st["inflight"] == 0 and st["queued"] == 0
            (line,) = (tmp_path / ns / "records").glob("*.jsonl")
            (rec,) = [json.loads(x) for x in line.read_text().splitlines()]
            assert rec["outcome"] == "address_refused"
            assert "127.0.0.1" in rec["reason"] and "allow_private_ips" in rec["reason"]
