"""frontier.scope: Scope.check reasons, domain sets, regex validation, old API kept."""

from __future__ import annotations

import time

import pytest

from frontier.config import ConfigError, CrawlConfig
from frontier.scope import REASONS, Scope
from frontier.urls import canonicalize, host_of

NOW = 2026


def scope(**settings: object) -> Scope:
    return Scope.from_config(CrawlConfig().replace(**settings), now_year=NOW)


def check(s: Scope, url: str, depth: int = 1) -> str | None:
    url = canonicalize(url)
    return s.check(url, host_of(url), depth)


# --- the existing API (workers/pipeline/lease.py uses it) ---------------------------------------

def test_legacy_constructor_and_methods() -> None:
    s = Scope(["Example.com", ".sub.org.", ""], 3)
    assert s.host_allowed("example.com")
    assert s.host_allowed("www.example.com:8080")
    assert s.host_allowed("a.b.sub.org")
    assert not s.host_allowed("notexample.com")
    assert not s.host_allowed("example.com.evil.net")
    assert not s.host_allowed("org")
    assert s.depth_allowed(3) and not s.depth_allowed(4)
    assert Scope([], 0).host_allowed("anything.net")
    assert Scope([], 0).depth_allowed(10_000)  # 0 = unlimited


def test_ipv6_and_ports() -> None:
    s = Scope(["[::1]", "127.0.0.1"], 5)
    assert s.host_allowed("[::1]:8080")
    assert s.host_allowed("[::1]")
    assert s.host_allowed("127.0.0.1:9000")
    assert not s.host_allowed("[::2]:8080")


def test_idn_domains_in_config_match_punycode_hosts() -> None:
    s = scope(allowed_domains=["bücher.de"])
    assert check(s, "https://www.bücher.de/x") is None
    assert check(s, "https://www.buecher.de/x") == "out_of_scope"


# --- host reasons ---------------------------------------------------------------------------

def test_denied_wins_over_allowed() -> None:
    s = scope(allowed_domains=["example.com"], denied_domains=["ads.example.com"])
    assert check(s, "https://www.example.com/") is None
    assert check(s, "https://ads.example.com/") == "denied_domain"
    assert check(s, "https://x.ads.example.com/") == "denied_domain"
    assert check(s, "https://other.net/") == "out_of_scope"
    s = scope(allowed_domains=["shop.example.com"], denied_domains=["example.com"])
    assert check(s, "https://shop.example.com/") == "denied_domain"


def test_denied_alone_allows_the_rest() -> None:
    s = scope(denied_domains=["tracker.net"])
    assert check(s, "https://a.tracker.net/") == "denied_domain"
    assert check(s, "https://example.org/") is None
    assert scope().host_reason("anything.example") is None


def test_host_check_is_a_set_lookup_not_a_scan() -> None:
    """10,000 allowed domains cost what 1 costs (the old code scanned them all per link)."""
    few = Scope(["d0.example"], 0)
    many = Scope([f"d{i}.example" for i in range(10_000)], 0)
    hosts = [f"h{i}.sub.d{i % 7}.example" for i in range(2000)] + ["www.nowhere.net"] * 100

    def cost(s: Scope) -> float:
        best = float("inf")
        for _ in range(5):
            s._host_memo.clear()
            t0 = time.perf_counter()
            for h in hosts:
                s._host_reason(h)
            best = min(best, time.perf_counter() - t0)
        return best

    assert many.host_allowed("h1.sub.d9999.example")
    assert cost(many) < 5 * cost(few) + 0.002


def test_host_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import frontier.scope as mod
    monkeypatch.setattr(mod, "HOST_MEMO_SIZE", 10)
    s = scope(allowed_domains=["example.com"])
    for i in range(25):
        s.host_reason(f"h{i}.example.com")
    assert len(s._host_memo) <= 10
    assert s.host_reason("h3.example.com") is None
    assert s.host_reason("h3.example.org") == "out_of_scope"


# --- url reasons ----------------------------------------------------------------------------

def test_too_deep() -> None:
    s = scope(max_depth=3)
    assert check(s, "https://e.com/", depth=3) is None
    assert check(s, "https://e.com/", depth=4) == "too_deep"
    assert check(scope(max_depth=0), "https://e.com/", depth=10_000) is None


def test_url_too_long() -> None:
    s = scope(max_url_length=60)
    long_url = "https://e.com/" + "x" * 60
    assert s.check(long_url, "e.com", 1) == "url_too_long"
    assert scope(max_url_length=0).check(long_url, "e.com", 1) is None


