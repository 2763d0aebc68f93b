"""HTTP fetching for the crawler: one GET, bounded in size and time, to a pre-resolved IP.

Why the connection plumbing below: politeness is enforced per IP and every address is checked
before connecting (see :mod:`workers.dns`), so the fetcher must connect to *the IP the
frontier decided on*, not to whatever urllib3's own ``getaddrinfo`` returns. The URL is not
rewritten to the IP (that would break the Host header, TLS SNI and certificate checks);
instead our urllib3 connection classes take a ``connect_ip`` and open the TCP socket to it,
while ``host`` (used for Host, SNI and hostname verification) stays the URL's host. Pools are
keyed by (scheme, host, port, connect_ip), so a pooled keep-alive connection is never reused
for a host after its IP changed.

:meth:`Fetcher.fetch` never raises for network or HTTP problems: it returns a
:class:`FetchResult` whose ``error`` is a short machine-readable class (see ``ERROR_CLASSES``).

Thread safety: a :class:`Fetcher` may be used from many threads (a Celery threads pool).
Each thread gets its own ``requests.Session`` (``threading.local``); all sessions share one
``HTTPAdapter`` whose urllib3 ``PoolManager`` is thread-safe. Cookies are never stored (a
crawler that keeps cookies walks into session-id traps and leaks state between hosts).
"""

from __future__ import annotations

import contextlib
import heapq
import http.client
import itertools
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.cookiejar import DefaultCookiePolicy
from typing import Any, NamedTuple
from urllib.parse import urljoin, urlsplit

import requests
import requests.adapters
import urllib3.connection
import urllib3.connectionpool
import urllib3.exceptions
import urllib3.poolmanager
import urllib3.util
from requests.cookies import RequestsCookieJar

from workers.dns import DNSError, ForbiddenAddressError, Resolver, is_forbidden_ip

__all__ = [
    "DEFAULT_ALLOWED_CONTENT_TYPES",
    "ERROR_CLASSES",
    "ROBOTS_MAX_BYTES",
    "FetchResult",
    "Fetcher",
]

#: Media types whose bodies are downloaded by :meth:`Fetcher.fetch` (``"type/*"`` allowed).
DEFAULT_ALLOWED_CONTENT_TYPES: tuple[str, ...] = (
    "text/html",
    "application/xhtml+xml",
    "text/plain",
    "application/xml",
    "text/xml",
    "application/rss+xml",
    "application/atom+xml",
)

#: robots.txt parsers read at most 500 KiB (RFC 9309 §2.5); a little more shows truncation.
ROBOTS_MAX_BYTES = 500 * 1024 + 4096
ROBOTS_MAX_REDIRECTS = 5

#: Values of ``FetchResult.error``.
ERROR_CLASSES: dict[str, str] = {
    "invalid_url": "URL is not absolute http(s) or cannot be parsed; nothing sent",
    "dns": "host name did not resolve (resolver raised DNSError)",
    "forbidden_ip": "address is private/loopback/... and allow_private is off; nothing sent",
    "connect_error": "TCP connection refused / unreachable",
    "timeout": "connect, read (no byte for read_timeout_s) or total wall-time timeout",
    "tls_error": "TLS handshake or certificate verification failed",
    "connection_reset": "peer closed or reset the connection before the response was complete",
    "invalid_response": "not parseable as HTTP/1.x (bad status line, header, chunk framing)",
    "decoding_error": "Content-Encoding could not be decoded",
    "too_large": "decoded body exceeded max_bytes; body kept up to the cap, truncated=True",
    "content_type_skipped": "media type not in the allow list; body not downloaded",
    "too_many_redirects": "fetch_robots: still a redirect after 5 hops",
    "fetch_error": "any other failure (see error_detail)",
}

_CHUNK = 64 * 1024
_HTTP_VERSIONS = {9: "HTTP/0.9", 10: "HTTP/1.0", 11: "HTTP/1.1", 20: "HTTP/2"}


