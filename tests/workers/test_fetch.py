"""Tests for workers.fetch against real HTTP servers on loopback addresses (no mocked HTTP)."""

from __future__ import annotations

import functools
import gzip
import json
import random
import shutil
import socket
import ssl
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import certifi
import pytest
import requests
import trustme
import urllib3.util

import workers.fetch.prepare as fetch_mod
from frontier.useragent import user_agent
from tests.loopback import CUT_PAGE, CutBodyHandler, LoopbackServer, serving
from workers.dns.resolver import CachingResolver
from workers.fetch import ROBOTS_FETCH_BYTES, ROBOTS_MAX_BYTES, Fetcher, LoopFetcher


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str | None = "text/html",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        if ctype is not None:
            self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(parts.query).items()}
        path = parts.path
        with self.server.lock:
            self.server.log.append((self.headers.get("Host"), path, self.client_address))
        if path == "/echo":
            body = json.dumps({
                "host": self.headers.get("Host"),
                "local": self.connection.getsockname()[0],
                "ua": self.headers.get("User-Agent"),
                "accept_encoding": self.headers.get("Accept-Encoding"),
                "x_extra": self.headers.get("X-Extra"),
                "cookie": self.headers.get("Cookie"),
            }).encode()
            self._send(200, body, "text/plain; charset=utf-8",
                       {"Set-Cookie": "sid=1; Path=/", "X-Dup": "a"})
        elif path == "/big":
            self._send(200, b"x" * int(q["n"]))
        elif path == "/image":
            self.send_response(200)
            self.send_header("Content-Type", "image/PNG")
            n = 50 * 1024 * 1024
            self.send_header("Content-Length", str(n))
            self.end_headers()
            try:
                block = b"\0" * 65536
                for _ in range(n // len(block)):
                    self.wfile.write(block)
            except OSError:
                self.server.aborted.set()
        elif path == "/notype":
            self._send(200, b"no type", None)
        elif path == "/redirect":
            body = b"x" * int(q["n"]) if "n" in q else b"<a>moved</a>"
            self._send(int(q.get("code", "301")), body, "text/html", {"Location": q["to"]})
        elif path == "/sleep":
            time.sleep(float(q["s"]))
            self._send(200, b"late")
        elif path == "/trickle":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for _ in range(1000):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
        elif path == "/slowheaders":
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                for i in range(90):  # http.client allows 100 header lines
                    self.wfile.write(b"X-Slow-%d: 1\r\n" % i)
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
            self.close_connection = True
        elif path == "/reset":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"y" * 1000)
            self.wfile.flush()
            # RST instead of FIN: SO_LINGER with zero timeout
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.connection.close()
            self.close_connection = True
        elif path == "/short":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "5000")
            self.end_headers()
            self.wfile.write(b"z" * 100)
            self.close_connection = True
        elif path == "/gzip":
            raw = b"<html>" + b"hello gzip " * 1000 + b"</html>"
            self._send(200, gzip.compress(raw), "text/html", {"Content-Encoding": "gzip"})
        elif path == "/deflate":
            raw = b"hello deflate " * 500
            self._send(200, zlib.compress(raw), "text/html", {"Content-Encoding": "deflate"})
        elif path == "/bomb":
            self._send(200, self.server.bomb, "text/html", {"Content-Encoding": "gzip"})
        elif path == "/garbage":
            self.wfile.write(b"HELLO THERE\r\n\r\n")
            self.close_connection = True
        elif path.startswith("/hop/"):
            n = int(path.rsplit("/", 1)[1])
            if n == 0:
                self._send(200, b"User-agent: *\nDisallow: /private\n", "text/plain")
            else:
                self._send(302, b"", "text/html", {"Location": f"/hop/{n - 1}"})
        elif path == "/robots.txt":
            self._send(200, b"User-agent: *\nDisallow: /a\n" + b"# pad\n" * 200_000,
                       "text/html")
        else:
            self._send(404, b"not found")


@functools.cache
def gzip_bomb() -> bytes:
    """64 MiB of zeros, gzipped to ~65 KB: made once, not per server."""
    return gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)


