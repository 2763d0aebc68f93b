"""workers.pipeline.parse: link extraction rules, robots directives, charsets, broken input,
real pages."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from workers.pipeline.parse import extract_text, parse_html, soup

VECTORS = Path(os.environ.get("TRAWL_VECTORS", "/work/shared/vectors"))
PAGES = VECTORS / "realpages"
URL = "https://example.com/dir/page.html"


def links(html: str | bytes, **kw: object) -> list[tuple[str, bool, str]]:
    body = html.encode() if isinstance(html, str) else html
    return [(lk.url, lk.nofollow, lk.tag) for lk in parse_html(body, URL, **kw).links]


def test_basic_resolution_and_fragments_kept() -> None:
    assert links('<a href="a.html#sec">x</a><a href=" /b \n">y</a><a name="n">z</a>') == [
        ("https://example.com/dir/a.html#sec", False, "a"),
        ("https://example.com/b", False, "a"),
    ]


@pytest.mark.parametrize("depth", [100, 300, 100_000])
def test_links_past_libxml2s_depth_limit_are_read(depth: int) -> None:
    """libxml2 drops everything past 256 nested elements; the flat scan reads those links
    (base, nofollow and order kept) and says so. At depth 100 lxml reads it all itself."""
    body = (b"<html><head><base href='http://b.test/d/'><title>t</title></head><body>"
            b"<a href=first>1</a>" + b"<div>" * depth + b"<a href=deep rel=nofollow>d</a>"
            + b"</div>" * depth + b"<a href='javascript:x'>j</a><a href=/after>a</a></body>"
            b"</html>")
    page = parse_html(body, "http://a.test/")
    assert [(link.url, link.nofollow) for link in page.links] == [
        ("http://b.test/d/first", False), ("http://b.test/d/deep", True),
        ("http://b.test/after", False)]
    assert page.title == "t"
    assert (page.error is not None and "nested deeper" in page.error) == (depth > 256)
    assert page.tree is not None
    # the control: lxml's tree alone has the deep link only within libxml2's limit
    hrefs = [a.get("href") for a in page.tree.iter("a")]
    assert ("deep" in hrefs) == (depth <= 256)


def test_base_href_first_one_wins() -> None:
    page = parse_html(b'<head><base href="/other/"><base href="http://evil/"></head>'
                      b'<a href="x">x</a>', URL)
    assert page.base_url == "https://example.com/other/"
    assert page.links[0].url == "https://example.com/other/x"


def test_nofollow_per_link() -> None:
    assert links('<a rel="external NoFollow" href="/a">a</a><a rel="next" href="/b">b</a>') == [
        ("https://example.com/a", True, "a"), ("https://example.com/b", False, "a")]


@pytest.mark.parametrize("meta,nofollow,noindex", [
    ('<meta name="robots" content="nofollow">', True, False),
    ('<meta name="ROBOTS" content="NoIndex, follow">', False, True),
    ('<meta name="robots" content="none">', True, True),
    ('<meta name="trawl" content="noindex,nofollow">', True, True),
    ('<meta name="googlebot" content="noindex,nofollow">', False, False),
    ('<meta name="robots" content="index, follow">', False, False),
])
def test_meta_robots(meta: str, nofollow: bool, noindex: bool) -> None:
    page = parse_html(f"<html><head>{meta}</head><a href='/x'>x</a></html>".encode(), URL)
    assert (page.meta_nofollow, page.meta_noindex) == (nofollow, noindex)
    assert page.links[0].nofollow is nofollow


@pytest.mark.parametrize("header,nofollow,noindex", [
    ("noindex", False, True),
    ("nofollow, noindex", True, True),
    ("none", True, True),
    ("trawl: nofollow", True, False),
    ("googlebot: noindex, nofollow", False, False),
    ("googlebot: noindex, trawl: nofollow", True, False),
    ("unavailable_after: 25 Jun 2010 15:00:00 PST", False, False),
    (["noindex", "trawl: nofollow"], True, True),
])
def test_x_robots_tag(header: str | list[str], nofollow: bool, noindex: bool) -> None:
    page = parse_html(b"<a href='/x'>x</a>", URL, x_robots_tag=header)
    assert (page.meta_nofollow, page.meta_noindex) == (nofollow, noindex)


def test_canonical_frames_area_and_skipped_schemes() -> None:
    html = """<head><link rel="canonical" href="/canon"><link rel="stylesheet" href="/s.css">
    </head><frameset><frame src="/f1"></frameset><iframe src="//cdn.example.net/i"></iframe>
    <map><area href="/area" rel="nofollow"></map>
    <a href="javascript:void(0)">j</a><a href="mailto:a@b">m</a><a href="TEL:123">t</a>
    <a href=" data:text/html,x">d</a><a href="">empty</a>"""
    page = parse_html(html.encode(), URL)
    assert page.canonical == "https://example.com/canon"
    got = {(lk.url, lk.nofollow, lk.tag) for lk in page.links}
    assert got == {
        ("https://example.com/canon", False, "link"),
        ("https://example.com/f1", False, "frame"),
        ("https://cdn.example.net/i", False, "iframe"),
        ("https://example.com/area", True, "area"),
    }


def test_title_and_link_cap() -> None:
    html = "<title> Hello \n world </title>" + "".join(f"<a href='/p{i}'>x</a>" for i in range(50))
    page = parse_html(html.encode(), URL, max_links=10)
    assert page.title == "Hello world"
    assert len(page.links) == 10 and page.truncated and page.dropped == 40
    assert [link.url for link in page.links] == [f"https://example.com/p{i}" for i in range(10)]
    whole = parse_html(html.encode(), URL)
    assert not whole.truncated and whole.dropped == 0 and len(whole.links) == 50


@pytest.mark.parametrize("body", [
    b"", b"   \n", b"<a href='/x'", b"<html><body><div><a href='/a'>unclosed<p><a href='/b'",
    b"<a href='/a\x00b'>x</a>\x00\x00<a href='/c'>", bytes(range(256)) * 40,
    os.urandom(5000), b"<a href='" + b"x" * 3_000_000 + b"'>x</a><a href='/after'>y</a>",
    b"\xff\xfe<\x00a\x00", b"<?xml version='1.0' encoding='utf-8'?><html><a href='/x'/></html>",
    b"<a href='http://[::1'>bad</a><a href='http://a b/'>bad</a><a href='/ok'>ok</a>",
])
def test_broken_input_never_raises(body: bytes) -> None:
    page = parse_html(body, URL, content_type="text/html; charset=utf-8")
    assert isinstance(page.links, list)
    if not body.strip():
        assert page.error == "empty body"
    extract_text(page)


def test_broken_recovers_links() -> None:
    page = parse_html(b"<html><body><div><a href='/a'>unclosed<p><a href='/b'>", URL)
    assert [lk.url for lk in page.links] == ["https://example.com/a", "https://example.com/b"]
    page = parse_html(b"<a href='/a\x00b'>x</a>\x00<a href='/c'>", URL)
    assert "https://example.com/c" in [lk.url for lk in page.links]
    assert parse_html(bytes(range(32)) * 100, URL).error is not None


def test_charsets() -> None:
    latin = "<title>café</title><a href='/é'>x</a>".encode("latin-1")
    page = parse_html(latin, URL, content_type="text/html; charset=ISO-8859-1")
    assert page.title == "café" and page.links[0].url == "https://example.com/%C3%A9"
    meta = "<meta charset='windows-1251'><title>Россия</title>".encode("cp1251")
    assert parse_html(meta, URL).title == "Россия"
    meta2 = ('<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">'
             "<title>日本</title>").encode("shift_jis")
    assert parse_html(meta2, URL).title == "日本"
    bom = b"\xef\xbb\xbf" + "<title>naïve</title>".encode()
    assert parse_html(bom, URL, content_type="text/html; charset=latin-1").title == "naïve"
    utf16 = "\ufeff<title>ü16</title>".encode("utf-16-le")
    assert parse_html(utf16, URL).title == "ü16"
    assert parse_html("<title>ü</title>".encode(), URL).title == "ü"  # default utf-8
    bogus = parse_html("<title>ü</title>".encode(), URL, content_type="text/html; charset=nope")
    assert bogus.title == "ü"
    wrong = parse_html(b"<title>caf\xe9</title>", URL, content_type="text/html; charset=utf-8")
    assert wrong.title is not None and wrong.title.startswith("caf")


def test_extract_text_and_soup() -> None:
    html = (b"<html><head><style>p{}</style><script>var x=1;</script><title>T</title></head>"
            b"<body><p>Hello <b>big</b>\n world</p><!-- c --><script>no()</script>tail</body>")
    page = parse_html(html, URL)
    assert extract_text(page) == "T Hello big world tail"
    assert extract_text(page.tree) == extract_text(html)
    assert extract_text(b"") == ""
    s = soup(page)
    assert s is soup(page) and s.title.string == "T"


def _expected_counts() -> dict[str, int]:
    text = (PAGES / "SOURCES.md").read_text()
    return {m[1]: int(m[2]) for m in re.finditer(r"\| (\S+\.html) \| \d+ \| (\d+) \|", text)}


@pytest.mark.skipif(not PAGES.exists(), reason="test vectors not present")
def test_realpages() -> None:
    counts = _expected_counts()
    assert len(counts) == 20
    for name, a_tags in counts.items():
        page = parse_html((PAGES / name).read_bytes(), "https://example.com/")
        assert page.error is None, name
        n_a = sum(lk.tag == "a" for lk in page.links)
        # <a> tags without href / with javascript: are skipped; the grep also misses some
        assert 0.5 * a_tags <= n_a <= 1.1 * a_tags, (name, n_a, a_tags)
        assert page.title, name
        assert len(extract_text(page)) > 200, name


def test_memoized_resolution_is_join_url_for_every_base_and_href() -> None:
    """workers.pipeline.parse memoizes link resolution by href and the part of the base it depends
    on: over the WHATWG suite's inputs crossed with many http(s) bases, in two shuffled
    passes (so hits meet other bases than the one that filled them), every answer is
    join_url's."""
    import contextlib
    import json
    import os
    import random
    from pathlib import Path

    from ada_url import join_url, normalize_url

    from workers.pipeline import parse as parse_mod

    vectors = Path(os.environ.get("TRAWL_VECTORS", "/work/shared/vectors"))
    data = vectors / "whatwg_urltestdata.json"
    if not data.exists():
        pytest.skip("test vectors not present")
    cases = [c for c in json.loads(data.read_text()) if isinstance(c, dict)]
    inputs = sorted({c["input"] for c in cases} | {
        "page.html", "../up/x", "./a?b", "?q=1", "#top", "/root", "//other.net/p", "",
        "HTTP://Caps.example/", "http:rel", "\\\\evil.example\\x", "/\\evil.example", "a:b"})
    bases = set()
    for c in cases:
        for raw in (c.get("base"), c.get("href")):
            if raw and raw.startswith(("http://", "https://")):
                with contextlib.suppress(ValueError):
                    bases.add(normalize_url(raw))
    bases |= {"http://example.com/a/b/c.html?x=/y#f", "https://u:p@example.com:8443/d/",
              "http://example.com/a/b/other.html", "http://example.com/"}
    pairs = [(h, b) for h in inputs for b in sorted(bases)[:60]]

    def expected(h: str, b: str) -> str | None:
        try:
            return join_url(b, h)
        except ValueError:
            return None

    parse_mod._RESOLVED.clear()
    rng = random.Random(3)
    for _ in range(2):
        rng.shuffle(pairs)
        bad = [(h, b) for h, b in pairs if parse_mod._resolve(h, b) != expected(h, b)]
        assert not bad, bad[:5]
    assert len(parse_mod._RESOLVED) > 0
