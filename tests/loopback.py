"""A plain HTTP server on a loopback address, for tests that need hand-made responses.

Real sockets and a real HTTP/1.1 server (http.server), so the client under test runs its own
connection, header and body code; only the answers are made by hand. Either pass a ``respond``
function (request -> Reply) or a BaseHTTPRequestHandler subclass for byte-level misbehaviour.
"""

from __future__ import annotations

import threading
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
