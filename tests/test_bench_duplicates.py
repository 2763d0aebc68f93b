"""The benchmark's duplicate count (bench/logcounts.py): a fetch again of a URL that was answered
is a duplicate; one after a reset or a timeout (status 0, the web's fail_share) or after a
"try again later" status (503) is a retry."""

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


def test_a_retry_after_a_try_again_later_status_is_not_a_duplicate() -> None:
    """The web's /err/flaky-503.html answers 503 and then 200: the crawler's retry of it
    (retry_http_statuses) is not a duplicate; a fetch again after the 200 is."""
    log = [_entry("/err/flaky-503.html", 1.0, 503), _entry("/err/flaky-503.html", 20.0, 200)]
    assert repeats_after_an_answer(log) == 0
    assert repeats_after_an_answer([*log, _entry("/err/flaky-503.html", 30.0, 200)]) == 1
    assert repeats_after_an_answer([_entry("/x", 1.0, 429), _entry("/x", 9.0, 200)]) == 0