class Server(LoopbackServer):
    """The shared loopback server with Handler's misbehaving paths and what they record."""

    def __init__(self, addr: str, port: int = 0) -> None:
        super().__init__(Handler, addr, port)
        #: (Host header, path, client (ip, port)) per request; one client port = one connection
        self.log: list[tuple[str | None, str, tuple[str, int]]] = []
        self.aborted = threading.Event()
        self.bomb = gzip_bomb()


@pytest.fixture(scope="module")
def srv1() -> Iterator[Server]:
    with serving(Server("127.0.0.1")) as s:
        yield s


@pytest.fixture(scope="module")
def srv2() -> Iterator[Server]:
    with serving(Server("127.0.0.2")) as s:
        yield s


STATIC = {
    "foo.sandbox.test": "127.0.0.2",
    "bar.sandbox.test": "127.0.0.1",
    "a.sandbox.test": "127.0.0.1",
    "b.sandbox.test": "127.0.0.2",
    "evil.example": "10.0.0.1",
}


def make_fetcher(cls: type[Any] = Fetcher, **kw: object) -> Any:
    resolver = CachingResolver(static=STATIC, allow_private=True)
    args: dict[str, object] = {"allow_private": True, "connect_timeout_s": 2.0,
                               "read_timeout_s": 2.0, "total_timeout_s": 5.0}
    args.update(kw)
    return cls(resolver, user_agent(), **args)


class Make:
    """The ``make`` fixture: ``make(**kw)`` builds the fetcher under test (``cls``: Fetcher,
    urllib3 on threads, or LoopFetcher, aiohttp on an event loop), closed after the test."""

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.made: list[Any] = []

    def __call__(self, **kw: object) -> Any:
        f = make_fetcher(self.cls, **kw)
        self.made.append(f)
        return f


@pytest.fixture(params=[Fetcher, LoopFetcher], ids=["urllib3", "aiohttp"])
def make(request: pytest.FixtureRequest) -> Iterator[Make]:
    m = Make(request.param)
    yield m
    for f in m.made:
        f.close()


@pytest.fixture()
def fetcher(make: Make) -> Any:
    return make()


def test_connects_to_resolved_ip_with_host_header(fetcher: Any, srv2: Server) -> None:
    url = f"http://foo.sandbox.test:{srv2.port}/echo"
    r = fetcher.fetch(url, extra_headers={"X-Extra": "1"})
    assert r.ok, r
    seen = json.loads(r.body)
    assert seen["local"] == "127.0.0.2"
    assert seen["host"] == f"foo.sandbox.test:{srv2.port}"
    assert seen["ua"] == user_agent()
    assert seen["x_extra"] == "1"
    assert r.ip == "127.0.0.2"
    assert r.status == 200 and r.reason == "OK" and r.http_version == "HTTP/1.1"
    assert r.content_type == "text/plain"
    assert r.header("content-type") == "text/plain; charset=utf-8"
    assert ("X-Dup", "a") in r.headers
    assert ("Host", f"foo.sandbox.test:{srv2.port}") in r.request_headers
    assert r.elapsed_s > 0 and abs(r.started_at - time.time()) < 10
    # cookies are never stored or sent back
    r2 = fetcher.fetch(url)
    assert json.loads(r2.body)["cookie"] is None


def test_given_ip_overrides_resolver(fetcher: Any, srv1: Server) -> None:
    # foo.sandbox.test resolves to 127.0.0.2, but the caller's IP wins
    r = fetcher.fetch(f"http://foo.sandbox.test:{srv1.port}/echo", ip="127.0.0.1")
    assert r.ok and r.ip == "127.0.0.1"
    seen = json.loads(r.body)
    assert seen["local"] == "127.0.0.1" and seen["host"] == f"foo.sandbox.test:{srv1.port}"


def test_same_host_port_different_ip_never_reuses_connection(fetcher: Any) -> None:
    # One port number bound on 127.0.0.1 and on 127.0.0.2 by two servers.
    for _ in range(20):
        a = Server("127.0.0.1").start()
        try:
            b = Server("127.0.0.2", a.port).start()
        except OSError:
            a.stop()
            continue
        break
    else:
        pytest.skip("could not bind one port on two loopback addresses")
    try:
        url = f"http://moving.sandbox.test:{a.port}/echo"
        got = [json.loads(fetcher.fetch(url, ip=ip).body)["local"]
               for ip in ("127.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.2")]
        assert got == ["127.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.2"]
        # keep-alive per (host, IP): each server saw its two requests on one connection
        assert len(a.log) == 2 and len({peer for _, _, peer in a.log}) == 1
        assert len(b.log) == 2 and len({peer for _, _, peer in b.log}) == 1
    finally:
        for srv in (a, b):
            srv.stop()


