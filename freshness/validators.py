"""When a stored Last-Modified may go back to the server as If-Modified-Since.

RFC 9110, 8.8.2.2: a Last-Modified is a strong validator only when the response's Date is at
least one second after it. An HTTP date names a whole second, so a copy fetched within the
second it was last modified cannot be told from a version made later in that second: the
server would answer 304 to a changed page. On the real web that takes a page changing twice
in a second (a feed, a counter page); at the changing sandbox web's time acceleration a wall
second is an hour or more of simulated time, and a fast page on a host that gives only dates
would look unchanged to every revisit. Used by the crawl (workers/pipeline/revisit.py) and
the freshness bench alike.
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime


def http_date_s(value: str | None) -> float | None:
    """An HTTP date as POSIX seconds; None when missing or unreadable."""
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, OverflowError):
        return None


def strong_at(last_modified_s: float | None, date_s: float | None) -> bool:
    """``strong_last_modified`` on dates already read (``http_date_s``)."""
    return last_modified_s is not None and date_s is not None and \
        date_s >= last_modified_s + 1.0


def strong_last_modified(last_modified: str | None, date: str | None) -> bool:
    """Whether a response's Last-Modified is strong: its Date at least a second after it
    (False when either is missing or unreadable)."""
    return strong_at(http_date_s(last_modified), http_date_s(date))
