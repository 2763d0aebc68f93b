"""The revisit schedule of continuous crawling: per partition, a ZSET of tracked URLs -> next
visit time, and the promotion of due revisits into their host queues under the budget.

A member is the tracked entry, "depth url" (frontier.records.Entry), and nothing else when
lua/promote_revisits.lua can find the URL's host queue from the URL alone: the netloc between
"://" and the next "/", after its last "@" (frontier.urls.host_of without its lower(), which a
canonical URL's host does not need; the test is exact, in bytes, see ``schedule_member``).
Otherwise, e.g. a host key that is not the URL's own, the member is "host\tdepth url". Not
repeating the host saves its length and a byte per tracked URL (docs/freshness.md).

Encoder and decoder of lua/promote_revisits.lua. A tracked URL is always in exactly one of
three places: its partition's schedule ``rv``, its host queue (as a revisit entry), or a
lease. lua/complete.lua moves it from a lease into ``rv`` in the step that ends the lease;
promotion moves it from ``rv`` into the queue; acquire and reap move it between the queue and
a lease as any URL. So the schedule survives a worker's death like the rest of the frontier.

How revisits and new URLs share the crawl (docs/freshness.md): revisits have their budget,
``revisit_budget_pages_s`` crawl-wide, split over the partitions in proportion to their
scheduled URLs (a token bucket per partition, in Redis, so the cap holds whichever worker owns
it); new URLs have the rest of the politeness capacity. A promoted revisit goes to the head
of its host queue, ahead of new URLs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from frontier.records import Entry
from frontier.scripts import Store, load_script, text

_PROMOTE = load_script("promote_revisits")

#: Most revisits one call promotes per partition (bounds the script's time in Redis).
MAX_PROMOTE = 500


def url_host(url: str) -> str | None:
    """The host queue key lua/promote_revisits.lua derives from a URL (its ``url_host``,
    byte for byte): None when the URL has no "://" (the member then names its host)."""
    start = url.find("://")
    if start < 0:
        return None
    end = url.find("/", start + 3)
    netloc = url[start + 3:] if end < 0 else url[start + 3:end]
    return netloc[netloc.rfind("@") + 1:]


def schedule_member(host: str, entry: Entry) -> str:
    """The schedule's member of a tracked entry of ``host``'s queue (the module docstring)."""
    tracked = entry.encode()
    return tracked if url_host(entry.url) == host else f"{host}\t{tracked}"


def member_entry(member: str | bytes) -> Entry:
    """The tracked entry of a schedule member, of either form."""
    raw = member.decode() if isinstance(member, bytes) else member
    return Entry.decode(raw.rpartition("\t")[2])


def member_host(member: str | bytes) -> str:
    """The host queue a schedule member goes back to, as the script finds it."""
    raw = member.decode() if isinstance(member, bytes) else member
    host, tab, _tracked = raw.partition("\t")
    if tab:
        return host
    found = url_host(Entry.decode(raw).url)
    if found is None:
        raise ValueError(f"schedule member without a host: {raw[:200]!r}")
    return found


@dataclass(frozen=True, slots=True)
class PromoteCall:
    """lua/promote_revisits.lua's ARGV: prefix, now, mode, rate, burst, max_n."""

    prefix: str
    now: float
    mode: str
    rate: float
    burst: float
    max_n: int

    def encode(self) -> list[Any]:
        return [self.prefix, repr(self.now), self.mode, repr(self.rate), repr(self.burst),
                self.max_n]


class PromoteReply(NamedTuple):
    """{promoted, woke or -1, members due now left for lack of tokens}."""

    promoted: int
    woke: float | None
    left: int

    @classmethod
    def decode(cls, raw: Any) -> PromoteReply:
        woke = float(text(raw[1]))
        return cls(int(raw[0]), woke if woke >= 0 else None, int(raw[2]))


@dataclass(frozen=True, slots=True)
class ScheduleStatus:
    """The revisit schedule crawl-wide: URLs tracked in it now, and of those, due now."""

    scheduled: int
    due: int


class Revisits:
    """Promotion and status of every partition's revisit schedule."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def shares(self) -> dict[int, float]:
        """Each partition's share of the revisit budget (revisits a second): the budget split
        in proportion to the URLs in the partitions' schedules (evenly while none are), so
        a partition with few tracked URLs does not sit on budget the others need. One
        pipeline of ZCARDs; the owners re-read it every few seconds."""
        store = self.store
        budget = store.config.revisit_budget_pages_s
        pipe = store.pipeline()
        for p in range(store.partitions):
            pipe.command("zcard", store.keys.revisits(p))
        sizes = [int(x) for x in pipe.execute()]
        total = sum(sizes)
        if not total:
            return dict.fromkeys(range(store.partitions), budget / store.partitions)
        return {p: budget * n / total for p, n in enumerate(sizes)}

    def promote(self, partitions: Iterable[int] | Mapping[int, str],
                rates: Mapping[int, float], now: float | None = None
                ) -> dict[int, PromoteReply]:
        """Move due revisits of ``partitions`` into their host queues (one pipeline), each
        within its token bucket refilled at ``rates[p]`` a second (:meth:`shares`). The
        caller owns them (the scheduler's step); returns each partition's reply."""
        store = self.store
        now = time.time() if now is None else now
        parts = list(partitions)
        pipe = store.pipeline()
        for p in parts:
            rate = rates[p]
            burst = max(1.0, rate * store.config.revisit_burst_s)
            call = PromoteCall(store.keys.prefix(p), now, store.mode, rate, burst, MAX_PROMOTE)
            pipe.script(_PROMOTE, [store.keys.ready(p)], call.encode())
        return {p: PromoteReply.decode(raw) for p, raw in zip(parts, pipe.execute(), strict=True)}

    def status(self, now: float | None = None) -> ScheduleStatus:
        """URLs in the schedules, and those due by ``now`` (one pipeline)."""
        store = self.store
        now = time.time() if now is None else now
        pipe = store.pipeline()
        for p in range(store.partitions):
            pipe.command("zcard", store.keys.revisits(p))
            pipe.command("zcount", store.keys.revisits(p), "-inf", repr(now))
        raw = pipe.execute()
        return ScheduleStatus(sum(int(x) for x in raw[::2]), sum(int(x) for x in raw[1::2]))
