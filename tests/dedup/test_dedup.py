"""dedup units: normalization, shingles, MinHash accuracy against exact Jaccard, LSH service."""

from __future__ import annotations

import math

import numpy as np
import pytest
import redis

from dedup.config import DedupConfig
from dedup.lsh import candidate_probability, choose_bands
from dedup.minhash import (
    EMPTY,
    MinHasher,
    OnePermutationHasher,
    estimated_jaccard,
    from_base64,
    to_datasketch,
)
from dedup.service import DedupService, record_fields, signature_field
from dedup.shingles import jaccard, shingle_hashes
from dedup.text import main_text, normalize_text, tokens

PAGE = b"""<html><head><title>T</title><style>p{}</style></head><body>
<header>Site name</header><nav><a href="/">home</a> menu</nav>
<div role="navigation">crumbs</div><script>var x = 1;</script>
<main><p>The Quick brown fox, jumped 12 times on 2024-05-01!</p><!-- c --></main>
<aside>related</aside><footer>copyright</footer></body></html>"""


def test_normalization_drops_markup_boilerplate_case_and_digits() -> None:
    assert main_text(PAGE).split() == ["The", "Quick", "brown", "fox,", "jumped", "12",
                                       "times", "on", "2024-05-01!"]
    assert tokens(PAGE) == [b"the", b"quick", b"brown", b"fox", b"jumped", b"0", b"times",
                            b"on", b"0", b"0", b"0"]
    assert tokens(PAGE.replace(b"12 times", b"99 times")) == tokens(PAGE)
    import lxml.html

    assert tokens(lxml.html.fromstring(PAGE)) == tokens(PAGE)  # a worker's tree works too
    assert tokens(b"") == [] and tokens(b"<html></html>") == []


def test_unicode_path_agrees_with_ascii_path_and_splits_cjk() -> None:
    text = "Hello, World! It's 2024 -- foo_bar mp3"
    from dedup import text as t

    slow = [x.encode() for x in t._TOKEN.findall(t._DIGITS.sub("0", text.lower()))]
    assert normalize_text(text) == slow
    assert normalize_text("Grüße aus KÖLN") == ["grüße".encode(), b"aus", "köln".encode()]
    assert len(normalize_text("中文字")) == 3


def test_shingles() -> None:
    words = [f"w{c}".encode() for c in "abcdefghij"]
    assert len(shingle_hashes(words, 4)) == 7
    assert len(shingle_hashes(words[:2], 4)) == 1
    assert len(shingle_hashes([], 4)) == 0
    assert np.array_equal(shingle_hashes(words), shingle_hashes(list(words)))
    a, b = shingle_hashes(words), shingle_hashes(words[:-1])
    assert jaccard(a, b) == pytest.approx(6 / 7)


HASHERS = [MinHasher, OnePermutationHasher]


@pytest.mark.parametrize("make", HASHERS)
def test_signature_of_shingles_with_repeats_is_the_signature_of_the_set(make: type) -> None:
    words = normalize_text("the cat sat on the mat and the cat sat on the mat again " * 20)
    hasher = make(128, 1)
    raw, uniq = shingle_hashes(words, 4, unique=False), shingle_hashes(words, 4)
    assert len(raw) > len(uniq)
    assert np.array_equal(hasher.signature(raw), hasher.signature(uniq))


@pytest.mark.parametrize("make", HASHERS)
def test_signatures_are_seeded_and_match_datasketch(make: type) -> None:
    s = shingle_hashes([f"w{i}".encode() for i in range(300)])
    t = shingle_hashes([f"w{i}".encode() for i in range(30, 330)])
    a1, a2, b = make(128, 1).signature(s), make(128, 1).signature(s), make(128, 1).signature(t)
    assert np.array_equal(a1, a2) and not np.array_equal(a1, make(128, 2).signature(s))
    assert to_datasketch(a1).jaccard(to_datasketch(b)) == pytest.approx(estimated_jaccard(a1, b))
    assert np.array_equal(from_base64(signature_field_of(a1)), a1)


def signature_field_of(sig: np.ndarray) -> str:
    from dedup.service import DedupResult

    return signature_field(DedupResult("unique", signature=sig))


def _pair(rng: np.random.Generator, j: float, pool: np.ndarray, pos: int
          ) -> tuple[np.ndarray, np.ndarray, float, int]:
    n = int(rng.integers(100, 400))
    inter = round(j * n)
    only = n - inter
    a_only = only // 2
    vals = pool[pos : pos + n]
    a = np.unique(np.concatenate([vals[:inter], vals[inter : inter + a_only]]))
    b = np.unique(np.concatenate([vals[:inter], vals[inter + a_only :]]))
    return a, b, inter / n, pos + n


