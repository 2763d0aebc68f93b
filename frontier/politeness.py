"""When a host may be fetched again: the only place that computes a host's next fetch time.

delay = max(configured minimum, robots Crawl-delay, k x last response time), at most
``max_delay_s``. The frontier's complete script stores ``end + delay`` as the host's next allowed
time; the ready heap then holds the host back until then, whichever worker fetches next.
"""

from __future__ import annotations

from frontier.config import CrawlConfig


def host_delay(config: CrawlConfig, crawl_delay_s: float | None, elapsed_s: float | None) -> float:
    delay = config.host_delay_s
    if crawl_delay_s is not None:
        delay = max(delay, crawl_delay_s)
    if elapsed_s is not None:
        delay = max(delay, config.adaptive_delay_factor * elapsed_s)
    return min(delay, config.max_delay_s)


def retry_backoff(config: CrawlConfig, attempt: int) -> float:
    """Wait before retry number ``attempt`` (1-based): exponential, bounded by max_delay_s."""
    return min(config.retry_backoff_s * 2 ** max(0, attempt - 1), config.max_delay_s)
