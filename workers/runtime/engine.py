"""The fetch engine of a worker process: many fetches in flight, each URL completed on its own.

The real web answers in hundreds of milliseconds, mostly waiting; a worker that fetched a
task's URLs one after another (as Trawl did) kept each host leased for the whole task and
spent its time idle. Here up to ``capacity`` handed-over URLs are in the engine at once, run
by one of two runners (the crawl's ``fetch_engine``): ``loop`` (``loop_runner``: all fetches
on one asyncio + aiohttp event loop, the CPU work on a few threads) or ``threads``
(``thread_runner``: a fetcher thread per URL, as in Heritrix, Nutch and StormCrawler);
docs/fetch-engine.md measures one against the other. When a page is done (fetched, stored,
parsed) it goes to the *completer*, which writes finished pages back in batches (one
near-duplicate round trip and two pipelines per batch, as a task did) after at most
``LINGER_S``: a host is free again as soon as its own page is done, whatever the other hosts
of its task are doing.

A *lease keeper* renews the deadline of every lease in the engine to now + ``lease_keep_s``
every third of it, so a worker that dies strands its URLs for about ``lease_keep_s`` (the
partition owner's reaper then puts them back), not for a whole fetch budget per URL.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

import redis

from workers.fetch.order import FetchOrder
from workers.pipeline.lease import LeaseResult, finish_pending
from workers.runtime import metrics
from workers.runtime.completion import apply_results
from workers.runtime.fdlimit import fit_capacity_to_fd_limit
from workers.runtime.figures import PUBLISH_S, CpuMeter, EngineFigures, publish_figures
from workers.runtime.jobs import Job, TokenGate
from workers.runtime.loop_runner import LoopRunner
from workers.runtime.thread_runner import ThreadRunner

log = logging.getLogger(__name__)

#: Pages finished within this long of the first one are written back together (bench/run
#: --quick, zero latency: batches of ~10 cost ~5% more CPU a page than tasks of 16 did; a
#: host's next fetch is due a delay after its fetch ended, so this only delays hosts whose
#: delay is shorter).
LINGER_S = 0.1
#: Threads writing finished pages back (one keeps the batches large).
COMPLETERS = 1
#: A write-back batch holds at most this many pages.
FLUSH_BATCH = 64


class FetchEngine:
    """``submit`` orders; they are fetched concurrently and completed one by one."""

    def __init__(self, ctx: Any, capacity: int) -> None:
        self.ctx = ctx
        self.capacity = max(1, capacity)
        self._slots = TokenGate(self.capacity)
        self._done: queue.SimpleQueue[tuple[Job, LeaseResult]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._jobs: dict[int, Job] = {}
        self._closing = threading.Event()
        self.completed = 0
        self._cpu = CpuMeter()
        self.renewals = 0
        self.stale_renewals = 0
        #: jobs dropped before their fetch because their lease had expired
        self.skipped_stale = 0
        #: fetches the keeper ended because their lease lapsed; the switch is for tests
        self.aborted_lapsed = 0
        self.abort_lapsed_fetches = True
        self._completers = [threading.Thread(target=self._complete_loop, daemon=True,
                                             name=f"trawl-completer-{i}")
                            for i in range(COMPLETERS)]
        self._keeper = threading.Thread(target=self._keep_loop, name="trawl-lease-keeper",
                                        daemon=True)
        for thread in self._completers:
            thread.start()
        self._keeper.start()
        self.runner: ThreadRunner | LoopRunner = (
            ThreadRunner(self) if ctx.config.fetch_engine == "threads" else LoopRunner(self))

    # -- hand-over -----------------------------------------------------------------------
    def submit(self, orders: list[FetchOrder]) -> None:
        """Start ``orders``; blocks while ``capacity`` fetches are in the engine. Their
        leases are kept alive from now on, also while they wait for a slot."""
        now = time.monotonic()
        jobs = [Job(order, renewed=now) for order in orders]
        with self._lock:
            for job in jobs:
                self._jobs[id(job)] = job
        for job in jobs:
            self._slots.acquire()
            if self._closing.is_set():  # the lease expires and the URL comes back
                self.forget([job])
                continue
            self.runner.start(job)

    @property
    def in_engine(self) -> int:
        """URLs handed over and not yet written back (fetching, waiting, completing)."""
        return len(self._jobs)

    def take(self, job: Job) -> bool:
        """A runner starts ``job``: True if it may be fetched, False (and forgotten) if its
        lease may have expired while it waited."""
        job.started = time.monotonic()
        cfg = self.ctx.config
        # Start only with time left on the lease for a good part of a fetch; one that runs on
        # while its lease lapses is ended by the keeper (abort_lapsed).
        fresh_s = cfg.lease_keep_s - min(cfg.total_timeout_s, cfg.lease_keep_s / 2)
        if job.stale or job.started - job.renewed > fresh_s:
            # Its lease has expired (or may have: the keeper could not renew it, Redis being
            # out of reach): the reaper gives the URL to another worker, so fetching it here
            # would fetch it twice. Drop it; nothing is lost.
            self.skipped_stale += 1
            log.warning("lease of %s expired while it waited for a slot: not fetched",
                        job.order.lease.entry.url)
            self.forget([job])
            return False
        return True

    def finished(self, job: Job, result: LeaseResult) -> None:
        """A runner is done with ``job``: its result goes to the completer."""
        self._done.put((job, result))

    # -- write-back ------------------------------------------------------------------------
    def _complete_loop(self) -> None:
        while True:
            try:
                first = self._done.get(timeout=0.2)
            except queue.Empty:
                if self._closing.is_set() and not self._jobs:
                    return
                continue
            batch = [first]
            until = time.monotonic() + LINGER_S
            while len(batch) < FLUSH_BATCH:
                wait = until - time.monotonic()
                try:
                    batch.append(self._done.get(timeout=wait) if wait > 0
                                 else self._done.get_nowait())
                except queue.Empty:
                    break
            self._write_back(batch)

    def _write_back(self, batch: list[tuple[Job, LeaseResult]]) -> None:
        items = [(job.order.lease, job.order.ip) for job, _ in batch]
        results = [res for _, res in batch]
        give_up = time.monotonic() + self.ctx.config.fetch_lease_s
        attempt = 0
        while True:
            try:
                began = time.monotonic()
                finish_pending(self.ctx, items, results)
                apply_results(self.ctx, [(r, ip) for r, (_, ip) in
                                         zip(results, items, strict=True)], [])
                counted = metrics.active()
                if counted is not None:
                    counted.writeback_seconds.observe(time.monotonic() - began)
                    counted.count_results(results)
                break
            except (redis.RedisError, OSError) as exc:
                # Redis is away: keep the pages (their leases are renewed meanwhile) and try
                # again; past fetch_lease_s the leases are left to expire and come back.
                attempt += 1
                if time.monotonic() > give_up or (self._closing.is_set() and attempt > 3):
                    log.error("could not write back %d pages (%s): their leases expire and "
                              "the URLs are fetched again", len(batch), exc)
                    break
                log.warning("write-back of %d pages failed (%s); retrying", len(batch), exc)
                time.sleep(min(2.0, 0.1 * 2 ** attempt))
            except Exception:
                log.exception("write-back of %d pages failed: their leases expire and the "
                              "URLs are fetched again", len(batch))
                break
        self.completed += len(batch)
        self.forget([job for job, _ in batch])

    def forget(self, jobs: list[Job]) -> None:
        with self._lock:
            for job in jobs:
                self._jobs.pop(id(job), None)
        for _ in jobs:
            self._slots.release()

    # -- lease keeper ------------------------------------------------------------------------
    def _keep_loop(self) -> None:
        cfg = self.ctx.config
        every = max(0.2, cfg.lease_keep_s / 3)
        renewed = published = 0.0
        while not self._closing.wait(min(every, PUBLISH_S)):
            if time.monotonic() - renewed >= every:
                renewed = time.monotonic()
                self.renew()
                self.abort_lapsed()
            if time.monotonic() - published >= PUBLISH_S:
                published = time.monotonic()
                self._publish()

    def renew(self) -> int:
        """Give every lease in the engine a deadline of now + lease_keep_s, except fetches
        running longer than fetch_lease_s (a stuck thread must not hold a host forever).
        Returns how many were renewed."""
        cfg = self.ctx.config
        now = time.monotonic()
        with self._lock:
            jobs = [j for j in self._jobs.values()
                    if not j.started or now - j.started < cfg.fetch_lease_s]
        leases = [j.order.lease for j in jobs]
        if not leases:
            return 0
        try:
            current = self.ctx.frontier.begin(leases, cfg.lease_keep_s, stagger=False)
        except (redis.RedisError, OSError) as exc:
            log.warning("lease keeper could not renew %d leases: %s", len(leases), exc)
            return 0
        for job, ok in zip(jobs, current, strict=True):
            if ok:
                job.renewed = now
            else:
                job.stale = True
        stale = len(current) - sum(current)
        self.renewals += len(current) - stale
        if stale:
            # Expired before we renewed them (the keeper was late: Redis away, a long pause):
            # the reaper re-queued them and this worker's completion will be ignored.
            self.stale_renewals += stale
            log.warning("%d leases in this worker expired before renewal", stale)
        return len(current) - stale

    def abort_lapsed(self) -> int:
        """End the fetches whose lease this worker can no longer vouch for: reaped (stale), or
        not renewed for half of ``lease_keep_s`` (Redis out of reach: two renewals failed, and
        the lease runs out within one more keeper period). Another worker may be given the URL
        once the lease expires, and a fetch running on past that would be a second request to
        the host at once. Returns how many fetches were ended."""
        if not self.abort_lapsed_fetches:
            return 0
        now = time.monotonic()
        limit_s = self.ctx.config.lease_keep_s / 2
        with self._lock:
            lapsed = [j for j in self._jobs.values() if j.abort and not j.aborted
                      and (j.stale or now - j.renewed > limit_s)]
        ended = 0
        for job in lapsed:
            job.aborted = True
            why = (f"lease lapsed: not renewed for {now - job.renewed:.1f} s "
                   f"(lease_keep_s {self.ctx.config.lease_keep_s})")
            if job.abort is not None and job.abort(why):
                ended += 1
                log.warning("fetch of %s ended: %s", job.order.lease.entry.url, why)
        self.aborted_lapsed += ended
        return ended

    def occupancy(self) -> tuple[int, int]:
        """(fetches running or finishing, URLs waiting for a slot)."""
        with self._lock:
            waiting = sum(1 for j in self._jobs.values() if not j.started)
            total = len(self._jobs)
        return total - waiting, waiting

    def figures(self) -> EngineFigures:
        in_flight, waiting = self.occupancy()
        return EngineFigures(worker=self.ctx.worker_id, capacity=self.capacity,
                             in_flight=in_flight, waiting=waiting,
                             completed=self.completed, cpu_load=self._cpu.load(),
                             at=time.time(), fetching=self.runner.fetching())

    def _publish(self) -> None:
        publish_figures(self.ctx.client, self.ctx.frontier.keys.engines, self.figures())

    # -- shutdown ----------------------------------------------------------------------------
    def close(self, timeout_s: float) -> None:
        """Let the fetches in the engine finish (up to ``timeout_s``) and write them back;
        what is still running then is left to its leases."""
        self._closing.set()
        deadline = time.monotonic() + timeout_s
        while self._jobs and time.monotonic() < deadline:
            time.sleep(0.05)
        for thread in self._completers:
            thread.join(max(0.1, deadline - time.monotonic()))
        self.runner.close()
        if self._jobs:
            log.warning("%d fetches unfinished at shutdown: their leases expire and the URLs "
                        "come back", len(self._jobs))


_engine: FetchEngine | None = None
_engine_lock = threading.Lock()


def current_engine() -> FetchEngine | None:
    """This process's engine if one was made (read by the metrics at scrape time)."""
    return _engine


def get_engine(ctx: Any, capacity: int | None = None) -> FetchEngine:
    """This process's engine (made on first use); ``capacity`` overrides the crawl's
    ``fetch_concurrency`` for this worker (``trawl worker --concurrency``)."""
    global _engine
    if _engine is None:
        with _engine_lock:
            if _engine is None:
                wanted = capacity or ctx.config.fetch_concurrency
                _engine = FetchEngine(ctx, fit_capacity_to_fd_limit(wanted))
    return _engine


def close_engine(timeout_s: float | None = None) -> None:
    global _engine
    with _engine_lock:
        engine, _engine = _engine, None
    if engine is not None:
        engine.close(engine.ctx.config.total_timeout_s + 5.0 if timeout_s is None
                     else timeout_s)
