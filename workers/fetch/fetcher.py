"""The :class:`Fetcher`: one GET, bounded in size and time, to a pre-resolved, checked IP."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from urllib3.util.retry import Retry
from urllib3.util.timeout import Timeout

from frontier.config import DEFAULT_CONTENT_TYPES, CrawlConfig
from workers.dns.resolver import Resolver

from .classify import _classify, describe
from .deadline import _WATCHDOG, _current, _Deadline
from .pinned import _PinnedPoolManager
from .request import BodyAction, RobotsHops, _FetchBase
from .response import _HTTP_VERSIONS, _discard, _drain, _read_body
from .result import ROBOTS_FETCH_BYTES, FetchResult, truncation_of
from .tls import pool_tls_kwargs

#: What requests' HTTPAdapter passed (``max_retries=0``): connect errors come back as
#: MaxRetryError(reason=...), read errors raise as they are; nothing is ever retried.
_NO_RETRIES = Retry(0, read=False)


class Fetcher(_FetchBase):
    """GETs URLs over pooled keep-alive connections to pre-resolved, checked IPs.

    ``max_bytes`` caps the *decoded* body. Decompression bombs: urllib3 (>= 2.6) inflates at
    most the amount asked for per read and we ask in 64 KiB steps up to the cap, so memory and
    CPU stay O(max_bytes) whatever the compression ratio (a 10 GB bomb costs what 10 MiB of
    page costs, then fails as "too_large"). ``verify`` is True (certifi's CA bundle, as
    requests used), False or a CA bundle file or directory; ``extra_ca`` is a PEM file of CAs
    trusted in addition to it (see :mod:`workers.fetch.tls`). Responses without Content-Type
    are downloaded (the parser sniffs); set ``allow_missing_content_type=False`` to skip them.
    Limits default to the crawl's defaults (``CrawlConfig``); a worker passes its crawl's.

    Pools: one per (scheme, host, port, IP), at most ``pool_connections`` of them kept (least
    recently used evicted and closed), each keeping at most ``pool_maxsize`` idle keep-alive
    connections. The crawl sends one request per host at a time, so 1-2 per host is enough
    and ``pool_connections`` should cover the hosts in rotation (several times the fetches in
    flight); the caller sizes it. A fetch never waits for a pool slot (``block=False``).
    """

    def __init__(
        self,
        resolver: Resolver,
        user_agent: str,
        connect_timeout_s: float = CrawlConfig.connect_timeout_s,
        read_timeout_s: float = CrawlConfig.read_timeout_s,
        total_timeout_s: float = CrawlConfig.total_timeout_s,
        max_bytes: int = CrawlConfig.max_body_bytes,
        allowed_content_types: Iterable[str] = DEFAULT_CONTENT_TYPES,
        allow_private: bool = False,
        allowed_networks: Iterable[str] = (),
        pool_maxsize: int = 2,
        pool_connections: int = 1000,
        verify: bool | str = True,
        allow_missing_content_type: bool = True,
        accept: str = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
        extra_ca: str | None = None,
    ) -> None:
        self._init_common(resolver, user_agent, connect_timeout_s, read_timeout_s,
                          total_timeout_s, max_bytes, allowed_content_types, allow_private,
                          allowed_networks, verify, allow_missing_content_type, accept,
                          extra_ca)
        self._timeout = Timeout(connect=connect_timeout_s, read=read_timeout_s)
        tls, self._ca_path = pool_tls_kwargs(verify, extra_ca)
        self._pm = _PinnedPoolManager(
            num_pools=pool_connections, maxsize=pool_maxsize, block=False, **tls
        )

    def close(self) -> None:
        """Close all pooled connections (the Fetcher stays usable; pools refill on demand)."""
        self._pm.clear()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API ------------------------------------------------------------------------
    def fetch(
        self,
        url: str,
        ip: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        any_type: bool = False,
    ) -> FetchResult:
        """GET ``url`` (connecting to ``ip``, else the resolver's answer); never raises.

        Redirects are not followed: a 3xx comes back with ``location`` set. ``any_type``:
        the body is read whatever its media type (a declared sitemap).
        """
        return self._fetch(url, ip, extra_headers, self.max_bytes, filter_types=not any_type,
                           truncation_is_error=True)

    def fetch_robots(self, url: str, ip: str | None = None,
                     hop_delay_s: float = 0.0) -> FetchResult:
        """GET a robots.txt, following up to 5 redirects (RFC 9309 §2.3.1.2).

        The body is capped at :data:`ROBOTS_FETCH_BYTES`; the cap truncates (``truncated``)
        without setting ``error``. Any media type is accepted. ``ip`` applies to the original
        URL's host only; redirect targets are resolved (and checked) anew. ``elapsed_s`` and
        ``started_at`` cover all hops; ``redirects`` lists the URLs that redirected.
        ``hop_delay_s`` is slept before each redirect hop, so following a redirect keeps the
        host's politeness delay.
        """
        hops = RobotsHops(url, ip)
        while True:
            res = self._fetch(hops.current, hops.ip, None, ROBOTS_FETCH_BYTES,
                              filter_types=False, truncation_is_error=False)
            if not hops.follow(res):
                return hops.result(res)
            if hop_delay_s > 0:
                time.sleep(hop_delay_s)

    # -- internals -------------------------------------------------------------------------
    def _fetch(
        self,
        url: str,
        ip: str | None,
        extra_headers: Mapping[str, str] | None,
        max_bytes: int,
        *,
        filter_types: bool,
        truncation_is_error: bool,
    ) -> FetchResult:
        res = FetchResult(url=url, started_at=time.time())
        target = self._target(res, url)
        if target is None:
            return res
        host = target.host.strip("[]")
        ip = self._checked_ip(res, host, ip)
        if ip is None:
            return res
        https = target.scheme == "https"
        default_port = 443 if https else 80
        port = target.port
        headers = self._request_headers(target.host, port, default_port, extra_headers)
        res.request_headers = list(headers.items())

        deadline = _WATCHDOG.arm(self.total_timeout_s)
        _current.deadline = deadline
        t0 = time.monotonic()
        resp: Any = None
        try:
            resp = self._open(target, host, port or default_port, ip, headers)
            self._read_response(res, resp, max_bytes, deadline, filter_types=filter_types,
                                truncation_is_error=truncation_is_error)
            if deadline.fired and res.error is None:
                # The watchdog shut the socket: http.client may take that EOF for the end of
                # the headers or body, so the response looks complete but is not.
                res.error, res.error_detail = self._fired(deadline)
                res.cut(truncation_of(res.error))
        except Exception as e:
            res.error, res.error_detail = (
                self._fired(deadline) if deadline.fired
                else (_classify(e), describe(e)))
            if res.status is not None:  # the body (or the headers) stopped half-way
                res.cut(truncation_of(res.error))
        finally:
            _WATCHDOG.disarm(deadline)
            _current.deadline = None
            res.elapsed_s = time.monotonic() - t0
            if resp is not None and (res.error is not None or res.truncated):
                _discard(resp)
        return res

    def _open(self, target: Any, host: str, port: int, ip: str, headers: dict[str, str]
              ) -> Any:
        """Send the GET on a kept-alive (or new) connection to ``ip``; the response, unread."""
        if target.scheme == "https" and self._ca_path is not None \
                and not os.path.exists(self._ca_path):
            raise OSError(  # what requests' cert_verify raised
                f"Could not find a suitable TLS CA certificate bundle, "
                f"invalid path: {self._ca_path}"
            )
        pool = self._pm.pool_for(target.scheme, host.lower(), port, ip)
        return pool.urlopen(
            "GET", target.path, body=None, headers=headers, retries=_NO_RETRIES,
            redirect=False, assert_same_host=False, timeout=self._timeout,
            pool_timeout=None, release_conn=False, chunked=False,
            preload_content=False, decode_content=False,
        )

    def _fired(self, deadline: Any) -> tuple[str, str]:
        """The error of a fetch whose deadline fired: its time was up, or the engine ended
        it (its lease lapsed)."""
        if deadline.why:
            return "aborted", deadline.why
        return "timeout", f"total timeout {self.total_timeout_s}s"

    def _checked_ip(self, res: FetchResult, host: str, ip: str | None) -> str | None:
        """The IP to connect to (``ip``, else the resolver's answer), or None with ``res``'s
        error set (dns, forbidden_ip): every address is checked before a connection."""
        if ip is None:
            ip = self._resolve(res, host)
            if ip is None:
                return None
        return self._check_ip(res, host, ip)

    def _read_response(self, res: FetchResult, resp: Any, max_bytes: int, deadline: _Deadline, *,
                       filter_types: bool, truncation_is_error: bool) -> None:
        """Status, headers and body of ``resp`` into ``res``; raises what urllib3 raises."""
        rheaders = resp.headers
        # raw_items: as items() for http.client's latin-1 headers, without the per-value
        # policy pass; duplicates and order as sent
        msg = resp._original_response.msg
        action = self._head(
            res, resp.status, resp.reason or "", _HTTP_VERSIONS.get(resp.version, "HTTP/1.1"),
            [(str(k), str(v)) for k, v in msg.raw_items()], rheaders.get("Location"),
            rheaders.get("Content-Type"), filter_types)
        if action is BodyAction.SKIP:
            _discard(resp)  # drop the connection rather than download the body
        elif action is BodyAction.DRAIN:
            # requests consumed and dropped a redirect's body (body b""); we do the same,
            # but undecoded and only up to the cap, else drop the connection.
            _drain(resp, max_bytes)
        else:
            _read_body(resp, res, max_bytes, deadline, truncation_is_error,
                       self.total_timeout_s)