def test_keep_alive_reuses_connection(fetcher: Any, srv1: Server) -> None:
    before = len(srv1.log)
    for _ in range(5):
        assert fetcher.fetch(f"http://bar.sandbox.test:{srv1.port}/echo").ok
    assert len({peer for _, _, peer in srv1.log[before:]}) == 1


def test_redirect_not_followed(fetcher: Any, srv1: Server) -> None:
    r = fetcher.fetch(f"http://bar.sandbox.test:{srv1.port}/redirect?to=/elsewhere&code=302")
    assert r.status == 302 and r.is_redirect and r.location == "/elsewhere"
    assert r.error is None and not r.ok
    assert not any(p == "/elsewhere" for _, p, _ in srv1.log)


def test_size_cap(srv1: Server, make: Make) -> None:
    f = make(max_bytes=100_000)
    r = f.fetch(f"http://bar.sandbox.test:{srv1.port}/big?n=1000000")
    assert r.error == "too_large" and r.truncated and r.truncation == "length"
    assert r.status == 200 and len(r.body) == 100_000 and not r.network_cut
    exact = f.fetch(f"http://bar.sandbox.test:{srv1.port}/big?n=100000")
    assert exact.ok and len(exact.body) == 100_000 and not exact.truncated
    assert exact.truncation is None and exact.cut_reason is None
    f.close()


def test_content_type_skipped(fetcher: Any, srv1: Server) -> None:
    t0 = time.monotonic()
    r = fetcher.fetch(f"http://bar.sandbox.test:{srv1.port}/image")
    assert time.monotonic() - t0 < 2.0
    assert r.status == 200 and r.error == "content_type_skipped"
    assert r.content_type == "image/png" and r.body == b""
    assert srv1.aborted.wait(5.0)  # the server saw the connection go away
    r2 = fetcher.fetch(f"http://bar.sandbox.test:{srv1.port}/notype")
    assert r2.ok and r2.content_type is None and r2.body == b"no type"


def test_gzip_and_deflate_decoded(fetcher: Any, srv1: Server) -> None:
    r = fetcher.fetch(f"http://bar.sandbox.test:{srv1.port}/gzip")
    assert r.ok and r.body == b"<html>" + b"hello gzip " * 1000 + b"</html>"
    assert r.header("Content-Encoding") == "gzip"
    r = fetcher.fetch(f"http://bar.sandbox.test:{srv1.port}/deflate")
    assert r.ok and r.body == b"hello deflate " * 500


def test_decompression_bomb_capped(srv1: Server, make: Make) -> None:
    f = make(max_bytes=5 * 1024 * 1024)
    t0 = time.monotonic()
    r = f.fetch(f"http://bar.sandbox.test:{srv1.port}/bomb")  # 64 MiB of zeros, ~65 KB gzip
    assert r.error == "too_large" and len(r.body) == 5 * 1024 * 1024 and r.truncated
    assert time.monotonic() - t0 < 2.0
    f.close()


def test_read_timeout_server_sleeps(srv1: Server, make: Make) -> None:
    f = make(read_timeout_s=0.5)
    t0 = time.monotonic()
    r = f.fetch(f"http://bar.sandbox.test:{srv1.port}/sleep?s=3")
    dt = time.monotonic() - t0
    assert r.error == "timeout" and r.status is None
    assert 0.4 < dt < 1.5
    f.close()


def test_total_timeout_trickle(srv1: Server, make: Make) -> None:
    f = make(read_timeout_s=1.0, total_timeout_s=1.0)
    t0 = time.monotonic()
    r = f.fetch(f"http://bar.sandbox.test:{srv1.port}/trickle")
    dt = time.monotonic() - t0
    assert r.error == "timeout" and r.status == 200 and r.truncated and r.truncation == "time"
    assert 0 < len(r.body) < 100
    assert 0.9 < dt < 1.6, dt
    f.close()


