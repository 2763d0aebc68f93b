"""URL-seen Bloom filter: sizing and the false-positive rate measured through Redis."""

from __future__ import annotations

import math

import redis

from frontier.bloom import BLOCK_BITS, blocked_fp_rate, layer_offsets, size_for, url_hash
from frontier.config import CrawlConfig
from frontier.frontier import Entry, Frontier


def test_sizing_meets_rate_and_space() -> None:
    for rate in (0.1, 0.01, 0.001):
        spec = size_for(1_000_000, rate)
        assert spec.bits % BLOCK_BITS == 0
        assert spec.expected_fp_rate() <= rate
        classic_bits = -1_000_000 * math.log(rate) / math.log(2) ** 2
        assert spec.bits < classic_bits * 1.35  # blocking costs a little space, not a lot
    assert size_for(1_000_000, 0.01).bits / 8 / 1_000_000 <= 1.25


def test_offsets_are_distinct_within_one_block() -> None:
    spec = size_for(10_000, 0.01)
    for i in range(1000):
        offs = layer_offsets(url_hash(f"http://h{i}.test/x"), spec)
        assert len(set(offs)) == spec.k
        assert len({o // BLOCK_BITS for o in offs}) == 1


def test_fp_formula_reduces_to_classic_for_huge_blocks() -> None:
    # With one block spanning the filter, the blocked formula is the classic one.
    bits, keys, k = 1 << 20, 100_000, 7
    classic = (1 - math.exp(-k * keys / bits)) ** k
    assert abs(blocked_fp_rate(bits, keys, k, block_bits=bits) - classic) / classic < 0.02


def _fill(f: Frontier, urls: list[tuple[str, str, Entry]]) -> int:
    rejected = 0
    for start in range(0, len(urls), 5000):
        rejected += f.admit(urls[start:start + 5000]).rejected
    return rejected


def test_false_positive_rate_on_a_million_urls(redis_client: redis.Redis) -> None:
    """Insert 1,000,000 URLs through the admission script, then probe 100,000 new ones."""
    cfg = CrawlConfig(partitions=8, bloom_capacity=1_100_000, bloom_error_rate=0.01,
                      allow_private_ips=True).validate()
    f = Frontier(redis_client, cfg)
    hosts = [f"h{i}.test" for i in range(20_011)]
    inserted = [(hosts[i % len(hosts)], f"http://{hosts[i % len(hosts)]}/page/{i}", Entry("x"))
                for i in range(1_000_000)]
    lost_while_filling = _fill(f, inserted)
    probes = [(hosts[i % len(hosts)], f"http://{hosts[i % len(hosts)]}/new/{i}", Entry("x"))
              for i in range(100_000)]
    probe_rejected = _fill(f, probes)
    rate = probe_rejected / len(probes)
    # The probes fill the filter from 1.0M to 1.1M keys (its capacity): the rate must be at
    # most the configured 1% and not far below it (a filter oversized by a bug would show 0).
    print(f"bloom fp near capacity: {rate:.4%}; lost while filling: "
          f"{lost_while_filling / 1e6:.4%}; model at capacity "
          f"{f.bloom_layers[0].expected_fp_rate():.4%}")
    assert 0.004 < rate <= 0.0105
    assert lost_while_filling / 1_000_000 < 0.01
    assert f.stats()["admitted"] == 1_100_000 - lost_while_filling - probe_rejected


def test_overfull_partition_grows_instead_of_collapsing(redis_client: redis.Redis) -> None:
    """One host (one partition) receives 4x the partition capacity: a layer is added."""
    cfg = CrawlConfig(partitions=4, bloom_capacity=80_000, bloom_error_rate=0.01,
                      allow_private_ips=True).validate()
    f = Frontier(redis_client, cfg)
    urls = [("big.test", f"http://big.test/{i}", Entry("x")) for i in range(80_000)]
    _fill(f, urls)
    probes = [("big.test", f"http://big.test/probe/{i}", Entry("x")) for i in range(20_000)]
    rate = _fill(f, probes) / len(probes)
    part = f.partition("big.test")
    layer = int(redis_client.hget(f.keys.stats(part), "bloom_layer"))
    assert layer >= 2  # 80,000 keys > 20,000 + 40,000 of layers 0 and 1
    assert rate < 0.02, rate  # a single fixed-size filter would be near 100% here
    # Python's reference offsets agree with the script: the key's bits are set in its layer.
    first = f.bloom_layers[0]
    offs = layer_offsets(url_hash("http://big.test/0"), first)
    assert all(redis_client.getbit(f.keys.bloom(part) + "0", o) for o in offs)
