"""robots.txt variants the sandbox hosts serve, and how a correct crawler must read each one."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from protego import Protego

#: RFC 9309 §2.5: crawlers must parse at least 500 KiB; the oracle parses exactly that much.
ROBOTS_PARSE_LIMIT = 500 * 1024


class RobotsKind(StrEnum):
    ALLOW_ALL = "allow_all"
    DISALLOW = "disallow"  # Disallow: /private/ for every agent
    AGENT_SPECIFIC = "agent_specific"  # a group for "trawl" disallowing /a/, "*" allows all
    CRAWL_DELAY = "crawl_delay"
    NOT_FOUND = "not_found"  # 404 → allow all
    SERVER_ERROR = "server_error"  # 500 → disallow all
    SLOW = "slow"  # allow-all rules, answered late
    OVERSIZED = "oversized"  # > 500 KiB; a Disallow: /a/ only after the 500 KiB mark
    REDIRECT = "redirect"  # 301 → /robots-real.txt (Disallow: /private/)
    HANG = "hang"  # the hanging host: never answers in time → disallow all


#: Variants every sandbox has at least one host of (the hanging host is chosen separately).
GUARANTEED = (
    RobotsKind.DISALLOW,
    RobotsKind.AGENT_SPECIFIC,
    RobotsKind.CRAWL_DELAY,
    RobotsKind.NOT_FOUND,
    RobotsKind.SERVER_ERROR,
    RobotsKind.SLOW,
    RobotsKind.OVERSIZED,
    RobotsKind.REDIRECT,
)

REAL_ROBOTS_PATH = "/robots-real.txt"
OVERSIZED_LATE_RULE = "Disallow: /a/"


@dataclass(frozen=True)
class RobotsReply:
    status: int
    body: bytes
    location: str | None = None  # for the redirect variant (path on the same host)


def robots_text(kind: RobotsKind, crawl_delay_s: float, oversized_bytes: int) -> bytes:
    """The robots.txt body of a variant (for the redirect variant: the body of the real file)."""
    if kind in (RobotsKind.ALLOW_ALL, RobotsKind.SLOW):
        return b"User-agent: *\nDisallow:\n"
    if kind in (RobotsKind.DISALLOW, RobotsKind.REDIRECT):
        return b"User-agent: *\nDisallow: /private/\n"
    if kind is RobotsKind.AGENT_SPECIFIC:
        return (b"User-agent: trawl\nDisallow: /a/\nDisallow: /private/\n\n"
                b"User-agent: *\nDisallow:\n")
    if kind is RobotsKind.CRAWL_DELAY:
        return f"User-agent: *\nCrawl-delay: {crawl_delay_s:g}\nDisallow:\n".encode()
    if kind is RobotsKind.OVERSIZED:
        return _oversized(oversized_bytes)
    if kind is RobotsKind.NOT_FOUND:
        return b"<html><body><h1>404 Not Found</h1></body></html>\n"
    if kind is RobotsKind.SERVER_ERROR:
        return b"<html><body><h1>500 Internal Server Error</h1></body></html>\n"
    return b""


def _oversized(total: int) -> bytes:
    if total <= ROBOTS_PARSE_LIMIT + 1024:
        raise ValueError(
            f"oversized_robots_bytes={total}: must exceed {ROBOTS_PARSE_LIMIT} + 1024 bytes")
    head = b"User-agent: *\nDisallow: /private/\n"
    filler_line = b"# padding padding padding padding padding padding padding padding padding\n"
    late = OVERSIZED_LATE_RULE.encode() + b"\n"
    n_fill = (total - len(head) - len(late)) // len(filler_line) + 1
    body = head + filler_line * n_fill + late
    assert body.index(late) > ROBOTS_PARSE_LIMIT
    return body


def robots_reply(kind: RobotsKind, crawl_delay_s: float, oversized_bytes: int) -> RobotsReply:
    text = robots_text(kind, crawl_delay_s, oversized_bytes)
    if kind is RobotsKind.NOT_FOUND:
        return RobotsReply(404, text)
    if kind is RobotsKind.SERVER_ERROR:
        return RobotsReply(500, text)
    if kind is RobotsKind.REDIRECT:
        return RobotsReply(301, b"", location=REAL_ROBOTS_PATH)
    return RobotsReply(200, text)


class RobotsRules:
    """What a correct crawler concludes from a host's robots.txt (RFC 9309, parsed by protego)."""

    def __init__(self, kind: RobotsKind, crawl_delay_s: float, oversized_bytes: int) -> None:
        self.kind = kind
        self._disallow_all = kind in (RobotsKind.SERVER_ERROR, RobotsKind.HANG)
        self._allow_all = kind is RobotsKind.NOT_FOUND
        self._parser: Protego | None = None
        if not (self._disallow_all or self._allow_all):
            raw = robots_text(kind, crawl_delay_s, oversized_bytes)[:ROBOTS_PARSE_LIMIT]
            self._parser = Protego.parse(raw.decode("utf-8", "replace"))

    def allowed(self, url: str, user_agent_token: str) -> bool:
        if self._disallow_all:
            return False
        if self._parser is None:
            return True
        return bool(self._parser.can_fetch(url, user_agent_token))

    def crawl_delay(self, user_agent_token: str) -> float | None:
        if self._parser is None:
            return None
        delay = self._parser.crawl_delay(user_agent_token)
        return None if delay is None else float(delay)
