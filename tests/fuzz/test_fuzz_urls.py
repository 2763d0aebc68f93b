"""URL canonicalization under hypothesis: for any str (lone surrogates, controls, odd schemes,
hosts and escapes) and any base, :func:`frontier.urls.canonicalize` returns a canonical URL or
raises :class:`~frontier.urls.InvalidURL` with a reason, and a canonical URL is a fixed point
that re-parses to itself (properties in tests/fuzz/properties.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier import urls
from tests.fuzz import properties
from tests.fuzz.properties import PropertyFailed, check_canonicalize
from tests.fuzz.strategies import BASES, FUZZ, URLS


@settings(FUZZ, max_examples=800)
@given(URLS, BASES)
def test_canonicalize_any_str(url: str, base: str | None) -> None:
    check_canonicalize(url, base)


@settings(FUZZ, max_examples=200)
@given(URLS, BASES, st.integers(min_value=10, max_value=300))
def test_canonicalize_short_max_length(url: str, base: str | None, max_length: int) -> None:
    """A small cap rejects with "too long" rather than returning an over-long URL."""
    check_canonicalize(url, base, max_length=max_length)


def test_every_kind_of_outcome_is_reached() -> None:
    """The generators reach both sides of the contract, and each documented reason."""
    seen = {check_canonicalize(u, b) for u, b in [
        ("http://a.example/%7e", None), ("mailto:x@y", None), ("/rel", None),
        ("http://[::1", None), ("http://./", None), ("http://a/" + "x" * 3000, None)]}
    assert seen == {"ok", "rejected:unsupported", "rejected:relative", "rejected:unparseable",
                    "rejected:empty", "rejected:too"}


def test_checker_catches_a_canonicalizer_that_is_not_idempotent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a double-encoding bug (``%`` escaped on every pass) is caught."""
    monkeypatch.setattr(urls, "_RAW", re.compile(r"[%^|`{}\\ \"<>]"))
    monkeypatch.setattr(urls, "_RAW_TABLE", {**urls._RAW_TABLE, ord("%"): "%25"})
    assert properties.canonicalize is urls.canonicalize  # the checker runs the patched code
    with pytest.raises(PropertyFailed, match="not idempotent"):
        check_canonicalize("http://a.example/%25")


@pytest.mark.parametrize("url", [
    "http://example.com/.;SID=", "http://example.com/a/..;jsessionid=x/b",
    "http://example.com/a/.;jsessionid=x", "http://example.com/..;sid=1?q=1"])
def test_a_dot_segment_left_by_session_id_stripping_is_resolved(url: str) -> None:
    """Found by the fuzzing in CI: ".;SID=" stripped to "." gave "http://example.com/.",
    which a parser re-reads as "http://example.com/" (not a fixed point)."""
    assert check_canonicalize(url) == "ok"
