"""aiohttp server for a SandboxSite: every loopback IP of the resolver map on one port."""

from __future__ import annotations

import asyncio
import errno
import math
import socket
import ssl
import time
import weakref
from email.utils import formatdate, parsedate_to_datetime

from aiohttp import web

from .change_model import ChangeModel
from .changing import CLOCK_HEADER, ChangingReplies
from .latency import Answer, Failure
from .looplag import LoopLagMonitor, lag_path
from .pages import small_html
from .replies import Reply
from .requestlog import LogEntry, RequestLog
from .site import SandboxSite


def bind_all(ips: list[str], port: int = 0, attempts: int = 50) -> list[socket.socket]:
    """Listening sockets on every IP with one shared port. Port 0: the kernel picks a free port
    on the first IP; if another process holds it on a later IP, start over with a new one."""
    for _ in range(attempts):
        socks: list[socket.socket] = []
        chosen = port
        try:
            for ip in ips:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((ip, chosen))
                chosen = s.getsockname()[1]
                s.listen(1024)
                s.setblocking(False)
            return socks
        except OSError as exc:
            for s in socks:
                s.close()
            if exc.errno != errno.EADDRINUSE or port != 0:
                raise
    raise OSError(errno.EADDRINUSE, f"no port free on all of {len(ips)} IPs after {attempts} tries")


def _not_modified(request: web.BaseRequest, reply: Reply) -> bool:
    inm = request.headers.get("If-None-Match")
    if inm is not None:
        return inm.strip() == "*" or reply.etag in (t.strip() for t in inm.split(","))
    ims = request.headers.get("If-Modified-Since")
    if ims and reply.last_modified:
        try:
            return parsedate_to_datetime(reply.last_modified) <= parsedate_to_datetime(ims)
        except (TypeError, ValueError):
            return False
    return False


def _base_headers(reply: Reply, now: float, start: float) -> dict[str, str]:
    """The reply's own headers, and a Date of ``now`` when the virtual clock set it."""
    headers = {"Content-Type": reply.content_type, **dict(reply.headers)}
    if now != start:
        headers["Date"] = formatdate(int(now), usegmt=True)
    return headers


