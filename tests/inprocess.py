"""A crawl run inside the test process: acquire -> pipeline -> apply_results on a real Redis
until nothing is queued or leased, for tests that need the pipeline's real outputs without
worker processes."""

from __future__ import annotations

import time

from frontier.frontier import Frontier
from workers.app.celery_app import configure
from workers.pipeline.lease import process_leases
from workers.runtime import context
from workers.runtime.completion import apply_results


def crawl_until_done(redis_url: str, frontier: Frontier, timeout_s: float,
                     skip_delays: bool = False) -> None:
    """Run the crawl of ``frontier`` (created with ``init_crawl``) to its end or ``timeout_s``.
    ``skip_delays``: acquire as if an hour later, so host delays and retry backoffs are not
    waited for (they are still computed and stored)."""
    configure(redis_url, frontier.config.namespace)
    context.close_context()
    ctx = context.get_context(redis_url, frontier.config.namespace)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            leases, _ = frontier.acquire(8, now=time.time() + 3600 if skip_delays else None)
            st = frontier.stats()
            if not leases and st["queued"] == 0 and st["inflight"] == 0:
                break
            results = process_leases(ctx, [(le, None) for le in leases])
            apply_results(ctx, [(r, None) for r in results], [])
    finally:
        context.close_context()
