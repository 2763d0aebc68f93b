"""MinHash LSH in Redis: b bands of r rows, one Lua script doing exact + LSH query-then-insert.

S-curve: a pair of Jaccard J shares at least one of b bands with probability
P(J) = 1 - (1 - J^r)^b. We want P ≈ 1 at the threshold (verification then removes the
candidates below it, so a false candidate only costs one signature read inside the script),
and few candidates from unrelated pages. With 128 permutations and threshold 0.9 the default
is b = 16, r = 8: P(0.95) = 1 - 4e-8, P(0.9) = 0.99988, P(0.85) = 0.9936, P(0.8) = 0.95,
P(0.5) = 0.06, P(0.3) = 0.001; the curve's midpoint (1/b)^(1/r) ≈ 0.71. Fewer, longer bands
(b = 8, r = 16) would miss 19% of the pairs at J = 0.9 before verification ever saw them.

Why our own bands rather than datasketch's ``MinHashLSH`` with Redis storage: its insert and
query are separate calls, so two workers can both query, both see nothing and both insert (two
canonicals); and it issues one command per band from Python. Here all of it is one EVALSHA.

Keys: every key of a crawl's dedup state carries the hash tag ``{<namespace>:dedup}``, so the
script touches one slot and runs unchanged on Redis Cluster. The cost there: the whole dedup
index of a crawl lives on one shard (about 1 KB per canonical page, and one ~0.1 ms script per
fetched page: ~4% of one core at 400 pages/s), which is the price of atomic query-then-insert
across all bands. Partitioning buckets by band over slots would need a cross-slot transaction.
"""

from __future__ import annotations

import math
from importlib import resources

import numpy as np
import redis
import xxhash

from dedup.config import MAX_BANDS
from dedup.minhash import pack
from frontier.slotpipe import LuaScript, SlotPipeline

_SCRIPT = LuaScript("dedup_check", resources.files("dedup").joinpath("lua/check.lua").read_text())


def candidate_probability(j: float, bands: int, rows: int) -> float:
    """P(a pair of Jaccard j collides in at least one band)."""
    return 1.0 - (1.0 - j**rows) ** bands


def choose_bands(num_perm: int, threshold: float, min_recall: float = 0.999) -> tuple[int, int]:
    """The (bands, rows) with the most rows (fewest false candidates) whose recall at
    ``threshold`` is still at least ``min_recall``; bands * rows <= num_perm."""
    best = (num_perm, 1)
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if candidate_probability(threshold, bands, rows) >= min_recall:
            best = (bands, rows)
    return best


def band_values(sig: np.ndarray, bands: int, rows: int) -> list[bytes]:
    """8-byte xxh3 digest of each band's rows (the bucket a page falls into in that band)."""
    raw = pack(sig)
    step = 4 * rows
    return [xxhash.xxh3_64_digest(raw[i * step : (i + 1) * step]) for i in range(bands)]


def band_fields(sig: np.ndarray, bands: int, rows: int) -> list[bytes]:
    """The field of each band's bucket in the bands hash: the band's number (one byte) and
    its value. Bands must stay apart: equal rows in two bands are not a shared bucket."""
    return [bytes((i,)) + v for i, v in enumerate(band_values(sig, bands, rows))]


class LshKeys:
    """Key names of one crawl's dedup state, all in one hash slot (the frontier's keys are
    ``frontier.keys.Keys``)."""

    def __init__(self, namespace: str, bands: int) -> None:
        tag = f"{{{namespace}:dedup}}"
        self.exact = f"{tag}:exact"
        self.doc = f"{tag}:doc"
        self.sig = f"{tag}:sig"
        self.seq = f"{tag}:seq"
        self.hostpages = f"{tag}:hostpages"
        self.mirror = f"{tag}:mirror"
        self.hostdup = f"{tag}:hostdup"
        #: every band's buckets, one hash (field: band number byte + band value)
        self.bands = f"{tag}:bands"

    def all(self) -> list[str]:
        return [self.exact, self.doc, self.sig, self.seq, self.hostpages, self.mirror,
                self.hostdup, self.bands]


class LSHIndex:
    """The Redis side: ``check`` runs the script; the rest are read-only views."""

    def __init__(self, client: redis.Redis, namespace: str, num_perm: int, threshold: float,
                 bands: int, rows: int, max_candidates: int, max_bucket: int) -> None:
        """Sizes as in :class:`dedup.config.DedupConfig` (which has their defaults)."""
        if bands * rows > num_perm or bands > MAX_BANDS:
            raise ValueError(f"bands={bands}, rows={rows}: at most {MAX_BANDS} bands, and "
                             f"bands*rows={bands * rows} may not exceed num_perm={num_perm}")
        self.client = client
        self.num_perm, self.bands, self.rows = num_perm, bands, rows
        self.need = math.ceil(threshold * num_perm - 1e-9)
        self.max_candidates, self.max_bucket = max_candidates, max_bucket
        self.keys = LshKeys(namespace, bands)
        self._keys = self.keys.all()

    def queue_check(self, pipe: SlotPipeline, fingerprint: bytes, host: str, url: str,
                    sig: np.ndarray, write: bool = True) -> None:
        """Add one page's check to ``pipe``. The checks of one pipeline run in order (on one
        server as one EVALSHA of the batched script), each atomic, so the second of two
        near-duplicates in it sees the first as its canonical."""
        args = [fingerprint, host, url, pack(sig), self.need, "1" if write else "0",
                self.num_perm, self.max_candidates, self.max_bucket,
                *band_fields(sig, self.bands, self.rows)]
        pipe.script(_SCRIPT, self._keys, args)