@pytest.mark.parametrize("make", HASHERS)
def test_estimated_jaccard_within_0_1_for_95_percent_and_error_matches_theory(make: type
                                                                              ) -> None:
    """10,000 pairs over the whole range 0..1: |est - J| <= 0.1 for >= 95%, and per bucket
    the RMS error is close to sqrt(J(1-J)/k). One-permutation bins sample the union without
    replacement, so their error is a little lower (0.88-0.93 of it here): within the bounds."""
    k, n_pairs = 128, 10_000
    rng = np.random.default_rng(7)
    with np.errstate(over="ignore"):  # distinct uint32 values: odd multiplier mod 2^32
        pool = rng.permutation(np.arange(4_000_000, dtype=np.uint32) * np.uint32(2654435761))
    hasher = make(k, seed=1)
    true, est, pos = [], [], 0
    for i in range(n_pairs):
        if pos + 400 > len(pool):
            pos = 0
            pool = rng.permutation(pool)
        a, b, _, pos = _pair(rng, (i + 0.5) / n_pairs, pool, pos)
        true.append(jaccard(a, b))
        est.append(estimated_jaccard(hasher.signature(a), hasher.signature(b)))
    t, e = np.array(true), np.array(est)
    within = float(np.mean(np.abs(e - t) <= 0.1))
    print(f"\n{n_pairs} pairs, k={k}: |est-J|<=0.1 for {within:.2%}")
    print(" bucket     n   bias    rms  theory")
    for lo in np.arange(0.0, 1.0, 0.1):
        m = (t >= lo) & (t < lo + 0.1)
        rms = math.sqrt(float(np.mean((e[m] - t[m]) ** 2)))
        theory = math.sqrt(float(np.mean(t[m] * (1 - t[m]))) / k)
        bias = float(np.mean(e[m] - t[m]))
        print(f" {lo:.1f}-{lo + 0.1:.1f} {m.sum():5d} {bias:+.4f} {rms:.4f} {theory:.4f}")
        assert abs(bias) < 0.01
        assert 0.8 * theory <= rms <= 1.2 * theory
    assert within >= 0.95


@pytest.mark.parametrize("n", [1, 2, 5, 40])
def test_one_permutation_signatures_of_small_sets_have_no_empty_bins(n: int) -> None:
    """Densification: with fewer shingles than bins every bin still gets a value of the set
    (a probe, or for a 1-2 shingle set the rotation fallback), so small pages compare."""
    hasher = OnePermutationHasher(128, 1)
    x = np.arange(1, n + 1, dtype=np.uint32) * np.uint32(2654435761)
    sig = hasher.signature(x)
    assert not np.any(sig == EMPTY)
    assert len(set(sig.tolist())) <= n  # every value is the minimum of a non-empty bin
    assert np.array_equal(sig, hasher.signature(x[::-1].copy()))
    assert np.all(hasher.signature(np.empty(0, dtype=np.uint32)) == EMPTY)


def test_one_permutation_estimate_on_small_sets_is_unbiased() -> None:
    """Sets of 20-60 shingles (about half the bins empty before densification): the mean
    estimate stays on the true Jaccard."""
    hasher = OnePermutationHasher(128, 1)
    rng = np.random.default_rng(3)
    errs = []
    for i in range(2000):
        vals = rng.choice(2**32 - 1, size=120, replace=False).astype(np.uint32)
        n = int(rng.integers(20, 60))
        inter = round((i % 10 + 0.5) / 10 * n)
        a = np.unique(vals[:n])
        b = np.unique(np.concatenate([vals[:inter], vals[n:2 * n - inter]]))
        errs.append(estimated_jaccard(hasher.signature(a), hasher.signature(b)) - jaccard(a, b))
    e = np.array(errs)
    print(f"\nsmall sets: bias {e.mean():+.4f}, rms {np.sqrt((e ** 2).mean()):.4f}")
    assert abs(e.mean()) < 0.01
    assert np.sqrt((e ** 2).mean()) < 0.06


def test_band_choice_and_s_curve() -> None:
    assert choose_bands(128, 0.9) == (16, 8)
    assert candidate_probability(0.95, 16, 8) > 0.99999
    assert candidate_probability(0.9, 16, 8) > 0.999
    assert candidate_probability(0.3, 16, 8) < 0.002


def _doc(words: list[str]) -> bytes:
    return ("<html><body><nav>menu</nav><main><p>" + " ".join(words)
            + "</p></main></body></html>").encode()


