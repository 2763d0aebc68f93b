"""The ``threads`` fetch engine: each URL runs the whole pipeline on its own fetcher thread.

As Heritrix, Nutch and StormCrawler do; docs/fetch-engine.md measures it against the event
loop (``loop_runner``), which spends less CPU a page on a web that answers slowly.
"""

from __future__ import annotations

import functools
import queue
import threading
from typing import TYPE_CHECKING

from workers.fetch import abort_fetch_in_thread
from workers.pipeline.lease import run_lease
from workers.runtime.jobs import Job

if TYPE_CHECKING:
    from workers.runtime.engine import FetchEngine

#: Fetcher threads get this much stack (CPython's default is the 8 MiB of ulimit -s; lxml and
#: our code need far less, and a thousand threads then reserve 256 MiB, not 8 GiB).
THREAD_STACK_BYTES = 1024 * 1024


class ThreadRunner:
    """Runs each job's :func:`run_lease` on a thread of its own."""

    def __init__(self, engine: FetchEngine) -> None:
        self.engine = engine
        #: Jobs for the fetcher threads; None tells a thread to exit.
        self._work: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def fetching(self) -> int:
        """Jobs on a thread (each thread does its job's whole pipeline, fetch included)."""
        return max(0, self.engine.in_engine - self._work.qsize())

    def start(self, job: Job) -> None:
        self._spawn()
        self._work.put(job)

    def _spawn(self) -> None:
        """At least as many fetcher threads as URLs in the engine, so no job waits for a
        thread. Threads are kept (an idle one blocks in SimpleQueue.get, in C); a hand-made
        pool because ThreadPoolExecutor's idle bookkeeping (a Python semaphore per job) cost
        ~5% of a worker's CPU at a thousand threads (py-spy, bench/run --quick)."""
        with self._lock:
            if len(self._threads) >= min(self.engine.capacity, self.engine.in_engine):
                return
            old = threading.stack_size()
            threading.stack_size(THREAD_STACK_BYTES)
            try:
                thread = threading.Thread(target=self._fetcher, daemon=True,
                                          name=f"trawl-fetch-{len(self._threads)}")
                thread.start()
            finally:
                threading.stack_size(old)
            self._threads.append(thread)

    def _fetcher(self) -> None:
        while True:
            job = self._work.get()
            if job is None:
                return
            self.run(job)

    def run(self, job: Job) -> None:
        """One job on this thread: the lease's whole pipeline."""
        job.abort = functools.partial(abort_fetch_in_thread, threading.get_ident())
        engine = self.engine
        if not engine.take(job):
            return
        try:
            result = run_lease(engine.ctx, job.order.lease, job.order.ip)
        except BaseException:  # run_lease catches Exception; this is a thread being torn down
            engine.forget([job])
            raise
        engine.finished(job, result)

    def close(self) -> None:
        for _ in self._threads:
            self._work.put(None)
