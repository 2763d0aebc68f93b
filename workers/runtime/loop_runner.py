"""The ``loop`` fetch engine: every fetch of a worker on one asyncio + aiohttp event loop, the
CPU work around it (plan, store, parse) on a few pipeline threads.

Why: on a web that answers in hundreds of milliseconds, a thread per fetch cost ~3 ms of CPU
a page more than an event loop doing the same fetches (docs/fetch-engine.md): hundreds of
threads each waking for every socket read to take the GIL back. Here the network waits cost
one loop and no thread, and a page crosses threads twice (planned -> loop -> finished).

A job: a pipeline thread plans it (:func:`plan_guarded`: robots.txt, probe or page; the
host's verdicts may be read from Redis, which the loop must never wait for), the loop fetches
(:func:`fetch_step_async`, endable through its ``FetchControl``), a pipeline thread finishes it
(:func:`finish_guarded`: WARC, parse, links) and hands the result to the engine's completer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from workers.fetch import AsyncFetcher, FetchControl, FetchResult, NetworkLoop
from workers.pipeline.lease import finish_guarded, plan_guarded
from workers.pipeline.result import LeaseResult
from workers.pipeline.steps import FetchStep, fetch_step_async
from workers.runtime.context import fetcher_settings
from workers.runtime.jobs import Job

if TYPE_CHECKING:
    from workers.runtime.engine import FetchEngine

log = logging.getLogger(__name__)


class LoopRunner:
    """Runs jobs' fetches on one event loop and their CPU work on ``pipeline_threads``."""

    def __init__(self, engine: FetchEngine) -> None:
        self.engine = engine
        ctx = engine.ctx
        self.loop = NetworkLoop(name="trawl-network")
        self.loop.start()
        self.fetcher = AsyncFetcher(ctx.resolver, ctx.user_agent,
                                    **fetcher_settings(ctx.config))
        self._tasks: set[asyncio.Task[None]] = set()
        #: CPU work for the pipeline threads; None tells a thread to exit.
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._pipeline, daemon=True,
                                          name=f"trawl-pipeline-{i}")
                         for i in range(max(1, ctx.config.pipeline_threads))]
        for thread in self._threads:
            thread.start()

    def start(self, job: Job) -> None:
        self._work.put(functools.partial(self._plan, job))

    def fetching(self) -> int:
        """Fetches on the event loop (waiting on the network)."""
        return len(self._tasks)

    def _pipeline(self) -> None:
        while True:
            work = self._work.get()
            if work is None:
                return
            work()

    def _plan(self, job: Job) -> None:
        engine = self.engine
        if not engine.take(job):
            return
        step = plan_guarded(engine.ctx, job.order.lease, job.order.ip)
        if isinstance(step, LeaseResult):
            engine.finished(job, step)
            return
        control = FetchControl()
        job.abort = functools.partial(self._abort, control)
        self.loop.call_soon(self._fetch_on_loop, job, step, control)

    def _abort(self, control: FetchControl, why: str) -> bool:
        self.loop.call_soon(control.abort, why)
        return True

    def _fetch_on_loop(self, job: Job, step: FetchStep, control: FetchControl) -> None:
        task = asyncio.get_running_loop().create_task(self._fetch(job, step, control))
        self._tasks.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._tasks.discard)

    async def _fetch(self, job: Job, step: FetchStep, control: FetchControl) -> None:
        try:
            res = await fetch_step_async(self.fetcher, step, control)
        except Exception as exc:  # the fetcher never raises; a bug must not lose the URL
            log.error("fetch of %s failed in the engine", step.url, exc_info=exc)
            res = FetchResult(url=step.url, ip=step.ip, error="fetch_error",
                              error_detail=f"{type(exc).__name__}: {exc}"[:500])
        self._work.put(functools.partial(self._finish, job, step, res))

    def _finish(self, job: Job, step: FetchStep, res: FetchResult) -> None:
        result = finish_guarded(self.engine.ctx, job.order.lease, step, res)
        self.engine.finished(job, result)

    def close(self) -> None:
        for _ in self._threads:
            self._work.put(None)
        try:
            self.loop.submit(self.fetcher.close()).result(5.0)
        except Exception as exc:  # closing sockets at exit: nothing to keep
            log.debug("closing the fetcher: %s", exc)
        self.loop.stop()
