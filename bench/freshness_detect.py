"""Change detection of one revisit (bench/freshness.py): did the page really change since the
copy we hold?

In order: a 304 is unchanged (the server says so); the same body digest (xxh3-128 of the
bytes) is unchanged; else the MinHash of the main text (dedup/: the crawl's own text
extraction, 4-word shingles, 128-bin one-permutation MinHash) is compared with the held copy's,
and an estimated Jaccard at or above ``threshold`` (default 0.9, dedup's near-duplicate
threshold) is unchanged. The changing web's cosmetic changes touch only an "Updated <date> ·
<n> views" line: dedup's normalisation folds the digits, so the two texts differ in a day and
month name at most, a few shingles out of hundreds (J ≈ 0.97); a content change re-renders the
text (J ≈ 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import xxhash

from dedup.config import DedupConfig
from dedup.minhash import OnePermutationHasher, estimated_jaccard
from dedup.service import page_features
from dedup.text import parse

DEDUP = DedupConfig()
HASHER = OnePermutationHasher(DEDUP.num_perm, DEDUP.seed)


class Outcome(StrEnum):
    FIRST = "first"  # the first copy: nothing to compare
    NOT_MODIFIED = "304"
    SAME_BYTES = "same-bytes"
    SIMILAR = "similar"  # bytes differ, main text near-identical: a cosmetic change
    CHANGED = "changed"

    @property
    def changed(self) -> bool:
        return self is Outcome.CHANGED


@dataclass(frozen=True)
class Copy:
    """What we keep of the copy we hold: its digest, main-text signature, validators."""

    digest: bytes
    signature: np.ndarray | None
    etag: str | None
    last_modified: str | None


def copy_of(body: bytes, etag: str | None, last_modified: str | None) -> Copy:
    features = page_features(parse(body), DEDUP, HASHER) if body else None
    return Copy(xxhash.xxh3_128_digest(body), None if features is None else features[1],
                etag, last_modified)


def detect(held: Copy | None, status: int, body: bytes, etag: str | None,
           last_modified: str | None, threshold: float = DEDUP.threshold
           ) -> tuple[Outcome, Copy, float | None]:
    """(what the visit found, the copy held after it, the similarity if it was measured)."""
    if held is not None and status == 304:
        # a 304 may repeat the validators; keep ours where it does not
        return Outcome.NOT_MODIFIED, Copy(held.digest, held.signature, etag or held.etag,
                                          last_modified or held.last_modified), None
    if held is not None and xxhash.xxh3_128_digest(body) == held.digest:
        return Outcome.SAME_BYTES, Copy(held.digest, held.signature, etag, last_modified), 1.0
    new = copy_of(body, etag, last_modified)
    if held is None:
        return Outcome.FIRST, new, None
    if new.signature is None or held.signature is None:  # no text: bytes decide
        return Outcome.CHANGED, new, None
    similarity = estimated_jaccard(held.signature, new.signature)
    return (Outcome.SIMILAR if similarity >= threshold else Outcome.CHANGED), new, similarity
