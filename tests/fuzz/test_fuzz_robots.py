"""robots.txt parsing under hypothesis: any bytes (random, mutated real files, lines of odd
keys and values) parse, every path gets a yes/no, and the decisions survive the Redis cache
form and lines RFC 9309 §2.1 says to ignore (properties in tests/fuzz/properties.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz import properties
from tests.fuzz.properties import PropertyFailed, check_robots
from tests.fuzz.strategies import FUZZ, PATHS, ROBOTS
from workers.pipeline import robots_rules


@settings(FUZZ, max_examples=300)
@given(ROBOTS, PATHS, st.lists(st.integers(min_value=0, max_value=200), max_size=4))
def test_robots_any_bytes(body: bytes, paths: list[str], noise_at: list[int]) -> None:
    check_robots(body, paths, noise_at)


def test_over_the_cap_is_truncated_and_still_parsed() -> None:
    body = b"User-agent: *\nDisallow: /private\n" + b"# filler\n" * 60_000
    assert check_robots(body, ["/private/x", "/public"], [1]) == "blocks-some"


def test_checker_catches_a_parser_that_ends_groups_on_unknown_lines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the §2.1 mistake protego made (an unknown line ends the group, so
    the agents above it lose the rules below) is caught by the noise-line property."""
    real = robots_rules.parse_rules

    def protego_like(text: str) -> robots_rules.RobotsRules:
        kept = []
        for line in text.splitlines():
            if line.startswith("X-Fuzz-Noise"):
                kept.append("Disallow:")  # ends the run of User-agent lines, as protego did
            else:
                kept.append(line)
        return real("\n".join(kept))

    monkeypatch.setattr(properties, "parse_rules", protego_like)
    body = b"User-agent: trawl\nUser-agent: googlebot\nDisallow: /private\n"
    with pytest.raises(PropertyFailed, match="ignorable lines"):
        check_robots(body, ["/private"], [1])
