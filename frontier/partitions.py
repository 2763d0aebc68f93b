"""Partition ownership (claim, release, who owns what) and the scheduler's due hints.

Encoders and decoders of lua/claim.lua, release_partition.lua and take_due.lua. Which member
*should* own a partition is frontier/ownership.py's; this module holds the leases in Redis
that make one member the owner, with fencing tokens that stop an ex-owner's writes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from frontier.scripts import Store, load_script, text

_CLAIM = load_script("claim")
_RELEASE = load_script("release_partition")
_TAKE_DUE = load_script("take_due")


def encode_claim(member: str, ttl_s: float) -> list[Any]:
    """lua/claim.lua's ARGV: member, ttl_ms."""
    return [member, int(ttl_s * 1000)]


def decode_claim(raw: Any) -> int | None:
    """The fencing token if the caller owns the partition now, else None."""
    token = int(raw)
    return token if token > 0 else None


def owner_value(raw: Any) -> str | None:
    """The member named by an ``own`` key's value "member|token" (None: no owner)."""
    return text(raw).split("|")[0] if raw else None


class DueReply(NamedTuple):
    """lua/take_due.lua's reply: {hinted partitions, earliest later hint time or '-1'}."""

    hinted: set[int]
    later: float | None

    @classmethod
    def decode(cls, raw: Sequence[Any]) -> DueReply:
        hinted, nxt = raw
        later = float(nxt)
        return cls({int(p) for p in hinted}, later if later >= 0 else None)


class Partitions:
    """Ownership leases of partitions, and due hints for their owners' schedulers."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: Due hints: partition -> a time from which it may have a due host that its last
        #: acquire did not see (a completion or an admission since). A ZSET of its own slot.
        self.due_key = store.keys.due

    def claim(self, member: str, partitions: Iterable[int], ttl_s: float) -> dict[int, int]:
        """Claim or renew ownership; returns partition -> fencing token for those now held."""
        keys, parts = self.store.keys, list(partitions)
        pipe = self.store.pipeline()
        for p in parts:
            pipe.script(_CLAIM, [keys.owner(p), keys.epoch(p)], encode_claim(member, ttl_s))
        tokens = {p: decode_claim(raw) for p, raw in zip(parts, pipe.execute(), strict=True)}
        return {p: t for p, t in tokens.items() if t is not None}

    def release(self, owners: Mapping[int, str]) -> int:
        """Give up partitions still held with these owner values; returns how many."""
        pipe = self.store.pipeline()
        for p, owner in owners.items():
            # lua/release_partition.lua: ARGV = the owner value; replies 1 if released.
            pipe.script(_RELEASE, [self.store.keys.owner(p)], [owner])
        return sum(int(x) for x in pipe.execute()) if owners else 0

    def owners(self) -> list[str | None]:
        """Per partition, the member owning it (None: nobody)."""
        pipe = self.store.pipeline()
        for p in range(self.store.partitions):
            pipe.command("get", self.store.keys.owner(p))
        return [owner_value(v) for v in pipe.execute()]

    def queue_due_hints(self, pipe: Any, hints: Mapping[int, float]) -> None:
        """See :meth:`Frontier.queue_due_hints`."""
        if hints:
            args: list[Any] = []
            for p, t in hints.items():
                args += [repr(t), p]
            pipe.command("ZADD", self.due_key, "LT", *args)

    def take_due(self, partitions: Iterable[int],
                 now: float | None = None) -> tuple[set[int], float | None]:
        """See :meth:`Frontier.take_due`."""
        now = time.time() if now is None else now
        pipe = self.store.pipeline()
        # lua/take_due.lua: ARGV = now, partitions...
        pipe.script(_TAKE_DUE, [self.due_key], [repr(now), *partitions])
        reply = DueReply.decode(pipe.execute()[0])
        return reply.hinted, reply.later