def test_deny_and_allow_patterns() -> None:
    s = scope(deny_url_patterns=[r"\.pdf$", r"/login\b"],
              allow_url_patterns=[r"^https://e\.com/(docs|blog)/"])
    assert check(s, "https://e.com/docs/a.html") is None
    assert check(s, "https://e.com/docs/a.pdf") == "deny_pattern"
    assert check(s, "https://e.com/blog/login") == "deny_pattern"
    assert check(s, "https://e.com/shop/") == "not_allowed_pattern"
    assert check(scope(), "https://e.com/shop/a.pdf") is None


@pytest.mark.parametrize("url,setting,reason", [
    ("https://e.com/" + "/".join(f"s{i}" for i in range(30)), "max_path_segments",
     "trap_path_depth"),
    ("https://e.com/a/b/a/b/a/b/", "max_segment_repeats", "trap_repeated_segments"),
    ("https://e.com/s?" + "&".join(f"f{i}=1" for i in range(12)), "max_query_params",
     "trap_query_params"),
    ("https://e.com/cal/2031/05/", "calendar_window_years", "trap_calendar"),
    ("https://e.com/cal?year=2031&month=5", "calendar_window_years", "trap_calendar"),
])
def test_traps_through_check(url: str, setting: str, reason: str) -> None:
    assert check(scope(), url) == reason
    assert check(scope(**{setting: 0}), url) is None


def test_current_year_is_used_without_pin() -> None:
    s = Scope.from_config(CrawlConfig())
    year = time.gmtime().tm_year
    assert s.now_year == year
    assert s.check(f"https://e.com/cal/{year + 3}/01/", "e.com", 1) == "trap_calendar"
    assert s.check(f"https://e.com/cal/{year + 2}/01/", "e.com", 1) is None


def test_order_host_before_patterns_and_traps() -> None:
    s = scope(allowed_domains=["e.com"], deny_url_patterns=["cal"])
    assert check(s, "https://x.org/cal/2031/05/") == "out_of_scope"
    assert check(s, "https://e.com/cal/2031/05/") == "deny_pattern"


def test_a_dropped_domain_wins_over_an_allowed_subdomain_and_can_be_undone() -> None:
    s = scope(allowed_domains=["www.e.com", "f.org"], denied_domains=["bad.f.org"])
    assert check(s, "https://www.e.com/a") is None  # memoized in scope
    s.set_dropped(frozenset({"e.com", "bad.f.org"}))
    assert check(s, "https://www.e.com/a") == "dropped_domain"
    assert check(s, "https://bad.f.org/a") == "denied_domain"  # the config's reason first
    assert check(s, "https://f.org/a") is None
    assert check(s, "https://x.org/a") == "out_of_scope"
    s.set_dropped(frozenset())
    assert check(s, "https://www.e.com/a") is None


def test_reasons_constant_covers_check() -> None:
    assert len(set(REASONS)) == len(REASONS) == 11


# --- validation ------------------------------------------------------------------------------

@pytest.mark.parametrize("setting", ["allow_url_patterns", "deny_url_patterns"])
def test_invalid_regex_names_setting_and_pattern(setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        scope(**{setting: [r"ok\.html$", r"/bad(unclosed"]})
    msg = str(info.value)
    assert setting in msg and "/bad(unclosed" in msg and "regular expression" in msg
    assert "ok\\.html" not in msg  # the valid one is not blamed


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        Scope([], 0, deny_url_patterns=["*"])


def test_cached_url_reasons_give_check_answer_at_every_depth() -> None:
    """Workers memoize url_reasons per link (WorkerContext.links) and add the depth
    later: that must answer exactly as check, reason order included."""
    s = scope(max_depth=3, max_url_length=60, allowed_domains=["example.com"],
              deny_url_patterns=[r"/private/"], max_path_segments=6)
    urls = ["http://example.com/a", "http://other.net/a", "http://example.com/private/x",
            "http://example.com/" + "x" * 80, "http://other.net/" + "y" * 80,
            "http://example.com/1/2/3/4/5/6/7/8", "http://www.example.com/ok?q=1"]
    for raw in urls:
        url = canonicalize(raw)
        reasons = s.url_reasons(url, host_of(url))
        for depth in (0, 3, 4):
            assert s.with_depth(reasons, depth) == s.check(url, host_of(url), depth), (raw, depth)


def test_link_memo_is_bounded() -> None:
    from frontier.memo import BoundedMemo

    memo: BoundedMemo[str, tuple[str, str, tuple[None, None]]] = BoundedMemo(size=3)
    for i in range(3):
        memo.put(f"u{i}", (f"u{i}", "h", (None, None)))
    assert memo.get("u0") is not None
    memo.put("u3", ("u3", "h", (None, None)))  # full: dropped whole, then stored
    assert memo.get("u0") is None and memo.get("u3") == ("u3", "h", (None, None))
