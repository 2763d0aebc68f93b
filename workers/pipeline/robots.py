"""robots.txt policy (RFC 9309), built from a fetch outcome.

The rules themselves (groups, product tokens, path matching) are read by
:mod:`workers.pipeline.robots_rules`, which says why that is no longer protego.

Status rules (RFC 9309 §2.3.1):

* 2xx: parse the first :data:`ROBOTS_MAX_BYTES` (500 KiB, the RFC's minimum).
  A partial last line after the cut is dropped, so a cut ``Disallow: /private`` cannot turn
  into ``Disallow: /p``. Body decoded as UTF-8 with ``errors="replace"``, BOM stripped.
* 3xx left after the fetcher's 5 redirects, and 4xx (except 429): "unavailable" in RFC terms,
  so everything is allowed (``kind="allow_all_4xx"``).
* 5xx, 429 (Google's choice: a rate limit is the server saying "not now") and no response at
  all (``status=None``): "unreachable", so everything is disallowed (``kind="unavailable"``)
  and the policy is kept only ``error_ttl_s`` before a retry (see :func:`ttl_for`).
* A body the parser fails on: allow all (``kind="unparseable"``, with ``reason``). The parser
  reads any text, so this is a guard, not an expected outcome.

Parsing costs a few ms for the largest real files (en.wikipedia.org, linkedin.com), so
parsed rule sets are kept in a small per-process LRU keyed by the xxh64 of the text; a policy
restored from Redis with :meth:`RobotsPolicy.from_bytes` re-parses only on a cache miss.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import xxhash

from frontier.config import CrawlConfig
from frontier.urls import InvalidURL, canonicalize
from frontier.useragent import ROBOTS_TOKEN, user_agent
from workers.fetch.result import (
    ROBOTS_FETCH_BYTES,
    ROBOTS_MAX_BYTES,
    FetchResult,
)
from workers.pipeline.robots_rules import RobotsRules, parse_rules

__all__ = [
    "ROBOTS_MAX_BYTES",
    "RobotsPolicy",
    "robots_command",
    "ttl_for",
]

KINDS = ("parsed", "allow_all_4xx", "unavailable", "unparseable")
# The cache keeps the text, not parsed rules, so a change of parser needs no new tag.
_FORMAT = b"R1"
_CACHE_SIZE = 256

_cache: OrderedDict[bytes, RobotsRules] = OrderedDict()
_cache_lock = threading.Lock()


def _parse_cached(text: str) -> RobotsRules:
    """Parse with a per-process LRU keyed by content hash (raises what the parser raises)."""
    key = xxhash.xxh64_digest(text.encode("utf-8", "surrogatepass"))
    with _cache_lock:
        rp = _cache.get(key)
        if rp is not None:
            _cache.move_to_end(key)
            return rp
    rp = parse_rules(text)
    with _cache_lock:
        _cache[key] = rp
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return rp


def robots_sitemaps(text: str) -> list[str]:
    """The URLs of the ``Sitemap:`` lines of a robots.txt (they stand outside the groups;
    the key in any case, RFC 9309 §2.2.4)."""
    out = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "sitemap":
            value = value.split("#", 1)[0].strip()
            if value:
                out.append(value)
    return out


@functools.lru_cache(maxsize=256)
def _sitemaps_cached(text: str) -> frozenset[str]:
    """Canonical URLs of the Sitemap: lines, as leased entries spell them."""
    out = set()
    for url in robots_sitemaps(text):
        try:
            out.add(canonicalize(url))
        except InvalidURL:
            continue
    return frozenset(out)


def _truncate(body: bytes) -> tuple[bytes, bool]:
    if len(body) <= ROBOTS_MAX_BYTES:
        return body, False
    cut = body[:ROBOTS_MAX_BYTES]
    nl = max(cut.rfind(b"\n"), cut.rfind(b"\r"))
    return (cut[: nl + 1] if nl >= 0 else cut), True


@dataclass
class RobotsPolicy:
    """What robots.txt lets us fetch on one host (scheme+authority)."""

    kind: str
    text: str = ""
    reason: str | None = None
    truncated: bool = False
    _rp: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.reason:  # one line, so to_bytes() can keep it in its header
            self.reason = self.reason.replace("\r", " ").replace("\n", " ")

    @classmethod
    def from_response(
        cls, status: int | None, body: bytes | None, error: str | None = None
    ) -> RobotsPolicy:
        """Policy for a robots.txt fetch: final HTTP status (None = no response), body, error."""
        if status is None:
            return cls("unavailable", reason=error or "unreachable")
        if 200 <= status < 300:
            return cls.from_text_bytes(body or b"")
        if status == 429:
            return cls("unavailable", reason="HTTP 429")
        if 300 <= status < 500:
            return cls("allow_all_4xx", reason=f"HTTP {status}")
        return cls("unavailable", reason=f"HTTP {status}" + (f": {error}" if error else ""))

    @classmethod
    def from_fetch(cls, res: FetchResult) -> RobotsPolicy:
        """Policy for a robots.txt fetch. A 2xx body the network cut short (reset, closed
        early, out of time) is a failed fetch, "unreachable": the lost part may hold the
        Disallow lines, so nothing is allowed until a retry after ``robots_error_ttl_s``."""
        if res.network_cut:
            return cls("unavailable", reason=f"body cut short ({res.cut_reason}): "
                                             f"{res.error or 'incomplete'}")
        if res.status is None and res.error and res.error_detail:
            # no response at all: the class alone ("tls_error") cannot say which failure
            # (an expired certificate, another host's, a refused connection): keep its detail
            return cls("unavailable", reason=f"{res.error}: {res.error_detail}"[:500])
        return cls.from_response(res.status, res.body, res.error)

    @classmethod
    def from_text_bytes(cls, body: bytes) -> RobotsPolicy:
        """Parse a robots.txt body (2xx); never raises."""
        raw, truncated = _truncate(body)
        text = raw.decode("utf-8", errors="replace")
        if text.startswith("\ufeff"):
            text = text[1:]
        return cls._from_text(text, truncated)

    @classmethod
    def _from_text(cls, text: str, truncated: bool) -> RobotsPolicy:
        try:
            rp = _parse_cached(text)
        except Exception as exc:  # the parser failing on garbage: allow all, say why
            return cls("unparseable", text=text, truncated=truncated,
                       reason=f"{type(exc).__name__}: {exc}"[:200])
        return cls("parsed", text=text, truncated=truncated, _rp=rp)

    def allowed(self, url: str, agent: str = ROBOTS_TOKEN) -> bool:
        if self.kind == "unavailable":
            return False
        if self.kind != "parsed":
            return True
        try:
            return bool(self._rp.allowed(url, agent))
        except Exception:  # a URL the matcher chokes on: don't fetch what we can't check
            return False

    def sitemaps(self) -> frozenset[str]:
        """The URLs of its ``Sitemap:`` lines (read as sitemaps when fetched)."""
        return _sitemaps_cached(self.text) if self.text else frozenset()

    def crawl_delay(self, agent: str = ROBOTS_TOKEN) -> float | None:
        if self.kind != "parsed":
            return None
        try:
            delay = self._rp.crawl_delay(agent)
        except Exception:
            return None
        return None if delay is None else float(delay)

    def to_bytes(self) -> bytes:
        """``R1|kind|truncated|reason\\n`` + the (truncated) text, for the Redis cache."""
        reason = (self.reason or "").replace("\n", " ").replace("\r", " ")
        head = f"{self.kind}|{int(self.truncated)}|{reason}".encode()
        return _FORMAT + b"|" + head + b"\n" + self.text.encode("utf-8", "surrogatepass")

    @classmethod
    def from_bytes(cls, data: bytes) -> RobotsPolicy:
        head, _, body = data.partition(b"\n")
        fmt, kind, trunc, reason = head.decode().split("|", 3)
        if fmt != _FORMAT.decode() or kind not in KINDS:
            raise ValueError(f"not a serialized RobotsPolicy: {head[:40]!r}")
        text = body.decode("utf-8", "surrogatepass")
        if kind == "parsed":
            policy = cls._from_text(text, trunc == "1")
            policy.reason = reason or None
            return policy
        return cls(kind, text=text, reason=reason or None, truncated=trunc == "1")


def ttl_for(policy: RobotsPolicy, ok_ttl_s: float = CrawlConfig.robots_ttl_s,
            error_ttl_s: float = CrawlConfig.robots_error_ttl_s) -> float:
    """How long to cache a policy: errors (5xx/unreachable) are retried soon, the rest daily."""
    return error_ttl_s if policy.kind == "unavailable" else ok_ttl_s


def fetch_policy(url: str, timeout_s: float = 10.0, allow_private: bool = False,
                 allowed_networks: Sequence[str] = ()) -> RobotsPolicy:
    """Fetch robots.txt the way a worker does (the crawl's fetcher: its address policy, the
    body cap, RFC 9309's five redirects) and apply the status rules, so ``trawl robots URL``
    shows the decision the crawl would make. A private, loopback or link-local address is
    refused unless ``allow_private`` or ``allowed_networks`` let it through."""
    from workers.dns.resolver import CachingResolver
    from workers.fetch import Fetcher

    resolver = CachingResolver(allow_private=allow_private, allowed_networks=allowed_networks)
    fetcher = Fetcher(resolver, user_agent(), connect_timeout_s=timeout_s,
                      read_timeout_s=timeout_s, total_timeout_s=timeout_s,
                      allow_private=allow_private, allowed_networks=allowed_networks)
    try:
        res = fetcher.fetch_robots(url)
    finally:
        fetcher.close()
    if res.error == "forbidden_ip":
        return RobotsPolicy("unavailable", reason=f"address refused: {res.error_detail or url} "
                            "(private, loopback or link-local: --allow-private to fetch it)")
    return RobotsPolicy.from_fetch(res)


def robots_command(
    source: str, urls: list[str], agent: str = ROBOTS_TOKEN, as_json: bool = False,
    out: IO[str] = sys.stdout, allow_private: bool = False,
) -> int:
    """``trawl robots SOURCE URL...``: SOURCE is a robots.txt file or an http(s) URL.

    Prints one line per URL (``allowed``/``disallowed`` and the crawl-delay), or with
    ``as_json`` one JSON object per line. Returns the exit code (2 if SOURCE is unreadable).
    """
    if source.startswith(("http://", "https://")):
        policy = fetch_policy(source, allow_private=allow_private)
    else:
        try:
            with open(source, "rb") as fh:
                body = fh.read(ROBOTS_FETCH_BYTES)
        except OSError as exc:
            print(f"trawl robots: cannot read {source}: {exc}", file=sys.stderr)
            return 2
        policy = RobotsPolicy.from_response(200, body, None)
    delay = policy.crawl_delay(agent)
    if not as_json:
        note = f" ({policy.reason})" if policy.reason else ""
        print(f"# {source}: {policy.kind}{note}, agent {agent!r}", file=out)
    for url in urls:
        ok = policy.allowed(url, agent)
        if as_json:
            print(json.dumps({"url": url, "allowed": ok, "crawl_delay": delay}), file=out)
        else:
            shown = "none" if delay is None else f"{delay:g}s"
            print(f"{'allowed   ' if ok else 'disallowed'} {url}  crawl-delay={shown}", file=out)
    return 0
