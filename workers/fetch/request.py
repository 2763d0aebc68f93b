"""What both fetchers share: settings, address checks, the request's headers, the response head.

Why one place: :class:`~workers.fetch.fetcher.Fetcher` (urllib3, threads) and
:class:`~workers.fetch.aio.AsyncFetcher` (aiohttp, one event loop) must send byte-for-byte the
same request to the same checked IP and read a response head into the same
:class:`FetchResult`; what differs is only the transport.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Mapping
from urllib.parse import urljoin

from frontier.memo import BoundedMemo
from workers.dns.policy import AddressPolicy
from workers.dns.resolver import DNSError, ForbiddenAddressError, Resolver

from .prepare import _hostname, _merge_headers, _prepare_url, _redirect_location_error, _Target
from .response import _media_type
from .result import ROBOTS_MAX_REDIRECTS, FetchResult

_REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))

class BodyAction(enum.Enum):
    """What a response head says to do with its body (see :meth:`_FetchBase._head`)."""

    READ = "read"
    #: a redirect's body: read undecoded up to the cap and dropped
    DRAIN = "drain"
    #: a media type the crawl does not download: the connection is dropped instead
    SKIP = "skip"


class _FetchBase:
    """Settings and per-request logic common to both fetchers (no transport here)."""

    def _init_common(self, resolver: Resolver, user_agent: str, connect_timeout_s: float,
                     read_timeout_s: float, total_timeout_s: float, max_bytes: int,
                     allowed_content_types: Iterable[str], allow_private: bool,
                     allowed_networks: Iterable[str], verify: bool | str,
                     allow_missing_content_type: bool, accept: str,
                     extra_ca: str | None) -> None:
        self.resolver = resolver
        self.user_agent = user_agent
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.total_timeout_s = total_timeout_s
        self.max_bytes = max_bytes
        types = [t.strip().lower() for t in allowed_content_types]
        self._types_exact = frozenset(t for t in types if not t.endswith("/*"))
        self._types_prefix = tuple(t[:-1] for t in types if t.endswith("/*"))
        self.allow_private = allow_private
        #: the address policy (SSRF guard) every IP is checked against before connecting
        self.policy = AddressPolicy.of(allow_private, allowed_networks)
        self.verify = verify
        self.allow_missing_content_type = allow_missing_content_type
        self.accept = accept
        self.extra_ca = extra_ca
        #: the policy's refusal per IP string ("" = allowed): a pure function of the IP
        self._refusals: BoundedMemo[str, str] = BoundedMemo(65_536)

    def content_type_allowed(self, media_type: str | None) -> bool:
        if media_type is None:
            return self.allow_missing_content_type
        return media_type in self._types_exact or media_type.startswith(self._types_prefix)

    @staticmethod
    def _target(res: FetchResult, url: str) -> _Target | None:
        """The prepared URL, or None with ``res.error`` = invalid_url."""
        try:
            return _prepare_url(url)
        except Exception as e:
            res.error, res.error_detail = "invalid_url", str(e)
            return None

    def _resolve(self, res: FetchResult, host: str) -> str | None:
        """The resolver's IP for ``host`` (blocking), or None with ``res``'s error set."""
        try:
            return self.resolver.resolve(host)
        except ForbiddenAddressError as e:
            res.error, res.error_detail = "forbidden_ip", f"{e.reason} for {e.host}"
            res.ip = e.ip or None
        except DNSError as e:
            res.error, res.error_detail = "dns", f"{e.kind}: {e}"
        except Exception as e:  # a broken resolver must not break the no-raise contract
            res.error, res.error_detail = "dns", repr(e)
        return None

    def _check_ip(self, res: FetchResult, host: str, ip: str) -> str | None:
        """``ip`` if it may be connected to, else None with ``res``'s error (forbidden_ip,
        the policy's reason). Called with the very IP the connection is then opened to,
        whoever resolved it: no second lookup happens between this check and the connect
        (a DNS answer that changes in between, DNS rebinding, cannot slip past it)."""
        res.ip = ip
        refusal = self._refusals.get(ip)
        if refusal is None:
            refusal = self._refusals.put(ip, self.policy.refusal(ip) or "")
        if refusal:
            res.error, res.error_detail = "forbidden_ip", f"{refusal} for {host}"
            return None
        return ip

    def _request_headers(self, host: str, port: int | None, default_port: int,
                         extra_headers: Mapping[str, str] | None) -> dict[str, str]:
        """The GET's headers: Host (with a port only when not the scheme's), our identity."""
        host_header = host if port in (None, default_port) else f"{host}:{port}"
        headers: dict[str, str] = {
            "Host": host_header,
            "User-Agent": self.user_agent,
            "Accept": self.accept,
            "Accept-Encoding": "gzip, deflate",
            "Connection": "keep-alive",
        }
        if extra_headers:
            headers = _merge_headers(headers, extra_headers)
        return headers

    def _head(self, res: FetchResult, status: int, reason: str, http_version: str,
              headers: list[tuple[str, str]], location: str | None,
              content_type: str | None, filter_types: bool) -> BodyAction:
        """Record a response head in ``res``; what to do with the body.

        ``location``/``content_type``: the header's values joined with ", " (as urllib3's
        ``HTTPHeaderDict.get`` gives them). Raises what requests raised for a bad redirect
        Location (the caller makes it a fetch_error). ``SKIP`` sets content_type_skipped: the
        caller drops the connection rather than download the body.
        """
        redirect = bool(location) and status in _REDIRECT_STATUSES
        if redirect:
            err = _redirect_location_error(location or "")
            if err is not None:
                raise err
        res.status = status
        res.reason = reason
        res.http_version = http_version
        res.headers = headers
        res.content_type = _media_type(content_type)
        if 300 <= status < 400:
            res.location = location
        elif filter_types and not self.content_type_allowed(res.content_type):
            res.error = "content_type_skipped"
            res.error_detail = f"content type {res.content_type!r} not allowed"
            return BodyAction.SKIP
        return BodyAction.DRAIN if redirect else BodyAction.READ


class RobotsHops:
    """The redirects of one robots.txt fetch (RFC 9309 §2.3.1.2), for both fetchers: each
    hop's URL (``current``) and IP (the given one for the first host only: another host is
    resolved and checked anew), when to stop (not a redirect, an error, or past
    ``ROBOTS_MAX_REDIRECTS``), and the result's ``redirects``, ``started_at`` and
    ``elapsed_s`` over all hops. The caller fetches and waits between hops."""

    def __init__(self, url: str, ip: str | None) -> None:
        self.current = url
        self._ip = ip
        self._first_host = _hostname(url)
        self._chain: list[str] = []
        self._started = time.time()
        self._elapsed = 0.0

    @property
    def ip(self) -> str | None:
        """The IP to fetch ``current`` on (None: resolve it)."""
        return self._ip if _hostname(self.current) == self._first_host else None

    def follow(self, res: FetchResult) -> bool:
        """After fetching ``current``: True if ``res`` redirects to a hop to fetch next (now
        ``current``), False if ``res`` ends the fetch (then pass it to :meth:`result`)."""
        self._elapsed += res.elapsed_s
        if not res.is_redirect or res.error is not None:
            return False
        assert res.location is not None
        if len(self._chain) >= ROBOTS_MAX_REDIRECTS:
            res.error = "too_many_redirects"
            res.error_detail = f"more than {ROBOTS_MAX_REDIRECTS} redirects"
            return False
        self._chain.append(self.current)
        self.current = urljoin(self.current, res.location.strip())
        return True

    def result(self, res: FetchResult) -> FetchResult:
        res.redirects = self._chain
        res.started_at = self._started
        res.elapsed_s = self._elapsed
        return res