def test_total_timeout_while_headers_trickle(srv1: Server, make: Make) -> None:
    """The watchdog interrupts a blocked read that the per-read timeout never trips."""
    f = make(read_timeout_s=1.0, total_timeout_s=1.0)
    t0 = time.monotonic()
    r = f.fetch(f"http://bar.sandbox.test:{srv1.port}/slowheaders")
    dt = time.monotonic() - t0
    assert r.error == "timeout", (r.error, r.error_detail)
    if make.cls is Fetcher:
        # the status line arrived, the headers never ended: http.client takes the EOF of the
        # shut socket for their end, so a timeout with a truncated response
        assert r.truncated and r.status == 200
    else:  # aiohttp parses a head as a whole: no status was read, nothing to truncate
        assert not r.truncated and r.status is None
    assert 0.9 < dt < 1.6, dt
    # the fetcher is still usable afterwards
    assert f.fetch(f"http://bar.sandbox.test:{srv1.port}/echo").ok
    f.close()


def test_listening_socket_never_answers(make: Make) -> None:
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(0)  # never accept: the kernel completes the handshake, nobody answers
    port = lsock.getsockname()[1]
    try:
        f = make(connect_timeout_s=0.5, read_timeout_s=0.5, total_timeout_s=3.0)
        t0 = time.monotonic()
        r = f.fetch(f"http://bar.sandbox.test:{port}/")
        dt = time.monotonic() - t0
        assert r.error == "timeout" and r.status is None
        assert dt < 1.5
        # Fill the accept queue so further SYNs are dropped: a connect timeout.
        fillers = []
        for _ in range(4):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            fillers.append(s)
        time.sleep(0.1)
        t0 = time.monotonic()
        r = f.fetch(f"http://bar.sandbox.test:{port}/")
        dt = time.monotonic() - t0
        assert r.error == "timeout"
        assert dt < 1.5
        for s in fillers:
            s.close()
        f.close()
    finally:
        lsock.close()


def test_connection_refused(make: Make) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    f = make()
    r = f.fetch(f"http://bar.sandbox.test:{port}/")
    assert r.error == "connect_error" and r.status is None
    f.close()


def test_connection_reset_mid_body(fetcher: Any, srv1: Server) -> None:
    r = fetcher.fetch(f"http://bar.sandbox.test:{srv1.port}/reset")
    assert r.error == "connection_reset", r.error_detail
    assert r.status == 200 and r.truncated and r.truncation == "disconnect"
    assert len(r.body) <= 1000
    r = fetcher.fetch(f"http://bar.sandbox.test:{srv1.port}/short")
    assert r.error == "connection_reset", r.error_detail
    assert r.truncated and r.body == b"z" * 100 and r.truncation == "disconnect"


@pytest.fixture(scope="module")
def hostile() -> Iterator[LoopbackServer]:
    with serving(LoopbackServer(CutBodyHandler)) as s:
        yield s


def test_cut_bodies_are_marked_with_their_reason(hostile: LoopbackServer, make: Make) -> None:
    """The three bodies of the hostile-input issue, each announcing 100,000 bytes: (a) 18
    bytes then the connection closed, (b) a reset after 3,000, (c) one byte a second until
    total_timeout_s. Each is a 200 marked cut with its WARC-Truncated reason, worth another
    try (``network_cut``); the whole page of the same server is not marked."""
    f = make(read_timeout_s=2.0, total_timeout_s=1.5)
    base = f"http://bar.sandbox.test:{hostile.port}"
    a = f.fetch(base + "/short")
    assert (a.status, a.error, a.truncated, a.truncation) == (
        200, "connection_reset", True, "disconnect"), a.error_detail
    assert a.body == CUT_PAGE[:18] and a.network_cut
    assert "IncompleteRead(18 bytes read, 99982 more expected)" in (a.error_detail or "")
    b = f.fetch(base + "/reset?n=3000")
    assert (b.status, b.error, b.truncated, b.truncation) == (
        200, "connection_reset", True, "disconnect"), b.error_detail
    # the kernel may drop what was not read yet when the RST arrives
    assert len(b.body) <= 3000 and b.body == CUT_PAGE[:len(b.body)] and b.network_cut
    t0 = time.monotonic()
    c = f.fetch(base + "/trickle?n=100")
    dt = time.monotonic() - t0
    assert (c.status, c.error, c.truncated, c.truncation) == (200, "timeout", True, "time")
    assert 100 <= len(c.body) < 103 and c.body == CUT_PAGE[:len(c.body)] and c.network_cut
    assert 1.4 < dt < 2.5, dt
    whole = f.fetch(base + "/whole")
    assert whole.ok and whole.body == CUT_PAGE and whole.error is None
    assert not whole.truncated and whole.truncation is None and not whole.network_cut
    f.close()


