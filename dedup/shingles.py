"""Word w-shingles hashed to 32-bit integers.

Each token is hashed once (xxh3-64); a shingle's hash is a polynomial over its w token hashes
mod 2^64, mixed and cut to 32 bits, all in numpy. That costs one xxhash call per *token*
instead of one per shingle string, and the set has the same meaning: two shingles collide
only if their token sequences are equal or with probability ~2^-32.

A page's tokens usually arrive as one ``b" ".join(tokens)`` string (``dedup.text.token_string``,
also the input of the exact fingerprint); :func:`string_token_hashes` hashes the tokens of a
long one in numpy without making a bytes object and an xxhash call per token.
"""

from __future__ import annotations

import numpy as np
import xxhash

_K = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the polynomial
_MIX = np.uint64(0xBF58476D1CE4E5B9)
_S29 = np.uint64(29)
_S32 = np.uint64(32)


def token_hashes(tokens: list[bytes]) -> np.ndarray:
    """uint64 xxh3-64 (seed 0) of each token, in order.

    Through the 8-byte big-endian digests joined: 20% less than np.fromiter over
    xxh3_64_intdigest, which makes and converts a Python int per token.
    """
    digests = b"".join(map(xxhash.xxh3_64_digest, tokens))
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64)


# --- xxh3-64 of many short tokens at once -------------------------------------------------
# Hand-written XXH3_64bits (seed 0, default secret) for inputs of 1-16 bytes, the lengths of
# nearly all tokens, because xxhash has no batch call: split() plus one xxhash call per token
# costs ~65 ns a token, this ~45 us plus 20-40 ns a token (numpy's per-call overhead makes
# the fixed part). On whole pages (bench/dedup_cost.py, worker-parsed trees): 0.16 against
# 0.19 ms on the sandbox pages (~2,700 tokens, mostly 9-16 bytes), 0.09 against 0.14 ms on
# the real pages (~2,100 tokens, half of them 1-3 bytes). Longer tokens still go through
# xxhash. Formulas: xxhash.h v0.8 XXH3_len_1to3_64b, XXH3_len_4to8_64b, XXH3_len_9to16_64b;
# an import-time self-check compares every length class with xxhash and turns this path off
# if any value differs, and tests/dedup/test_dedup_fastpath.py compares them again.

