"""The fetch engine in-process on a real Redis and a real sandbox web (no Celery).

A task's URLs complete one by one: a fast host of a task is free again while a slow host of
the same task still loads, and the lease keeper keeps a long fetch's lease alive. Each
property is shown next to the old way (the task's URLs fetched one after another with one
deadline each), where the same measurement fails.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis

from frontier.config import CrawlConfig
from frontier.counters import Outcome
from frontier.frontier import Frontier, Lease
from frontier.redisserver import EmbeddedRedis
from frontier.urls import host_of
from sandbox import SandboxConfig, SandboxWeb
from tests.webs import SandboxWebs
from workers.app.celery_app import configure
from workers.cli.crawl import init_crawl
from workers.fetch.order import FetchOrder
from workers.pipeline.lease import process_leases
from workers.runtime import context
from workers.runtime.completion import apply_results
from workers.runtime.engine import FetchEngine
from workers.runtime.figures import read_engines
from workers.runtime.jobs import Job

SLOW_S = 2.0
KEEP_S = 1.0  # lease_keep_s: shorter than the slow page, so only renewal keeps it


@dataclass
class Env:
    web: SandboxWeb
    redis_url: str
    tmp: Path


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, redis_server: EmbeddedRedis,
        module_webs: SandboxWebs) -> Env:
    tmp = tmp_path_factory.mktemp("engine")
    web_cfg = SandboxConfig(seed=11, hosts=16, pages_per_host=20, ips=16, crawl_delay_s=0.0,
                            slow_page_s=SLOW_S)
    return Env(module_webs.shared(web_cfg), redis_server.url, tmp)


ENGINES = ("loop", "threads")


def _crawl(env: Env, namespace: str, slow_url: str, engine: str = "loop"
           ) -> tuple[Frontier, Lease, list[Lease]]:
    """A crawl seeded with one slow page and one page of each other host; robots.txt of
    every host already fetched. Returns the frontier, the slow page's lease and the others'."""
    web = env.web
    slow_host = host_of(slow_url)
    seeds = [slow_url, *[u for u in web.seeds if host_of(u) != slow_host][:10]]
    cfg = CrawlConfig(namespace=namespace, partitions=4, host_delay_s=0.0,
                      adaptive_delay_factor=0.0, allow_private_ips=True, soft404_probe=False,
                      static_hosts=web.resolver_map, lease_keep_s=KEEP_S,
                      connect_timeout_s=1.0, read_timeout_s=3.0, total_timeout_s=4.0,
                      fetch_engine=engine, output_dir=str(env.tmp / namespace)).validate()
    client = redis.Redis.from_url(env.redis_url)
    frontier = init_crawl(client, cfg, seeds)
    configure(env.redis_url, namespace)
    context.close_context()
    ctx = context.get_context(env.redis_url, namespace)
    robots, _ = frontier.acquire(len(seeds))  # each host's first lease fetches robots.txt
    assert len(robots) == len(seeds)
    apply_results(ctx, [(r, None) for r in process_leases(ctx, [(le, None) for le in robots])],
                  [])
    pages, _ = frontier.acquire(len(seeds), now=time.time() + 1)
    assert sorted(le.entry.url for le in pages) == sorted(seeds)
    slow = next(le for le in pages if le.entry.url == slow_url)
    return frontier, slow, [le for le in pages if le is not slow]


def _watch(frontier: Frontier, slow: Lease, fast: list[Lease], reap_at_s: float
           ) -> tuple[float | None, bool, int]:
    """Poll until the slow lease ends: when every fast lease had completed (seconds after
    the start, None if not before the slow one), and how many leases a reaper run at
    ``reap_at_s`` re-queued."""
    start = time.monotonic()
    fast_done_at = None
    reaped = -1
    while time.monotonic() - start < SLOW_S + 3:
        alive = frontier.lease_alive([slow, *fast])
        if fast_done_at is None and not any(alive[1:]) and alive[0]:
            fast_done_at = time.monotonic() - start
        if reaped < 0 and time.monotonic() - start >= reap_at_s:
            reaped = frontier.reap(now=time.time())
        if not alive[0] and reaped >= 0:
            break
        time.sleep(0.02)
    return fast_done_at, reaped >= 0, reaped


@pytest.mark.parametrize("engine_kind", ENGINES)
def test_urls_of_a_task_complete_one_by_one_and_stay_leased(env: Env, engine_kind: str) -> None:
    slow_urls = env.web.site.slow_urls()
    assert len({host_of(u) for u in slow_urls}) >= 2, slow_urls

    # The engine: the whole task in one submit (one hand-over, as a Celery task does).
    frontier, slow, fast = _crawl(env, f"eng-{engine_kind}", slow_urls[0], engine_kind)
    ctx = context.get_context(env.redis_url, f"eng-{engine_kind}")
    engine = FetchEngine(ctx, capacity=32)
    try:
        orders = [FetchOrder(le) for le in (slow, *fast)]
        assert all(frontier.begin([o.lease for o in orders], KEEP_S, stagger=False))
        threading.Thread(target=engine.submit, args=(orders,), daemon=True).start()
        fast_done_at, _, reaped = _watch(frontier, slow, fast, reap_at_s=1.5 * KEEP_S)
        published = engine.figures()
        engine._publish()
        seen = read_engines(ctx.client, frontier.keys.engines)
    finally:
        engine.close(5.0)
        context.close_context()
    # Every fast host was free again while the slow host of its task was still loading.
    assert fast_done_at is not None and fast_done_at < SLOW_S / 2, fast_done_at
    # The slow fetch outlived its lease_keep_s deadline, renewed by the keeper: not reaped.
    assert reaped == 0
    st = frontier.stats()
    assert st["fetched"] == len(fast) + 1 and st["requeued"] == 0 and st["inflight"] == 0
    assert engine.renewals >= 1 and engine.stale_renewals == 0
    assert [f.worker for f in seen] == [published.worker] and seen[0].capacity == 32

    # Negative control, the old task: fetched one after another, one deadline for all.
    frontier, slow, fast = _crawl(env, f"seq-{engine_kind}", slow_urls[1])
    ctx = context.get_context(env.redis_url, f"seq-{engine_kind}")
    try:
        items = [(le, None) for le in (slow, *fast)]
        assert all(frontier.begin([le for le, _ in items], KEEP_S, stagger=False))

        def old_task() -> None:
            apply_results(ctx, [(r, None) for r in process_leases(ctx, items)], [])

        worker = threading.Thread(target=old_task, daemon=True)
        worker.start()
        fast_done_at, _, reaped = _watch(frontier, slow, fast, reap_at_s=1.5 * KEEP_S)
        worker.join(10)
    finally:
        context.close_context()
    assert fast_done_at is None  # the fast hosts waited for the slow one
    assert reaped == len(items)  # and nobody kept the leases alive: all re-queued


@pytest.mark.parametrize("engine_kind", ENGINES)
def test_a_url_whose_lease_lapsed_while_waiting_is_not_fetched(env: Env, engine_kind: str
                                                               ) -> None:
    """A URL that waited for a slot longer than its lease could be kept (the keeper could not
    renew it: Redis out of reach) may already be another worker's: it is dropped, not fetched
    twice. Its lease comes back through the reaper."""
    slow_urls = env.web.site.slow_urls()
    ns = f"lapse-{engine_kind}"
    _frontier, _slow, fast = _crawl(env, ns, slow_urls[2 % len(slow_urls)], engine_kind)
    ctx = context.get_context(env.redis_url, ns)
    engine = FetchEngine(ctx, capacity=4)
    try:
        time.sleep(0.3)  # the server flushes its log every 0.1 s: earlier requests first
        before = len(env.web.read_log())
        # (in the engine just before they start: the keeper must not renew the lapsed one)
        lapsed = Job(FetchOrder(fast[0]), renewed=time.monotonic() - 2 * KEEP_S)
        current = Job(FetchOrder(fast[1]), renewed=time.monotonic())
        with engine._lock:
            engine._jobs[id(lapsed)] = lapsed
            engine._jobs[id(current)] = current
        engine._slots.acquire()
        engine._slots.acquire()
        engine.runner.start(lapsed)
        engine.runner.start(current)
        time.sleep(0.8)
        pages = {(e.host, e.path) for e in env.web.read_log()[before:]}
    finally:
        engine.close(5.0)
        context.close_context()
    assert engine.skipped_stale == 1
    def page(le: Lease) -> tuple[str, str]:
        parts = urlsplit(le.entry.url)
        return parts.hostname or "", parts.path or "/"

    assert page(fast[1]) in pages  # the current one was fetched
    assert page(fast[0]) not in pages  # the lapsed one was not


def _ended_early(env: Env, namespace: str, slow_url: str, abort: bool, engine_kind: str
                 ) -> tuple[float, Any]:
    """Fetch the slow page in an engine, reap its lease 0.3 s in (as the partition owner's
    reaper does once a lease runs out) and return how long the fetch took and its result:
    the engine's own keeper finds the lease gone and (with ``abort``) ends the fetch."""
    frontier, slow, _fast = _crawl(env, namespace, slow_url, engine_kind)
    ctx = context.get_context(env.redis_url, namespace)
    engine = FetchEngine(ctx, capacity=4)
    engine.abort_lapsed_fetches = abort
    out: dict[str, Any] = {}
    done = threading.Event()

    def finished(job: Job, result: Any) -> None:  # instead of the completer's write-back
        out["result"], out["took"] = result, time.monotonic() - t0
        engine.forget([job])
        done.set()

    engine.finished = finished  # type: ignore[method-assign]
    try:
        assert frontier.begin([slow], KEEP_S, stagger=False) == [True]
        t0 = time.monotonic()
        engine.submit([FetchOrder(slow)])
        time.sleep(0.3)
        assert frontier.reap(now=time.time() + 10 * KEEP_S) == 1  # the lease is gone
        assert done.wait(SLOW_S + 5)
    finally:
        engine.close(5.0)
        context.close_context()
    return out["took"], out["result"]


@pytest.mark.parametrize("engine_kind", ENGINES)
def test_a_fetch_whose_lease_lapses_is_ended(env: Env, engine_kind: str) -> None:
    """A fetch must not outlive its lease: once the lease is gone (reaped) or can no longer
    be renewed (Redis out of reach), another worker may be given the host. The keeper ends
    the fetch; without it the slow page runs its full SLOW_S."""
    slow_urls = env.web.site.slow_urls()
    took, result = _ended_early(env, f"abort1-{engine_kind}", slow_urls[3 % len(slow_urls)],
                                True, engine_kind)
    assert took < SLOW_S / 2, took
    assert result.counters["err:aborted"] == 1
    assert result.completion.outcome is Outcome.RETRY  # comes back, if the lease still were

    # Negative control: the same with the keeper's abort switched off.
    took, result = _ended_early(env, f"abort2-{engine_kind}", slow_urls[4 % len(slow_urls)],
                                False, engine_kind)
    assert took >= SLOW_S * 0.9, took
    assert result.completion.outcome is Outcome.FETCHED and not result.counters["err:aborted"]
