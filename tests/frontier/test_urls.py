"""frontier.urls: WHATWG suite, third-party canonicalization suites (pass floors), rules."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from frontier.config import CrawlConfig
from frontier.urls import InvalidURL, ParamStripper, canonicalize, finish_href, host_of

VECTORS = Path(os.environ.get("TRAWL_VECTORS", "/work/shared/vectors"))
CASES = VECTORS / "url_canonicalization_cases.json"
WHATWG = VECTORS / "whatwg_urltestdata.json"

pytestmark = pytest.mark.skipif(not CASES.exists(), reason="test vectors not present")


def _suites() -> dict:
    return json.loads(CASES.read_text())["suites"]


def _canon(url: str, base: str | None = None, **kw: object) -> str:
    try:
        return canonicalize(url, base, **kw)
    except InvalidURL as exc:
        return "ERR " + exc.reason


# --- WHATWG urltestdata -------------------------------------------------------------------

def test_whatwg_suite() -> None:
    tests = [t for t in json.loads(WHATWG.read_text()) if isinstance(t, dict)]
    n_http = ok_http = n_other = ok_other = n_fail = ok_fail = 0
    for t in tests:
        got = _canon(t["input"], t.get("base"))
        if t.get("failure"):
            n_fail += 1
            ok_fail += got.startswith("ERR") or not got.startswith(("http://", "https://"))
        elif t["href"].startswith(("http://", "https://")):
            n_http += 1
            try:
                expected = finish_href(t["href"])  # the suite's href + our extra steps
            except InvalidURL as exc:
                expected = "ERR " + exc.reason
            ok_http += got == expected
        else:
            n_other += 1
            ok_other += got.startswith("ERR unsupported scheme")
    assert (n_http, n_fail) == (247, 267)
    assert ok_http >= 247
    assert ok_fail >= 267
    assert n_other == 377 and ok_other >= 377  # non-http results must be rejected


# --- third-party suites -----------------------------------------------------------------------

def _score(name: str, fn) -> tuple[int, int]:
    cases = _suites()[name]["cases"]
    ok = sum(1 for c in cases if fn(c))
    return len(cases), ok


def test_w3lib_suite_order_kept() -> None:
    def check(c: dict) -> bool:
        return _canon(c["input"]) == c["expected"]

    total, ok = _score("w3lib_canonicalize_url", check)
    assert total == 70 and ok >= 41


def test_w3lib_suite_with_sort_query() -> None:
    """'w3lib minus query sorting': the same cases with our opt-in sort_query=True."""
    def check(c: dict) -> bool:
        return _canon(c["input"], sort_query=True) == c["expected"]

    total, ok = _score("w3lib_canonicalize_url", check)
    assert total == 70 and ok >= 48


def test_url_normalize_suite() -> None:
    """url-normalize also accepts scheme-less references; we resolve those against a base."""
    def check(c: dict) -> bool:
        inp, exp = c["input"], c["expected"]
        if "://" not in inp and not inp.startswith(("mailto:", "tel:", "news:", "urn:", "ftp:")):
            scheme = (c.get("kwargs") or {}).get("default_scheme", "https")
            domain = (c.get("kwargs") or {}).get("default_domain") or "example.invalid"
            got = _canon(inp, f"{scheme}://{domain}/")
            if "://" not in exp:  # the expected value is a bare path
                got = "/" + got.split("/", 3)[3] if not got.startswith("ERR") else got
            return got == exp
        return _canon(inp) == exp

    total, ok = _score("url_normalize", check)
    assert total == 82 and ok >= 62


def test_safebrowsing_suites() -> None:
    def url_check(c: dict) -> bool:
        if c["input"] is None:
            return False
        got = _canon(c["input"])
        return got.startswith("ERR") if c.get("fail") else got == c["expected"]

    def host_check(c: dict) -> bool:
        got = _canon(c["input"])
        if got.startswith("ERR"):
            return False
        host = host_of(got)
        if ("]:" in host) if host.startswith("[") else (":" in host):
            host = host.rsplit(":", 1)[0]
        return host == c["expected"]

    def path_check(c: dict) -> bool:
        got = _canon(c["input"])
        return not got.startswith("ERR") and "/" + got.split("/", 3)[3].split("?")[0] == c[
            "expected"]

    assert _score("safebrowsing_canonical_url", url_check)[1] >= 28
    assert _score("safebrowsing_canonical_host", host_check)[1] >= 6
    assert _score("safebrowsing_canonical_path", path_check)[1] >= 7
    assert _score("safebrowsing_v4_doc_examples_via_firefox",
                  lambda c: _canon(c["input"]) == c["expected"])[1] >= 18


def test_courlan_suite() -> None:
    total, ok = _score("courlan", lambda c: _canon(c["input"]) == c["expected"])
    assert total == 40 and ok >= 14


# --- rules ------------------------------------------------------------------------------------

@pytest.mark.parametrize("url,expected", [
    ("HTTP://Example.COM/a", "http://example.com/a"),  # lowercase scheme and host
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),  # IDNA -> punycode
    ("http://example.com:80/", "http://example.com/"),  # default port
    ("https://example.com:443/", "https://example.com/"),
    ("https://example.com:8443/x", "https://example.com:8443/x"),  # other port kept
    ("http://example.com:443/", "http://example.com:443/"),
    ("http://example.com/a/./b/../c", "http://example.com/a/c"),  # dot segments
    ("http://example.com/%7euser/%2D%41%5f", "http://example.com/~user/-A_"),  # unreserved
    ("http://example.com/a%2fb%c3%a9", "http://example.com/a%2Fb%C3%A9"),  # uppercase hex
    ("http://example.com/100%", "http://example.com/100%25"),  # stray %
    ("http://example.com/a b/é", "http://example.com/a%20b/%C3%A9"),  # encode
    ("http://example.com/a|b^c{d}", "http://example.com/a%7Cb%5Ec%7Bd%7D"),
    ("http://example.com", "http://example.com/"),  # empty path
    ("http://example.com/p#frag", "http://example.com/p"),  # fragment
    ("http://example.com/?b=2&a=1&b=1", "http://example.com/?b=2&a=1&b=1"),  # order kept
    ("http://example.com./x", "http://example.com/x"),  # trailing dot
    ("http://example.com.:8080/x", "http://example.com:8080/x"),
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("  http://example.com/\n ", "http://example.com/"),
])
def test_rules(url: str, expected: str) -> None:
    assert canonicalize(url) == expected


def test_resolution_against_base() -> None:
    base = "https://example.com/a/b/c.html?q=1"
    assert canonicalize("../d", base) == "https://example.com/a/d"
    assert canonicalize("?x=1", base) == "https://example.com/a/b/c.html?x=1"
    assert canonicalize("//other.org/p", base) == "https://other.org/p"
    assert canonicalize("\\\\other.org\\p", base) == "https://other.org/p"  # WHATWG, not RFC
    assert canonicalize("#top", base) == "https://example.com/a/b/c.html?q=1"


def test_sort_query_option() -> None:
    assert canonicalize("http://e.com/?b=2&a=1", sort_query=True) == "http://e.com/?a=1&b=2"


@pytest.mark.parametrize("url,reason", [
    ("javascript:void(0)", "unsupported scheme 'javascript'"),
    ("mailto:a@b.c", "unsupported scheme 'mailto'"),
    ("ftp://example.com/", "unsupported scheme 'ftp'"),
    ("http://", "empty host"),
    ("http://./", "empty host"),
    ("/relative", "relative URL without base"),
    ("http://exa mple.com/", "unparseable URL"),
])
def test_invalid(url: str, reason: str) -> None:
    with pytest.raises(InvalidURL) as info:
        canonicalize(url)
    assert info.value.reason == reason
    assert isinstance(info.value, ValueError)


def test_too_long() -> None:
    url = "http://example.com/" + "a" * 2100
    with pytest.raises(InvalidURL) as info:
        canonicalize(url)
    assert info.value.reason == "too long"
    assert canonicalize(url, max_length=4096) == url
    with pytest.raises(InvalidURL):
        canonicalize("http://example.com/" + "a" * 100_000)


def test_host_names_dns_cannot_carry_are_invalid() -> None:
    """RFC 1035: at most 253 characters, labels of at most 63 (also after IDNA)."""
    ok = "http://" + ".".join(["a" * 63] * 3) + "." + "b" * 61 + "/"  # 253 characters
    assert canonicalize(ok) == ok
    assert canonicalize("http://u:p@" + "c" * 63 + ".test:8080/") == (
        "http://u:p@" + "c" * 63 + ".test:8080/")
    cyrillic = "".join(chr(0x430 + i * 7 % 32) for i in range(50))  # 70 once punycoded
    for bad in ("http://" + "a" * 64 + ".test/", ok.replace("b" * 61, "b" * 62),
                f"http://{cyrillic}.test/", "http://" + "d" * 300 + "/"):
        with pytest.raises(InvalidURL) as info:
            canonicalize(bad)
        assert info.value.reason == "host name too long", bad


def test_host_of() -> None:
    assert host_of("http://example.com/a") == "example.com"
    assert host_of("https://example.com:8443/a?b") == "example.com:8443"
    assert host_of("http://user:pw@example.com/") == "example.com"
    assert host_of("http://[::1]:8080/") == "[::1]:8080"
    assert host_of("http://example.com") == "example.com"
    assert host_of(canonicalize("HTTP://Example.COM.:80/x")) == "example.com"


# --- session-id stripping (rule 7) -------------------------------------------------------------

SESSION = ParamStripper(CrawlConfig().session_id_params)


@pytest.mark.parametrize("url,expected", [
    ("http://e.com/a;jsessionid=ABC123?x=1", "http://e.com/a?x=1"),
    ("http://e.com/a;JSESSIONID=ABC123", "http://e.com/a"),
    ("http://e.com/a;jsessionid=1/b;type=a", "http://e.com/a/b;type=a"),  # others kept
    ("http://e.com/p?b=2&PHPSESSID=abc&a=1", "http://e.com/p?b=2&a=1"),    # order kept
    ("http://e.com/p?sid=1", "http://e.com/p"),                            # no bare "?"
    ("http://e.com/p?sidebar=1&sid", "http://e.com/p?sidebar=1"),          # whole keys only
    ("http://e.com/p?%73id=3&x", "http://e.com/p?x"),                      # after rule 4
    ("http://e.com/p?oscsid=z&q=a%20b&&r", "http://e.com/p?q=a%20b&&r"),   # rest exact
    ("http://e.com/p?q=sid%3D1&ref=sid", "http://e.com/p?q=sid%3D1&ref=sid"),  # values kept
    ("http://e.com/p?x=1#sid=2", "http://e.com/p?x=1"),
    ("http://e.com/plain/path", "http://e.com/plain/path"),
    ("http://e.com/p?CFID=1&CFTOKEN=2&id=7", "http://e.com/p?id=7"),
])
def test_session_ids_stripped(url: str, expected: str) -> None:
    assert canonicalize(url, strip=SESSION) == expected


def test_session_ids_kept_without_stripper() -> None:
    url = "http://e.com/a;jsessionid=ABC?PHPSESSID=x&y=1"
    assert canonicalize(url) == url
    assert canonicalize(url, strip=ParamStripper([])) == url
    assert canonicalize("?sid=1&p=2", "https://e.com/x", strip=SESSION) == "https://e.com/x?p=2"


def test_session_stripper_names_are_case_insensitive() -> None:
    s = ParamStripper(["Token"])
    assert s.names == frozenset({"token"})
    assert canonicalize("http://e.com/?TOKEN=1&tokenx=2", strip=s) == "http://e.com/?tokenx=2"
