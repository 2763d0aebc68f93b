"""Celery tasks. ``trawl.fetch`` hands a batch of leased URLs of distinct hosts to the
process's fetch engine (workers/runtime/engine.py), which completes each URL on its own.

A task is idempotent: a lease that is no longer current (expired and re-queued, or already
completed by an earlier delivery of the same message) is skipped before any request is made.
The task returns once its URLs are in the engine (it blocks only while the engine is full),
so its message is acked then: from there on the lease in Redis, kept alive by the engine's
lease keeper, is what brings a URL back if this worker dies.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import worker_process_shutdown, worker_shutdown

from frontier.counters import ERRORS
from workers.app.celery_app import app
from workers.fetch.order import decode_batch
from workers.runtime.completion import apply_results
from workers.runtime.context import close_context, get_context
from workers.runtime.engine import close_engine, get_engine

__all__ = ["apply_results", "fetch"]

log = logging.getLogger(__name__)


@app.task(name="trawl.fetch", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def fetch(batch: list[Any]) -> int:
    """Start fetching each :class:`FetchOrder` of ``batch``; returns how many were started.

    Before the hand-over (one round trip for the whole batch) every lease is checked and
    given a deadline of ``lease_keep_s``, which the engine's keeper renews while the fetch
    runs: a stale lease is skipped, and a worker that dies strands its URLs that long.
    """
    ctx = get_context(app.conf.trawl_redis_url, app.conf.trawl_namespace)
    orders, bad = decode_batch(batch)
    for exc in bad:
        # Its URL stays leased in Redis and comes back when the lease expires.
        log.error("malformed task message skipped: %s", exc)
    if bad:
        # Partition 0's counters: a message that does not decode names no lease (and so
        # no partition); it is rare, so it makes no hot key (completion.py spreads the rest).
        ctx.client.hincrby(ctx.frontier.keys.stats(0), ERRORS.name("bad_message"), len(bad))
    if not orders:
        return 0
    current = ctx.frontier.begin([o.lease for o in orders], ctx.config.lease_keep_s,
                                 stagger=False)
    todo = [o for o, ok in zip(orders, current, strict=True) if ok]
    stale = [(o.lease, o.ip) for o, ok in zip(orders, current, strict=True) if not ok]
    if stale:
        apply_results(ctx, [], stale)
    if todo:
        get_engine(ctx, app.conf.get("trawl_fetch_concurrency")).submit(todo)
    return len(todo)


@worker_process_shutdown.connect
@worker_shutdown.connect
def _flush_on_shutdown(**_kw: Any) -> None:
    close_engine()
    close_context()
