"""frontier.psl: registered domains from the bundled Public Suffix List (offline)."""

from __future__ import annotations

import socket

import pytest

from frontier import psl
from frontier.psl import PSL_VERSION, registered_domain


@pytest.mark.parametrize("host,expected", [
    # ICANN section, multi-label suffixes
    ("www.bbc.co.uk", "bbc.co.uk"),
    ("a.b.c.example.co.uk", "example.co.uk"),
    ("example.com.au", "example.com.au"),
    ("www.example.com", "example.com"),
    ("example.com", "example.com"),
    # wildcard and exception rules (*.kobe.jp with !city.kobe.jp, *.ck with !www.ck)
    ("a.b.kobe.jp", "a.b.kobe.jp"),
    ("www.city.kobe.jp", "city.kobe.jp"),
    ("x.y.ck", "x.y.ck"),
    ("www.ck", "www.ck"),
    # PRIVATE section counts as public: each blog / user site is its own domain
    ("alice.github.io", "alice.github.io"),
    ("www.alice.github.io", "alice.github.io"),
    ("someblog.blogspot.com", "someblog.blogspot.com"),
    ("bucket.s3.amazonaws.com", "bucket.s3.amazonaws.com"),
    # a host that is itself a public suffix, or a single label, is its own domain
    ("co.uk", "co.uk"),
    ("github.io", "github.io"),
    ("localhost", "localhost"),
    # unknown TLDs: the default rule "*"
    ("a.b.test", "b.test"),
    ("host7.sandbox.test", "sandbox.test"),
    ("x.y.internal", "y.internal"),
    # IDN: punycode in, punycode out; Unicode is mapped first; IDN suffixes (xn--p1ai = рф)
    ("www.xn--bcher-kva.de", "xn--bcher-kva.de"),
    ("www.bücher.de", "xn--bcher-kva.de"),
    ("a.b.xn--p1ai", "b.xn--p1ai"),
    ("пример.рф", "xn--e1afmkfd.xn--p1ai"),
    # ports, case, trailing dot
    ("www.example.com:8080", "example.com"),
    ("WWW.Example.COM.", "example.com"),
    ("a.b.test:443", "b.test"),
    # IP literals stay themselves
    ("127.0.0.1", "127.0.0.1"),
    ("10.1.2.3:8080", "10.1.2.3"),
    ("[::1]", "[::1]"),
    ("[2001:db8::1]:8443", "[2001:db8::1]"),
    ("2001:db8::1", "2001:db8::1"),
])
def test_registered_domain(host: str, expected: str) -> None:
    assert registered_domain(host) == expected


def test_private_suffixes_are_on() -> None:
    """The decision is the list's PRIVATE section counts; without it github.io users merge."""
    assert registered_domain("a.github.io") != registered_domain("b.github.io")
    assert registered_domain("a.blogspot.com") != registered_domain("b.blogspot.com")


def test_bundled_snapshot_version() -> None:
    assert PSL_VERSION[:4].isdigit() and PSL_VERSION.endswith("UTC"), PSL_VERSION


def test_no_network_access(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the list and answering never opens a socket (the list ships in the wheel)."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    fresh = psl.PublicSuffixList(accept_unknown=True, only_icann=False)
    assert fresh.privatesuffix("www.example.co.uk") == "example.co.uk"
    registered_domain.cache_clear()
    assert registered_domain("news.example.org") == "example.org"


def test_cached() -> None:
    registered_domain.cache_clear()
    registered_domain("www.example.net")
    registered_domain("www.example.net")
    assert registered_domain.cache_info().hits >= 1