async def _trickle(request: web.BaseRequest, status: int, headers: dict[str, str], body: bytes,
                   answer: Answer) -> tuple[web.StreamResponse, float]:
    """Send ``body`` in ``answer.trickle_chunks`` chunks, the server time spread between them;
    returns the response and when its headers went out (the log's ``sent``)."""
    stream = web.StreamResponse(status=status, headers=headers)
    stream.content_length = len(body)
    await stream.prepare(request)
    sent = time.time()
    step = -(-len(body) // answer.trickle_chunks)
    for i in range(0, len(body), step):
        await asyncio.sleep(answer.delay_s / answer.trickle_chunks)
        await stream.write(body[i:i + step])
    await stream.write_eof()
    return stream, sent


class SandboxServer:
    def __init__(self, site: SandboxSite, log: RequestLog, change_epoch: float = 0.0) -> None:
        """``change_epoch``: wall time of the changing web's simulated second 0 (with
        config.changes)."""
        self.site = site
        self.log = log
        self._flaky_seen: set[tuple[str, str]] = set()
        c = site.config
        self.latency = c.latency_model() if c.latency else None
        #: (host, path) -> requests so far: the n of the latency model's draws
        self._asked: dict[tuple[str, str], int] = {}
        self._https = site.layout.https_hosts
        self.changes = ChangingReplies(site.replies, ChangeModel(c, change_epoch, site.layout)
                                       ) if c.changes else None
        #: transport -> requests served on it so far (LogEntry.conn_request)
        self._conn_requests: weakref.WeakKeyDictionary[object, int] = \
            weakref.WeakKeyDictionary()

    def _conn_request(self, request: web.BaseRequest) -> int:
        if request.transport is None:
            return 0
        n = self._conn_requests[request.transport] = \
            self._conn_requests.get(request.transport, 0) + 1
        return n

    def _misdirected(self, host: str, secure: bool) -> Reply | None:
        """A plain-HTTP host asked over TLS (the SNI of another host) answers 421. An HTTPS
        host asked over plain HTTP answers as over TLS: no link of the web points there, and
        tests that speak plain HTTP to any host keep working."""
        if secure and host not in self._https and host in self.site.layout.host_index:
            return Reply(421, small_html("Misdirected Request", host), "text/html", "error")
        return None

    async def _wait(self, request: web.BaseRequest, host: str, target: str,
                    first_on_conn: bool, secure: bool) -> Answer | None:
        """Sleep the latency model's server time (and a new connection's handshakes); a
        failure resets the connection (raises CancelledError) or hangs for hang_s. None
        without a latency model."""
        if self.latency is None:
            return None
        if first_on_conn:
            handshakes = self.latency.handshake_s(host, secure)
            if handshakes:
                await asyncio.sleep(handshakes)
        n = self._asked[(host, target)] = self._asked.get((host, target), 0) + 1
        answer = self.latency.answer(host, target, n)
        if answer.failure is Failure.RESET:
            await asyncio.sleep(answer.delay_s / 2)
            if request.transport is not None:
                request.transport.abort()
            # as a client's disconnect: aiohttp drops it quietly (a ConnectionResetError
            # would be logged with its traceback, about a millisecond each)
            raise asyncio.CancelledError("latency model: connection reset")
        if answer.failure is Failure.HANG:
            await asyncio.sleep(self.site.config.hang_s)
        elif not answer.trickle_chunks:
            await asyncio.sleep(answer.delay_s)
        return answer

    def _clock(self, request: web.BaseRequest, start: float) -> float:
        """The request's time: its CLOCK_HEADER under ``config.virtual_clock``, else ``start``
        (an unreadable header is answered at ``start``: a driver's bug shows as changes)."""
        if not self.site.config.virtual_clock:
            return start
        try:
            value = float(request.headers.get(CLOCK_HEADER, ""))
        except ValueError:
            return start
        return value if math.isfinite(value) and value >= 0 else start

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        start = time.time()
        host = (request.headers.get("Host") or "").rsplit(":", 1)[0].lower()
        target = request.raw_path
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        status = nbytes = 0
        sent, version = 0.0, None
        secure = request.transport is not None and \
            request.transport.get_extra_info("sslcontext") is not None
        conn_request = self._conn_request(request)
        try:
            reply = (secure and self._misdirected(host, secure)) or self.site.respond(host, target)
            now = self._clock(request, start)
            if self.changes is not None:
                reply, version = self.changes.serve(host, target, reply, now)
            answer = await self._wait(request, host, target, conn_request == 1, secure)
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            status, body = reply.status, reply.body
            headers = _base_headers(reply, now, start)
            if reply.first_status is not None and (host, target) not in self._flaky_seen:
                self._flaky_seen.add((host, target))
                status, body = reply.first_status, small_html("Unavailable", "try again")
                headers["Retry-After"] = "0"
            if status == 200 and (reply.etag or reply.last_modified):
                if reply.etag:
                    headers["ETag"] = reply.etag
                if reply.last_modified is not None:
                    headers["Last-Modified"] = reply.last_modified
                if reply.conditional and _not_modified(request, reply):
                    status, body = 304, b""
                    del headers["Content-Type"]
            if answer is not None and answer.trickle_chunks and len(body) > 1:
                stream, sent = await _trickle(request, status, headers, body, answer)
                nbytes = len(body)
                return stream
            resp = web.Response(status=status, body=body, headers=headers)
            await resp.prepare(request)
            sent = time.time()
            await resp.write_eof()
            nbytes = 0 if request.method == "HEAD" else len(body)
            return resp
        except (ConnectionError, asyncio.CancelledError):
            status = nbytes = 0
            raise
        finally:
            self.log.write(LogEntry(
                start=start, end=time.time(), host=host, ip=sock[0] if sock else "",
                path=target, method=request.method, status=status, bytes=nbytes,
                ua=request.headers.get("User-Agent", ""), sent=sent or time.time(),
                scheme="https" if secure else "http", version=version,
                conn_request=conn_request,
            ))


async def serve(site: SandboxSite, log: RequestLog, socks: list[socket.socket],
                stop: asyncio.Event, ready: asyncio.Event | None = None,
                tls_socks: list[socket.socket] | None = None,
                tls: ssl.SSLContext | None = None, change_epoch: float = 0.0) -> None:
    """Serve until ``stop`` is set, then close, cancel in-flight requests and flush the log.
    ``tls_socks`` (the HTTPS port on every IP) are served with ``tls`` (SNI-picked certs)."""
    server = SandboxServer(site, log, change_epoch)
    # keepalive_timeout: the internet-like web closes connections idle keepalive_idle_s
    # (aiohttp's own default, 75 s, otherwise).
    extra = {"keepalive_timeout": site.config.keepalive_idle_s} if site.config.latency else {}
    runner = web.ServerRunner(web.Server(server.handle, handler_cancellation=True, **extra),
                              shutdown_timeout=0.5, access_log=None)
    await runner.setup()
    for s in socks:
        await web.SockSite(runner, s, shutdown_timeout=0.5).start()
    for s in tls_socks or ():
        await web.SockSite(runner, s, shutdown_timeout=0.5, ssl_context=tls).start()
    log.start()
    lag = LoopLagMonitor(lag_path(log.path))
    lag.start()
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        lag.close()
        log.close()
