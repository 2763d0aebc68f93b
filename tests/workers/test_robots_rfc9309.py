"""RFC 9309 conformance of RobotsPolicy: a table of (robots.txt, agent, URL, verdict) cases.

Each case names what it checks: an RFC 9309 section, or "Google" for a behaviour of Google's
reference parser (github.com/google/robotstxt) that the RFC leaves open. The negative controls
run raw protego (what RobotsPolicy used before) on the cases of the three defects fixed in
workers/pipeline/robots_rules.py and show it deciding them the other way.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
from protego import Protego

from workers.pipeline.robots import RobotsPolicy
from workers.pipeline.robots_rules import canonical_path, parse_rules, request_path

H = "https://example.com"
GROUPS = "RFC 9309 §2.1"  # groups: user-agent lines then rules; other lines ignored
AGENT = "RFC 9309 §2.2.1"  # product token, case-insensitive, "*" fallback, merged groups
PATHS = "RFC 9309 §2.2.2"  # percent-encoding, longest match, Allow on ties, /robots.txt
SPECIAL = "RFC 9309 §2.2.3"  # "*" and "$"


class Case(NamedTuple):
    robots: str
    agent: str
    path: str
    allowed: bool
    ref: str


def _d(*rules: str, agent: str = "*") -> str:
    """A one-group robots.txt: ``_d("Disallow: /x")``."""
    return f"User-agent: {agent}\n" + "\n".join(rules) + "\n"


CASES: dict[str, Case] = {
    # --- defect 1: lines that are not rules do not split a group (§2.1) ---
    "unknown-line-between-agents": Case(
        "User-agent: trawl\nFoo: bar\nUser-agent: other\nDisallow: /x\n", "trawl", "/x", False,
        GROUPS),
    "crawl-delay-between-agents": Case(
        "User-agent: trawl\nCrawl-delay: 5\nUser-agent: other\nDisallow: /x\n", "trawl", "/x",
        False, GROUPS),
    "request-rate-between-agents": Case(
        "User-agent: trawl\nRequest-rate: 1/5\nUser-agent: other\nDisallow: /x\n", "trawl",
        "/x", False, GROUPS),
    "sitemap-between-agents": Case(
        f"User-agent: trawl\nSitemap: {H}/s.xml\nUser-agent: other\nDisallow: /x\n", "trawl",
        "/x", False, GROUPS),
    "colonless-unknown-between-agents": Case(
        "User-agent: trawl\nNoindex /y\nUser-agent: other\nDisallow: /x\n", "trawl", "/x",
        False, GROUPS + " + Google (key without colon)"),
    "unknown-lines-between-rules": Case(
        "User-agent: trawl\nDisallow: /a\nFoo: bar\nCrawl-delay: 1\nDisallow: /x\n", "trawl",
        "/x", False, GROUPS),
    "protego-vector-invalid-directive": Case(
        "User-agent: abc\nDisallow: /c/\nUser-agent: *\nInvalid_directive: /gb.html\n"
        "User-agent: ia_archiver\nDisallow: /\n", "trawl", "/foo", False, GROUPS),
    "rule-line-does-split": Case(
        "User-agent: trawl\nDisallow: /a\nUser-agent: other\nDisallow: /x\n", "trawl", "/x",
        True, GROUPS),
    "empty-disallow-does-split": Case(
        "User-agent: trawl\nDisallow:\nUser-agent: other\nDisallow: /x\n", "trawl", "/x", True,
        GROUPS + " + Google"),
    "rules-before-any-agent-ignored": Case(
        "Disallow: /x\nUser-agent: *\nDisallow: /y\n", "trawl", "/x", True, GROUPS),
    "blank-lines-do-not-split": Case(
        "User-agent: trawl\n\n# comment\n\nDisallow: /x\n", "trawl", "/x", False, GROUPS),
    "cr-line-endings": Case(
        "User-agent: trawl\rDisallow: /x\r", "trawl", "/x", False, "RFC 9309 §2.2 (EOL)"),
    # --- defect 2: the product token of a User-agent value (§2.2.1) ---
    "multi-word-agent": Case(_d("Disallow: /x", agent="TRAWL BOT"), "trawl", "/x", False,
                             AGENT + " + Google (first token)"),
    "agent-with-version-and-url": Case(
        _d("Disallow: /x", agent="trawl/1.0 (+https://x.org/)"), "trawl", "/x", False,
        AGENT + " + Google"),
    "multi-word-agent-beats-star": Case(
        "User-agent: *\nDisallow: /x\nUser-agent: trawl crawler\nDisallow: /y\n", "trawl", "/x",
        True, AGENT),
    "multi-word-agent-crawl-delay-group": Case(
        "User-agent: Trawl Crawler\nCrawl-delay: 3\nDisallow: /x\n", "trawl", "/x/1", False,
        AGENT),
    "digits-end-the-token": Case(_d("Disallow: /x", agent="trawl2"), "trawl", "/x", False,
                                 "Google ([a-zA-Z_-] only)"),
    "hyphen-is-part-of-token": Case(_d("Disallow: /x", agent="trawl-news"), "trawl", "/x",
                                    True, AGENT),
    "token-prefix-does-not-match": Case(_d("Disallow: /x", agent="tra"), "trawl", "/x", True,
                                        AGENT),
    "longer-token-does-not-match": Case(_d("Disallow: /x", agent="trawler"), "trawl", "/x",
                                        True, AGENT),
    "agent-case-insensitive": Case(_d("Disallow: /x", agent="TrAwL"), "trawl", "/x", False,
                                   AGENT),
    "star-with-suffix-names-nobody": Case(_d("Disallow: /x", agent="*bot"), "trawl", "/x", True,
                                          "Google"),
    "star-then-words-is-global": Case(_d("Disallow: /x", agent="* everyone"), "trawl", "/x",
                                      False, "Google"),
    # --- defect 3: percent-encoding (§2.2.2) ---
    "utf8-rule-encoded-url": Case(_d("Disallow: /ä"), "trawl", "/%C3%A4", False, PATHS),
    "encoded-rule-utf8-url": Case(_d("Disallow: /%C3%A4"), "trawl", "/ä", False, PATHS),
    "lower-hex-rule": Case(_d("Disallow: /%c3%a4"), "trawl", "/%C3%A4", False, PATHS),
    "lower-hex-url": Case(_d("Disallow: /ä"), "trawl", "/%c3%a4", False, PATHS),
    "rfc-table-katakana": Case(_d("Disallow: /foo/bar/ツ"), "trawl", "/foo/bar/%E3%83%84",
                               False, PATHS + " (table)"),
    "rfc-table-unreserved-escapes": Case(_d("Disallow: /foo/bar/%62%61%7A"), "trawl",
                                         "/foo/bar/baz", False, PATHS + " (table)"),
    "escaped-tilde-rule": Case(_d("Disallow: /%7Euser"), "trawl", "/~user/a", False, PATHS),
    "escaped-tilde-url": Case(_d("Disallow: /~user"), "trawl", "/%7euser/a", False, PATHS),
    "escaped-slash-rule-kept": Case(_d("Disallow: /a%2Fb"), "trawl", "/a/b", True,
                                    PATHS + " + Google"),
    "escaped-slash-url-kept": Case(_d("Disallow: /a/"), "trawl", "/a%2Fb", True,
                                   PATHS + " + Google"),
    "escaped-slash-hex-case": Case(_d("Disallow: /a%2fb"), "trawl", "/a%2Fb", False,
                                   PATHS + " + Google"),
    "escaped-question-mark-kept": Case(_d("Disallow: /a%3Fb"), "trawl", "/a?b", True, PATHS),
    "raw-question-mark-kept": Case(_d("Disallow: /*?"), "trawl", "/search%3Fq", True, PATHS),
    "escaped-equals-kept": Case(_d("Disallow: /a%3Db"), "trawl", "/a=b", True, PATHS),
    "non-utf8-escapes-differ": Case(_d("Disallow: /%FF"), "trawl", "/%FE", True, PATHS),
    "non-utf8-escape-hex-case": Case(_d("Disallow: /%FF"), "trawl", "/%ff", False, PATHS),
    "utf8-after-wildcard": Case(_d("Disallow: /*ä"), "trawl", "/x/%C3%A4", False, PATHS),
    "utf8-anchored": Case(_d("Disallow: /ä$"), "trawl", "/%C3%A4", False, PATHS),
    "utf8-anchored-longer-url": Case(_d("Disallow: /ä$"), "trawl", "/%C3%A4x", True, PATHS),
    "utf8-in-query": Case(_d("Disallow: /s?q=ä"), "trawl", "/s?q=%C3%A4", False, PATHS),
    "space-in-rule": Case(_d("Disallow: /a b"), "trawl", "/a%20b", False, PATHS),
    "escaped-star-matches-star": Case(_d("Disallow: /a%2Ab"), "trawl", "/a*b", False,
                                      SPECIAL),
    "escaped-dollar-matches-dollar": Case(_d("Disallow: /a%24"), "trawl", "/a$", False,
                                          SPECIAL),
    # --- longest match, Allow on ties (§2.2.2) ---
    "longest-allow-wins": Case(_d("Allow: /p", "Disallow: /"), "trawl", "/page", True, PATHS),
    "longest-disallow-wins": Case(_d("Allow: /a", "Disallow: /a/b"), "trawl", "/a/b/c", False,
                                  PATHS),
    "longest-counts-wildcards": Case(_d("Allow: /page", "Disallow: /*.htm"), "trawl",
                                     "/page.htm", False, PATHS + " + Google"),
    "longest-counts-encoded-octets": Case(_d("Allow: /é", "Disallow: /%C3%A9x"), "trawl",
                                          "/éx", False, PATHS),
    "tie-allow-wins": Case(_d("Allow: /folder", "Disallow: /folder"), "trawl", "/folder/page",
                           True, PATHS),
    "tie-allow-wins-any-order": Case(_d("Disallow: /x", "Allow: /x"), "trawl", "/x", True,
                                     PATHS),
    "tie-after-encoding": Case(_d("Disallow: /%C3%A4", "Allow: /ä"), "trawl", "/ä", True,
                               PATHS),
    "allow-root-only": Case(_d("Allow: /$", "Disallow: /"), "trawl", "/", True, SPECIAL),
    "allow-root-only-not-page": Case(_d("Allow: /$", "Disallow: /"), "trawl", "/page", False,
                                     SPECIAL),
    "no-rule-matches": Case(_d("Disallow: /x"), "trawl", "/y", True, PATHS),
    "path-case-sensitive": Case(_d("Disallow: /X"), "trawl", "/x", True, PATHS),
    # --- wildcards (§2.2.3) ---
    "star-suffix": Case(_d("Disallow: /*.php"), "trawl", "/a/index.php?x=1", False, SPECIAL),
    "dollar-anchor": Case(_d("Disallow: /*.php$"), "trawl", "/index.php", False, SPECIAL),
    "dollar-anchor-query": Case(_d("Disallow: /*.php$"), "trawl", "/index.php?x=1", True,
                                SPECIAL),
    "star-middle": Case(_d("Disallow: /fish*.php"), "trawl", "/fish/salmon.php", False,
                        SPECIAL),
    "star-middle-no-match": Case(_d("Disallow: /fish*.php"), "trawl", "/Fish.PHP", True,
                                 SPECIAL),
    "dollar-inside-is-literal": Case(_d("Disallow: /a$b"), "trawl", "/a$b", False, "Google"),
    "dollar-inside-not-anchor": Case(_d("Disallow: /a$b"), "trawl", "/a", True, "Google"),
    "stars-only": Case(_d("Disallow: /***"), "trawl", "/anything", False, SPECIAL),
    "hostile-many-stars": Case(_d("Disallow: /" + "*a" * 500 + "b"), "trawl",
                               "/" + "a" * 20_000, True, SPECIAL + " (linear matcher)"),
    "rule-without-slash-matches-nothing": Case(_d(f"Disallow: {H}/x"), "trawl", "/x", True,
                                               PATHS + " + Google"),
    # --- directive names and agent selection (§2.1, §2.2.1) ---
    "directive-names-case-insensitive": Case("USER-AGENT: trawl\nDISALLOW: /x\n", "trawl",
                                             "/x", False, GROUPS),
    "directive-typo-accepted": Case("User-agent: trawl\nDissallow: /x\n", "trawl", "/x", False,
                                    "Google (typos)"),
    "star-only-when-no-specific": Case(
        "User-agent: *\nDisallow: /\nUser-agent: trawl\nDisallow:\n", "trawl", "/x", True,
        AGENT),
    "star-used-when-no-specific": Case(
        "User-agent: other\nDisallow: /\nUser-agent: *\nDisallow: /x\n", "trawl", "/x", False,
        AGENT),
    "star-group-other-paths": Case(
        "User-agent: other\nDisallow: /\nUser-agent: *\nDisallow: /x\n", "trawl", "/y", True,
        AGENT),
    "no-group-applies": Case("User-agent: other\nDisallow: /\n", "trawl", "/x", True, AGENT),
    "specific-group-without-rules": Case(
        "User-agent: *\nDisallow: /\n\nUser-agent: trawl\n", "trawl", "/x", True,
        AGENT + " + Google"),
    "agents-sharing-a-group": Case(
        "User-agent: trawl\n\nUser-agent: *\nDisallow: /\n", "trawl", "/x", False, GROUPS),
    "merged-groups-first": Case(
        "User-agent: trawl\nDisallow: /a\n\nUser-agent: other\nDisallow: /\n\n"
        "User-agent: TRAWL\nDisallow: /b\n", "trawl", "/a", False, AGENT),
    "merged-groups-second": Case(
        "User-agent: trawl\nDisallow: /a\n\nUser-agent: other\nDisallow: /\n\n"
        "User-agent: TRAWL\nDisallow: /b\n", "trawl", "/b", False, AGENT),
    "merged-groups-longest-across": Case(
        "User-agent: trawl\nDisallow: /a\nUser-agent: x\nDisallow: /\n"
        "User-agent: trawl bot\nAllow: /a/b\n", "trawl", "/a/b", True, AGENT),
    # --- /robots.txt (§2.2.2) ---
    "robots-txt-always-allowed": Case(_d("Disallow: /"), "trawl", "/robots.txt", True, PATHS),
    "robots-txt-named-in-rule": Case(_d("Disallow: /robots.txt", agent="trawl"), "trawl",
                                     "/robots.txt", True, PATHS),
    "robots-txt-lookalike": Case(_d("Disallow: /"), "trawl", "/robots.txt.bak", False, PATHS),
    # --- Google extensions kept ---
    "index-html-allows-dir": Case(_d("Disallow: /", "Allow: /d/index.html"), "trawl", "/d/",
                                  True, "Google (index.htm)"),
}

#: Cases on which raw protego decides the other way: without the fix they would fail.
NEGATIVE_CONTROLS = {
    "1: unknown lines split a group": [
        "unknown-line-between-agents", "crawl-delay-between-agents",
        "request-rate-between-agents", "protego-vector-invalid-directive"],
    "2: multi-word or prefix user-agent": [
        "multi-word-agent", "agent-with-version-and-url", "multi-word-agent-beats-star",
        "multi-word-agent-crawl-delay-group", "token-prefix-does-not-match",
        "merged-groups-longest-across"],
    # protego (0.3 and 0.7 alike) already equates /ä and /%C3%A4; where it still departs from
    # §2.2.2 is by decoding reserved characters and by turning non-UTF-8 escapes into U+FFFD
    "3: percent-encoding": [
        "escaped-question-mark-kept", "raw-question-mark-kept", "escaped-equals-kept",
        "non-utf8-escapes-differ"],
}


def test_table_is_large_and_covers_every_rule() -> None:
    assert len(CASES) >= 40
    refs = [c.ref for c in CASES.values()]
    for section in (GROUPS, AGENT, PATHS, SPECIAL, "Google"):
        assert sum(section in ref for ref in refs) >= 3, section


@pytest.mark.parametrize("name", list(CASES))
def test_conformance(name: str) -> None:
    case = CASES[name]
    policy = RobotsPolicy.from_response(200, case.robots.encode(), None)
    assert policy.kind == "parsed"
    assert policy.allowed(H + case.path, case.agent) is case.allowed, case.ref
    # the verdict survives the Redis cache round trip (the text is re-parsed)
    assert RobotsPolicy.from_bytes(policy.to_bytes()).allowed(H + case.path, case.agent) \
        is case.allowed


@pytest.mark.parametrize("defect,name", [(d, n) for d, names in NEGATIVE_CONTROLS.items()
                                         for n in names])
def test_negative_control_raw_protego_disagrees(defect: str, name: str) -> None:
    case = CASES[name]
    raw = Protego.parse(case.robots).can_fetch(H + case.path, case.agent)
    assert raw is not case.allowed, f"protego already gets {name} right ({defect})"


def test_crawl_delay_follows_the_same_groups() -> None:
    rules = parse_rules("User-agent: trawl\nFoo: x\nUser-agent: other\nCrawl-delay: 4\n"
                        "Disallow: /\nUser-agent: Trawl Crawler\nCrawl-delay: 2.5\n"
                        "Disallow: /z\nUser-agent: *\nCrawl-delay: 9\n")
    assert rules.crawl_delay("trawl") == 2.5  # the last valid value of its merged groups
    assert rules.crawl_delay("other") == 4
    assert rules.crawl_delay("nobody") == 9
    assert parse_rules("User-agent: *\nCrawl-delay: -1\nCrawl-delay: nan\n").crawl_delay(
        "trawl") is None


@pytest.mark.parametrize("raw,form", [  # RFC 9309 §2.2.2's table, then our own edges
    ("/foo/bar?baz=quz", "/foo/bar?baz=quz"),
    ("/foo/bar/ツ", "/foo/bar/%E3%83%84"),
    ("/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"),
    ("/foo/bar/%62%61%7A", "/foo/bar/baz"),
    ("/a%2fb%3f%7e", "/a%2Fb%3F~"),
    ("/100%", "/100%25"),
    ("/a b\"<>", "/a%20b%22%3C%3E"),
])
def test_canonical_path(raw: str, form: str) -> None:
    assert canonical_path(raw) == form


@pytest.mark.parametrize("url,path", [
    ("https://h.example/a/b?x=1#frag", "/a/b?x=1"),
    ("https://h.example", "/"),
    ("https://h.example?q", "/?q"),
    ("https://h.example/a?", "/a?"),
    ("http://h.example;p=1", "/;p=1"),
    ("//h.example/x", "/x"),
    ("/bare/path", "/bare/path"),
    ("https://h.example#/not-a-path", "/"),
])
def test_request_path(url: str, path: str) -> None:
    assert request_path(url) == path
