"""A hostile web: one host per kind of bad server, answering with raw bytes on loopback.

Why raw asyncio streams and not aiohttp or http.server: most cases break HTTP itself (a status
line that is not one, a Content-Length that lies, chunk framing that breaks, headers without
end), which a well-behaved server library refuses to send. Every connection serves one
request and is closed, so what a case does to one response cannot leak into the next.

The cases (host name -> behaviour) are in :mod:`sandbox.hostile_cases`; the certificates of
the TLS cases in :mod:`sandbox.hostile_tls`; the DNS cases' name server in
:mod:`sandbox.hostile_dns`. :class:`HostileServer` runs all of them on one plain port and
one TLS port of 127.0.0.1 (a crawl maps every case's host name to it, ``static_hosts``),
in a thread of its own, and logs every request it answered (:class:`Hit`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

#: The hostile web's domain: every case is ``<case>.hostile.test``.
DOMAIN = "hostile.test"
#: The longest request head read (a crawler's is a few hundred bytes).
_MAX_HEAD = 64 * 1024


@dataclass(slots=True)
class Hit:
    """One request as the server saw it, with how many body bytes it got out."""

    host: str
    path: str
    tls: bool
    start: float
    end: float = 0.0
    sent: int = 0


class Conn:
    """One request on one connection, for a case's handler: what was asked and ways to answer.

    ``send`` counts the bytes it writes into the request's :class:`Hit`; a client that hung
    up raises ``ConnectionError`` out of ``send``, which ends the handler quietly.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hit: Hit,
                 server: HostileServer) -> None:
        self.reader = reader
        self.writer = writer
        self.hit = hit
        self.server = server

    @property
    def host(self) -> str:
        return self.hit.host

    @property
    def path(self) -> str:
        """The request's path without its query (a case answers by path; a crawl may add a
        query to make a seed new again)."""
        return self.hit.path.split("?", 1)[0]

    def origin(self, host: str, tls: bool = False) -> str:
        """``scheme://host:port`` of a host of this web."""
        port = self.server.tls_port if tls else self.server.port
        return f"{'https' if tls else 'http'}://{host}:{port}"

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()
        self.hit.sent += len(data)

    async def head(self, status: str, headers: list[tuple[str, str]]) -> None:
        """A status line (as given, e.g. ``"200 OK"``) and headers, then the blank line."""
        lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers), "", ""]
        await self.send("\r\n".join(lines).encode("latin-1"))

    async def reply(self, status: str, body: bytes, ctype: str | None = "text/html",
                    headers: tuple[tuple[str, str], ...] = ()) -> None:
        """An honest response: Content-Length, Connection: close."""
        head = [("Content-Type", ctype)] if ctype else []
        await self.head(status, [*head, *headers, ("Content-Length", str(len(body))),
                                  ("Connection", "close")])
        await self.send(body)

    async def stream(self, chunk: bytes, total: int, pause_s: float = 0.0) -> None:
        """``chunk`` again and again until ``total`` bytes went out (or the client left)."""
        while self.hit.sent < total:
            await self.send(chunk)
            if pause_s:
                await asyncio.sleep(pause_s)

    def reset(self) -> None:
        """Close with a TCP reset (RST), not a FIN."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            import socket
            import struct
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()


Handler = Callable[[Conn], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    """One hostile host: what it does (``handle``, for every path but robots.txt unless
    ``robots`` is given), how the crawl reaches it, and the family it is reported in."""

    name: str
    family: str
    handle: Handler
    #: what the issue calls this case (the docs table's first column)
    title: str
    #: path of the seed URL
    path: str = "/"
    #: answers /robots.txt (None: 404, everything allowed)
    robots: Handler | None = None
    #: served over TLS with this fault (a key of ``sandbox.hostile_tls.FAULTS``); None: http
    tls: str | None = None
    #: resolved through the hostile name server (``sandbox.hostile_dns``), not static_hosts
    dns: str | None = None
    #: extra host names (of this domain) the case's pages point to and serves itself
    aliases: tuple[str, ...] = ()
    #: the seed's port instead of the server's (1: nothing listens there)
    port: int | None = None

    @property
    def host(self) -> str:
        return f"{self.name}.{DOMAIN}"

    def seed(self, port: int, tls_port: int) -> str:
        scheme, p = ("https", tls_port) if self.tls else ("http", port)
        p = self.port or p
        return f"{scheme}://{self.host}:{p}{self.path}"


async def not_found(conn: Conn) -> None:
    await conn.reply("404 Not Found", b"not here", "text/plain")


@dataclass
class HostileServer:
    """All ``cases`` on 127.0.0.1: ``port`` (plain) and ``tls_port`` (``tls`` picks each
    host's certificate by SNI). Start with ``with`` or :meth:`start`; ``hits`` logs requests."""

    cases: list[Case]
    tls: ssl.SSLContext | None = None
    addr: str = "127.0.0.1"
    port: int = 0
    tls_port: int = 0
    hits: list[Hit] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_host: dict[str, Case] = {}
        for case in self.cases:
            for name in (case.name, *case.aliases):
                self._by_host[f"{name}.{DOMAIN}"] = case
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="hostile-web")
        self._servers: list[asyncio.base_events.Server] = []
        self._tasks: set[asyncio.Task[None]] = set()

    # -- life ------------------------------------------------------------------------------
    def start(self) -> HostileServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            for s in self._servers:
                s.close()
            for t in list(self._tasks):
                t.cancel()
            await asyncio.sleep(0)
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _listen(self) -> None:
        plain = await asyncio.start_server(self._plain, self.addr, self.port, limit=_MAX_HEAD)
        self._servers.append(plain)
        self.port = plain.sockets[0].getsockname()[1]
        if self.tls is not None:
            secure = await asyncio.start_server(self._secure, self.addr, self.tls_port,
                                                ssl=self.tls, limit=_MAX_HEAD,
                                                ssl_handshake_timeout=5)
            self._servers.append(secure)
            self.tls_port = secure.sockets[0].getsockname()[1]

    # -- requests --------------------------------------------------------------------------
    def requests(self, host: str, path: str | None = None) -> list[Hit]:
        """The requests ``host`` answered (of ``path`` only, if given), in arrival order."""
        with self._lock:
            return [h for h in self.hits if h.host == host and (path is None or h.path == path)]

    async def _plain(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._serve(reader, writer, False)

    async def _secure(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._serve(reader, writer, True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     tls: bool) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        hit: Hit | None = None
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            hit = self._hit(head, tls)
            case = self._by_host.get(hit.host)
            conn = Conn(reader, writer, hit, self)
            if case is None:
                await conn.reply("421 Misdirected Request", b"no such host here", "text/plain")
            elif conn.path == "/robots.txt":
                await (case.robots or not_found)(conn)
            else:
                await case.handle(conn)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                TimeoutError, ssl.SSLError, OSError):
            pass  # the client hung up, or spoke no HTTP: nothing to answer
        finally:
            if hit is not None:
                hit.end = time.time()
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _hit(self, head: bytes, tls: bool) -> Hit:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        path = parts[1] if len(parts) > 1 else ""
        host = ""
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "host":
                host = value.strip().rsplit(":", 1)[0].lower()
        hit = Hit(host, path, tls, time.time())
        with self._lock:
            self.hits.append(hit)
        return hit

