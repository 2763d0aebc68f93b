"""Visit histories in Redis: 51-byte records in small hashes keyed by a 32-bit slice of a
64-bit URL hash.

Records are grouped into ``buckets`` hashes (``<prefix><n>``) by xxh64 of the URL: the low 32
bits pick the hash (modulo ``buckets``), the field is the high 32 bits (4 bytes), not the URL.
Sized so that a hash holds at most Redis's ``hash-max-listpack-entries`` (128 by default)
fields, each hash stays a listpack, and a URL costs its 4-byte field and 51-byte value plus one
header byte and one back-length byte for each, and about a byte of the hash's own overhead:
about 60 bytes, and no copy of the URL (the revisit schedule holds it).

Two URLs of a partition share a record when they fall in the same hash and have the same
field: with about TARGET_PER_HASH records per hash, a URL meets about that many others, each
matching with odds 2⁻³², so a crawl of N URLs expects about N·TARGET_PER_HASH/2/2³² shared
pairs: 0.01 at 10⁶ URLs, 1 at 10⁸, 11 at 10⁹. The harm is one merged history (and visit
state: an ETag sent to the wrong URL gets a full 200, not a wrong 304).

The crawl passes a partition's prefix (frontier.keys.Keys.prefix(p) + "fh:") so the records of a
partition share its slot. A URL is visited by one worker at a time (its host is leased), so
the read-modify-write of ``observe_many`` needs no lock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import redis
import xxhash

from freshness.history import RecordError, VisitHistory

log = logging.getLogger(__name__)

#: Records per hash the bucket count aims at (listpack limit 128, minus slack for skew).
TARGET_PER_HASH = 96


def buckets_for(expected_urls: int) -> int:
    """Hashes to spread ``expected_urls`` records over, each staying a listpack."""
    return max(1, -(-expected_urls // TARGET_PER_HASH))


class HistoryStore:
    """Get and put packed ``VisitHistory`` records of URLs."""

    def __init__(self, client: redis.Redis, prefix: str, buckets: int) -> None:
        if buckets < 1:
            raise ValueError(f"buckets must be >= 1, got {buckets}")
        self.client, self.prefix, self.buckets = client, prefix, buckets
        self.bad_records = 0

    def location(self, url: str) -> tuple[str, bytes]:
        """(hash key, field) of the record of ``url``."""
        h = xxhash.xxh64_intdigest(url.encode())
        return f"{self.prefix}{(h & 0xFFFF_FFFF) % self.buckets}", (h >> 32).to_bytes(4, "big")

    def get_many(self, urls: Sequence[str]) -> list[VisitHistory | None]:
        """The records of ``urls`` (None where there is none; an unreadable record is
        logged, counted in ``bad_records`` and read as None)."""
        # one HMGET a hash, not an HGET a URL: a replan reads a whole partition's records
        by_key: dict[str, tuple[list[int], list[bytes]]] = {}
        for i, url in enumerate(urls):
            key, fld = self.location(url)
            at, fields = by_key.setdefault(key, ([], []))
            at.append(i)
            fields.append(fld)
        pipe = self.client.pipeline(transaction=False)
        for key, (_, fields) in by_key.items():
            pipe.hmget(key, fields)
        raws: list[bytes | None] = [None] * len(urls)
        for (at, _), values in zip(by_key.values(), pipe.execute(), strict=True):
            for i, raw in zip(at, values, strict=True):
                raws[i] = raw
        out: list[VisitHistory | None] = []
        for url, raw in zip(urls, raws, strict=True):
            try:
                out.append(VisitHistory.unpack(raw) if raw is not None else None)
            except RecordError as exc:
                self.bad_records += 1
                log.warning("history of %s unreadable, starting afresh: %s", url, exc)
                out.append(None)
        return out

    def put_many(self, records: Iterable[tuple[str, VisitHistory]]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for url, record in records:
            pipe.hset(*self.location(url), record.pack())
        pipe.execute()

    def observe_many(self, visits: Sequence[tuple[str, int, bool, int | None, int | None]]
                     ) -> list[VisitHistory]:
        """Record visits (url, time_s, changed, last_modified_s, digest); the new records."""
        old = self.get_many([v[0] for v in visits])
        new = [(rec or VisitHistory()).observe(t, changed, lm, digest)
               for rec, (_url, t, changed, lm, digest) in zip(old, visits, strict=True)]
        self.put_many(zip((v[0] for v in visits), new, strict=True))
        return new
