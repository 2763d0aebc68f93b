"""When a host may be fetched again: the only place that computes a host's next fetch time.

delay = max(configured minimum, robots Crawl-delay, k x last response time), at most
``max_delay_s``; after a 429 or 503 (any status worth a retry) also the server's
``Retry-After``, at most an hour. The frontier's complete script stores ``end + delay`` as
the host's next allowed time; the ready heap then holds the host back until then, whichever
worker fetches next.
"""

from __future__ import annotations

from datetime import UTC
from email.utils import parsedate_to_datetime

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


#: Longest Retry-After honoured (seconds). Not a setting: a server that asks for more (or for
#: years, as a hostile one may) gets an hour, after which the URL's retries go on as usual.
RETRY_AFTER_MAX_S = 3600.0


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (RFC 9110 §10.2.3: delay-seconds or an
    HTTP-date), at most :data:`RETRY_AFTER_MAX_S`; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:  # an HTTP-date is GMT; a date without a zone is read so too
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - now
    return min(max(0.0, seconds), RETRY_AFTER_MAX_S)