def test_a_bad_chunk_size_is_an_invalid_response_in_both_engines(hostile: LoopbackServer,
                                                                  make: Make) -> None:
    """Chunked framing broken after a good chunk: the server sent bytes that are no HTTP,
    not a network cut. Both engines say ``invalid_response`` (not worth a quick retry), keep
    the good bytes and mark the body cut. http.client reports it as an incomplete read
    whose cause is the failed chunk-size parse; aiohttp as a bad chunk size."""
    f = make(read_timeout_s=2.0, total_timeout_s=3.0)
    t0 = time.monotonic()
    r = f.fetch(f"http://bar.sandbox.test:{hostile.port}/badchunk")
    assert time.monotonic() - t0 < 2.0
    assert (r.status, r.error, r.truncated, r.truncation) == (
        200, "invalid_response", True, "unspecified"), r.error_detail
    assert "chunk size" in (r.error_detail or "") and r.body == b"hello"
    assert not r.network_cut
    f.close()


def test_a_robots_txt_cut_short_is_unreachable_not_parsed(hostile: LoopbackServer,
                                                           make: Make) -> None:
    """A robots.txt whose body the network cut may have lost its Disallow lines: the policy
    is "unavailable" (disallow all, retried after the error TTL), not the part that came."""
    from workers.pipeline.robots import RobotsPolicy

    f = make(read_timeout_s=2.0, total_timeout_s=1.5)
    base = f"http://bar.sandbox.test:{hostile.port}"
    for path in ("/short", "/reset?n=3000", "/trickle?n=20"):
        res = f.fetch_robots(base + path)
        policy = RobotsPolicy.from_fetch(res)
        assert res.status == 200 and res.network_cut, (path, res.error)
        assert policy.kind == "unavailable" and "cut short" in (policy.reason or ""), path
        assert not policy.allowed(base + "/anything")
    whole = f.fetch_robots(base + "/whole")  # negative control: the same server, whole
    assert RobotsPolicy.from_fetch(whole).kind == "parsed"
    assert RobotsPolicy.from_response(200, CUT_PAGE[:18]).kind == "parsed"  # what it was
    f.close()


def test_invalid_response(fetcher: Any, srv1: Server) -> None:
    r = fetcher.fetch(f"http://bar.sandbox.test:{srv1.port}/garbage")
    assert r.error == "invalid_response", (r.error, r.error_detail)


def test_forbidden_ip_refused_without_connecting(srv1: Server, make: Make) -> None:
    resolver = CachingResolver(static=STATIC, allow_private=True)
    f = make.cls(resolver, user_agent())  # allow_private=False
    make.made.append(f)
    before = len(srv1.log)
    r = f.fetch(f"http://bar.sandbox.test:{srv1.port}/echo")
    assert r.error == "forbidden_ip" and r.status is None and r.ip == "127.0.0.1"
    r = f.fetch(f"http://x.test:{srv1.port}/echo", ip="::ffff:127.0.0.1")
    assert r.error == "forbidden_ip"
    # the resolver's own guard maps to forbidden_ip too
    strict = make.cls(CachingResolver(static=STATIC), user_agent())
    make.made.append(strict)
    r = strict.fetch("http://evil.example/")
    assert r.error == "forbidden_ip" and r.ip == "10.0.0.1"  # refused, never connected
    assert len(srv1.log) == before


def test_dns_failure_and_bad_urls(fetcher: Any) -> None:
    r = fetcher.fetch("http://no-such-host.invalid/")
    assert r.error == "dns"
    for bad in ("ftp://x.test/", "not a url", "http:///nohost"):
        assert fetcher.fetch(bad).error == "invalid_url", bad


