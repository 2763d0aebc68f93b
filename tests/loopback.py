"""A plain HTTP server on a loopback address, for tests that need hand-made responses.

Real sockets and a real HTTP/1.1 server (http.server), so the client under test runs its own
connection, header and body code; only the answers are made by hand. Either pass a ``respond``
function (request -> Reply) or a BaseHTTPRequestHandler subclass for byte-level misbehaviour.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple, TypeVar


class Request(NamedTuple):
    """What a ``respond`` function sees of one GET (a plain tuple to compare with)."""

    #: Host header without its port.
    host: str
    #: Path with its query, as sent.
    target: str

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


class Reply(NamedTuple):
    status: int
    body: bytes = b""
    content_type: str | None = "text/html"
    headers: tuple[tuple[str, str], ...] = ()


Respond = Callable[[Request], Reply]


class ReplyHandler(BaseHTTPRequestHandler):
    """Answers every GET with its server's ``respond(request)``, Content-Length always set."""

    protocol_version = "HTTP/1.1"
    server: LoopbackServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        request = Request((self.headers.get("Host") or "").split(":")[0], self.path)
        self.server.record(request)
        assert self.server.respond is not None, "ReplyHandler needs a respond function"
        self.send_reply(self.server.respond(request))

    def send_reply(self, reply: Reply) -> None:
        self.send_response(reply.status)
        if reply.content_type is not None:
            self.send_header("Content-Type", reply.content_type)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)


class LoopbackServer(ThreadingHTTPServer):
    """A threaded HTTP server on ``addr`` (port 0: a free one), serving from a daemon thread.

    ``requests`` records what ReplyHandler saw, in arrival order; handlers of their own call
    ``record`` for the same.
    """

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler] = ReplyHandler,
                 addr: str = "127.0.0.1", port: int = 0, respond: Respond | None = None) -> None:
        super().__init__((addr, port), handler)
        self.respond = respond
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # clients hanging up on purpose (skips, timeouts) are expected

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def origin(self, host: str | None = None) -> str:
        """``http://host:port`` (host: the listening address unless a name is given)."""
        return f"http://{host or self.server_address[0]}:{self.port}"

    def record(self, request: Request) -> None:
        with self.lock:
            self.requests.append(request)

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(5)


#: The ``http_server`` fixture: ``http_server(respond=...)`` or ``http_server(Handler, addr)``.
HTTPServerFactory = Callable[..., LoopbackServer]


ServerT = TypeVar("ServerT", bound=LoopbackServer)


@contextmanager
def serving(server: ServerT) -> Iterator[ServerT]:
    """Run ``server`` for the block (for a test that needs one outside the fixtures)."""
    server.start()
    try:
        yield server
    finally:
        server.stop()


#: The page :class:`CutBodyHandler` serves (whole at ``/whole``, cut elsewhere): 100,000 bytes
#: of HTML with enough text that near-duplicate detection takes it (and any fragment of it),
#: its links all to another site (out of a crawl's scope: nothing more to fetch).
_PARAS = b"".join(b"<p>paragraph %d of a page about hostile servers and the bodies they cut "
                  b"short, <a href=\"http://elsewhere.example/%d\">link %d</a></p>\n" % (i, i, i)
                  for i in range(600))
CUT_PAGE = (b"<html><head><title>cut</title></head><body>" + _PARAS).ljust(
    100_000 - len(b"</body></html>"), b" ") + b"</body></html>"


class CutBodyHandler(BaseHTTPRequestHandler):
    """A hostile server: its bodies announce ``Content-Length: 100000`` (:data:`CUT_PAGE`);
    the path says how one ends (``?n=`` bytes sent first, default 18):

    - ``/short``: ``n`` bytes, then the connection closed (FIN);
    - ``/reset``: ``n`` bytes, then a reset (RST);
    - ``/trickle``: ``n`` bytes, then one byte a second until the client gives up;
    - ``/whole``: the whole page (the negative control); ``/big``: three times the page,
      whole (for a byte cap below it);
    - ``/badchunk``: chunked, the chunk ``hello``, then (0.1 s later) a bad chunk size, and
      the connection kept open 6 s more, as a hostile server may; anything else: 404.
    """

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: LoopbackServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        self.server.record(Request((self.headers.get("Host") or "").split(":")[0], self.path))
        n = int(query[2:]) if query.startswith("n=") else 18
        if path == "/badchunk":
            self._bad_chunk()
            return
        if path not in ("/short", "/reset", "/trickle", "/whole", "/big"):
            self.send_error(404)
            return
        body = CUT_PAGE * 3 if path == "/big" else CUT_PAGE
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if path in ("/whole", "/big"):
            self.wfile.write(body)
            return
        self.close_connection = True
        try:
            self.wfile.write(body[:n])
            self.wfile.flush()
            if path == "/reset":  # SO_LINGER 0: close() sends RST, not FIN
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
            elif path == "/trickle":
                for byte in body[n:n + 60]:
                    time.sleep(1.0)
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
        except OSError:
            pass  # the client hung up (its time cap)

    def _bad_chunk(self) -> None:
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self.wfile.write(b"5\r\nhello\r\n")
            self.wfile.flush()
            time.sleep(0.1)  # the error comes in a later read than the head
            self.wfile.write(b"zz\r\nmore\r\n")
            self.wfile.flush()
            time.sleep(6)  # a client that missed the error waits for its own time cap
        except OSError:
            pass
