"""The 52-byte visit history: packing, Last-Modified checks, forgetting, the error its
log-bucketed intervals add to the MLE, and its cost in a real Redis."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import redis

from freshness.estimators import mle_rate
from freshness.history import (
    BUCKETS,
    COUNT_MAX,
    RECORD_BYTES,
    RecordError,
    VisitHistory,
    bucket_of,
)
from freshness.store import HistoryStore, buckets_for

T0 = 1_780_000_000
#: A record of the 64-byte version 1 (uint64 digest, 24 uint8 counts), as a crawl before
#: version 2 left it.
V1_RECORD = struct.pack(f"<BBHHHIIffffQ{BUCKETS}B", 1, 0, 3, 0, 0, T0, 0, 300.0, 200.0, 0.0,
                        100.0, 2**63 + 5, *([1] * BUCKETS))


def test_record_is_52_bytes_and_round_trips() -> None:
    h = VisitHistory().observe(T0, False, digest=7).observe(T0 + 100, True, T0 + 90)
    h = h.observe(T0 + 1000, False, T0 + 90)
    data = h.pack()
    assert len(data) == RECORD_BYTES == 52
    back = VisitHistory.unpack(data)
    assert back == h and back.digest == 7 and back.n_changed == 1 and back.n_unchanged == 1
    # every bucket's 6-bit count survives its neighbours at their maximum
    full = VisitHistory(buckets=tuple(COUNT_MAX - k % 3 for k in range(BUCKETS)))
    assert VisitHistory.unpack(full.pack()).buckets == full.buckets
    with pytest.raises(RecordError):
        VisitHistory.unpack(data[:-1])
    with pytest.raises(RecordError):
        VisitHistory.unpack(b"\x09" + data[1:])


def test_a_version_1_record_is_an_error_not_a_crash() -> None:
    """The 64-byte layout before this one (uint64 digest, 24 uint8 counts)."""
    with pytest.raises(RecordError, match="version-2"):
        VisitHistory.unpack(V1_RECORD)


def test_the_digest_compares_on_its_kept_32_bits() -> None:
    body = 0xDEAD_BEEF_0123_4567  # an xxh64 of a body
    h = VisitHistory().observe(T0, False, digest=body)
    assert h.same_digest(body) and VisitHistory.unpack(h.pack()).same_digest(body)
    assert not h.same_digest(body + 1) and not h.same_digest(None)


def test_buckets_are_log2_from_16_seconds() -> None:
    assert [bucket_of(t) for t in (1, 15.9, 16, 31, 32, 3600, 1e12)] == [
        0, 0, 1, 1, 2, 8, BUCKETS - 1]


def test_last_modified_that_contradicts_the_content_is_not_used() -> None:
    good = VisitHistory().observe(T0, False, T0 - 500)
    for k in range(1, 6):  # each visit: changed, Last-Modified after the previous visit
        good = good.observe(T0 + 100 * k, True, T0 + 100 * k - 30)
    assert good.lm_trusted() and good.last_modified_rate() == pytest.approx(5 / 150)
    liar = VisitHistory().observe(T0, False, T0)
    for k in range(1, 6):  # Last-Modified is always "now", also when nothing changed
        liar = liar.observe(T0 + 100 * k, k % 2 == 0, T0 + 100 * k)
    assert liar.lm_bad >= 3 and not liar.lm_trusted() and liar.last_modified_rate() is None
    future = VisitHistory().observe(T0, False).observe(T0 + 100, True, T0 + 10_000)
    assert future.lm_bad == 1


def test_old_visits_fade_when_a_counter_would_overflow() -> None:
    h = VisitHistory().observe(T0, False)
    for k in range(1, 300):
        h = h.observe(T0 + 10 * k, True)  # all 10 s intervals: bucket 0
    assert max(h.buckets) < COUNT_MAX and h.n_changed < 299
    assert h.changed_s == pytest.approx(10.0 * h.n_changed, rel=0.02)  # ratios kept
    assert h.naive_rate() == pytest.approx(0.1, rel=0.02)


def test_bucketing_moves_the_mle_by_a_few_percent() -> None:
    """Intervals spread over a factor of 100 (0.05 to 5 expected changes), 60 visits: the
    record's MLE against the MLE of the exact intervals."""
    rng = np.random.default_rng(37)
    errors = []
    for _ in range(300):
        lam = 10 ** rng.uniform(-5, -2)
        h, t = VisitHistory().observe(T0, False), T0
        changed, unchanged = [], []
        for interval in 10 ** rng.uniform(np.log10(0.05 / lam), np.log10(5 / lam), 60):
            step = int(interval) + 1
            t += step
            flag = bool(rng.random() < -np.expm1(-lam * step))
            (changed if flag else unchanged).append(float(step))
            h = h.observe(t, flag)
        exact = mle_rate(changed, unchanged)
        if exact.rate > 0 and unchanged:
            errors.append(abs(h.mle().rate / exact.rate - 1))
    print(f"bucketing error of the MLE: mean {np.mean(errors):.4f}, max {np.max(errors):.4f}")
    assert np.mean(errors) < 0.02 and np.max(errors) < 0.08  # 0.014 and 0.050 measured


