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

Thread safety: a :class:`Fetcher` may be used from many threads (a Celery threads pool); its
one urllib3 ``PoolManager`` is thread-safe. Requests go straight to urllib3 (no ``requests``
layer: it cost more CPU per page than urllib3 itself, see ``bench/fetch_cost.py``). Cookies
are never stored or sent (a crawler that keeps cookies walks into session-id traps and leaks
state between hosts), and nothing is taken from the environment (no proxies, no netrc, no CA
bundle variables).
"""

from __future__ import annotations

import contextlib
import heapq
import http.client
import itertools
import os
import re
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import quote, urljoin, urlparse, urlsplit, urlunparse

import certifi
import urllib3.connection
import urllib3.connectionpool
import urllib3.exceptions
import urllib3.poolmanager
import urllib3.util
from urllib3.util.retry import Retry
from urllib3.util.timeout import Timeout

from frontier.memo import BoundedMemo
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
    """A PoolManager whose pools connect to a given IP; one pool per (scheme, host, port, IP).

    :meth:`pool_for` is :meth:`connection_from_host` with ``pool_kwargs={"connect_ip": ip}``
    minus the per-call key normalization: the pool key of a (scheme, host, port, IP) is
    memoized (the manager's other pool kwargs are fixed at construction). Pools themselves stay
    in urllib3's LRU container (``num_pools``), so an evicted pool is closed and rebuilt as
    before.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool_classes_by_scheme = {
            "http": _PinnedHTTPConnectionPool,
            "https": _PinnedHTTPSConnectionPool,
        }
        self.key_fn_by_scheme = {"http": _pinned_key, "https": _pinned_key}
        self._keys: BoundedMemo[tuple[str, str, int, str], Any] = BoundedMemo(50_000)

    def pool_for(self, scheme: str, host: str, port: int, ip: str) -> Any:
        t = (scheme, host, port, ip)
        key = self._keys.get(t)
        if key is None:
            key = self._keys.put(t, _pinned_key(self._context(scheme, host, port, ip)))
        with self.pools.lock:
            pool = self.pools.get(key)
            if pool:
                return pool
        # new pool (or evicted): the ordinary path, which creates it under the lock
        return self.connection_from_pool_key(key, self._context(scheme, host, port, ip))

    def _context(self, scheme: str, host: str, port: int, ip: str) -> dict[str, Any]:
        ctx = self.connection_pool_kw.copy()
        ctx.update(scheme=scheme, host=host, port=port, connect_ip=ip)
        return ctx


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
        urllib3.exceptions.ConnectTimeoutError,
        urllib3.exceptions.ReadTimeoutError,
        TimeoutError,
    ):
        return "timeout"
    if has(ssl.SSLError, urllib3.exceptions.SSLError):
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
    # urllib3's InvalidHeader: conflicting Content-Length values (raised building the response)
    if has(http.client.HTTPException, urllib3.exceptions.InvalidHeader):
        return "invalid_response"
    if has(urllib3.exceptions.DecodeError):
        return "decoding_error"
    # MaxRetryError (other reasons) and ClosedPoolError: what requests called ConnectionError
    if has(
        urllib3.exceptions.ProtocolError,
        urllib3.exceptions.MaxRetryError,
        urllib3.exceptions.ClosedPoolError,
    ):
        return "connection_reset"
    if has(urllib3.exceptions.LocationParseError):
        return "invalid_url"
    return "fetch_error"


def _media_type(value: str | None) -> str | None:
    if not value:
        return None
    mt = value.split(";", 1)[0].strip().lower()
    return mt or None


# --- request preparation (what requests' PreparedRequest did to the URL and headers) ----------
class _BadURL(ValueError):
    pass


class _BadEscape(ValueError):
    pass


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
#: requote_uri leaves a URL made only of these unchanged (no "%": escapes may be rewritten)
_REQUOTE_IDENTITY = re.compile(r"[A-Za-z0-9_.\-~!#$&'()*+,/:;=?@\[\]]*")
_HEADER_NAME = re.compile(r"^[^:\s][^:\r\n]*$")
_HEADER_VALUE = re.compile(r"^\S[^\r\n]*$|^$")


def _unquote_unreserved(uri: str) -> str:
    """requests.utils.unquote_unreserved: decode %XX escapes of unreserved characters only."""
    parts = uri.split("%")
    for i in range(1, len(parts)):
        h = parts[i][0:2]
        if len(h) == 2 and h.isalnum():
            try:
                c = chr(int(h, 16))
            except ValueError:
                raise _BadEscape(h) from None
            if c in _UNRESERVED:
                parts[i] = c + parts[i][2:]
            else:
                parts[i] = f"%{parts[i]}"
        else:
            parts[i] = f"%{parts[i]}"
    return "".join(parts)


def _requote_uri(uri: str) -> str:
    """requests.utils.requote_uri: normalize escapes, quote what is illegal, keep the rest."""
    if _REQUOTE_IDENTITY.fullmatch(uri):
        return uri
    try:
        return quote(_unquote_unreserved(uri), safe="!#$%&'()*+,/:;=?@[]~")
    except _BadEscape:
        return quote(uri, safe="!#$&'()*+,/:;=?@[]~")


