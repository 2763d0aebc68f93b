"""Domains an operator dropped from a running crawl (``trawl drop``): Heritrix's "retire" of a
site that asked to be left alone, or of a spider trap the scope did not foresee.

The dropped domains are one crawl-wide Redis set (``Keys.dropped``). A domain covers its
subdomains, as ``denied_domains`` does. Every worker re-reads the set every
:data:`REFRESH_S` seconds (:class:`DroppedView`) and then:

* refuses new links to those hosts (``links_dropped_domain``, frontier/scope.py);
* ends a leased URL of such a host without a request (outcome ``dropped``,
  workers/pipeline/steps.py), and empties the rest of its host's queue
  (lua/drop_queued.lua), writing a JSONL record for each URL it ends;
* once per newly dropped domain, crawl-wide (the first worker to claim it), sweeps every
  partition's ready heap for that domain's hosts and empties their queues the same way
  (workers/runtime/drop_sweep.py), so a host whose next visit is far off does not keep its
  URLs queued until then.

So nothing is lost: each URL admitted before the drop ends with an outcome (``dropped``
counts towards ``accounted``). A fetch already in progress when the drop is read ends as
usual, and a worker fetches for at most :data:`REFRESH_S` more before it sees the drop.
``trawl drop --undo`` takes a domain out of the set: links to it are admitted again (links
refused meanwhile never reached the URL-seen test, so they are found again when linked).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import redis

from frontier.config import ConfigError
from frontier.keys import host_name
from frontier.psl import ascii_host
from frontier.records import Entry
from frontier.scripts import Store, load_script, text

log = logging.getLogger(__name__)

_DROP = load_script("drop_queued")

#: How often a worker re-reads the set (one SMEMBERS): the longest a worker goes on leasing
#: a dropped host's URLs after ``trawl drop``. Not a setting: operators wait seconds anyway.
REFRESH_S = 2.0
#: Most URLs one script call ends per partition (bounds its time in Redis); a queue longer
#: than that is emptied over more calls.
DROP_BATCH = 1000
#: Most calls one drain makes; a host left with URLs after them is emptied at its next lease.
DRAIN_ROUNDS = 50
#: How long one worker's claim on sweeping a newly dropped domain lasts: other workers that
#: see the drop meanwhile leave the sweep to it (a claimer that dies leaves the rest to the
#: leases). ``--undo`` removes the claim, so dropping the domain again sweeps again.
SWEEP_CLAIM_S = 600
#: Ready-heap entries one ZSCAN call reads while a sweep looks for a domain's hosts.
SWEEP_SCAN_COUNT = 1000
#: Delete a sweep claim only if it is still the caller's (it may have expired and been
#: taken by another worker meanwhile).
_RELEASE_IF_MINE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def domain_name(raw: str) -> str:
    """The set's form of a domain given by an operator: ASCII (IDNA), lower case, no dots at
    its ends. A URL or a name with a port or path is refused: a domain is asked for."""
    name = raw.strip().strip(".").lower()
    if not name or any(c in name for c in "/:@ \t?#"):
        raise ConfigError(f"{raw!r} is not a domain name (give e.g. example.com, not a URL)")
    try:
        return ascii_host(name)
    except ValueError as exc:
        raise ConfigError(f"{raw!r} is not a domain name ({exc})") from None


def dropped_reason(domain: str) -> str:
    """The JSONL ``reason`` of a URL ended because ``domain`` was dropped."""
    return f"{domain} dropped from the crawl (trawl drop)"


def covering(domains: frozenset[str], host: str) -> str | None:
    """The domain of ``domains`` that covers politeness key ``host`` (``name[:port]``): the
    host itself or one of its parent domains; None if none does."""
    if not domains:
        return None
    name = host_name(host).lower()
    start = 0
    while True:
        suffix = name[start:] if start else name
        if suffix in domains:
            return suffix
        dot = name.find(".", start)
        if dot < 0:
            return None
        start = dot + 1


@dataclass(frozen=True, slots=True)
class DroppedEntry:
    """A queued URL the drain ended: its host queue and its entry as queued."""

    host: str
    entry: Entry


class Dropped:
    """The crawl's dropped-domain set, and the drain of dropped hosts' queues."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, domains: Iterable[str]) -> int:
        """Drop ``domains`` (checked with :func:`domain_name`); returns how many were new."""
        names = [domain_name(d) for d in domains]
        return int(self.store.r.sadd(self.store.keys.dropped, *names)) if names else 0

    def remove(self, domains: Iterable[str]) -> int:
        """Undo the drop of ``domains`` (and their sweeps' claims); returns how many were
        dropped."""
        names = [domain_name(d) for d in domains]
        if not names:
            return 0
        for name in names:
            self.store.r.delete(self.store.keys.drop_sweep(name))
        return int(self.store.r.srem(self.store.keys.dropped, *names))

    def claim_sweep(self, domain: str, worker: str) -> bool:
        """True for the one worker that is to sweep newly dropped ``domain``'s queues."""
        return bool(self.store.r.set(self.store.keys.drop_sweep(domain), worker, nx=True,
                                     ex=SWEEP_CLAIM_S))

    def release_sweep(self, domain: str, worker: str) -> bool:
        """Give up ``worker``'s claim on sweeping ``domain`` (its sweep failed), so that a
        worker that sees the drop later sweeps it; True when the claim was this worker's."""
        return bool(self.store.r.eval(_RELEASE_IF_MINE, 1, self.store.keys.drop_sweep(domain),
                                      worker))

    def hosts_under(self, domain: str, partitions: Iterable[int]) -> dict[str, int]:
        """Hosts with queued URLs and no lease (the ready heaps: due now or waiting on their
        delay) that ``domain`` covers: host -> partition. One ZSCAN per partition; the
        match on the name is a prefilter, :func:`covering` the test (no look-alikes)."""
        cover = frozenset({domain})
        found: dict[str, int] = {}
        for p in partitions:
            for raw, _score in self.store.r.zscan_iter(self.store.keys.ready(p),
                                                       match=f"*{domain}*",
                                                       count=SWEEP_SCAN_COUNT):
                host = text(raw)
                if covering(cover, host) is not None:
                    found[host] = p
        return found

    def members(self) -> frozenset[str]:
        return frozenset(text(m) for m in self.store.r.smembers(self.store.keys.dropped))

    def drain(self, hosts: Mapping[str, int]) -> list[DroppedEntry]:
        """End every queued URL of ``hosts`` (host -> partition) that holds no lease; returns
        them. At most :data:`DRAIN_ROUNDS` rounds of :data:`DROP_BATCH` URLs a partition."""
        by_part: dict[int, list[str]] = {}
        for host, p in hosts.items():
            by_part.setdefault(p, []).append(host)
        taken: list[DroppedEntry] = []
        for _ in range(DRAIN_ROUNDS):
            if not by_part:
                break
            parts = list(by_part)
            pipe = self.store.pipeline()
            for p in parts:
                pipe.script(_DROP, [self.store.keys.ready(p)],
                            [self.store.keys.prefix(p), self.store.mode, DROP_BATCH,
                             *by_part[p]])
            for p, raw in zip(parts, pipe.execute(), strict=True):
                got = [DroppedEntry(text(raw[i]), Entry.decode(text(raw[i + 1])))
                       for i in range(0, len(raw), 2)]
                taken += got
                if len(got) < DROP_BATCH:
                    del by_part[p]
        return taken