def test_robots_follows_up_to_five_redirects(fetcher: Any, srv1: Server) -> None:
    base = f"http://bar.sandbox.test:{srv1.port}"
    r = fetcher.fetch_robots(f"{base}/hop/5")
    assert r.ok and b"Disallow: /private" in r.body
    assert r.url == f"{base}/hop/0" and len(r.redirects) == 5
    r = fetcher.fetch_robots(f"{base}/hop/6")
    assert r.error == "too_many_redirects" and r.status == 302
    assert r.url == f"{base}/hop/1"
    hops = [p for _, p, _ in srv1.log if p.startswith("/hop/")]
    assert "/hop/0" in hops


def test_robots_redirect_to_other_host(fetcher: Any, srv1: Server, srv2: Server) -> None:
    target = f"http://foo.sandbox.test:{srv2.port}/hop/0"
    r = fetcher.fetch_robots(
        f"http://bar.sandbox.test:{srv1.port}/redirect?to={target}", ip="127.0.0.1"
    )
    assert r.ok and r.ip == "127.0.0.2" and r.url == target


def test_robots_cap_truncates_without_error(fetcher: Any, srv1: Server) -> None:
    r = fetcher.fetch_robots(f"http://bar.sandbox.test:{srv1.port}/robots.txt")
    assert r.ok and r.error is None and r.truncated and r.truncation == "length"
    assert len(r.body) == ROBOTS_FETCH_BYTES
    # a little more than the parser keeps, so the parser sees the cut
    assert ROBOTS_FETCH_BYTES > ROBOTS_MAX_BYTES
    assert r.content_type == "text/html"  # robots accepts any media type


def test_concurrent_fetches_to_different_hosts(srv1: Server, srv2: Server, make: Make) -> None:
    f = make()
    jobs = []
    for i in range(200):
        host, srv, local = [("a.sandbox.test", srv1, "127.0.0.1"),
                            ("b.sandbox.test", srv2, "127.0.0.2"),
                            ("foo.sandbox.test", srv2, "127.0.0.2")][i % 3]
        jobs.append((f"http://{host}:{srv.port}/echo", host, srv.port, local))

    def run(job: tuple[str, str, int, str]) -> bool:
        url, host, port, local = job
        r = f.fetch(url)
        seen = json.loads(r.body)
        return r.ok and seen["host"] == f"{host}:{port}" and seen["local"] == local

    with ThreadPoolExecutor(16) as ex:
        results = list(ex.map(run, jobs))
    assert all(results)
    f.close()


def test_per_fetch_overhead(srv1: Server, make: Make) -> None:
    """Not a benchmark gate: prints the loopback cost of one keep-alive fetch."""
    f = make()
    url = f"http://bar.sandbox.test:{srv1.port}/big?n=17000"
    f.fetch(url)
    n = 300
    t0 = time.perf_counter()
    for _ in range(n):
        assert f.fetch(url).ok
    per = (time.perf_counter() - t0) / n
    print(f"\nper-fetch wall time on loopback (17 KB, keep-alive): {per * 1e6:.0f} us")
    assert per < 0.05
    f.close()


# --- HTTPS: TLS SNI and certificate checks use the host name, not the IP -------------------
@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not available")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    proc = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=foo.sandbox.test",
         "-addext", "subjectAltName=DNS:foo.sandbox.test"],
        capture_output=True, check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"openssl failed: {proc.stderr[-200:]!r}")
    s = Server("127.0.0.2")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    sni: list[str | None] = []
    ctx.sni_callback = lambda sock, name, c: sni.append(name)  # type: ignore[assignment]
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
    s.sni = sni  # type: ignore[attr-defined]
    with serving(s):
        yield s, cert


def test_https_sni_and_cert_use_host_name(tls_server: tuple[Server, Path], make: Make) -> None:
    s, cert = tls_server
    f = make(verify=str(cert))
    r = f.fetch(f"https://foo.sandbox.test:{s.port}/echo")
    assert r.ok, (r.error, r.error_detail)
    seen = json.loads(r.body)
    assert seen["local"] == "127.0.0.2"
    assert seen["host"] == f"foo.sandbox.test:{s.port}"
    assert "foo.sandbox.test" in s.sni  # type: ignore[attr-defined]
    # Same IP under a name the certificate does not cover: verification must fail.
    r = f.fetch(f"https://b.sandbox.test:{s.port}/echo")
    assert r.error == "tls_error", (r.error, r.error_detail)
    f.close()