class _Target(NamedTuple):
    scheme: str
    host: str  #: as in the URL (IPv6 in brackets): Host header, SNI, certificate name
    port: int | None
    path: str  #: request target: path and query


#: An http(s) URL that urllib3's parse_url and requests' requote leave as it is: lower-case
#: scheme and ASCII host, no userinfo, no leading-zero port, path/query only of characters
#: neither quotes, no "%" and no fragment. (Dot segments are checked apart.)
_SIMPLE_URL = re.compile(
    r"(https?)://([a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*)(?::([1-9][0-9]{0,4}))?"
    r"(/[A-Za-z0-9\-._~!$&'()*+,;=:@/]*)?(?:\?([A-Za-z0-9\-._~!$&'()*+,;=:@/?]*))?"
)


def _prepare_url(url: str) -> _Target:
    """:func:`_prepare_url_full`, without the parsing work for URLs it would not change."""
    m = _SIMPLE_URL.fullmatch(url)
    if m is not None:
        scheme, host, port_s, path, query = m.groups()
        port = int(port_s) if port_s else None
        if (port is None or port <= 65535) and (path is None or "/." not in path):
            path = path or "/"
            return _Target(scheme, host, port, f"{path}?{query}" if query else path)
    return _prepare_url_full(url)


def _prepare_url_full(url: str) -> _Target:
    """The URL as requests prepared it (``PreparedRequest.prepare_url`` then ``path_url``).

    urllib3's ``parse_url`` normalizes (scheme/host case, IDNA, dot segments, invalid
    characters), then requests re-quotes the whole URL; raises :class:`_BadURL` or
    ``LocationParseError`` for what requests refused.
    """
    u = url.lstrip()
    p = urllib3.util.parse_url(u)
    if not p.scheme:
        raise _BadURL(
            f"Invalid URL {u!r}: No scheme supplied. Perhaps you meant https://{u}?"
        )
    if p.scheme not in ("http", "https"):
        raise _BadURL(f"not an absolute http(s) URL: {url!r}")
    if not p.host:
        raise _BadURL(f"Invalid URL {u!r}: No host supplied")
    if p.host.startswith(("*", ".")):
        raise _BadURL("URL has an invalid label.")
    netloc = f"{p.auth}@{p.host}" if p.auth else p.host
    if p.port:
        netloc += f":{p.port}"
    prepared = urlunparse((p.scheme, netloc, p.path or "/", "", p.query, p.fragment))
    requoted = _requote_uri(prepared)
    p = urllib3.util.parse_url(requoted)  # the host and port we used came from the final URL
    if p.scheme not in ("http", "https") or not p.host:
        raise _BadURL(f"not an absolute http(s) URL: {url!r}")
    s = urlsplit(requoted)
    path = s.path or "/"
    return _Target(p.scheme, p.host, p.port, f"{path}?{s.query}" if s.query else path)


def _check_header(name: str, value: str) -> None:
    """requests' check_header_validity: a bad extra header is the caller's bug, raised."""
    if not isinstance(name, str) or not _HEADER_NAME.match(name):
        raise ValueError(f"Invalid leading whitespace, reserved character(s), or return "
                         f"character(s) in header name: {name!r}")
    if not isinstance(value, str) or not _HEADER_VALUE.match(value):
        raise ValueError(f"Invalid leading whitespace, reserved character(s), or return "
                         f"character(s) in header value: {value!r}")


#: What requests' HTTPAdapter passed (``max_retries=0``): connect errors come back as
#: MaxRetryError(reason=...), read errors raise as they are; nothing is ever retried.
_NO_RETRIES = Retry(0, read=False)
_REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))


def _redirect_location_error(location: str) -> Exception | None:
    """The exception requests' redirect resolution raised for this Location, if any.

    With ``allow_redirects=False`` requests still resolved the next hop of a redirect (to fill
    ``Response.next``); a Location that is not UTF-8 (after the latin-1 round trip) or that
    ``urlparse`` rejects made the whole fetch fail as ``fetch_error``. Kept as it was.
    """
    try:
        loc = location.encode("latin1").decode("utf8")
        if loc.startswith("//"):
            loc = "http:" + loc
        parsed = urlparse(loc)
        parsed.geturl()
    except (UnicodeError, ValueError) as e:
        return e
    return None


def _discard(resp: Any) -> None:
    """Close the response's connection and hand the (closed) slot back to its pool."""
    with contextlib.suppress(Exception):
        resp.close()
    with contextlib.suppress(Exception):
        resp.release_conn()


