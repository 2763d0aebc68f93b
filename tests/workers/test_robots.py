"""workers.pipeline.robots: protego's own cases, real files, RFC 9309 status rules, cache, CLI."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from tests.loopback import HTTPServerFactory, Reply, Request
from workers.pipeline import robots as robots_mod
from workers.pipeline.robots import ROBOTS_MAX_BYTES, RobotsPolicy, robots_command, ttl_for

VECTORS = Path(os.environ.get("TRAWL_VECTORS", "/work/shared/vectors"))
REAL = VECTORS / "robots_real"
CASES = VECTORS / "protego_data" / "protego_can_fetch_cases.json"

pytestmark = pytest.mark.skipif(not CASES.exists(), reason="test vectors not present")


def _names(prefix: str, *numbers: int) -> list[str]:
    return [f"{prefix}#{n}" for n in numbers]


#: protego's own expectations that RobotsPolicy no longer meets because it follows RFC 9309
#: (see workers/pipeline/robots_rules.py). In every one of them our verdict is the one
#: google/robotstxt gives (the vector's google_robotstxt_verdict), which the test checks too.
RFC_9309_OVER_PROTEGO: dict[str, list[str]] = {
    # §2.2.1: a product token is [a-zA-Z_-]; Google reads "Rule1TestBot" as "Rule" and "2bot"
    # as nothing, so an agent queried as "Rule1TestBot"/"2bot" gets the "*" group (none here)
    "digits end a product token":
        _names("test_allowed_wildcards", 15, 16, 17, 19, 20, 21, 23, 24, 26, 27, 28, 30, 31,
               32, 34, 35, 36, 38, 39, 41, 42, 43)
        + _names("test_1996rfc_examples", 4, 12, 13),
    # §2.2.1 again: "UnicödeBöt" names "unic", "Львів-bot" names nothing, and a query for a
    # whole User-Agent header matches no product token
    "non-ASCII letters end a product token":
        _names("test_unicode_url_and_useragent", 4, 10, 12, 15),
    # §2.1: a line that is not a rule (Invalid_directive) does not end the group, so
    # "User-agent: *" and "User-agent: ia_archiver" share "Disallow: /"
    "unknown lines do not split a group": _names("test_grouping_unknown_keys", 1, 2, 3),
    # a key without a colon is only read when the line has two words (Google); "foo*bot" names
    # "foo", and a query "foo*bot"/"foobot" is not that token
    "missing colon with 4 words; '*' inside an agent name": _names("test_generosity", 3, 5, 6),
    # §2.2.3: a final "$" anchors the rule; protego also reads it as a literal "$"
    "a final $ is only an anchor": _names("test_special_symbols_dual_behaviour", 2, 3),
    # §2.2.2: paths start with "/"; protego turns "http://x/" into the rule "/http://x/"
    "a rule not starting with / matches no path": _names("test_with_absolute_urls", 2),
    # §2.2.1: the agent must equal the token; protego lets "hedwig" apply to "hedwig-news2"
    "agent names match whole, not as a prefix": _names("test_user_agent_precedence",
                                                       2, 8, 9, 11, 12),
}


def test_protego_can_fetch_cases() -> None:
    cases = json.loads(CASES.read_text())["cases"]
    assert len(cases) == 378
    expected = {name for names in RFC_9309_OVER_PROTEGO.values() for name in names}
    wrong = {}
    for c in cases:
        policy = RobotsPolicy.from_response(200, c["robots_txt"].encode(), None)
        verdict = policy.allowed(c["url"], c["user_agent"])
        if verdict != c["allowed"]:
            wrong[c["name"]] = verdict
            assert verdict == c["google_robotstxt_verdict"], c["name"]
    assert sorted(wrong) == sorted(expected)


def test_real_files_parse_and_answer() -> None:
    files = sorted(REAL.iterdir())
    assert len(files) == 12
    for f in files:
        policy = RobotsPolicy.from_response(200, f.read_bytes(), None)
        assert policy.kind == "parsed", f.name
        assert not policy.text.startswith("\ufeff")
    wiki = RobotsPolicy.from_response(200, (REAL / "en.wikipedia.org").read_bytes())
    assert wiki.allowed("https://en.wikipedia.org/wiki/Main_Page")
    assert not wiki.allowed("https://en.wikipedia.org/w/index.php?title=Special:Search")
    assert not wiki.allowed("https://en.wikipedia.org/wiki/Special:Random")
    assert wiki.crawl_delay("trawl") is None  # only mentioned in a comment there
    twitter = RobotsPolicy.from_response(200, (REAL / "twitter.com").read_bytes())
    assert twitter.crawl_delay("trawl") == 1.0
    github = RobotsPolicy.from_response(200, (REAL / "github.com").read_bytes())
    assert not github.allowed("https://github.com/", "trawl")
    google = RobotsPolicy.from_response(200, (REAL / "www.google.com").read_bytes())
    assert not google.allowed("https://www.google.com/search?q=x")
    assert google.allowed("https://www.google.com/")


@pytest.mark.parametrize("status,kind,allowed", [
    (200, "parsed", False), (204, "parsed", True), (404, "allow_all_4xx", True),
    (403, "allow_all_4xx", True), (310, "allow_all_4xx", True), (429, "unavailable", False),
    (500, "unavailable", False), (503, "unavailable", False), (None, "unavailable", False),
])
def test_status_rules(status: int | None, kind: str, allowed: bool) -> None:
    body = b"User-agent: *\nDisallow: /\n" if status != 204 else b""
    policy = RobotsPolicy.from_response(status, body, "timeout" if status is None else None)
    assert policy.kind == kind
    assert policy.allowed("http://h/x") is allowed
    assert ttl_for(policy) == (600 if kind == "unavailable" else 86400)
    assert ttl_for(policy, ok_ttl_s=5, error_ttl_s=1) == (1 if kind == "unavailable" else 5)


def test_unreachable_robots_keeps_why() -> None:
    """No response at all: the policy's reason keeps the failure's detail (which TLS
    problem, which refusal), not only its class; the rule (disallow all) is the same."""
    from workers.fetch.result import FetchResult
    res = FetchResult("https://a.test/robots.txt", error="tls_error",
                      error_detail="certificate verify failed: certificate has expired")
    policy = RobotsPolicy.from_fetch(res)
    assert policy.kind == "unavailable" and not policy.allowed("https://a.test/")
    assert policy.reason == "tls_error: certificate verify failed: certificate has expired"
    assert RobotsPolicy.from_bytes(policy.to_bytes()).reason == policy.reason
    bare = RobotsPolicy.from_fetch(FetchResult("https://a.test/robots.txt", error="dns"))
    assert bare.reason == "dns"


def test_truncation_at_500_kib() -> None:
    filler = b"# " + b"x" * 1000 + b"\n"
    body = b"User-agent: *\n" + filler * 600 + b"Disallow: /late\n"
    policy = RobotsPolicy.from_response(200, body, None)
    assert policy.truncated and len(policy.text.encode()) <= ROBOTS_MAX_BYTES
    assert policy.allowed("http://h/late")  # the rule after 500 KiB is not seen
    # a cut mid-line drops the partial line instead of shortening a rule
    cut = b"User-agent: *\n" + b"#" * (ROBOTS_MAX_BYTES - 20) + b"\nDisallow: /private-area\n"
    policy = RobotsPolicy.from_response(200, cut, None)
    assert policy.allowed("http://h/p")
    head = b"User-agent: *\nDisallow: /late\n"
    assert not RobotsPolicy.from_response(200, head, None).allowed("http://h/late")


@pytest.mark.parametrize("body", [
    b"\x00\xff\xfe" * 1000, bytes(range(256)) * 64, b"\xef\xbb\xbf", b"<html><body>404</body>",
    b"User-agent: *\nDisallow: /\xff\xfe\n", b"Disallow: /\n" * 50_000,
])
def test_garbage_never_raises(body: bytes) -> None:
    policy = RobotsPolicy.from_response(200, body, None)
    assert policy.kind in ("parsed", "unparseable")
    policy.allowed("http://h/x")
    policy.crawl_delay("trawl")


def test_parser_error_is_unparseable(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(text: str) -> None:
        raise ValueError("bad robots")

    monkeypatch.setattr(robots_mod, "parse_rules", boom)
    policy = RobotsPolicy.from_response(200, b"User-agent: *\nDisallow: /never-seen-before\n")
    assert policy.kind == "unparseable" and "bad robots" in (policy.reason or "")
    assert policy.allowed("http://h/never-seen-before")


def test_serialization_round_trip() -> None:
    for policy in [
        RobotsPolicy.from_response(200, (REAL / "twitter.com").read_bytes()),
        RobotsPolicy.from_response(404, b"", None),
        RobotsPolicy.from_response(None, None, "connection refused\nreally"),
    ]:
        data = policy.to_bytes()
        back = RobotsPolicy.from_bytes(data)
        assert back == policy
        assert back.kind == policy.kind and back.reason == policy.reason
        for url in ("https://twitter.com/", "https://twitter.com/search?q=a"):
            assert back.allowed(url) == policy.allowed(url)
        assert back.crawl_delay("trawl") == policy.crawl_delay("trawl")
    with pytest.raises(ValueError):
        RobotsPolicy.from_bytes(b"nonsense")


def test_cli_on_file() -> None:
    out = io.StringIO()
    rc = robots_command(str(REAL / "twitter.com"),
                        ["https://twitter.com/", "https://twitter.com/search?q=x"],
                        "trawl", True, out=out)
    assert rc == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rows == [
        {"url": "https://twitter.com/", "allowed": True, "crawl_delay": 1.0},
        {"url": "https://twitter.com/search?q=x", "allowed": False, "crawl_delay": 1.0},
    ]
    out = io.StringIO()
    assert robots_command(str(REAL / "twitter.com"), ["https://twitter.com/search?q=x"],
                          "trawl", False, out=out) == 0
    assert "disallowed https://twitter.com/search?q=x" in out.getvalue()
    assert robots_command("/nonexistent/robots.txt", ["http://h/"], "trawl", False,
                          out=io.StringIO()) == 2


ROUTES = {
    "/robots.txt": Reply(200, b"User-agent: *\nDisallow: /private\nCrawl-delay: 2.5\n", None),
    "/gone/robots.txt": Reply(404, b"not found", None),
    "/down/robots.txt": Reply(503, b"busy", None),
}


def _robots_reply(request: Request) -> Reply:
    if request.target.startswith("/loop"):
        return Reply(302, b"", None, (("Location", request.target + "x"),))
    return ROUTES.get(request.target, Reply(404, b"", None))


@pytest.fixture(scope="module")
def server(http_server: HTTPServerFactory) -> str:
    return http_server(respond=_robots_reply).origin()


def test_cli_on_url(server: str) -> None:
    def run(path: str, url: str) -> dict:
        out = io.StringIO()
        assert robots_command(server + path, [url], "trawl", True, out=out,
                              allow_private=True) == 0
        return json.loads(out.getvalue())

    assert run("/robots.txt", server + "/private/x") == {
        "url": server + "/private/x", "allowed": False, "crawl_delay": 2.5}
    assert run("/robots.txt", server + "/public")["allowed"] is True
    assert run("/gone/robots.txt", server + "/private/x")["allowed"] is True
    assert run("/down/robots.txt", server + "/public")["allowed"] is False
    assert run("/loop", server + "/public")["allowed"] is True  # > 5 redirects: RFC "unavailable"
    # nothing listening: unreachable, disallow all
    assert robots_command("http://127.0.0.1:9/robots.txt", ["http://127.0.0.1:9/"], "trawl",
                          True, out=(out := io.StringIO()), allow_private=True) == 0
    assert json.loads(out.getvalue())["allowed"] is False


def test_cli_refuses_a_loopback_robots_txt_unless_allowed(server: str) -> None:
    """The crawl's address policy: without --allow-private the loopback server is never asked
    (its robots.txt would allow /public), and the reason names the way out."""
    out = io.StringIO()
    assert robots_command(server + "/robots.txt", [server + "/public"], "trawl", False,
                          out=out) == 0
    text = out.getvalue()
    assert "address refused" in text and "--allow-private" in text
    assert "disallowed " + server + "/public" in text
    out = io.StringIO()
    assert robots_command(server + "/robots.txt", [server + "/public"], "trawl", False,
                          out=out, allow_private=True) == 0
    assert "allowed    " + server + "/public" in out.getvalue()
