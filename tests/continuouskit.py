"""A continuous crawl run inside the test process (tests/inprocess.py's loop, plus the
scheduler's revisit promotion and the member's replanning): for tests that need real revisits
without worker processes."""

from __future__ import annotations

import time

from frontier.config import CrawlConfig
from frontier.frontier import Frontier
from sandbox import SandboxConfig, SandboxWeb
from workers.app.celery_app import configure
from workers.cluster.revisits import RevisitOwner
from workers.pipeline.lease import process_leases
from workers.runtime import context
from workers.runtime.completion import apply_results

#: A small changing web: 3600x (a simulated hour per wall second), every kind of host; a
#: changing page changes every 1 min to 6 h simulated (17 ms to 6 s wall), so a test's
#: revisits see changes, half of them date-line only.
CHANGING = SandboxConfig(seed=3, hosts=12, pages_per_host=10, ips=3, changes=True,
                         change_share=0.7, cosmetic_share=0.5, etag_share=0.5,
                         last_modified_share=0.5, change_max_interval_s=6 * 3600.0,
                         wrong_lm_share=0.2, time_acceleration=3600.0, slow_page_s=0.1,
                         robots_slow_s=0.1, hang_s=1.0, crawl_delay_s=0.1)


def continuous_config(web: SandboxWeb, namespace: str, out: str, **kw: object) -> CrawlConfig:
    settings: dict[str, object] = dict(
        namespace=namespace, partitions=4, output_dir=out, host_delay_s=0.0,
        adaptive_delay_factor=0.0, allow_private_ips=True, soft404_probe=False,
        static_hosts=web.resolver_map, allowed_domains=[web.config.domain], ip_concurrency=0,
        connect_timeout_s=1.0, read_timeout_s=1.5, total_timeout_s=2.0, max_retries=0,
        continuous=True, revisit_policy="fixed", revisit_fixed_interval_s=1.0,
        revisit_min_interval_s=0.5, revisit_max_interval_s=30.0, revisit_budget_pages_s=200.0,
        revisit_expected_urls=1000, max_delay_s=0.0)
    settings.update(kw)
    return CrawlConfig(**settings).validate()  # type: ignore[arg-type]


def crawl_for(redis_url: str, frontier: Frontier, seconds: float,
              until: object = None) -> RevisitOwner:
    """Run the crawl of ``frontier`` for ``seconds`` (or until ``until()`` is true): promote
    due revisits, acquire, fetch, complete. Returns the owner (its promotion counts)."""
    configure(redis_url, frontier.config.namespace)
    context.close_context()
    ctx = context.get_context(redis_url, frontier.config.namespace)
    owner = RevisitOwner(frontier)
    parts = dict.fromkeys(range(frontier.partitions), "")
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if callable(until) and until():
                break
            owner.step(time.time(), parts)
            owner.replan_due(time.time(), parts)  # a member does this on a thread of its own
            leases, _ = frontier.acquire(8)
            if not leases:
                time.sleep(0.02)
                continue
            results = process_leases(ctx, [(le, None) for le in leases])
            apply_results(ctx, [(r, None) for r in results], [])
    finally:
        context.close_context()
    return owner