# --- the fetcher ---------------------------------------------------------------------------
class Fetcher:
    """GETs URLs over pooled keep-alive connections to pre-resolved, checked IPs.

    ``max_bytes`` caps the *decoded* body. Decompression bombs: urllib3 (>= 2.6) inflates at
    most the amount asked for per read and we ask in 64 KiB steps up to the cap, so memory and
    CPU stay O(max_bytes) whatever the compression ratio (a 10 GB bomb costs what 10 MiB of
    page costs, then fails as "too_large"). ``verify`` is True (certifi's CA bundle, as
    requests used), False or a CA bundle file or directory. Responses without Content-Type are
    downloaded (the parser sniffs); set ``allow_missing_content_type=False`` to skip them.
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
        #: is_forbidden_ip verdicts per IP string (a pure function of it and allow_private)
        self._forbidden: BoundedMemo[str, bool] = BoundedMemo(65_536)
        self._timeout = Timeout(connect=connect_timeout_s, read=read_timeout_s)
        # TLS settings as requests' adapter gave its pools (cert_verify): the CA bundle is
        # certifi's for verify=True, the given file or directory for a path.
        tls: dict[str, Any] = {"cert_reqs": "CERT_REQUIRED" if verify else "CERT_NONE"}
        self._ca_path: str | None = None
        if verify:
            self._ca_path = certifi.where() if verify is True else str(verify)
            if os.path.isdir(self._ca_path):
                tls["ca_cert_dir"] = self._ca_path
            else:
                tls["ca_certs"] = self._ca_path
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
            target = _prepare_url(url)
        except Exception as e:
            res.error, res.error_detail = "invalid_url", str(e)
            return res
        host = target.host.strip("[]")

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
        forbidden = self._forbidden.get(ip)
        if forbidden is None:
            forbidden = self._forbidden.put(ip, is_forbidden_ip(ip, self.allow_private))
        if forbidden:
            res.error, res.error_detail = "forbidden_ip", f"forbidden address {ip} for {host}"
            return res

        https = target.scheme == "https"
        default_port = 443 if https else 80
        port = target.port
        host_header = target.host if port in (None, default_port) else f"{target.host}:{port}"
        headers: dict[str, str] = {
            "Host": host_header,
            "User-Agent": self.user_agent,
            "Accept": self.accept,
            "Accept-Encoding": "gzip, deflate",
            "Connection": "keep-alive",
        }
        if extra_headers:
            headers = self._merge_headers(headers, extra_headers)
        res.request_headers = list(headers.items())

        deadline = _WATCHDOG.arm(self.total_timeout_s)
        _current.deadline = deadline
        t0 = time.monotonic()
        resp: Any = None
        try:
            if https and self._ca_path is not None and not os.path.exists(self._ca_path):
                raise OSError(  # what requests' cert_verify raised
                    f"Could not find a suitable TLS CA certificate bundle, "
                    f"invalid path: {self._ca_path}"
                )
            pool = self._pm.pool_for(
                target.scheme, host.lower(), port or default_port, ip
            )
            resp = pool.urlopen(
                "GET", target.path, body=None, headers=headers, retries=_NO_RETRIES,
                redirect=False, assert_same_host=False, timeout=self._timeout,
                pool_timeout=None, release_conn=False, chunked=False,
                preload_content=False, decode_content=False,
            )
            status: int = resp.status
            rheaders = resp.headers
            location = rheaders.get("Location")
            if location and status in _REDIRECT_STATUSES:
                err = _redirect_location_error(location)
                if err is not None:
                    raise err
            res.status = status
            res.reason = resp.reason or ""
            res.http_version = _HTTP_VERSIONS.get(resp.version, "HTTP/1.1")
            # raw_items: as items() for http.client's latin-1 headers, without the per-value
            # policy pass; duplicates and order as sent
            msg = resp._original_response.msg
            res.headers = [(str(k), str(v)) for k, v in msg.raw_items()]
            res.content_type = _media_type(rheaders.get("Content-Type"))
            if 300 <= status < 400:
                res.location = location
            elif filter_types and not self.content_type_allowed(res.content_type):
                res.error = "content_type_skipped"
                res.error_detail = f"content type {res.content_type!r} not allowed"
                _discard(resp)  # drop the connection rather than download the body
                return res
            if location and status in _REDIRECT_STATUSES:
                # requests consumed and dropped a redirect's body (body b""); we do the same,
                # but undecoded and only up to the cap, else drop the connection.
                self._drain(resp, max_bytes)
            else:
                self._read_body(resp, res, max_bytes, deadline, truncation_is_error)
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
                _discard(resp)
        return res

    @staticmethod
    def _merge_headers(
        headers: dict[str, str], extra: Mapping[str, str]
    ) -> dict[str, str]:
        """``headers`` updated with ``extra``, case-insensitively, as requests' headers did.

        A name given again keeps its first position but takes the new spelling and value.
        """
        merged: dict[str, tuple[str, str]] = {k.lower(): (k, v) for k, v in headers.items()}
        for k, v in extra.items():
            merged[k.lower()] = (k, v)
        for k, v in merged.values():
            _check_header(k, v)
        return dict(merged.values())

    def _drain(self, resp: Any, max_bytes: int) -> None:
        """Read and drop a body (raw bytes, at most ``max_bytes``); errors only cost reuse."""
        total = 0
        try:
            while True:
                chunk = resp.read1(_CHUNK, decode_content=False)
                if not chunk:
                    return
                total += len(chunk)
                if total > max_bytes:
                    break
        except Exception:
            pass
        _discard(resp)

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
