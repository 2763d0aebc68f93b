"""Leases: due hosts handed out (acquire), started (begin), ended (complete) or expired (reap).

Encoders and decoders of lua/acquire.lua, begin.lua, complete.lua and reap.lua. A lease is
the only way a URL leaves its host queue, so a host is never fetched by two workers at once.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from frontier.records import Completion, Entry, Lease
from frontier.revisits import schedule_member
from frontier.scripts import Store, load_script, owners_of, text

_ACQUIRE = load_script("acquire")
_BEGIN = load_script("begin")
_COMPLETE = load_script("complete")
_REAP = load_script("reap")

#: What acquire.lua and reap.lua reply when the caller no longer owns the partition.
_FENCED = -2


@dataclass(frozen=True, slots=True)
class AcquireCall:
    """lua/acquire.lua's ARGV: prefix, now, max_n, lease_ttl_s, owner ('' = unfenced), mode."""

    prefix: str
    now: float
    max_n: int
    lease_ttl_s: float
    owner: str
    mode: str

    def encode(self) -> list[Any]:
        return [self.prefix, self.now, self.max_n, self.lease_ttl_s, self.owner, self.mode]


class AcquireReply(NamedTuple):
    """lua/acquire.lua's reply: {earliest, lease id, host, entry, score, ...} or {-2}."""

    #: The caller no longer owns the partition (nothing was leased).
    fenced: bool
    #: Earliest next-allowed time of a host still waiting, or None.
    next_due: float | None
    leases: list[Lease]

    @classmethod
    def decode(cls, partition: int, raw: Sequence[Any]) -> AcquireReply:
        first = float(raw[0])
        if first == _FENCED:
            return cls(True, None, [])
        leases = [Lease(partition, text(raw[i]), text(raw[i + 1]), Entry.decode(text(raw[i + 2])),
                        float(raw[i + 3])) for i in range(1, len(raw), 4)]
        return cls(False, first if first >= 0 else None, leases)


def encode_begin(prefix: str, now: float, budget_s: float,
                 runs: Iterable[tuple[str, str, int]]) -> list[Any]:
    """lua/begin.lua's ARGV: prefix, now, budget_s, then per lease: lease id, host, j (its
    deadline becomes now + j x budget_s)."""
    argv: list[Any] = [prefix, now, budget_s]
    for run in runs:
        argv += run
    return argv


def decode_begin(raw: Sequence[Any]) -> list[bool]:
    """Per lease: still current (its deadline renewed)."""
    return [bool(int(flag)) for flag in raw]


def encode_complete(prefix: str, mode: str, completions: Iterable[Completion]) -> list[Any]:
    """lua/complete.lua's ARGV: prefix, mode, then per lease: lease id, host, next_allowed,
    outcome, requeued entry ('' = none), 'h'/'t' (head/tail), score, revisit time and the
    schedule member (frontier/revisits.py ``schedule_member``; '' and '': the URL is not put
    in the revisit schedule)."""
    argv: list[Any] = [prefix, mode]
    for c in completions:
        argv += [c.lease.lease_id, c.lease.host, repr(c.next_allowed), c.outcome,
                 c.requeue.encode() if c.requeue else "", "h" if c.at_head else "t",
                 repr(c.lease.score)]
        if c.revisit_at is None:
            argv += ["", ""]
        else:
            tracked = Entry(c.lease.entry.url, c.lease.entry.depth)
            argv += [repr(c.revisit_at), schedule_member(c.lease.host, tracked)]
    return argv


def decode_complete(raw: Any) -> int:
    """How many of the call's leases were stale (expired and re-queued already)."""
    return int(raw)


@dataclass(frozen=True, slots=True)
class ReapCall:
    """lua/reap.lua's ARGV: prefix, now, max_n, owner ('' = unfenced), mode, begun_s (a
    begun lease's deadline is at most this far ahead; see the script on orphans)."""

    prefix: str
    now: float
    max_n: int
    owner: str
    mode: str
    begun_s: float

    def encode(self) -> list[Any]:
        return [self.prefix, self.now, self.max_n, self.owner, self.mode, self.begun_s]


class ReapReply(NamedTuple):
    """lua/reap.lua's reply: leases re-queued, or -2 when the caller no longer owns it."""

    fenced: bool
    requeued: int

    @classmethod
    def decode(cls, raw: Any) -> ReapReply:
        n = int(raw)
        return cls(n == _FENCED, max(0, n))


