"""What continuous crawling keeps per tracked URL besides its 52-byte visit history: the
validators of the last visit (ETag; Last-Modified is in the history), the day of the last
full WARC capture, and a 32-byte sketch of the page's main text.

Both live in small hashes of the URL's partition, bucketed by the URL's 64-bit hash like the
history (freshness/store.py: the field is 4 bytes of the URL's hash, not the URL; the
schedule holds the URL): ``fh:<n>`` the history, ``fv:<n>`` this state. A state with an ETag
too long to keep the value within Redis's listpack limit (64 bytes) goes to one hash ``fvx``
of its own, so the bucket hashes stay listpacks.

The sketch is a b-bit MinHash (Li & König, 2010) of the signature dedup/ computes anyway: the
low 2 bits of each of the 128 minima. Two versions agree on a bit pair with probability
J + (1 − J)/4, so J ≈ (agree − 1/4)/(3/4), with a standard error of about 0.03 near J = 0.9:
enough to tell a changed date line (J ≈ 0.95) from a rewritten text (J ≈ 0.1).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis

from freshness.history import RecordError, VisitHistory
from freshness.store import HistoryStore, buckets_for
from frontier.config import CrawlConfig
from frontier.keys import Keys

#: Bits kept of each MinHash minimum, and the sketch's size for 128 minima.
SKETCH_BITS = 2
_HEAD = struct.Struct("<BI")  # version, captured_s
#: Version 2 adds the Last-Modified strength bit; a version-1 state reads as "not strong".
VERSION = 2
_READABLE = (1, 2)
#: In the sketch-length byte (a sketch is at most 127 bytes): the stored Last-Modified is a
#: strong validator (freshness/validators.py), so it may be sent as If-Modified-Since.
_LM_STRONG = 0x80
#: Largest value kept in a bucket hash (Redis's hash-max-listpack-value).
LISTPACK_VALUE = 64


def sketch_of(signature: np.ndarray) -> bytes:
    """The low SKETCH_BITS bits of each minimum, packed (32 bytes for 128 minima)."""
    low = (np.asarray(signature, dtype=np.uint32) & 3).astype(np.uint8)
    pad = (-len(low)) % 4
    low = np.concatenate([low, np.zeros(pad, np.uint8)]).reshape(-1, 4)
    return (low[:, 0] | low[:, 1] << 2 | low[:, 2] << 4 | low[:, 3] << 6).astype(np.uint8).tobytes()


def sketch_similarity(a: bytes, b: bytes, n: int) -> float:
    """Estimated Jaccard similarity of the texts behind two sketches of ``n`` minima."""
    if len(a) != len(b) or not a:
        return 0.0
    x = np.frombuffer(a, np.uint8) ^ np.frombuffer(b, np.uint8)
    pairs = np.stack([(x >> s) & 3 for s in (0, 2, 4, 6)], axis=1).reshape(-1)[:n]
    agree = float((pairs == 0).mean())
    return max(0.0, (agree - 0.25) / 0.75)


@dataclass(frozen=True, slots=True)
class VisitState:
    """The last visit's ETag (sent back verbatim), when the last full copy was archived
    (WARC-Refers-To-Date of a revisit record; Unix seconds), its text sketch, and whether the
    Last-Modified kept in the history is a strong validator (If-Modified-Since only then)."""

    etag: str = ""
    captured_s: int = 0
    sketch: bytes = b""
    lm_strong: bool = False

    def pack(self) -> bytes:
        if len(self.sketch) >= _LM_STRONG:
            raise ValueError(f"a sketch is at most {_LM_STRONG - 1} bytes: {len(self.sketch)}")
        etag = self.etag.encode("latin-1", "replace")
        size = len(self.sketch) | (_LM_STRONG if self.lm_strong else 0)
        return _HEAD.pack(VERSION, self.captured_s) + bytes([size]) + self.sketch + etag

    @classmethod
    def unpack(cls, data: bytes) -> VisitState:
        if len(data) < _HEAD.size + 1 or data[0] not in _READABLE:
            raise RecordError(f"not a version-{VERSION} visit state ({len(data)} bytes)")
        _v, captured = _HEAD.unpack_from(data)
        size = data[_HEAD.size]
        n, strong = size & (_LM_STRONG - 1), bool(size & _LM_STRONG)
        start = _HEAD.size + 1
        return cls(data[start + n:].decode("latin-1"), captured, data[start:start + n], strong)


@dataclass(frozen=True, slots=True)
class PriorVisit:
    """What the last visit of a URL left: its history and state (None: none kept)."""

    history: VisitHistory | None
    state: VisitState | None


class VisitStore:
    """Where a URL's history and state live, read before a revisit and written at its end."""

    def __init__(self, client: redis.Redis, config: CrawlConfig) -> None:
        self.client, self.keys = client, Keys(config.namespace)
        self.buckets = buckets_for(max(1, config.revisit_expected_urls // config.partitions))
        self.bad_records = 0

    def history_store(self, partition: int) -> HistoryStore:
        return HistoryStore(self.client, self.keys.prefix(partition) + "fh:", self.buckets)

    def locations(self, partition: int, url: str) -> tuple[tuple[str, bytes], str, str]:
        """(history key, field), state bucket key, long-ETag state key."""
        key, fld = self.history_store(partition).location(url)
        prefix = self.keys.prefix(partition)
        return (key, fld), prefix + "fv:" + key.rsplit(":", 1)[-1], prefix + "fvx"

    def read(self, partition: int, url: str) -> PriorVisit:
        """The URL's history and state (one round trip; unreadable ones count and read as
        None: the visit then starts a new history)."""
        (hkey, fld), skey, xkey = self.locations(partition, url)
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(hkey, fld)
        pipe.hget(skey, fld)
        pipe.hget(xkey, fld)
        raw_h, raw_s, raw_x = pipe.execute()
        try:
            history = VisitHistory.unpack(raw_h) if raw_h is not None else None
            raw = raw_s if raw_s is not None else raw_x
            state = VisitState.unpack(raw) if raw is not None else None
        except RecordError:
            self.bad_records += 1
            return PriorVisit(None, None)
        return PriorVisit(history, state)

    def queue_write(self, pipe: Any, partition: int, url: str, history: VisitHistory,
                    state: VisitState) -> None:
        """HSETs of the URL's new history and state on a frontier pipeline (the completion's
        round trip)."""
        self.queue_history(pipe, partition, url, history)
        self.queue_state(pipe, partition, url, state)

    def queue_history(self, pipe: Any, partition: int, url: str, history: VisitHistory) -> None:
        (hkey, fld), _skey, _xkey = self.locations(partition, url)
        pipe.command("hset", hkey, fld, history.pack())

    def queue_state(self, pipe: Any, partition: int, url: str, state: VisitState) -> None:
        (_hkey, fld), skey, xkey = self.locations(partition, url)
        value = state.pack()
        pipe.command("hset", skey if len(value) <= LISTPACK_VALUE else xkey, fld, value)
