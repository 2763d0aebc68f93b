"""Sizing and hashing of the scalable, blocked Bloom filter behind the URL-seen test.

*Blocked*: all k bits of a key lie in one 512-bit block, so a test-and-set is one ``BITFIELD``
command (k ``SET u1`` ops that return the old bits) inside the admission script. The price is a
slightly higher false-positive rate than a classic filter of the same size; :func:`size_for`
accounts for that exactly (Poisson load per block), so the configured rate is what a layer
delivers at its capacity.

*Scalable* (Almeida et al. 2007): partitions are filled unevenly (one big site puts all its URLs
in one partition), so a partition's filter must not overflow. Layer 0 of each partition is sized
for capacity/P at the configured rate; when it is full, a layer of twice the capacity and half
the rate is added, and so on. A key is new if no layer has it; it is set in the newest layer.
So at the configured capacity the rate is the configured one, and beyond it, up to 2x that rate
at worst instead of a collapse. A false positive silently drops a URL, hence all this care.

Python hashes each URL once (xxh3-128) into two integers the Lua script turns into the block and
bit positions of every layer; :func:`layer_offsets` is the same arithmetic, for tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import xxhash

BLOCK_BITS = 512
#: Layers a partition may grow to (capacity 2**15 x layer 0: far beyond any sane config).
MAX_LAYERS = 16


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
    def blocks(self) -> int:
        return self.bits // BLOCK_BITS

    @property
    def bytes(self) -> int:
        return self.bits // 8

    def expected_fp_rate(self, keys: int | None = None) -> float:
        return blocked_fp_rate(self.bits, self.capacity if keys is None else keys, self.k)


def size_for(capacity: int, error_rate: float) -> BloomSpec:
    """Smallest blocked filter (and its k) holding ``capacity`` keys at ``error_rate``."""
    capacity = max(1, capacity)
    bits_per_key = -math.log(error_rate) / (math.log(2) ** 2)
    while True:
        bits = math.ceil(capacity * bits_per_key / BLOCK_BITS) * BLOCK_BITS
        classic_k = max(1, round(bits_per_key * math.log(2)))
        best = min((blocked_fp_rate(bits, capacity, k), k)
                   for k in range(max(1, classic_k - 2), classic_k + 3))
        if best[0] <= error_rate:
            return BloomSpec(bits=bits, k=best[1], capacity=capacity, error_rate=error_rate)
        bits_per_key *= 1.02


def partition_layers(total_capacity: int, error_rate: float, partitions: int) -> list[BloomSpec]:
    """Layer specs of one partition's scalable filter (all partitions share them)."""
    base = math.ceil(total_capacity / partitions)
    return [size_for(base * 2**i, error_rate * 0.5**i) for i in range(MAX_LAYERS)]


def url_hash(url: str) -> tuple[int, int]:
    """(block hash < 2**52, in-block hash < 2**18): exact in Lua's doubles."""
    h = xxhash.xxh3_128_intdigest(url.encode())
    return (h >> 76), (h & 0x3FFFF)


def layer_offsets(hashes: tuple[int, int], spec: BloomSpec) -> list[int]:
    """The k bit offsets of a key in one layer: one block, k distinct bits (odd step mod 512)."""
    block_hash, bit_hash = hashes
    base = (block_hash % spec.blocks) * BLOCK_BITS
    start = bit_hash % BLOCK_BITS
    step = ((bit_hash // BLOCK_BITS) % 256) * 2 + 1
    return [base + (start + i * step) % BLOCK_BITS for i in range(spec.k)]
