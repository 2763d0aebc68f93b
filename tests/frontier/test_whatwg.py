"""frontier.whatwg: the same answers as ada-url's own ``join_url`` / ``normalize_url``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import ada_url
import pytest

from frontier import whatwg

WHATWG = Path(os.environ.get("TRAWL_VECTORS", "/work/shared/vectors")) / "whatwg_urltestdata.json"

#: (base, href) pairs of each kind the crawl meets, valid and invalid, beyond the suite's.
PAIRS = [
    ("https://h1.sandbox.test:8443/dir/page-17.html", "../other/page-3.html?x=1#f"),
    ("http://a/b/c/d;p?q", "g;x?y#s"),
    ("http://a/b/c/d;p?q", "//other.example/"),
    ("http://a/b/c/d;p?q", ""),
    ("http://a/b/c/d;p?q", " \t\n/x y\u00e9 "),
    ("http://a/b/", "http://[::1"),  # invalid: unclosed IPv6
    ("http://a/b/", "http://exa mple.com/"),  # invalid host
    ("http://a/b/", "\ud800"),  # a lone surrogate cannot be encoded
    ("\udfff", "x"),
    ("not a base", "relative"),
    ("http://xn--nxasmq6b.com/", "./\u00fc?\u00e4=1"),
    ("https://example.com/", "javascript:alert(1)"),
]


def _answer(fn, *args: str) -> tuple[str, str]:
    try:
        return ("ok", fn(*args))
    except ValueError as exc:
        return ("ValueError", str(exc))


def _cases() -> list[tuple[str, str]]:
    cases = list(PAIRS)
    if WHATWG.exists():
        for t in json.loads(WHATWG.read_text()):
            if isinstance(t, dict):
                cases.append((t.get("base") or "", t["input"]))
    return cases


def test_join_url_answers_as_ada_url() -> None:
    cases = _cases()
    valid = 0
    for base, href in cases:
        want = _answer(ada_url.join_url, base, href)
        assert _answer(whatwg.join_url, base, href) == want, (base, href)
        valid += want[0] == "ok"
    # both kinds were compared: URLs that resolve and URLs that raise
    assert 0 < valid < len(cases)


def test_normalize_url_answers_as_ada_url() -> None:
    cases = _cases()
    valid = 0
    for _, href in cases:
        want = _answer(ada_url.normalize_url, href)
        assert _answer(whatwg.normalize_url, href) == want, href
        valid += want[0] == "ok"
    assert 0 < valid < len(cases)


def test_the_direct_calls_are_in_use() -> None:
    """Else the comparisons above would compare ada-url with itself."""
    assert whatwg.join_url is whatwg._join_url
    assert whatwg.normalize_url is whatwg._normalize_url


def test_empty_serialization_and_bad_input() -> None:
    with pytest.raises(ValueError, match="Invalid URL"):
        whatwg.normalize_url("")
    with pytest.raises(ValueError, match="Invalid URL"):
        whatwg.join_url("http://a/", "\ud800")
    assert whatwg.normalize_url("HTTP://EXAMPLE.com:80/a/../b") == "http://example.com/b"