def test_service_exact_near_unique_and_record_fields(redis_client: redis.Redis) -> None:
    rng = np.random.default_rng(3)
    base = [f"t{chr(97 + int(x) % 26)}{chr(97 + int(x) // 26 % 26)}q{int(x)}"
            for x in rng.integers(0, 10**6, 800)]
    base = [w.translate(str.maketrans("0123456789", "abcdefghij")) for w in base]
    svc = DedupService(redis_client, "crawl1", DedupConfig())
    first = svc.check("http://a.test/1", "a.test", _doc(base))
    assert first.kind == "unique" and first.canonical_url is None
    again = svc.check("http://a.test/copy", "a.test",
                      _doc(base).replace(b"<nav>menu</nav>", b"<nav>other menu</nav>"))
    assert (again.kind, again.canonical_url, again.similarity) == ("exact", "http://a.test/1",
                                                                    1.0)
    assert again.skip_links
    near = list(base)
    near[100] = near[500] = "zzchanged"
    res = svc.check("http://b.test/2", "b.test", _doc(near))
    assert res.kind == "near" and res.canonical_url == "http://a.test/1"
    assert res.similarity is not None and res.similarity >= 0.9
    other = svc.check("http://b.test/3", "b.test", _doc(base[::-1]))
    assert other.kind == "unique"
    fields = record_fields(res)
    assert fields["dup_kind"] == "near" and fields["dup_of"] == "http://a.test/1"
    assert np.array_equal(from_base64(fields["minhash"]), res.signature)
    fresh = [w + "k" for w in base[:400]]
    peek = svc.check("http://c.test/4", "c.test", _doc(fresh), record=False)
    assert peek.kind == "unique"
    assert svc.check("http://c.test/4", "c.test", _doc(fresh)).kind == "unique"
    assert svc.stats() == {"pages": 4, "canonicals": 3}
    assert DedupService(redis_client, "crawl1", DedupConfig(enabled=False)).check(
        "http://x/", "x", _doc(base)).kind == "skipped"
    assert svc.check("http://x/e", "x", b"<html><body></body></html>").kind == "skipped"


def test_refetch_of_a_recorded_url_is_not_its_own_duplicate(redis_client: redis.Redis) -> None:
    """A worker killed after the dedup check but before admitting the page's links: the page
    is fetched again under the same URL and must not be skipped as a copy of itself."""
    words = [f"w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676)}"
             for i in range(600)]
    svc = DedupService(redis_client, "refetch", DedupConfig())
    assert svc.check("http://a.test/1", "a.test", _doc(words)).kind == "unique"
    assert svc.check("http://b.test/copy", "b.test", _doc(words)).kind == "exact"
    near = list(words)
    near[300] = "zzchanged"
    assert svc.check("http://c.test/near", "c.test", _doc(near)).kind == "near"
    pages_key = svc.index.keys.hostpages
    before = int(redis_client.hget(pages_key, "a.test"))
    again = svc.check("http://a.test/1", "a.test", _doc(words))
    assert (again.kind, again.skip_links) == ("unique", False)
    changed = list(words)
    changed[10] = "zzedited"
    assert svc.check("http://a.test/1", "a.test", _doc(changed)).kind == "unique"
    # the copies keep their classification when they are fetched again
    copy = svc.check("http://b.test/copy", "b.test", _doc(words))
    assert (copy.kind, copy.canonical_url) == ("exact", "http://a.test/1")
    near_again = svc.check("http://c.test/near", "c.test", _doc(near))
    assert (near_again.kind, near_again.canonical_url) == ("near", "http://a.test/1")
    # the original and the edited version of a.test/1 (a new version is indexed as such)
    assert svc.stats()["canonicals"] == 2
    assert int(redis_client.hget(pages_key, "a.test")) == before + 1


def test_checks_in_one_round_trip_answer_as_one_after_another(redis_client: redis.Redis
                                                                ) -> None:
    """check_many (a task's pages in one pipeline) gives what successive checks give: a page
    sees the pages before it in the same call, exact and near copies included."""
    base = [f"w{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(400)]  # no digits
    near = base[:]
    near[200] = "changed"
    docs = [("http://a.test/1", "a.test", _doc(base)),
            ("http://b.test/2", "b.test", _doc(base)),
            ("http://b.test/3", "b.test", _doc(near)),
            ("http://c.test/4", "c.test", _doc(base[::-1]))]
    one = DedupService(redis_client, "one_by_one")
    many = DedupService(redis_client, "in_one_call")
    expected = [one.check(u, h, d) for u, h, d in docs]
    feats = [(u, h, many.features(d)) for u, h, d in docs]
    got = many.check_many([(u, h, f) for u, h, f in feats if f is not None])
    assert [r.kind for r in got] == ["unique", "exact", "near", "unique"]
    assert [(r.kind, r.canonical_url, r.similarity) for r in got] == [
        (r.kind, r.canonical_url, r.similarity) for r in expected]
    assert got[2].canonical_url == "http://a.test/1"
