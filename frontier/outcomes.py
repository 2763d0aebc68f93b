"""The ways a lease can end: one enum shared by the completions, the counters, the JSONL
records and the summary.

A *final* outcome ends the URL (it gets a JSONL record and counts towards ``accounted``);
the others put the URL back in its queue. Each value is also the name of the partition
counter that the completion script bumps, so the stored names never change.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    FETCHED = "fetched"
    FAILED = "failed"
    ROBOTS_BLOCKED = "robots_blocked"
    OUT_OF_SCOPE = "out_of_scope"
    #: back at the queue's tail, to be fetched again after a backoff
    RETRY = "retries"
    #: the host's robots.txt was fetched instead; the URL is back at the queue's head
    ROBOTS_FETCH = "robots_fetches"
    #: the host's soft-404 probe was fetched instead; back at the head
    SOFT404_PROBE = "soft404_probes"
    #: its IP was busy (per-IP politeness); back at the head
    DEFERRED = "deferred"
    #: the broker refused its task; back at the head
    UNSENT = "unsent"

    @property
    def final(self) -> bool:
        return self in FINAL


#: Outcomes that end a URL: fetched + failed + robots_blocked + out_of_scope = admitted.
FINAL = frozenset({Outcome.FETCHED, Outcome.FAILED, Outcome.ROBOTS_BLOCKED,
                   Outcome.OUT_OF_SCOPE})
