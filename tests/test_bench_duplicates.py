"""The benchmark's duplicate count (bench/logcounts.py): a fetch again of a URL that was answered
is a duplicate; one after a reset or a timeout (status 0, the web's fail_share) is a retry."""

from __future__ import annotations

from bench.logcounts import repeats_after_an_answer
from sandbox.requestlog import LogEntry


def _entry(path: str, start: float, status: int) -> LogEntry:
    return LogEntry(start=start, end=start + 0.1, host="h1.sandbox.test", ip="127.0.0.2",
                    path=path, method="GET", status=status, bytes=100, ua="Trawl/0.1")


def test_a_retry_after_no_answer_is_not_a_duplicate_and_a_refetch_after_one_is() -> None:
    log = [_entry("/a", 3.0, 200), _entry("/a", 1.0, 0),  # reset, then retried: a retry
           _entry("/b", 1.0, 200), _entry("/b", 2.0, 200),  # answered twice: a duplicate
           _entry("/c", 1.0, 404), _entry("/c", 2.0, 0)]  # a 404 is an answer too
    assert repeats_after_an_answer(log) == 2
    assert repeats_after_an_answer(list(reversed(log))) == 2  # time order, not log order
    # The plain count (fetches less distinct URLs, the table's "dup") takes all three repeats.
    assert len(log) - len({e.path for e in log}) == 3
