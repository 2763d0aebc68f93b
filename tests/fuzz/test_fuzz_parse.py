"""HTML link extraction under hypothesis: random bytes, pages made of hostile link and markup
pieces, and the real pages of ../shared/vectors/realpages mutated (byte flips, splices,
truncations, tags nested 20,000 deep, hostile links) all give a page whose links are bounded,
absolute and canonicalizable (properties in tests/fuzz/properties.py)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz import inputs
from tests.fuzz.properties import PropertyFailed, check_parse, check_resolve
from tests.fuzz.strategies import BASES, FUZZ, RNG, URLS
from workers.pipeline import parse

PAGE_URLS = BASES.map(lambda b: b or "http://example.com/dir/page.html")
MAX_LINKS = st.sampled_from((0, 1, 7, parse.DEFAULT_MAX_LINKS))
CONTENT_TYPES = st.sampled_from(inputs.CONTENT_TYPES)


@settings(FUZZ, max_examples=250)
@given(st.binary(max_size=3000), PAGE_URLS, CONTENT_TYPES, MAX_LINKS)
def test_random_bytes(body: bytes, url: str, ctype: str | None, max_links: int) -> None:
    check_parse(body, url, ctype, max_links)


@settings(FUZZ, max_examples=150)
@given(RNG.map(inputs.random_html), PAGE_URLS, CONTENT_TYPES, MAX_LINKS)
def test_hostile_markup(body: bytes, url: str, ctype: str | None, max_links: int) -> None:
    check_parse(body, url, ctype, max_links)


@pytest.mark.skipif(not inputs.real_pages(), reason="realpages vectors not present")
@settings(FUZZ, max_examples=80)
@given(RNG, PAGE_URLS, CONTENT_TYPES, MAX_LINKS)
def test_mutated_real_pages(rng: random.Random, url: str, ctype: str | None,
                            max_links: int) -> None:
    pages = inputs.real_pages()
    body = inputs.mutate(rng, pages[rng.randrange(len(pages))], pages)
    check_parse(body, url, ctype, max_links)


@settings(FUZZ, max_examples=300)
@given(st.lists(st.tuples(URLS, PAGE_URLS), min_size=1, max_size=8))
def test_memoized_resolution_answers_as_join_url(pairs: list[tuple[str, str]]) -> None:
    check_resolve(pairs)


def test_checker_catches_a_memo_keyed_by_href_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a resolution memo that ignored the base would hand one page's
    resolution of ``x.html`` to another page; the property sees it."""
    monkeypatch.setattr(parse, "_base_part", lambda href, parts: "")
    with pytest.raises(PropertyFailed, match="memo answer differs"):
        check_resolve([("fuzz-x.html", "http://a.example/one/"),
                       ("fuzz-x.html", "http://a.example/two/")])


def test_checker_catches_links_beyond_max_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a parser that ignored ``max_links`` breaks the bound."""
    real = parse.parse_html
    monkeypatch.setattr("tests.fuzz.properties.parse_html",
                        lambda body, url, ctype=None, *, max_links: real(body, url, ctype))
    with pytest.raises(PropertyFailed, match="more links than max_links"):
        check_parse(b'<a href="/a">a</a><a href="/b">b</a>', "http://e.example/", None, 1)
