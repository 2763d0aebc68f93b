"""Tests for workers.dns.resolver: static map, TTL and negative caching, coalescing, the
address guard."""

from __future__ import annotations

import threading
import time

import pytest

from workers.dns.resolver import (
    CachingResolver,
    DNSError,
    ForbiddenAddressError,
    is_forbidden_ip,
    system_lookup,
)


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class CountingLookup:
    """A stand-in for the system resolver that counts calls (the DNS server side)."""

    def __init__(self, answers: dict[str, list[str] | DNSError], delay_s: float = 0.0) -> None:
        self.answers = answers
        self.calls: list[str] = []
        self.delay_s = delay_s
        self._lock = threading.Lock()

    def __call__(self, host: str) -> list[str]:
        with self._lock:
            self.calls.append(host)
        if self.delay_s:
            time.sleep(self.delay_s)
        ans = self.answers.get(host)
        if ans is None:
            raise DNSError("lookup failed: Name or service not known", host, "nxdomain")
        if isinstance(ans, DNSError):
            raise ans
        return list(ans)


def test_static_map_first_and_never_expires() -> None:
    clock = FakeClock()
    lookup = CountingLookup({"foo.sandbox.test": ["93.184.216.34"]})
    r = CachingResolver(static={"Foo.Sandbox.Test.": "127.0.0.2"}, allow_private=True,
                        clock=clock, lookup=lookup)
    assert r.resolve("foo.sandbox.test") == "127.0.0.2"
    clock.t += 10**9
    assert r.resolve("FOO.sandbox.test.") == "127.0.0.2"
    assert lookup.calls == []
    assert r.hits == 2 and r.misses == 0


def test_ttl_expiry() -> None:
    clock = FakeClock()
    lookup = CountingLookup({"a.example": ["93.184.216.34"]})
    r = CachingResolver(ttl_s=300.0, clock=clock, lookup=lookup)
    assert r.resolve("a.example") == "93.184.216.34"
    clock.t += 299.0
    assert r.resolve("a.example") == "93.184.216.34"
    assert len(lookup.calls) == 1
    lookup.answers["a.example"] = ["93.184.216.35"]
    clock.t += 2.0
    assert r.resolve("a.example") == "93.184.216.35"
    assert len(lookup.calls) == 2
    assert (r.hits, r.misses, r.failures) == (1, 2, 0)


def test_negative_caching() -> None:
    clock = FakeClock()
    lookup = CountingLookup({})
    r = CachingResolver(negative_ttl_s=60.0, clock=clock, lookup=lookup)
    for _ in range(3):
        with pytest.raises(DNSError) as ei:
            r.resolve("nope.example")
        assert ei.value.kind == "nxdomain"
    assert len(lookup.calls) == 1
    assert r.failures == 1 and r.hits == 2
    clock.t += 61.0
    lookup.answers["nope.example"] = ["93.184.216.34"]
    assert r.resolve("nope.example") == "93.184.216.34"
    assert len(lookup.calls) == 2


def test_cached_error_is_a_fresh_exception_each_time() -> None:
    r = CachingResolver(lookup=CountingLookup({}))
    errors = []
    for _ in range(2):
        try:
            r.resolve("nope.example")
        except DNSError as e:
            errors.append(e)
    assert errors[0] is not errors[1]
    assert isinstance(errors[1], OSError)


def test_max_entries_lru() -> None:
    lookup = CountingLookup({f"h{i}.example": [f"93.184.216.{i}"] for i in range(10)})
    r = CachingResolver(max_entries=3, lookup=lookup)
    for i in range(5):
        r.resolve(f"h{i}.example")
    assert len(r) == 3
    r.resolve("h0.example")  # evicted, looked up again
    assert lookup.calls.count("h0.example") == 2


def test_concurrent_lookups_coalesce() -> None:
    lookup = CountingLookup({"slow.example": ["93.184.216.34"]}, delay_s=0.2)
    r = CachingResolver(lookup=lookup)
    results: list[str] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        results.append(r.resolve("slow.example"))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert results == ["93.184.216.34"] * 8
    assert lookup.calls == ["slow.example"]
    assert r.misses == 1 and r.coalesced + r.hits == 7


def test_concurrent_failures_coalesce() -> None:
    lookup = CountingLookup({}, delay_s=0.2)
    r = CachingResolver(lookup=lookup)
    errors: list[str] = []

    def worker() -> None:
        try:
            r.resolve("gone.example")
        except DNSError as e:
            errors.append(e.kind)

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert errors == ["nxdomain"] * 5
    assert len(lookup.calls) == 1


