"""Counts over a sandbox request log that the benchmark reports (bench/harness.py).

A module of its own, free of side effects: bench/harness.py puts bench/ on ``sys.path``, where
bench/freshness.py would shadow the ``freshness`` package, so tests must not import it.
"""

from __future__ import annotations

from frontier.config import CrawlConfig
from sandbox.requestlog import LogEntry

#: Statuses that say "try again later" (Trawl's default retry_http_statuses, as Scrapy's
#: RETRY_HTTP_CODES and Heritrix's retry on 5xx): a fetch again after one is a retry.
RETRY_LATER = frozenset(CrawlConfig().retry_http_statuses)


def repeats_after_an_answer(pages: list[LogEntry]) -> int:
    """Fetches of a URL that had already been answered: duplicates. A fetch again after a
    reset or a timeout (status 0, the web's ``fail_share``) or after a "try again later"
    status (:data:`RETRY_LATER`: the web's ``/err/flaky-503.html``) is a retry and is not
    counted."""
    answered: set[str] = set()
    repeats = 0
    for e in sorted(pages, key=lambda e: e.start):
        key = f"{e.host}{e.path}"
        if key in answered:
            repeats += 1
        if e.status != 0 and e.status not in RETRY_LATER:
            answered.add(key)
    return repeats