@dataclass
class FetchResult:
    """Outcome of one fetch: everything the parser, the frontier and the WARC writer need."""

    url: str
    ip: str | None = None
    status: int | None = None
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    content_type: str | None = None
    location: str | None = None
    elapsed_s: float = 0.0
    error: str | None = None
    error_detail: str | None = None
    truncated: bool = False
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    http_version: str = "HTTP/1.1"
    started_at: float = 0.0
    #: ``fetch_robots`` only: the URLs that redirected, in order (``url`` is the last hop).
    redirects: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """A 2xx response read completely (or truncated without an error, as robots.txt)."""
        return self.error is None and self.status is not None and 200 <= self.status < 300

    @property
    def is_redirect(self) -> bool:
        return self.status in (301, 302, 303, 307, 308) and self.location is not None

    def header(self, name: str, default: str | None = None) -> str | None:
        """First value of response header ``name`` (case-insensitive)."""
        lname = name.lower()
        for k, v in self.headers:
            if k.lower() == lname:
                return v
        return default


# --- deadline watchdog ---------------------------------------------------------------------
class _Deadline:
    """A fetch's wall-time deadline; when it passes, the fetch's socket is shut down.

    A blocked ``recv`` (a server trickling one byte per read timeout) cannot otherwise be
    interrupted. The connection is registered by :meth:`_PinnedMixin.request` under the
    watchdog lock, and ``owner`` is checked under the same lock, so a deadline never shuts a
    pooled connection that another fetch has taken over.
    """

    __slots__ = ("at", "conn", "done", "fired")

    def __init__(self, at: float) -> None:
        self.at = at
        self.conn: Any = None
        self.done = False
        self.fired = False

    def _abort(self) -> None:  # called with the watchdog lock held
        self.fired = True
        conn = self.conn
        if conn is None or getattr(conn, "_trawl_owner", None) is not self:
            return
        sock = getattr(conn, "sock", None)
        if sock is not None:
            # socket.socket.shutdown, not SSLSocket.shutdown: the latter drops the SSL
            # object under the feet of the thread blocked in recv.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watchdog:
    """One daemon thread per process firing deadlines in time order (lazy, fork-aware)."""

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, timeout_s: float) -> _Deadline:
        d = _Deadline(time.monotonic() + timeout_s)
        with self._cond:
            heapq.heappush(self._heap, (d.at, next(self._seq), d))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="trawl-fetch-watchdog", daemon=True
                )
                self._thread.start()
            elif self._heap[0][2] is d:
                self._cond.notify()
        return d

    def disarm(self, d: _Deadline) -> None:
        with self.lock:
            d.done = True

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait(60.0)
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                _, _, d = heapq.heappop(self._heap)
                d._abort()


_WATCHDOG = _Watchdog()
_current = threading.local()  # .deadline: the _Deadline of the fetch running in this thread


# --- urllib3 plumbing: connect to a given IP, keep the host name -----------------------------
class _PinnedMixin:
    """Opens the TCP connection to ``connect_ip``; ``host`` (Host header, SNI, cert) unchanged."""

    _connect_ip: str | None

    def __init__(self, *args: Any, connect_ip: str | None = None, **kwargs: Any) -> None:
        self._connect_ip = connect_ip
        super().__init__(*args, **kwargs)

    def _new_conn(self) -> socket.socket:
        if self._connect_ip is None:  # not used by Fetcher; keeps the class usable alone
            return super()._new_conn()  # type: ignore[misc]
        this: Any = self
        try:
            sock = urllib3.util.connection.create_connection(
                (self._connect_ip, this.port),
                this.timeout,
                source_address=this.source_address,
                socket_options=this.socket_options,
            )
        except TimeoutError as e:
            raise urllib3.exceptions.ConnectTimeoutError(
                this, f"Connection to {this.host} ({self._connect_ip}) timed out"
            ) from e
        except OSError as e:
            raise urllib3.exceptions.NewConnectionError(
                this, f"Failed to establish a new connection to {self._connect_ip}: {e}"
            ) from e
        sys.audit("http.client.connect", self, this.host, this.port)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        deadline: _Deadline | None = getattr(_current, "deadline", None)
        if deadline is not None:
            with _WATCHDOG.lock:
                self._trawl_owner = deadline
                deadline.conn = self
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _PinnedHTTPConnection(_PinnedMixin, urllib3.connection.HTTPConnection):
    pass


class _PinnedHTTPSConnection(_PinnedMixin, urllib3.connection.HTTPSConnection):
    pass


class _PinnedHTTPConnectionPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _PinnedHTTPConnection


class _PinnedHTTPSConnectionPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _PinnedHTTPSConnection


def _make_key_class() -> Any:
    """urllib3's PoolKey plus ``key_connect_ip``: pools are per (host, IP)."""
    fields = [(f, Any) for f in urllib3.poolmanager.PoolKey._fields] + [
        ("key_connect_ip", Any)
    ]
    return NamedTuple("PinnedPoolKey", fields)  # type: ignore[misc]


_PinnedPoolKey = _make_key_class()


def _pinned_key(request_context: dict[str, Any]) -> Any:
    return urllib3.poolmanager._default_key_normalizer(_PinnedPoolKey, request_context)


class _PinnedPoolManager(urllib3.poolmanager.PoolManager):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool_classes_by_scheme = {
            "http": _PinnedHTTPConnectionPool,
            "https": _PinnedHTTPSConnectionPool,
        }
        self.key_fn_by_scheme = {"http": _pinned_key, "https": _pinned_key}


class _PinnedAdapter(requests.adapters.HTTPAdapter):
    """Routes each PreparedRequest to the pool of (host, ``request.trawl_connect_ip``)."""

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        self._pool_connections = connections
        self._pool_maxsize = maxsize
        self._pool_block = block
        self.poolmanager = _PinnedPoolManager(
            num_pools=connections, maxsize=maxsize, block=block, **pool_kwargs
        )

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(
            request, verify, cert
        )
        ip = getattr(request, "trawl_connect_ip", None)
        if ip is None:
            raise ValueError("no connect IP pinned for request")
        pool_kwargs["connect_ip"] = ip
        return host_params, pool_kwargs


# --- error classification ------------------------------------------------------------------
def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 20:
        e = todo.pop(0)
        if any(e is s for s in seen):
            continue
        seen.append(e)
        for nxt in (getattr(e, "reason", None), e.__cause__, e.__context__, *e.args):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    return seen


def _classify(exc: BaseException) -> str:
    chain = _chain(exc)

    def has(*types: type) -> bool:
        return any(isinstance(e, types) for e in chain)

    if has(urllib3.exceptions.NewConnectionError, ConnectionRefusedError) and not has(
        socket.timeout, TimeoutError
    ):
        return "connect_error"
    if has(
        requests.Timeout,
        urllib3.exceptions.ConnectTimeoutError,
        urllib3.exceptions.ReadTimeoutError,
        TimeoutError,
    ):
        return "timeout"
    if has(ssl.SSLError, urllib3.exceptions.SSLError, requests.exceptions.SSLError):
        return "tls_error"
    if has(urllib3.exceptions.NewConnectionError, OSError) and has(
        urllib3.exceptions.NewConnectionError
    ):
        return "connect_error"
    if has(urllib3.exceptions.InvalidChunkLength, urllib3.exceptions.HeaderParsingError):
        return "invalid_response"
    if has(
        http.client.RemoteDisconnected,
        ConnectionResetError,
        BrokenPipeError,
        ConnectionAbortedError,
        http.client.IncompleteRead,
    ):
        return "connection_reset"
    if has(http.client.HTTPException, requests.exceptions.InvalidHeader):
        return "invalid_response"
    if has(urllib3.exceptions.DecodeError, requests.exceptions.ContentDecodingError):
        return "decoding_error"
    if has(urllib3.exceptions.ProtocolError, requests.ConnectionError):
        return "connection_reset"
    if has(urllib3.exceptions.LocationParseError, requests.exceptions.InvalidURL):
        return "invalid_url"
    return "fetch_error"


def _media_type(value: str | None) -> str | None:
    if not value:
        return None
    mt = value.split(";", 1)[0].strip().lower()
    return mt or None


