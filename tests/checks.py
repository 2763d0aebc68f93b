"""Politeness and completeness checks over the sandbox server's request log.

Shared by every end-to-end test, so each crawl is judged by the same rules.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable

from sandbox import LogEntry

TOLERANCE_S = 0.002  # clock granularity between the server's end stamp and the next start


def crawler_entries(entries: Iterable[LogEntry], token: str = "Trawl/") -> list[LogEntry]:
    return [e for e in entries if e.ua.startswith(token)]


def url_of(e: LogEntry, port: int, https_port: int = 0) -> str:
    """The URL a log entry answered: HTTPS hosts are served on the sandbox's ``https_port``."""
    if e.scheme == "https":
        return f"https://{e.host}:{https_port}{e.path}"
    return f"http://{e.host}:{port}{e.path}"


def overlaps(entries: list[LogEntry], key: str) -> list[tuple[LogEntry, LogEntry]]:
    """Pairs of requests to one host (key='host') or IP (key='ip') that were in flight at once."""
    by: dict[str, list[LogEntry]] = defaultdict(list)
    for e in entries:
        by[getattr(e, key)].append(e)
    bad = []
    for group in by.values():
        group.sort(key=lambda e: e.start)
        for a, b in itertools.pairwise(group):
            if b.start < a.end - TOLERANCE_S:
                bad.append((a, b))
    return bad


def short_gaps(entries: list[LogEntry], min_gap_s: dict[str, float],
               default_gap_s: float) -> list[tuple[LogEntry, LogEntry, float]]:
    """Consecutive requests to a host closer than its required gap (sent → next start).

    ``sent`` is when the server handed over the response, a lower bound on when the crawler
    had it, so a polite crawler can never fail this check because the server was slow.
    """
    by: dict[str, list[LogEntry]] = defaultdict(list)
    for e in entries:
        by[e.host].append(e)
    bad = []
    for host, group in by.items():
        need = min_gap_s.get(host, default_gap_s)
        group.sort(key=lambda e: e.start)
        for a, b in itertools.pairwise(group):
            gap = b.start - (a.sent or a.end)
            if gap < need - TOLERANCE_S:
                bad.append((a, b, gap))
    return bad


#: Path prefix of the crawler's soft-404 probe (workers/pipeline/soft404.py): one request per host,
#: like robots.txt; politeness checks see it, completeness checks do not.
PROBE_PREFIX = "/trawl-probe-"


def fetch_counts(entries: list[LogEntry], port: int, https_port: int = 0) -> Counter[str]:
    return Counter(url_of(e, port, https_port) for e in entries
                   if not e.path.startswith(PROBE_PREFIX))
