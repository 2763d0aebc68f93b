"""Which URLs a crawl admits: the stateless URL filter that runs before URL-seen.

:meth:`Scope.check` is the one call per extracted link: it returns None (admitted) or a short
reason, used as a counter-name suffix (``links_<reason>``). Checks run cheapest and most
common first:

=========================  ===============================================================
``url_too_long``           ``len(url) > max_url_length`` (0 = off)
``denied_domain``          the host or one of its parent domains is in ``denied_domains``
                           (wins over allowed)
``dropped_domain``         the same for a domain an operator dropped from the running crawl
                           (``trawl drop``, frontier/dropped.py; :meth:`Scope.set_dropped`)
``out_of_scope``           ``allowed_domains`` is set and neither the host nor a parent is in it
``too_deep``               ``depth > max_depth`` (0 = unlimited)
``deny_pattern``           a ``deny_url_patterns`` regex matches (``re.search``)
``not_allowed_pattern``    ``allow_url_patterns`` is set and none matches
``trap_*``                 :mod:`frontier.traps` (path depth, repeated segments, query
                           parameters, calendar)
=========================  ===============================================================

Stateful limits (``max_pages_per_host``/``_domain``, ``max_query_variants_per_path``, the
domain budget) need counts and are applied at admission, keyed by
:func:`frontier.psl.registered_domain`; they are not here.

Domain matching walks the host's suffixes (``a.b.example.com``, ``b.example.com``,
``example.com``, ``com``) against sets, so its cost depends on the host's label count, not
on how many domains are configured.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Iterable

from frontier.config import E_BAD_VALUE, ConfigError, CrawlConfig
from frontier.keys import host_name
from frontier.memo import BoundedMemo
from frontier.psl import ascii_host
from frontier.traps import trap_reason

__all__ = ["HOST_MEMO_SIZE", "REASONS", "Scope"]

#: Hosts whose scope answer is memoized (a few MB at most).
HOST_MEMO_SIZE = 65536

#: Every reason :meth:`Scope.check` can return.
REASONS = ("url_too_long", "denied_domain", "dropped_domain", "out_of_scope", "too_deep",
           "deny_pattern", "not_allowed_pattern", "trap_path_depth", "trap_repeated_segments",
           "trap_query_params", "trap_calendar")


def _domain_set(domains: Iterable[str]) -> frozenset[str]:
    out = set()
    for d in domains:
        d = d.strip().strip(".").lower()
        if not d:
            continue
        out.add(ascii_host(d))
    return frozenset(out)


def _compile(name: str, patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for p in patterns:
        try:
            compiled.append(re.compile(p))
        except (re.error, TypeError) as exc:
            raise ConfigError(E_BAD_VALUE.format(
                name=name, value=p, why=f"not a valid regular expression ({exc})")) from None
    return tuple(compiled)


def _year_end(year: int) -> float:
    """Epoch seconds at which ``year`` ends (UTC)."""
    return float(calendar.timegm((year + 1, 1, 1, 0, 0, 0)))


class Scope:
    """The crawl's URL filter; build once per worker (regexes compiled here)."""

    def __init__(
        self,
        allowed_domains: Iterable[str],
        max_depth: int,
        *,
        denied_domains: Iterable[str] = (),
        allow_url_patterns: Iterable[str] = (),
        deny_url_patterns: Iterable[str] = (),
        max_url_length: int = 0,
        max_path_segments: int = 0,
        max_segment_repeats: int = 0,
        max_query_params: int = 0,
        calendar_window_years: int = 0,
        now_year: int | None = None,
    ) -> None:
        self.allowed = _domain_set(allowed_domains)
        self._host_memo: BoundedMemo[str, str | None] = BoundedMemo(HOST_MEMO_SIZE)
        self.denied = _domain_set(denied_domains)
        #: domains dropped from the running crawl (``set_dropped``), already in ASCII form
        self.dropped: frozenset[str] = frozenset()
        self.domains = tuple(sorted(self.allowed))  # kept for callers that list them
        self.max_depth = max_depth
        self.allow_patterns = _compile("allow_url_patterns", allow_url_patterns)
        self.deny_patterns = _compile("deny_url_patterns", deny_url_patterns)
        self.max_url_length = max_url_length
        self.max_path_segments = max_path_segments
        self.max_segment_repeats = max_segment_repeats
        self.max_query_params = max_query_params
        self.calendar_window_years = calendar_window_years
        self._year = now_year if now_year is not None else time.gmtime().tm_year
        self._year_ends_at = float("inf") if now_year is not None else _year_end(self._year)

    @classmethod
    def from_config(cls, cfg: CrawlConfig, now_year: int | None = None) -> Scope:
        """All of the crawl's stateless scope settings; ``now_year`` pins the year (tests)."""
        return cls(
            cfg.allowed_domains, cfg.max_depth,
            denied_domains=cfg.denied_domains,
            allow_url_patterns=cfg.allow_url_patterns,
            deny_url_patterns=cfg.deny_url_patterns,
            max_url_length=cfg.max_url_length,
            max_path_segments=cfg.max_path_segments,
            max_segment_repeats=cfg.max_segment_repeats,
            max_query_params=cfg.max_query_params,
            calendar_window_years=cfg.calendar_window_years,
            now_year=now_year,
        )

    @property
    def now_year(self) -> int:
        """The current UTC year (re-read when the year ends: workers live across new year)."""
        if time.time() >= self._year_ends_at:
            self._year = time.gmtime().tm_year
            self._year_ends_at = _year_end(self._year)
        return self._year

    def host_reason(self, host: str) -> str | None:
        """None, ``denied_domain`` or ``out_of_scope`` for a politeness key ``name[:port]``.

        Answers are memoized per host (links of a page mostly share a few hosts); the memo is
        dropped whole when it reaches :data:`HOST_MEMO_SIZE` entries.
        """
        if not self.denied and not self.allowed and not self.dropped:
            return None
        memo = self._host_memo
        try:
            return memo[host]
        except KeyError:
            return memo.put(host, self._host_reason(host))

    def set_dropped(self, domains: frozenset[str]) -> None:
        """The domains dropped from the running crawl now (ASCII, as frontier/dropped.py keeps
        them); the host memo is emptied, since its answers may have changed."""
        self.dropped = domains
        self._host_memo.clear()

    def _host_reason(self, host: str) -> str | None:
        name = host_name(host).lower()
        allowed = not self.allowed
        denied, allow_set, dropped = self.denied, self.allowed, self.dropped
        start = 0
        while True:
            suffix = name[start:] if start else name
            if suffix in denied:
                return "denied_domain"
            if suffix in dropped:
                return "dropped_domain"
            if not allowed and suffix in allow_set:
                allowed = True
                if not denied and not dropped:
                    return None
            dot = name.find(".", start)
            if dot < 0:
                break
            start = dot + 1
        return None if allowed else "out_of_scope"

    def host_allowed(self, host: str) -> bool:
        """``host`` is a politeness key (``name[:port]``); a domain allows its subdomains."""
        return self.host_reason(host) is None

    def depth_allowed(self, depth: int) -> bool:
        """``max_depth`` 0 means unlimited (as the pipeline reads it)."""
        return not self.max_depth or depth <= self.max_depth

    def check(self, url: str, host: str, depth: int) -> str | None:
        """None if the canonical ``url`` (of politeness key ``host``, at link ``depth``) is
        admitted, else the reason (one of :data:`REASONS`)."""
        return self.with_depth(self.url_reasons(url, host), depth)

    def url_reasons(self, url: str, host: str) -> tuple[str | None, str | None]:
        """The depth-independent part of :meth:`check`, which a worker may cache per URL:
        (reason checked before the depth, reason checked after it)."""
        if self.max_url_length and len(url) > self.max_url_length:
            return "url_too_long", None
        reason = self.host_reason(host)
        if reason:
            return reason, None
        return None, self._url_reason(url)

    def with_depth(self, reasons: tuple[str | None, str | None], depth: int) -> str | None:
        """:meth:`check`'s answer from :meth:`url_reasons` and the link's depth."""
        if reasons[0]:
            return reasons[0]
        if self.max_depth and depth > self.max_depth:
            return "too_deep"
        return reasons[1]

    def _url_reason(self, url: str) -> str | None:
        for p in self.deny_patterns:
            if p.search(url):
                return "deny_pattern"
        if self.allow_patterns and not any(p.search(url) for p in self.allow_patterns):
            return "not_allowed_pattern"
        return trap_reason(
            url,
            max_path_segments=self.max_path_segments,
            max_segment_repeats=self.max_segment_repeats,
            max_query_params=self.max_query_params,
            calendar_window_years=self.calendar_window_years,
            now_year=self.now_year,
        )