# --- the fetcher ---------------------------------------------------------------------------
class Fetcher:
    """GETs URLs over pooled keep-alive connections to pre-resolved, checked IPs.

    ``max_bytes`` caps the *decoded* body. Decompression bombs: urllib3 (>= 2.6) inflates at
    most the amount asked for per read and we ask in 64 KiB steps up to the cap, so memory and
    CPU stay O(max_bytes) whatever the compression ratio (a 10 GB bomb costs what 10 MiB of
    page costs, then fails as "too_large"). ``verify`` is passed to requests
    (True, False or a CA bundle path). Responses without Content-Type are downloaded (the
    parser sniffs); set ``allow_missing_content_type=False`` to skip them.
    """

    def __init__(
        self,
        resolver: Resolver,
        user_agent: str,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 15.0,
        total_timeout_s: float = 30.0,
        max_bytes: int = 10 * 1024 * 1024,
        allowed_content_types: Iterable[str] = DEFAULT_ALLOWED_CONTENT_TYPES,
        allow_private: bool = False,
        pool_maxsize: int = 4,
        pool_connections: int = 1000,
        verify: bool | str = True,
        allow_missing_content_type: bool = True,
        accept: str = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
    ) -> None:
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
        self.verify = verify
        self.allow_missing_content_type = allow_missing_content_type
        self.accept = accept
        self._adapter = _PinnedAdapter(
            pool_connections=pool_connections, pool_maxsize=pool_maxsize, max_retries=0
        )
        self._local = threading.local()

    # -- sessions --------------------------------------------------------------------------
    def _session(self) -> requests.Session:
        s: requests.Session | None = getattr(self._local, "session", None)
        if s is None:
            s = requests.Session()
            s.trust_env = False  # no proxies/netrc from the environment
            s.cookies = RequestsCookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
            s.mount("http://", self._adapter)
            s.mount("https://", self._adapter)
            self._local.session = s
        return s

    def close(self) -> None:
        """Close all pooled connections (the Fetcher stays usable; pools refill on demand)."""
        self._adapter.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def content_type_allowed(self, media_type: str | None) -> bool:
        if media_type is None:
            return self.allow_missing_content_type
        return media_type in self._types_exact or media_type.startswith(self._types_prefix)

    # -- public API ------------------------------------------------------------------------
    def fetch(
        self,
        url: str,
        ip: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> FetchResult:
        """GET ``url`` (connecting to ``ip``, else the resolver's answer); never raises.

        Redirects are not followed: a 3xx comes back with ``location`` set.
        """
        return self._fetch(url, ip, extra_headers, self.max_bytes, filter_types=True,
                           truncation_is_error=True)

    def fetch_robots(self, url: str, ip: str | None = None,
                     hop_delay_s: float = 0.0) -> FetchResult:
        """GET a robots.txt, following up to 5 redirects (RFC 9309 §2.3.1.2).

        The body is capped at :data:`ROBOTS_MAX_BYTES`; the cap truncates (``truncated``)
        without setting ``error``. Any media type is accepted. ``ip`` applies to the original
        URL's host only; redirect targets are resolved (and checked) anew. ``elapsed_s`` and
        ``started_at`` cover all hops; ``redirects`` lists the URLs that redirected.
        ``hop_delay_s`` is slept before each redirect hop, so following a redirect keeps the
        host's politeness delay.
        """
        first_host = _hostname(url)
        chain: list[str] = []
        started = time.time()
        elapsed = 0.0
        current = url
        while True:
            hop_ip = ip if _hostname(current) == first_host else None
            res = self._fetch(current, hop_ip, None, ROBOTS_MAX_BYTES, filter_types=False,
                              truncation_is_error=False)
            elapsed += res.elapsed_s
            if not res.is_redirect or res.error is not None:
                break
            assert res.location is not None
            if len(chain) >= ROBOTS_MAX_REDIRECTS:
                res.error = "too_many_redirects"
                res.error_detail = f"more than {ROBOTS_MAX_REDIRECTS} redirects"
                break
            chain.append(current)
            current = urljoin(current, res.location.strip())
            if hop_delay_s > 0:
                time.sleep(hop_delay_s)
        res.redirects = chain
        res.started_at = started
        res.elapsed_s = elapsed
        return res

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
        try:
            prep = requests.Request("GET", url).prepare()
            assert prep.url is not None
            parsed = urllib3.util.parse_url(prep.url)
        except Exception as e:
            res.error, res.error_detail = "invalid_url", str(e)
            return res
        if parsed.scheme not in ("http", "https") or not parsed.host:
            res.error, res.error_detail = "invalid_url", f"not an absolute http(s) URL: {url!r}"
            return res
        host = parsed.host.strip("[]")

        if ip is None:
            try:
                ip = self.resolver.resolve(host)
            except ForbiddenAddressError as e:
                res.error, res.error_detail = "forbidden_ip", str(e)
                return res
            except DNSError as e:
                res.error, res.error_detail = "dns", f"{e.kind}: {e}"
                return res
            except Exception as e:  # a broken resolver must not break the no-raise contract
                res.error, res.error_detail = "dns", repr(e)
                return res
        res.ip = ip
        if is_forbidden_ip(ip, self.allow_private):
            res.error, res.error_detail = "forbidden_ip", f"forbidden address {ip} for {host}"
            return res

        default_port = 443 if parsed.scheme == "https" else 80
        host_header = parsed.host if parsed.port in (None, default_port) else (
            f"{parsed.host}:{parsed.port}"
        )
        headers: dict[str, str] = {
            "Host": host_header,
            "User-Agent": self.user_agent,
            "Accept": self.accept,
            "Accept-Encoding": "gzip, deflate",
            "Connection": "keep-alive",
        }
        if extra_headers:
            headers.update(extra_headers)
        prep.prepare_headers(headers)
        prep.trawl_connect_ip = ip  # type: ignore[attr-defined]
        res.request_headers = list(prep.headers.items())

        deadline = _WATCHDOG.arm(self.total_timeout_s)
        _current.deadline = deadline
        t0 = time.monotonic()
        resp: requests.Response | None = None
        try:
            resp = self._session().send(
                prep,
                stream=True,
                allow_redirects=False,
                timeout=(self.connect_timeout_s, self.read_timeout_s),
                verify=self.verify,
            )
            raw = resp.raw
            res.status = resp.status_code
            res.reason = resp.reason or ""
            res.http_version = _HTTP_VERSIONS.get(getattr(raw, "version", 11), "HTTP/1.1")
            orig = getattr(raw, "_original_response", None)
            msg = getattr(orig, "msg", None)
            res.headers = (
                [(str(k), str(v)) for k, v in msg.items()] if msg is not None
                else list(resp.headers.items())
            )
            res.content_type = _media_type(resp.headers.get("Content-Type"))
            if 300 <= res.status < 400:
                res.location = resp.headers.get("Location")
            elif filter_types and not self.content_type_allowed(res.content_type):
                res.error = "content_type_skipped"
                res.error_detail = f"content type {res.content_type!r} not allowed"
                resp.close()  # drop the connection rather than download the body
                return res
            self._read_body(raw, res, max_bytes, deadline, truncation_is_error)
            if deadline.fired and res.error is None:
                # The watchdog shut the socket: http.client may take that EOF for the end of
                # the headers or body, so the response looks complete but is not.
                res.error = "timeout"
                res.error_detail = f"total timeout {self.total_timeout_s}s"
                res.truncated = True
        except Exception as e:
            res.error = "timeout" if deadline.fired else _classify(e)
            res.error_detail = (
                f"total timeout {self.total_timeout_s}s" if deadline.fired
                else f"{type(e).__name__}: {e}"[:500]
            )
            if res.status is not None:
                res.truncated = True
        finally:
            _WATCHDOG.disarm(deadline)
            _current.deadline = None
            res.elapsed_s = time.monotonic() - t0
            if resp is not None and (res.error is not None or res.truncated):
                resp.close()
        return res

    def _read_body(
        self,
        raw: Any,
        res: FetchResult,
        max_bytes: int,
        deadline: _Deadline,
        truncation_is_error: bool,
    ) -> None:
        parts: list[bytes] = []
        total = 0
        try:
            while True:
                chunk = raw.read1(min(_CHUNK, max_bytes - total + 1), decode_content=True)
                if not chunk:
                    break
                parts.append(chunk)
                total += len(chunk)
                if total > max_bytes:
                    res.truncated = True
                    if truncation_is_error:
                        res.error = "too_large"
                        res.error_detail = f"body exceeds {max_bytes} bytes"
                    break
                if time.monotonic() > deadline.at:
                    res.truncated = True
                    res.error = "timeout"
                    res.error_detail = f"total timeout {self.total_timeout_s}s"
                    break
        finally:
            body = b"".join(parts)
            res.body = body[:max_bytes] if len(body) > max_bytes else body


def _hostname(url: str) -> str | None:
    try:
        return (urlsplit(url).hostname or "").lower() or None
    except ValueError:
        return None
