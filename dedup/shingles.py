"""Word w-shingles hashed to 32-bit integers.

Each token is hashed once (xxh3-64); a shingle's hash is a polynomial over its w token hashes
mod 2^64, mixed and cut to 32 bits, all in numpy. That costs one xxhash call per *token*
instead of one per shingle string, and the set has the same meaning: two shingles collide
only if their token sequences are equal or with probability ~2^-32.
"""

from __future__ import annotations

import numpy as np
import xxhash

_K = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the polynomial
_MIX = np.uint64(0xBF58476D1CE4E5B9)
_S29 = np.uint64(29)
_S32 = np.uint64(32)


def token_hashes(tokens: list[bytes]) -> np.ndarray:
    return np.fromiter(map(xxhash.xxh3_64_intdigest, tokens), dtype=np.uint64,
                       count=len(tokens))


def shingle_hashes(tokens: list[bytes], w: int = 4, unique: bool = True) -> np.ndarray:
    """Sorted unique uint32 hashes of the word w-shingles of ``tokens``.

    Fewer than ``w`` tokens give one shingle of all of them; no tokens give an empty array.
    ``unique=False`` skips the sort: the hashes in text order, repeats kept, which is all a
    MinHash signature needs (a minimum does not see repeats) and ~0.1 ms less a page.
    """
    if w < 1:
        raise ValueError(f"shingle width w={w} must be >= 1")
    n = len(tokens)
    if n == 0:
        return np.empty(0, dtype=np.uint32)
    h = token_hashes(tokens)
    if n < w:
        w = n
    m = n - w + 1
    with np.errstate(over="ignore"):
        acc = h[:m].copy()
        for j in range(1, w):
            acc *= _K
            acc += h[j : j + m]
        acc ^= acc >> _S29
        acc *= _MIX
        acc >>= _S32
    out = acc.astype(np.uint32)
    return np.unique(out) if unique else out


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard of two shingle-hash sets (sorted unique arrays); 1.0 for two empty sets."""
    if len(a) == 0 and len(b) == 0:
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)