@pytest.mark.parametrize(
    ("ip", "forbidden"),
    [
        ("93.184.216.34", False),
        ("8.8.8.8", False),
        ("1.1.1.1", False),
        ("10.0.0.1", True),
        ("172.16.5.4", True),
        ("172.32.0.1", False),
        ("192.168.1.1", True),
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("169.254.169.254", True),  # cloud metadata
        ("0.0.0.0", True),
        ("0.1.2.3", True),
        ("100.64.0.1", True),  # CGNAT
        ("224.0.0.1", True),
        ("239.255.255.250", True),
        ("240.0.0.1", True),
        ("255.255.255.255", True),
        ("192.0.2.1", True),  # TEST-NET-1
        ("198.18.0.1", True),
        ("2606:4700:4700::1111", False),
        ("::1", True),
        ("::", True),
        ("fe80::1", True),
        ("fe80::1%eth0", True),
        ("fc00::1", True),
        ("fd12:3456::1", True),
        ("ff02::1", True),
        ("2001:db8::1", True),  # documentation
        ("::ffff:127.0.0.1", True),
        ("::ffff:10.1.2.3", True),
        ("::ffff:8.8.8.8", False),
        ("64:ff9b::7f00:1", True),  # NAT64 of 127.0.0.1
        ("2002:7f00:1::1", True),  # 6to4 of 127.0.0.1
        ("not-an-ip", True),
        ("", True),
    ],
)
def test_forbidden_ranges(ip: str, forbidden: bool) -> None:
    assert is_forbidden_ip(ip, allow_private=False) is forbidden


@pytest.mark.parametrize("ip", ["127.0.0.1", "10.0.0.1", "::1", "::ffff:192.168.0.1"])
def test_allow_private_allows(ip: str) -> None:
    assert is_forbidden_ip(ip, allow_private=True) is False
    assert is_forbidden_ip("garbage", allow_private=True) is True


def test_resolver_refuses_forbidden_results() -> None:
    lookup = CountingLookup({"evil.example": ["10.0.0.5"], "mixed.example": ["10.0.0.5",
                                                                             "93.184.216.34"]})
    r = CachingResolver(lookup=lookup, static={"sbx.test": "127.0.0.2"})
    with pytest.raises(ForbiddenAddressError, match=r"private address 10\.0\.0\.5"):
        r.resolve("evil.example")
    with pytest.raises(ForbiddenAddressError):
        r.resolve("sbx.test")
    with pytest.raises(ForbiddenAddressError):
        r.resolve("127.0.0.1")  # IP literal
    assert r.resolve("mixed.example") == "93.184.216.34"  # first allowed address
    assert r.resolve("93.184.216.34") == "93.184.216.34"


def test_allow_private_resolver() -> None:
    r = CachingResolver(allow_private=True, lookup=CountingLookup({"in.example": ["10.0.0.5"]}))
    assert r.resolve("in.example") == "10.0.0.5"
    assert r.resolve("[::1]") == "::1"


def test_real_localhost() -> None:
    addrs = system_lookup("localhost")
    assert addrs and addrs[0] in ("127.0.0.1", "::1")
    r = CachingResolver(allow_private=True)
    ip = r.resolve("localhost")
    assert ip in ("127.0.0.1", "::1")
    assert r.resolve("localhost") == ip
    assert r.misses == 1 and r.hits == 1
    with pytest.raises(ForbiddenAddressError):
        CachingResolver().resolve("localhost")


def test_real_nxdomain() -> None:
    r = CachingResolver()
    with pytest.raises(DNSError):
        r.resolve("no-such-host.invalid")
    assert r.failures == 1


def test_wildcard_static_entry_answers_every_subdomain_not_the_domain() -> None:
    r = CachingResolver(static={"*.Farm.test": "127.0.0.9", "exact.farm.test": "127.0.0.3"},
                        allow_private=True)
    assert r.resolve("s1.farm.test") == "127.0.0.9"
    assert r.resolve("a.b.farm.test.") == "127.0.0.9"
    assert r.resolve("exact.farm.test") == "127.0.0.3"  # an exact entry wins
    with pytest.raises(DNSError):
        CachingResolver(static={"*.farm.test": "127.0.0.9"}, allow_private=True,
                        lookup=lambda _h: []).resolve("farm.test")