class Leases:
    """The lease life cycle of every partition (see Frontier's invariants)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: Partitions whose ownership was lost, as of the last acquire.
        self.fenced: set[int] = set()
        #: Partition -> earliest time a host of it is due, or None, as of the last acquire.
        self.next_due: dict[int, float | None] = {}

    def acquire(
        self, per_partition: int, now: float | None = None,
        partitions: Iterable[int] | Mapping[int, str] | None = None,
    ) -> tuple[list[Lease], float | None]:
        """See :meth:`Frontier.acquire`."""
        store = self.store
        now = time.time() if now is None else now
        owners = owners_of(range(store.partitions) if partitions is None else partitions)
        pipe = store.pipeline()
        for p, owner in owners.items():
            call = AcquireCall(store.keys.prefix(p), now, per_partition,
                               store.config.lease_ttl_s, owner, store.mode)
            pipe.script(_ACQUIRE, [store.keys.ready(p)], call.encode())
        leases: list[Lease] = []
        earliest: float | None = None
        self.fenced = set()
        self.next_due = {}
        for p, raw in zip(owners, pipe.execute(), strict=True):
            reply = AcquireReply.decode(p, raw)
            if reply.fenced:
                self.fenced.add(p)
                continue
            self.next_due[p] = reply.next_due
            if reply.next_due is not None and (earliest is None or reply.next_due < earliest):
                earliest = reply.next_due
            leases += reply.leases
        return leases, earliest

    def begin(self, leases: Sequence[Lease], budget_s: float,
              now: float | None = None, *, stagger: bool = True) -> list[bool]:
        """See :meth:`Frontier.begin`."""
        now = time.time() if now is None else now
        groups: dict[int, list[int]] = defaultdict(list)
        for i, lease in enumerate(leases):
            groups[lease.partition].append(i)
        pipe = self.store.pipeline()
        for p, idx in groups.items():
            runs = [(leases[i].lease_id, leases[i].host, i + 1 if stagger else 1) for i in idx]
            pipe.script(_BEGIN, [self.store.keys.ready(p)],
                        encode_begin(self.store.keys.prefix(p), now, budget_s, runs))
        ok = [False] * len(leases)
        for idx, raw in zip(groups.values(), pipe.execute(), strict=True):
            for i, current in zip(idx, decode_begin(raw), strict=True):
                ok[i] = current
        return ok

    def queue_complete(self, pipe: Any, completions: Iterable[Completion]) -> int:
        """Add completion scripts to ``pipe``; returns how many replies they add."""
        groups: dict[int, list[Completion]] = defaultdict(list)
        for c in completions:
            groups[c.lease.partition].append(c)
        keys, mode = self.store.keys, self.store.mode
        for p, group in groups.items():
            pipe.script(_COMPLETE, [keys.ready(p)], encode_complete(keys.prefix(p), mode, group))
        return len(groups)

    def complete(self, completions: Iterable[Completion]) -> int:
        """Finish leases; returns how many were stale (already expired and re-queued)."""
        pipe = self.store.pipeline()
        n = self.queue_complete(pipe, completions)
        return sum(decode_complete(x) for x in pipe.execute()[:n])

    def reap(self, now: float | None = None, max_per_partition: int = 1000,
             partitions: Iterable[int] | Mapping[int, str] | None = None) -> int:
        """Re-queue every expired lease (of the given partitions); returns how many."""
        store = self.store
        now = time.time() if now is None else now
        owners = owners_of(range(store.partitions) if partitions is None else partitions)
        # Twice the keeper's deadline: room for clock skew between a worker and this caller.
        begun_s = 2 * store.config.lease_keep_s
        pipe = store.pipeline()
        for p, owner in owners.items():
            call = ReapCall(store.keys.prefix(p), now, max_per_partition, owner, store.mode,
                            begun_s)
            pipe.script(_REAP, [store.keys.ready(p)], call.encode())
        return sum(ReapReply.decode(x).requeued for x in pipe.execute())

    def alive(self, leases: Sequence[Lease]) -> list[bool]:
        """Whether each lease is still current (not reaped): checked before a fetch."""
        pipe = self.store.pipeline()
        for lease in leases:
            pipe.command("hget", self.store.keys.busy_hosts(lease.partition), lease.host)
        return [text(v) == lease.lease_id if v is not None else False
                for v, lease in zip(pipe.execute(), leases, strict=True)]