_SECRET = bytes.fromhex(  # first 64 bytes of XXH3's kSecret
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c")


def _s32(i: int) -> int:
    return int.from_bytes(_SECRET[i : i + 4], "little")


def _s64(i: int) -> int:
    return int.from_bytes(_SECRET[i : i + 8], "little")


_U = np.uint64
_FLIP_1TO3 = np.uint32(_s32(0) ^ _s32(4))
_FLIP_4TO8 = _U(_s64(8) ^ _s64(16))
_FLIP_9A, _FLIP_9B = _U(_s64(24) ^ _s64(32)), _U(_s64(40) ^ _s64(48))
_P64_2, _P64_3 = _U(0xC2B2AE3D27D4EB4F), _U(0x165667B19E3779F9)
_MX1, _MX2 = _U(0x165667919E3779F9), _U(0x9FB21C651E98DF25)
_LO32 = _U(0xFFFFFFFF)
_SH = {k: _U(k) for k in (15, 24, 28, 29, 32, 33, 35, 37, 40, 49)}
_SH3, _SH4 = _U(3), _U(4)
_U8, _U16, _U24 = np.uint32(8), np.uint32(16), np.uint32(24)
_CUTS = np.array([4, 9, 17], dtype=np.intp)  # first length of classes 4-8, 9-16, 17+
#: Below this many bytes of joined tokens the per-token calls are cheaper (measured break-even:
#: ~6 KB with real pages' short tokens, ~16 KB with the sandbox's 9-16 byte ones).
VECTOR_MIN_BYTES = 8000


def _len1to3(b: np.ndarray, s: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """XXH3_len_1to3_64b of the tokens at byte offsets ``s`` of lengths ``ln`` (intp)."""
    c = b[s].astype(np.uint32)
    c <<= _U16
    t = b[s + (ln >> 1)].astype(np.uint32)
    t <<= _U24
    c |= t
    c |= b[s + ln - 1]
    t = ln.astype(np.uint32)
    t <<= _U8
    c |= t
    c ^= _FLIP_1TO3
    h = c.astype(np.uint64)  # XXH64_avalanche
    h ^= h >> _SH[33]
    h *= _P64_2
    h ^= h >> _SH[29]
    h *= _P64_3
    h ^= h >> _SH[32]
    return h


def _len4to8(v64: np.ndarray, s: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """XXH3_len_4to8_64b; ``v64``: little-endian 8-byte reads at every byte offset."""
    w = v64[s]  # one 8-byte read holds both 4-byte reads (first and last 4 bytes)
    lu = ln.astype(np.uint64)
    last = w >> ((lu - _SH4) << _SH3)
    last &= _LO32
    w <<= _SH[32]
    w += last
    w ^= _FLIP_4TO8  # XXH3_rrmxmx
    r = w << _SH[49]
    r |= w >> _SH[15]
    t = w << _SH[24]
    t |= w >> _SH[40]
    r ^= t
    w ^= r
    w *= _MX2
    t = w >> _SH[35]
    t += lu
    w ^= t
    w *= _MX2
    w ^= w >> _SH[28]
    return w


def _len9to16(v64: np.ndarray, s: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """XXH3_len_9to16_64b; ``v64`` as for :func:`_len4to8`."""
    lo = v64[s]
    lo ^= _FLIP_9A
    hi = v64[s + ln - 8]
    hi ^= _FLIP_9B
    acc = ln.astype(np.uint64)
    acc += lo.byteswap()
    acc += hi
    # XXH3_mul128_fold64(lo, hi): low ^ high 64 bits of the 128-bit product
    low = lo * hi  # mod 2^64
    a0, a1 = lo & _LO32, lo >> _SH[32]
    b0, b1 = hi & _LO32, hi >> _SH[32]
    ll = a0 * b0
    hl = a1 * b0
    a0 *= b1  # lh
    a1 *= b1  # hh
    cross = ll >> _SH[32]
    cross += hl & _LO32
    cross += a0  # no overflow: (2^32-1)^2 + 2 (2^32-1) < 2^64
    hl >>= _SH[32]
    hl += a1
    hl += cross >> _SH[32]  # high 64 bits
    low ^= hl
    acc += low
    acc ^= acc >> _SH[37]  # XXH3_avalanche
    acc *= _MX1
    acc ^= acc >> _SH[32]
    return acc


def _vector_hashes(joined: bytes) -> np.ndarray:
    """xxh3-64 of each space-separated token of ``joined``: grouped by length class (a radix
    argsort), hashed a class at a time, scattered back to text order."""
    n = len(joined)
    buf = joined + bytes(8)  # 8-byte reads at a token's start stay inside the buffer
    b = np.frombuffer(buf, dtype=np.uint8)
    v64 = np.ndarray((n + 1,), dtype="<u8", buffer=buf, offset=0, strides=(1,))  # at any byte
    spaces = np.flatnonzero(b == 32)
    m = len(spaces) + 1
    bounds = np.empty(m + 1, dtype=np.intp)
    bounds[0] = -1
    bounds[1:-1] = spaces
    bounds[-1] = n
    starts = bounds[:-1] + 1
    lens = bounds[1:] - starts
    order = np.argsort(np.minimum(lens, 255).astype(np.uint8), kind="stable")  # radix sort
    ln = lens[order]
    st = starts[order]
    c1, c2, c3 = np.searchsorted(ln, _CUTS).tolist()
    res = np.empty(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        if c1:
            res[:c1] = _len1to3(b, st[:c1], ln[:c1])
        if c2 > c1:
            res[c1:c2] = _len4to8(v64, st[c1:c2], ln[c1:c2])
        if c3 > c2:
            res[c2:c3] = _len9to16(v64, st[c2:c3], ln[c2:c3])
    if m > c3:
        s_list = st[c3:].tolist()
        res[c3:] = np.fromiter(
            (xxhash.xxh3_64_intdigest(joined[s : s + k])
             for s, k in zip(s_list, ln[c3:].tolist(), strict=True)),
            dtype=np.uint64, count=m - c3)
    out = np.empty(m, dtype=np.uint64)
    out[order] = res
    return out


def _self_check() -> bool:
    """True when :func:`_vector_hashes` gives xxhash's values for every length 1-40."""
    alphabet = np.array([c for c in range(256) if c != 32], dtype=np.uint8)
    lengths = [k for k in range(1, 41) for _ in range(8)]
    blob = bytes(np.random.default_rng(0x5EED).choice(alphabet, size=sum(lengths)))
    ends = np.cumsum(lengths).tolist()
    toks = [blob[e - k : e] for k, e in zip(lengths, ends, strict=True)]
    try:
        want = np.fromiter(map(xxhash.xxh3_64_intdigest, toks), dtype=np.uint64)
        return bool(np.array_equal(_vector_hashes(b" ".join(toks)), want))
    except Exception:  # an odd platform (big-endian, old numpy): per-token calls
        return False


_VECTOR_OK = _self_check()


def string_token_hashes(joined: bytes) -> np.ndarray:
    """``token_hashes(joined.split(b" "))`` for ``joined = b" ".join(tokens)`` (non-empty tokens
    without spaces, as ``dedup.text.token_string`` gives); empty for b""."""
    if not joined:
        return np.empty(0, dtype=np.uint64)
    if len(joined) < VECTOR_MIN_BYTES or not _VECTOR_OK:
        return token_hashes(joined.split(b" "))
    return _vector_hashes(joined)


def shingles_of_hashes(h: np.ndarray, w: int = 4, unique: bool = True) -> np.ndarray:
    """:func:`shingle_hashes` from the tokens' xxh3-64 hashes ``h`` (uint64, text order)."""
    if w < 1:
        raise ValueError(f"shingle width w={w} must be >= 1")
    n = len(h)
    if n == 0:
        return np.empty(0, dtype=np.uint32)
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


def shingle_hashes(tokens: list[bytes], w: int = 4, unique: bool = True) -> np.ndarray:
    """Sorted unique uint32 hashes of the word w-shingles of ``tokens``.

    Fewer than ``w`` tokens give one shingle of all of them; no tokens give an empty array.
    ``unique=False`` skips the sort: the hashes in text order, repeats kept, which is all a
    MinHash signature needs (a minimum does not see repeats) and ~0.1 ms less a page.
    """
    return shingles_of_hashes(token_hashes(tokens), w, unique)  # it checks w


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard of two shingle-hash sets (sorted unique arrays); 1.0 for two empty sets."""
    if len(a) == 0 and len(b) == 0:
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)