def test_forgetting_costs_the_mle_little_over_long_histories() -> None:
    """400 visits (intervals over a factor of 100, as above): the counts are halved several
    times, yet the record's MLE is about as far from the true rate as the MLE of every exact
    interval. (5-bit counts, halved twice as often, measured 11 % worse: 0.081 against 0.073.)"""
    rng = np.random.default_rng(37)
    kept, exact = [], []
    for _ in range(120):
        lam = 10 ** rng.uniform(-5, -2)
        h, t = VisitHistory().observe(T0, False), T0
        changed, unchanged = [], []
        for interval in 10 ** rng.uniform(np.log10(0.05 / lam), np.log10(5 / lam), 400):
            step = int(interval) + 1
            t += step
            flag = bool(rng.random() < -np.expm1(-lam * step))
            (changed if flag else unchanged).append(float(step))
            h = h.observe(t, flag)
        kept.append(abs(h.mle().rate / lam - 1))
        exact.append(abs(mle_rate(changed, unchanged).rate / lam - 1))
    print(f"MLE error after 400 visits: record {np.mean(kept):.4f}, exact {np.mean(exact):.4f}")
    assert max(h.buckets) < COUNT_MAX and h.n_changed < 200  # it did forget
    assert np.mean(kept) < 1.08 * np.mean(exact)


@pytest.fixture
def store(redis_client: redis.Redis) -> HistoryStore:
    return HistoryStore(redis_client, "trawl:{0}:fh:", buckets_for(20_000))


def test_redis_store_costs_about_the_record(store: HistoryStore,
                                             redis_client: redis.Redis) -> None:
    urls = [f"https://host{i % 97}.example/path/{i}?q={i * 7}" for i in range(20_000)]
    record = VisitHistory().observe(T0, False, T0 - 50, 1234).observe(T0 + 600, True, T0 + 500)
    before = redis_client.info("memory")["used_memory"]
    for start in range(0, len(urls), 1000):
        store.put_many((u, record) for u in urls[start:start + 1000])
    per_url = (redis_client.info("memory")["used_memory"] - before) / len(urls)
    print(f"Redis bytes per tracked URL at 20,000 URLs: {per_url:.1f}")
    assert per_url <= 64  # field (4) + record + 2 listpack entry headers + hash overheads
    sample = next(redis_client.scan_iter("trawl:{0}:fh:*"))
    assert redis_client.object("encoding", sample) in (b"listpack", b"ziplist")  # Redis 7, 6
    assert store.get_many([*urls[:3], "https://never.example/"]) == [record] * 3 + [None]


def test_redis_store_observes_and_skips_unreadable_records(store: HistoryStore) -> None:
    url = "https://a.example/x"
    store.observe_many([(url, T0, False, None, 1)])
    (after,) = store.observe_many([(url, T0 + 60, True, None, 2)])
    assert after.n_changed == 1 and after.digest == 2
    assert store.get_many([url]) == [after]
    key, field = store.location(url)
    store.client.hset(key, field, b"junk")
    assert store.get_many([url]) == [None] and store.bad_records == 1
    store.client.hset(key, field, V1_RECORD)
    assert store.get_many([url]) == [None] and store.bad_records == 2
    (fresh,) = store.observe_many([(url, T0 + 120, True, None, 3)])
    assert fresh.visits == 0 and store.get_many([url]) == [fresh]  # a new history began