# --- extra_ca: a private CA trusted in addition to certifi's bundle ------------------------
@pytest.fixture(scope="module")
def private_ca_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """An HTTPS server on 127.0.0.2 whose certificate (foo.sandbox.test) a throwaway CA signed."""
    ca = trustme.CA()
    ca_pem = tmp_path_factory.mktemp("private-ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    s = Server("127.0.0.2")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("foo.sandbox.test").configure_cert(ctx)
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
    with serving(s):
        yield s, ca_pem


def _certifi_ca_count() -> int:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=certifi.where())
    return ctx.cert_store_stats()["x509_ca"]


def test_extra_ca_trusted_in_addition_to_certifi(private_ca_server: tuple[Server, Path],
                                                  make: Make) -> None:
    s, ca_pem = private_ca_server
    url = f"https://foo.sandbox.test:{s.port}/echo"
    plain = make()  # certifi only: the private CA is unknown
    r = plain.fetch(url)
    assert r.error == "tls_error", (r.error, r.error_detail)
    plain.close()

    f = make(extra_ca=str(ca_pem))
    r = f.fetch(url)
    assert r.ok, (r.error, r.error_detail)
    assert json.loads(r.body)["local"] == "127.0.0.2"
    # one shared context: every certifi root plus the one extra CA, verifying host names
    ctx = f.aio._ssl if make.cls is LoopFetcher else f._pm.connection_pool_kw["ssl_context"]
    assert ctx.cert_store_stats()["x509_ca"] == _certifi_ca_count() + 1
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    # the CA is trusted, but only for the names it certified
    r = f.fetch(f"https://b.sandbox.test:{s.port}/echo")
    assert r.error == "tls_error", (r.error, r.error_detail)
    f.close()


def test_extra_ca_never_disables_verification(private_ca_server: tuple[Server, Path],
                                              make: Make) -> None:
    _, ca_pem = private_ca_server
    with pytest.raises(ValueError):
        make(extra_ca=str(ca_pem), verify=False)
    with pytest.raises(OSError):  # a CA asked for and not found fails at construction
        make(extra_ca=str(ca_pem.parent / "missing.pem"))


def test_pool_connections_bounds_kept_pools(srv1: Server, srv2: Server) -> None:
    """Pools are per host; only ``pool_connections`` of them (LRU) keep their connection."""
    hosts = [("a.sandbox.test", srv1), ("b.sandbox.test", srv2), ("bar.sandbox.test", srv1)]

    def conns_for_a(pool_connections: int) -> int:
        f = make_fetcher(pool_connections=pool_connections, pool_maxsize=1)
        before = len(srv1.log)
        for host, srv in [*hosts, hosts[0]]:
            assert f.fetch(f"http://{host}:{srv.port}/echo").ok
        f.close()
        return len({peer for h, _, peer in srv1.log[before:] if h and h.startswith("a.")})

    assert conns_for_a(3) == 1  # a's pool kept: its keep-alive connection reused
    assert conns_for_a(2) == 2  # a's pool evicted by the third host: a new connection


