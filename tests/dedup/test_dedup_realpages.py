"""Real pages (../shared/vectors/realpages): edited copies are flagged, the same template around
a different article is not, and two Yahoo articles on one template are not."""

from __future__ import annotations

import os
import random
from pathlib import Path

import lxml.html
import pytest
import redis

from dedup.minhash import OnePermutationHasher, estimated_jaccard
from dedup.service import DedupService
from dedup.shingles import jaccard, shingle_hashes
from dedup.text import tokens

PAGES = Path(os.environ.get("TRAWL_VECTORS", "/work/shared/vectors")) / "realpages"
NAMES = sorted(p.stem for p in PAGES.glob("*.html"))
pytestmark = pytest.mark.skipif(not NAMES, reason="realpages vectors not present")


def load(name: str) -> bytes:
    return (PAGES / f"{name}.html").read_bytes()


def tree(html):  # type: ignore[no-untyped-def]
    """What the worker hands over: an lxml root parsed with the page's own charset (edited
    copies are edited trees, so no serialization round trip changes their charset)."""
    return lxml.html.fromstring(html) if isinstance(html, bytes) else html


def edit_words(html: bytes, rate: float, seed: int):  # type: ignore[no-untyped-def]
    """Replace about ``rate`` of the words in paragraph text (a typo fix, an updated line)."""
    root = lxml.html.fromstring(html)
    rng = random.Random(seed)
    for p in root.iter("p"):
        if p.text:
            words = p.text.split(" ")
            for i in range(len(words)):
                if rng.random() < rate:
                    words[i] = "edited"
            p.text = " ".join(words)
    return root


def other_article(html: bytes, donor: bytes):  # type: ignore[no-untyped-def]
    """The same page with every paragraph's text taken from another site's paragraphs."""
    root, src = lxml.html.fromstring(html), lxml.html.fromstring(donor)
    texts = [p.text_content() for p in src.iter("p") if p.text_content().strip()] or ["x"]
    for i, p in enumerate(root.iter("p")):
        for child in list(p):
            p.remove(child)
        p.text = texts[i % len(texts)] + f" {i}"
    return root


@pytest.mark.parametrize("name", NAMES)
def test_edited_copy_is_flagged_and_other_article_is_not(name: str,
                                                         redis_client: redis.Redis) -> None:
    html = load(name)
    svc = DedupService(redis_client, f"real-{name}")
    assert svc.check(f"http://a/{name}", "a", tree(html)).kind == "unique"
    base = shingle_hashes(tokens(tree(html)))

    edited = edit_words(html, 0.004, 1)
    j = jaccard(base, shingle_hashes(tokens(tree(edited))))
    res = svc.check(f"http://b/{name}", "b", tree(edited), record=False)
    if j >= 0.95:
        assert res.kind in ("near", "exact") and res.canonical_url == f"http://a/{name}"

    donor = load(NAMES[(NAMES.index(name) + 7) % len(NAMES)])
    swapped = other_article(html, donor)
    j2 = jaccard(base, shingle_hashes(tokens(tree(swapped))))
    res2 = svc.check(f"http://c/{name}", "c", tree(swapped), record=False)
    print(f"\n{name}: edited J={j:.3f} -> {res.kind}; other article J={j2:.3f} -> {res2.kind}")
    if j2 <= 0.8:
        assert res2.kind == "unique"


def test_edits_reach_the_threshold_on_most_pages_and_templates_stay_apart() -> None:
    hasher = OnePermutationHasher()  # what DedupService signs pages with
    high = low = 0
    for name in NAMES:
        base = shingle_hashes(tokens(tree(load(name))))
        edited = shingle_hashes(tokens(edit_words(load(name), 0.004, 1)))
        high += jaccard(base, edited) >= 0.95
        donor = load(NAMES[(NAMES.index(name) + 7) % len(NAMES)])
        other = shingle_hashes(tokens(tree(other_article(load(name), donor))))
        low += estimated_jaccard(hasher.signature(base), hasher.signature(other)) < 0.9
    assert high >= len(NAMES) * 0.75 and low >= len(NAMES) * 0.75


def test_two_articles_on_one_template_are_not_duplicates(redis_client: redis.Redis) -> None:
    svc = DedupService(redis_client, "yahoo")
    assert svc.check("http://y/1", "y", tree(load("yahoo-1"))).kind == "unique"
    assert svc.check("http://y/3", "y", tree(load("yahoo-3"))).kind == "unique"
