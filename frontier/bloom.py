"""Sizing and hashing of the scalable Bloom filter behind the URL-seen test.

*Classic* k-bit filter over each layer's whole bitmap, with enhanced double hashing (Dillinger
& Manolios 2004: x = h1, y = h2; offset_i = x; x += y; y += i, all mod m): the admission
script tests-and-sets the links of a whole call with a few ``BITFIELD`` commands (k ``SET u1``
ops per link, which return the old bits), since BITFIELD takes any offsets of one key.
Until 2026-12 the filter was *blocked* (all k bits in one 512-bit block, Putze, Sanders &
Singler 2007); the uneven load of the blocks (Poisson) costs a few % more bits for the same
rate: 1.237 B/URL against 1.198 B/URL at 1%, which the allocator's rounding of the bitmap to
whole pages (4 KiB) turned into 1.258 B/URL, over issue 7's 1.25 (the classic layer of a
156,250-URL partition takes 46 pages, 1.206 B/URL). :func:`blocked_fp_rate` is kept to show
the difference. Measured since (Redis 6.2 Lua, 2026-12-03): a script's cost is mostly its
calls' arguments (~150 ns each), so testing a blocked filter with one GETRANGE of the block
and bit tests in Lua costs ~1.0 us a link against ~3.7 us for k BITFIELD GET ops; with 2048-bit
blocks it would take 1.212 B/URL at 1%. Not done: a layout change breaks resuming old crawls.

Each layer's bitmap is allocated at its full size when it is first used (admit.lua): grown bit
by bit, Redis's greedy string growth would over-allocate it by up to 2x.

*Scalable* (Almeida et al. 2007): partitions are filled unevenly (one big site puts all its URLs
in one partition), so a partition's filter must not overflow. Layer 0 of each partition is sized
for capacity/P at the configured rate; when it is full, a layer of twice the capacity and half
the rate is added, and so on. A key is new if no layer has it; it is set in the newest layer.
So at the configured capacity the rate is the configured one, and beyond it, up to 2x that rate
at worst instead of a collapse. A false positive silently drops a URL, hence all this care.

Python hashes each URL once (xxh3-128) into two 52-bit integers (exact in Lua's doubles) the
Lua script turns into the bit offsets of every layer; :func:`layer_offsets` is the same
arithmetic, for tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import xxhash

#: Layer sizes are rounded up to this many bits (whole 64-byte words).
BLOCK_BITS = 512
#: Layers a partition may grow to (capacity 2**15 x layer 0: far beyond any sane config).
MAX_LAYERS = 16


def classic_fp_rate(bits: int, keys: int, k: int) -> float:
    """Expected false-positive rate of a classic Bloom filter: (1 - e^(-kn/m))^k."""
    if keys <= 0:
        return 0.0
    return (1.0 - math.exp(-k * keys / bits)) ** k


def blocked_fp_rate(bits: int, keys: int, k: int, block_bits: int = BLOCK_BITS) -> float:
    """Expected false-positive rate of a blocked Bloom filter (Putze, Sanders & Singler 2007)."""
    if keys <= 0:
        return 0.0
    load = keys * block_bits / bits  # mean keys per block (Poisson)
    spread = 12 * math.sqrt(load) + 20
    total = 0.0
    for i in range(max(0, int(load - spread)), int(load + spread) + 1):
        weight = math.exp(i * math.log(load) - load - math.lgamma(i + 1))
        fill = 1.0 - (1.0 - 1.0 / block_bits) ** (k * i)
        total += weight * fill**k
    return total


@dataclass(frozen=True)
class BloomSpec:
    bits: int  # a multiple of BLOCK_BITS
    k: int
    capacity: int
    error_rate: float

    @property
    def bytes(self) -> int:
        return self.bits // 8

    def expected_fp_rate(self, keys: int | None = None) -> float:
        return classic_fp_rate(self.bits, self.capacity if keys is None else keys, self.k)


def size_for(capacity: int, error_rate: float) -> BloomSpec:
    """Smallest filter (and its k) holding ``capacity`` keys at ``error_rate``."""
    capacity = max(1, capacity)
    bits_per_key = -math.log(error_rate) / (math.log(2) ** 2)
    while True:
        bits = math.ceil(capacity * bits_per_key / BLOCK_BITS) * BLOCK_BITS
        classic_k = max(1, round(bits_per_key * math.log(2)))
        best = min((classic_fp_rate(bits, capacity, k), k)
                   for k in range(max(1, classic_k - 2), classic_k + 3))
        if best[0] <= error_rate:
            return BloomSpec(bits=bits, k=best[1], capacity=capacity, error_rate=error_rate)
        bits_per_key *= 1.0025


def partition_layers(total_capacity: int, error_rate: float, partitions: int) -> list[BloomSpec]:
    """Layer specs of one partition's scalable filter (all partitions share them)."""
    base = math.ceil(total_capacity / partitions)
    return [size_for(base * 2**i, error_rate * 0.5**i) for i in range(MAX_LAYERS)]


def url_hash(url: str) -> tuple[int, int]:
    """Two independent 52-bit hashes of the URL (exact in Lua's doubles)."""
    h = xxhash.xxh3_128_intdigest(url.encode())
    return (h >> 76), (h >> 24) & 0xFFFFFFFFFFFFF


def layer_offsets(hashes: tuple[int, int], spec: BloomSpec) -> list[int]:
    """The k bit offsets of a key in one layer (enhanced double hashing mod the layer's bits)."""
    m = spec.bits
    x, y = hashes[0] % m, hashes[1] % m
    out = []
    for i in range(spec.k):
        out.append(x)
        x = (x + y) % m
        y = (y + i) % m
    return out
