"""MinHash signatures of 32-bit shingle-hash sets, identical on every worker (fixed seed).

The fast path is a numpy multiply-add-shift family over our precomputed 32-bit shingle hashes:
h_i(x) = ((a_i * x + b_i) mod 2^64) >> 32 with random odd 64-bit a_i and random b_i, which
is a strongly universal family for 32-bit keys (Dietzfelbinger 1996), so E[match rate] = J.
Because ">> 32" is monotone, the minimum is taken before the shift: one multiply, one add and
one min per (permutation, shingle). bench/dedup_cost.py measures it against datasketch's
``MinHash.update`` (sha1 per shingle), ``update_batch`` and its (a*x+b mod p) formula in numpy;
``to_datasketch`` wraps a signature as a ``datasketch.LeanMinHash`` for anyone who wants its API.
"""

from __future__ import annotations

import base64

import numpy as np
from datasketch import LeanMinHash

EMPTY = np.uint32(0xFFFFFFFF)
_S32 = np.uint64(32)


class MinHasher:
    """Signatures of ``num_perm`` 32-bit minima; all workers with the same seed agree."""

    def __init__(self, num_perm: int = 128, seed: int = 1) -> None:
        if num_perm < 1:
            raise ValueError(f"num_perm={num_perm} must be >= 1")
        self.num_perm = num_perm
        self.seed = seed
        gen = np.random.Generator(np.random.PCG64(seed))
        self._a = (gen.integers(0, 2**63, size=num_perm, dtype=np.uint64) * np.uint64(2)
                   + np.uint64(1))[:, None]
        self._b = gen.integers(0, 2**63, size=num_perm, dtype=np.uint64)[:, None] * np.uint64(2)

    def signature(self, hashes: np.ndarray, chunk: int = 512) -> np.ndarray:
        """uint32[num_perm] minima of the shingle-hash set ``hashes`` (all 0xFFFFFFFF if empty)."""
        if len(hashes) == 0:
            return np.full(self.num_perm, EMPTY, dtype=np.uint32)
        x = hashes.astype(np.uint64)
        best = None
        with np.errstate(over="ignore"):
            for start in range(0, len(x), chunk):  # bounded temporaries stay in cache
                buf = self._a * x[start : start + chunk]
                buf += self._b
                part = buf.min(axis=1)
                best = part if best is None else np.minimum(best, part)
        assert best is not None
        return (best >> _S32).astype(np.uint32)


def estimated_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Fraction of equal minima: an unbiased estimate of the Jaccard of the two sets."""
    return float(np.count_nonzero(a == b)) / len(a)


def pack(sig: np.ndarray) -> bytes:
    """Little-endian uint32 bytes (4 * num_perm): the form stored in Redis and in records."""
    return sig.astype("<u4").tobytes()


def unpack(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<u4").astype(np.uint32)


def to_base64(sig: np.ndarray) -> str:
    return base64.b64encode(pack(sig)).decode("ascii")


def from_base64(text: str) -> np.ndarray:
    return unpack(base64.b64decode(text))


def to_datasketch(sig: np.ndarray, seed: int = 1) -> LeanMinHash:
    """The signature as a datasketch LeanMinHash (its jaccard() agrees with ours). Scheme
    'legacy' is datasketch's tag for hash values computed outside its own hash scheme."""
    return LeanMinHash(seed=seed, hashvalues=sig.astype(np.uint64), scheme="legacy")
