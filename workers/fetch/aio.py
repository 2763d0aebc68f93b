"""The :class:`AsyncFetcher`: :class:`~workers.fetch.fetcher.Fetcher`'s fetch on asyncio + aiohttp.

Why: a thread per fetch costs ~3 ms more CPU per page than one event loop
(docs/fetch-engine.md). Same behaviour, same :class:`FetchResult`: the same checked IP, the
same request bytes (:mod:`.request`), the same body caps and decoding (:mod:`.aio_body`), the
same error names for the same server behaviour (:mod:`.aio_errors`).

IP pinning: the request goes to ``scheme://<ip>:<port><path>`` with our own Host header and
``server_hostname=<host>``, so TLS SNI and the certificate check use the URL's host while the
socket goes to the IP the frontier checked. aiohttp's ConnectionKey holds ``server_hostname``
(also for plain http, where it is not otherwise used), so a kept-alive connection is reused
only for the same (IP, port, TLS, host name): two names on one IP never share one.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import functools
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.helpers import _EXC_SENTINEL
from yarl import URL

from frontier.config import DEFAULT_CONTENT_TYPES, CrawlConfig
from workers.dns.resolver import Resolver

from .aio_body import decoder_for, drain, read_body
from .aio_errors import classify_aio, detail_of
from .request import BodyAction, RobotsHops, _FetchBase
from .result import ROBOTS_FETCH_BYTES, FetchResult, truncation_of
from .tls import client_context

#: asyncio gives every TLS connection a read buffer of ``SSLProtocol.max_size`` (256 KiB in
#: CPython 3.11, zero-filled at once, so resident): on the internet-like web, where hosts idle
#: out between visits and most fetches open a connection, filling it was 2.4% of a worker's
#: CPU (bench/run --profile), and every kept-alive TLS connection held 256 KiB. A TLS record
#: is at most 16 KiB; 64 KiB still reads four at a time.
TLS_READ_BUFFER = 64 * 1024
_SKIP_AUTO = ("Accept", "Accept-Encoding", "User-Agent")  # only the headers we give are sent
_HTTP_VERSIONS = {(1, 0): "HTTP/1.0", (1, 1): "HTTP/1.1"}


class FetchControl:
    """Lets a caller end one fetch in progress: ``abort(why)``.

    The fetch then returns normally with ``error="aborted"``, ``error_detail=why`` and its body
    cut (``unspecified``) if a status was read; an abort before the fetch starts ends it
    before anything is sent. ``abort`` may be called from any thread. A cancellation that did
    not come from ``abort`` (``task.cancel()``) is not turned into a result: it propagates.
    One control per fetch.
    """

    __slots__ = ("_loop", "_task", "why")

    def __init__(self) -> None:
        self.why: str | None = None
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def abort(self, why: str) -> None:
        if self.why is not None:
            return
        self.why = why
        task, loop = self._task, self._loop
        if task is None or loop is None:
            return
        try:
            same = asyncio.get_running_loop() is loop
        except RuntimeError:
            same = False
        if same:
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)


class _BodyFailingHandler(ResponseHandler):
    """aiohttp's protocol, with one fix: a framing error found in a read after the response
    head (a bad chunk size after a good chunk) also fails the body being read. aiohttp 3.14
    sets it only on the protocol, whose reader is long done, and stops the read timeout, so
    the body read waited for ``total_timeout_s`` and the URL ended ``truncated`` after its
    retries instead of ``invalid_response`` at once (tests/workers/test_aio_fetcher.py)."""

    def set_exception(self, exc: BaseException, exc_cause: BaseException = _EXC_SENTINEL
                      ) -> None:
        body = self._payload
        super().set_exception(exc, exc_cause)
        if body is not None and not body.is_eof() and body.exception() is None:
            body.set_exception(exc, exc_cause)


class _BoundedConnector(aiohttp.TCPConnector):
    """A TCPConnector keeping idle connections for at most ``max_idle`` keys (least recently
    released closed first); the crawl sends one request per host at a time, so a key (IP,
    port, TLS, host name) rarely holds more than one. Uses aiohttp's ``_conns`` and
    ``_factory`` (3.14): its connections speak :class:`_BodyFailingHandler`."""

    def __init__(self, max_idle: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._max_idle = max_idle
        self._factory = functools.partial(_BodyFailingHandler, loop=self._loop)

    def _release(self, key: Any, protocol: Any, *, should_close: bool = False) -> None:
        super()._release(key, protocol, should_close=should_close)
        conns = self._conns
        if key in conns:
            conns[key] = conns.pop(key)  # most recently used last
        while len(conns) > self._max_idle:
            for proto, _ in conns.pop(next(iter(conns))):
                proto.close()


class AsyncFetcher(_FetchBase):
    """GETs URLs over pooled keep-alive aiohttp connections to pre-resolved, checked IPs.

    Use from one event loop; the session is made in it on first use. ``pool_connections``
    bounds the hosts with an idle keep-alive connection kept. Everything else as
    :class:`~workers.fetch.fetcher.Fetcher`; ``fetch`` never raises for network or HTTP
    problems (a bad ``extra_headers`` is the caller's bug and raises, as there).
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
        verify: bool | str = True,
        allow_missing_content_type: bool = True,
        accept: str = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
        extra_ca: str | None = None,
        pool_connections: int = 1000,
    ) -> None:
        self._init_common(resolver, user_agent, connect_timeout_s, read_timeout_s,
                          total_timeout_s, max_bytes, allowed_content_types, allow_private,
                          allowed_networks, verify, allow_missing_content_type, accept,
                          extra_ca)
        self.pool_connections = pool_connections
        # a verify path is checked per HTTPS fetch and loaded on first use, as Fetcher does
        self._ca_path = verify if isinstance(verify, str) and extra_ca is None else None
        self._ssl = None if self._ca_path else client_context(verify, extra_ca)
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout_s, sock_read=read_timeout_s,
            ceil_threshold=1e9)  # exact timeouts, not rounded up to whole seconds
        self._session: aiohttp.ClientSession | None = None
        asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER  # type: ignore[attr-defined]

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = _BoundedConnector(self.pool_connections, limit=0, limit_per_host=0,
                                          force_close=False)
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
                skip_auto_headers=_SKIP_AUTO, auto_decompress=False, timeout=self._timeout,
                max_line_size=65536, max_field_size=65536, max_headers=100)  # http.client's
            # aiohttp sends an idempotent request again, at once, when a kept-alive
            # connection fails under it (RFC 9112 §9.3.1 allows it): the host then gets two
            # requests with no delay between them, and a retry is the frontier's decision
            # (after the backoff). No public switch exists in 3.14; test_aio_fetcher.py
            # fails if this one stops working.
            self._session._retry_connection = False
        return self._session

    async def close(self) -> None:
        """Close all pooled connections (the fetcher stays usable; a new session on use)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- public API ------------------------------------------------------------------------
    async def fetch(self, url: str, ip: str | None = None,
                    extra_headers: Mapping[str, str] | None = None,
                    control: FetchControl | None = None, any_type: bool = False
                    ) -> FetchResult:
        """GET ``url`` (connecting to ``ip``, else the resolver's answer); redirects are not
        followed (a 3xx comes back with ``location``). See :class:`FetchControl`.
        ``any_type``: the body is read whatever its media type (a declared sitemap)."""
        return await self._fetch(url, ip, extra_headers, self.max_bytes, not any_type, True,
                                 control)

    async def fetch_robots(self, url: str, ip: str | None = None, hop_delay_s: float = 0.0,
                           control: FetchControl | None = None) -> FetchResult:
        """GET a robots.txt, following up to 5 redirects: as ``Fetcher.fetch_robots``."""
        hops = RobotsHops(url, ip)
        while True:
            res = await self._fetch(hops.current, hops.ip, None, ROBOTS_FETCH_BYTES, False,
                                    False, control)
            if not hops.follow(res):
                return hops.result(res)
            if hop_delay_s > 0:
                await asyncio.sleep(hop_delay_s)

    # -- internals -------------------------------------------------------------------------
    async def _fetch(self, url: str, ip: str | None, extra_headers: Mapping[str, str] | None,
                     max_bytes: int, filter_types: bool, truncation_is_error: bool,
                     control: FetchControl | None) -> FetchResult:
        res = FetchResult(url=url, started_at=time.time())
        target = self._target(res, url)
        if target is None:
            return res
        host = target.host.strip("[]")
        if ip is None:  # the resolver blocks: off the loop
            loop = asyncio.get_running_loop()
            ip = await loop.run_in_executor(None, self._resolve, res, host)
            if ip is None:
                return res
        if self._check_ip(res, host, ip) is None:
            return res
        default_port = 443 if target.scheme == "https" else 80
        headers = self._request_headers(target.host, target.port, default_port, extra_headers)
        res.request_headers = list(headers.items())
        path, _, query = target.path.partition("?")
        url_ip = URL.build(scheme=target.scheme, host=f"[{ip}]" if ":" in ip else ip,
                           port=target.port or default_port, path=path, query_string=query,
                           encoded=True)
        exchange = self._exchange(res, url_ip, host, headers, max_bytes, filter_types,
                                  truncation_is_error)
        t0 = time.monotonic()
        try:
            if control is None:
                await exchange
            else:
                await self._controlled(res, control, exchange)
        finally:
            res.elapsed_s = time.monotonic() - t0
        return res

    async def _controlled(self, res: FetchResult, control: FetchControl, exchange: Any) -> None:
        """Run ``exchange`` as a task ``control.abort`` can cancel; that cancel ends in an
        ``aborted`` result, any other propagates."""
        if control.why is not None:
            exchange.close()
            res.error, res.error_detail = "aborted", control.why
            return
        task = asyncio.ensure_future(exchange)
        control._loop, control._task = asyncio.get_running_loop(), task
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if control.why is None or (current is not None and current.cancelling()):
                raise
            res.error, res.error_detail = "aborted", control.why
            if res.status is not None:
                res.cut(truncation_of("aborted"))
        finally:
            control._task = None

    async def _exchange(self, res: FetchResult, url_ip: URL, host: str, headers: dict[str, str],
                        max_bytes: int, filter_types: bool, truncation_is_error: bool) -> None:
        """Send the GET and read the response into ``res``; sets ``res.error`` rather than
        raise (a cancellation propagates, with what was read kept in ``res``)."""
        resp: Any = None
        whole = False
        deadline = asyncio.timeout(self.total_timeout_s)
        try:
            async with deadline:
                https = url_ip.scheme == "https"
                if https and self._ssl is None:
                    if not os.path.exists(str(self._ca_path)):
                        raise OSError(  # what requests' cert_verify raised
                            f"Could not find a suitable TLS CA certificate bundle, "
                            f"invalid path: {self._ca_path}")
                    self._ssl = client_context(str(self._ca_path), None)
                resp = await self._get_session().request(
                    "GET", url_ip, headers=headers, allow_redirects=False,
                    ssl=self._ssl if https else True, server_hostname=host)
                whole = await self._read(res, resp, max_bytes, filter_types,
                                         truncation_is_error)
        except Exception as e:
            if deadline.expired():
                res.error = "timeout"
                res.error_detail = f"total timeout {self.total_timeout_s}s"
            else:
                res.error, res.error_detail = classify_aio(e), detail_of(e)
            if res.status is not None:  # the body stopped half-way
                res.cut(truncation_of(res.error))
        finally:
            if resp is not None:
                if whole and res.error is None and not res.truncated:
                    resp.release()
                else:
                    resp.close()  # a connection whose body was not read to the end

    async def _read(self, res: FetchResult, resp: Any, max_bytes: int,
                    filter_types: bool, truncation_is_error: bool) -> bool:
        """Head and body of ``resp`` into ``res``; True if the body was read to its end."""
        rh = resp.headers
        location = ", ".join(rh.getall("Location", ())) or None
        ctype = ", ".join(rh.getall("Content-Type", ())) or None
        version = _HTTP_VERSIONS.get(tuple(resp.version), "HTTP/1.1")
        head = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
        action = self._head(res, resp.status, resp.reason or "", version, head, location, ctype,
                            filter_types)
        if action is BodyAction.SKIP:
            return False
        if action is BodyAction.DRAIN:
            await drain(resp, max_bytes)
            return True
        encoding = ", ".join(rh.getall("Content-Encoding", ())) or None
        await read_body(resp, res, max_bytes, truncation_is_error, decoder_for(encoding),
                        encoding)
        return True