# --- behaviours kept from the requests-based fetcher ----------------------------------------
def _requests_target(url: str) -> tuple[str, str, int | None, str]:
    """What the requests-based fetcher sent: PreparedRequest's URL, its host/port, path_url."""
    prep = requests.Request("GET", url).prepare()
    assert prep.url is not None
    parsed = urllib3.util.parse_url(prep.url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(url)
    return parsed.scheme, parsed.host, parsed.port, prep.path_url


def _ours(url: str) -> tuple[str, str, int | None, str]:
    return tuple(fetch_mod._prepare_url(url))  # type: ignore[return-value]


def test_url_preparation_matches_requests() -> None:
    urls = [
        "http://h000.sandbox.test:8080/a/b.html", "https://x.test", "http://x.test/?",
        "http://x.test:80/p?q=1&r=/?s", "http://X.Test/A", "HTTP://x.test/", "  http://x.test/",
        "http://x.test/a/../b/./c", "http://x.test/.well-known/x", "http://x.test/a/..",
        "http://x.test/a%41/%2E%2E/b?x=%7e y#f", "http://x.test/x%zz#%41", "http://x.test/ü?q=ü",
        "http://bücher.test/", "http://user:pw@x.test/p", "http://x.test:0/", "http://x.test:080/",
        "http://x.test:65535/", "http://[::1]:8080/x", "http://1.2.3.4/", "http://x.test./",
        "http://x.test/a b", "http://x.test/~u/", "http://x.test/#frag", "http://x.test/p;a=b",
        "http://x.test//double//slash", "http://a%41.test/", "http://x.test/%7E%41%2F",
    ]
    rng = random.Random(7)
    pieces = ["a", "Z", "0", "-", ".", "/", "..", "?", "#", "%", "%41", "%7e", "%zz", "%2F", ":",
              "@", "[", "]", " ", "ü", "*", "~", "&", "=", "+", "'", ";", ",", "!", "$", "(", "\t"]
    for _ in range(3000):
        host = rng.choice(["x.test", "X.test", "h1.sandbox.test", "x.test:8080", "x.test:80",
                           "*.x", ".x", "[::1]", "ü.test", "u@x.test", "x..test", ""])
        tail = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        urls.append(f"{rng.choice(['http', 'https', 'HTTP', 'ftp'])}://{host}/{tail}")
    checked = 0
    for url in urls:
        try:
            want = _requests_target(url)
        except Exception:
            with pytest.raises(Exception):  # noqa: B017 - any refusal means invalid_url
                _ours(url)
            continue
        assert _ours(url) == want, url
        checked += 1
    assert checked > 1000


def test_request_headers_merge_like_requests(fetcher: Any, srv2: Server) -> None:
    r = fetcher.fetch(f"http://foo.sandbox.test:{srv2.port}/echo",
                      extra_headers={"user-agent": "X", "X-Extra": "2"})
    assert json.loads(r.body)["ua"] == "X" and json.loads(r.body)["x_extra"] == "2"
    assert [k for k, _ in r.request_headers] == [
        "Host", "user-agent", "Accept", "Accept-Encoding", "Connection", "X-Extra"]
    with pytest.raises(ValueError):
        fetcher.fetch(f"http://foo.sandbox.test:{srv2.port}/echo",
                      extra_headers={"X-Bad": "a\r\nInjected: 1"})


def test_redirect_body_dropped_and_bad_location(fetcher: Any, srv1: Server, make: Make) -> None:
    base = f"http://bar.sandbox.test:{srv1.port}"
    before = len(srv1.log)
    r = fetcher.fetch(f"{base}/redirect?to=/x&code=301")
    assert r.status == 301 and r.is_redirect and r.body == b"" and r.error is None
    r = fetcher.fetch(f"{base}/redirect?to=/x&code=300")  # not a redirect status for requests
    assert r.status == 300 and r.body == b"<a>moved</a>"
    r = fetcher.fetch(f"{base}/redirect?to=http://[bad&code=302")
    assert r.error == "fetch_error" and r.status is None
    assert fetcher.fetch(f"{base}/echo").ok
    # the connection survived the drained redirects
    assert len({peer for _, _, peer in srv1.log[before:before + 2]}) == 1
    # a redirect body over the cap is not downloaded: the connection is dropped instead
    small = make(max_bytes=1000)
    t0 = time.monotonic()
    r = small.fetch(f"{base}/redirect?to=/x&code=302&n=50000000")
    assert r.status == 302 and r.error is None and r.body == b"" and r.location == "/x"
    assert time.monotonic() - t0 < 2.0
    assert small.fetch(f"{base}/echo").ok
    small.close()


def test_no_proxy_from_environment(fetcher: Any, srv1: Server,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # discard port: a proxy would fail
    assert fetcher.fetch(f"http://bar.sandbox.test:{srv1.port}/echo").ok


def test_missing_ca_bundle_is_fetch_error(tls_server: tuple[Server, Path], make: Make) -> None:
    s, _ = tls_server
    f = make(verify="/nonexistent/ca.pem")
    r = f.fetch(f"https://foo.sandbox.test:{s.port}/echo")
    assert r.error == "fetch_error" and "CA certificate bundle" in (r.error_detail or "")
    f.close()
