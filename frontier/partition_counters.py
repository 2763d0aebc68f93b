"""Each partition's counters (HASH ``s``): read for status, bumped by workers.

Encoders and decoders of lua/hget.lua, hgetall.lua and hincrby.lua: plain hash commands as
scripts, so that on one server a pipeline's calls for many partitions merge into one batched
EVALSHA (frontier/slotpipe.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from frontier.scripts import Store, load_script, text

_HGET = load_script("hget")
_HGETALL = load_script("hgetall")
_HINCRBY = load_script("hincrby")

#: Fields of a partition's counter hash that are bookkeeping, not counters.
_INTERNAL = frozenset({"seq", "bloom_layer", "bloom_fill", "bfs_asked"})


def encode_hincrby(counters: Mapping[str, int]) -> list[Any]:
    """lua/hincrby.lua's ARGV: field, amount, ..."""
    argv: list[Any] = []
    for name, amount in counters.items():
        argv += [name, amount]
    return argv


def decode_hgetall(raw: Sequence[Any]) -> dict[str, int]:
    """lua/hgetall.lua's reply (field, value, ...) as counters, bookkeeping fields left out."""
    pairs = zip(raw[::2], raw[1::2], strict=True)
    return {name: int(v) for name, v in ((text(k), v) for k, v in pairs)
            if name not in _INTERNAL}


class PartitionCounters:
    """Reads and bumps the counters of partitions."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def read(self) -> list[dict[str, int]]:
        """Every partition's counters (one round trip)."""
        pipe = self.store.pipeline()
        for p in range(self.store.partitions):
            pipe.script(_HGETALL, [self.store.keys.stats(p)], [])
        return [decode_hgetall(raw) for raw in pipe.execute()]

    def queue_add(self, pipe: Any, partition: int, counters: Mapping[str, int]) -> None:
        """Add ``counters`` to one partition's counters: one script call for all of them."""
        argv = encode_hincrby(counters)
        if argv:
            pipe.script(_HINCRBY, [self.store.keys.stats(partition)], argv)

    def queue_inflight(self, pipe: Any, partitions: Iterable[int]) -> int:
        """Add reads of the partitions' in-flight counts to ``pipe``; returns how many replies
        they add (lua/hget.lua: ARGV = field; replies the value or 0)."""
        n = 0
        for p in partitions:
            pipe.script(_HGET, [self.store.keys.stats(p)], ["inflight"])
            n += 1
        return n