class DroppedView:
    """A worker's copy of the dropped set, re-read at most every :data:`REFRESH_S` seconds.

    ``on_change`` is called with the new set when it differs (the worker's scope and link
    memo are told). Thread-safe: one caller re-reads, the others use the copy they find.
    """

    def __init__(self, dropped: Dropped,
                 on_change: Callable[[frozenset[str]], Any] | None = None,
                 refresh_s: float = REFRESH_S) -> None:
        self._dropped = dropped
        self._on_change = on_change
        self._refresh_s = refresh_s
        self._lock = threading.Lock()
        self._next = 0.0
        self.domains: frozenset[str] = frozenset()

    def refresh(self, now: float | None = None) -> frozenset[str]:
        """The set, re-read from Redis when :data:`REFRESH_S` has passed (else as last read).
        A Redis error keeps the last copy: the next call tries again."""
        now = time.monotonic() if now is None else now
        if now < self._next or not self._lock.acquire(blocking=False):
            return self.domains
        try:
            self._next = now + self._refresh_s
            try:
                fresh = self._dropped.members()
            except (redis.RedisError, OSError) as exc:
                log.warning("could not read the dropped domains (%s): using the last copy", exc)
                return self.domains
            if fresh != self.domains:
                self.domains = fresh
                if self._on_change is not None:
                    self._on_change(fresh)
        finally:
            self._lock.release()
        return self.domains

    def covering(self, host: str) -> str | None:
        """The dropped domain that covers ``host`` (re-reading the set when due), or None."""
        return covering(self.refresh(), host)
