"""The aiohttp fetcher (workers/fetch/aio.py) against real loopback servers: IP pinning per
host name, aborts, memory under a decompression bomb, and that it sends and decodes exactly what
the urllib3 Fetcher does (the shared behaviour tests are in test_fetch.py, run on both)."""

from __future__ import annotations

import asyncio
import gzip
import random
import socket
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from yarl import URL

from frontier.useragent import user_agent
from tests.loopback import CutBodyHandler, LoopbackServer, Reply, Request, serving
from tests.workers.test_fetch import STATIC, Server, gzip_bomb, make_fetcher
from workers.dns.resolver import CachingResolver
from workers.fetch import AsyncFetcher, FetchControl, Fetcher, LoopFetcher
from workers.fetch.prepare import _prepare_url


@pytest.fixture(scope="module")
def srv() -> Iterator[Server]:
    with serving(Server("127.0.0.1")) as s:
        yield s


def _aio(**kw: Any) -> AsyncFetcher:
    args: dict[str, Any] = {"allow_private": True, "connect_timeout_s": 2.0,
                            "read_timeout_s": 2.0, "total_timeout_s": 5.0}
    args.update(kw)
    return AsyncFetcher(CachingResolver(static=STATIC, allow_private=True), user_agent(), **args)


@pytest.mark.parametrize("cls", [Fetcher, LoopFetcher], ids=["urllib3", "aiohttp"])
def test_two_names_on_one_ip_never_share_a_connection(srv: Server, cls: type[Any]) -> None:
    """a.sandbox.test and bar.sandbox.test both resolve to 127.0.0.1: each keeps its own
    kept-alive connection (the server sees two client ports, each used twice)."""
    f = make_fetcher(cls)
    before = len(srv.log)
    for host in ("a", "bar", "a", "bar"):
        r = f.fetch(f"http://{host}.sandbox.test:{srv.port}/echo")
        assert r.ok and r.ip == "127.0.0.1", r.error_detail
    f.close()
    peers: dict[str, set[Any]] = {}
    for host, _, peer in srv.log[before:]:
        peers.setdefault((host or "").split(".")[0], set()).add(peer)
    assert len(peers["a"]) == 1 and len(peers["bar"]) == 1 and peers["a"] != peers["bar"]


def test_given_ip_wins_over_the_resolver(srv: Server) -> None:
    """foo.sandbox.test resolves to 127.0.0.2; fetched with ip=127.0.0.1 it goes there, with
    its own name in Host."""
    async def run() -> Any:
        f = _aio()
        try:
            return await f.fetch(f"http://foo.sandbox.test:{srv.port}/echo", ip="127.0.0.1")
        finally:
            await f.close()
    r = asyncio.run(run())
    assert r.ok and r.ip == "127.0.0.1"
    assert srv.log[-1][0] == f"foo.sandbox.test:{srv.port}" and srv.log[-1][2][0] == "127.0.0.1"


def test_abort_ends_a_fetch_and_cancel_propagates(srv: Server) -> None:
    url = f"http://bar.sandbox.test:{srv.port}/sleep?s=3"

    async def run() -> tuple[Any, float, Any, Any]:
        f = _aio()
        control = FetchControl()
        t0 = time.monotonic()
        task = asyncio.create_task(f.fetch(url, control=control))
        await asyncio.sleep(0.2)
        threading.Thread(target=control.abort, args=("lease lapsed",)).start()  # any thread
        res = await task
        dt = time.monotonic() - t0
        # a plain cancel is the caller's, not an abort: it propagates
        task2 = asyncio.create_task(f.fetch(url, control=FetchControl()))
        await asyncio.sleep(0.2)
        task2.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task2
        # aborted after the status line: the body so far, cut
        control3 = FetchControl()
        task3 = asyncio.create_task(
            f.fetch(f"http://bar.sandbox.test:{srv.port}/trickle", control=control3))
        await asyncio.sleep(0.35)
        control3.abort("stop")
        res3 = await task3
        early = FetchControl()
        early.abort("before")
        res4 = await f.fetch(url, control=early)
        await f.close()
        return res, dt, res3, res4

    res, dt, res3, res4 = asyncio.run(run())
    assert (res.error, res.error_detail, res.status, res.truncated) == (
        "aborted", "lease lapsed", None, False)
    assert dt < 1.0, dt
    assert res3.error == "aborted" and res3.status == 200 and res3.truncation == "unspecified"
    assert 0 < len(res3.body) < 10
    assert res4.error == "aborted" and res4.error_detail == "before" and res4.elapsed_s < 0.1


def test_decompression_bomb_memory_bounded(srv: Server) -> None:
    """64 MiB of zeros gzipped (~65 KB), a 1 MiB cap: too_large, and the fetch's peak
    allocations stay a few MiB."""
    gzip_bomb()  # made before tracing
    f = make_fetcher(LoopFetcher, max_bytes=1024 * 1024)
    tracemalloc.start()
    try:
        r = f.fetch(f"http://bar.sandbox.test:{srv.port}/bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        f.close()
    assert r.error == "too_large" and r.truncation == "length" and len(r.body) == 1024 * 1024
    assert peak < 8 * 1024 * 1024, peak


def _read_head(conn: socket.socket) -> bytes:
    """What ``conn`` sends up to its first blank line (less if it closes before)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _raw_server() -> tuple[socket.socket, list[bytes]]:
    """A server recording each request's bytes up to the blank line; answers 200, empty."""
    lsock = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            with conn:
                seen.append(_read_head(conn))
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    return lsock, seen


def test_both_fetchers_send_identical_requests() -> None:
    lsock, seen = _raw_server()
    port = lsock.getsockname()[1]
    paths = ["/", "/a/b.html?q=1&r=/?s", "/a%41/%2E%2E/b?x=%7e%20y", "/ü?q=ü", "/a b",
             "/x%zz", "/p;a=b//c", "/%7E%41%2F", "/'()*!$,~"]
    extra = {"user-agent": "X/1", "X-Extra": "2", "If-None-Match": '"e"'}
    try:
        got: dict[str, list[bytes]] = {}
        for cls in (Fetcher, LoopFetcher):
            f = make_fetcher(cls)
            start = len(seen)
            for p in paths:
                assert f.fetch(f"http://bar.sandbox.test:{port}{p}").ok
            assert f.fetch(f"http://bar.sandbox.test:{port}/", extra_headers=extra).ok
            f.close()
            got[cls.__name__] = seen[start:]
    finally:
        lsock.close()
    assert got["Fetcher"] == got["LoopFetcher"]
    assert got["Fetcher"][-1].startswith(b"GET / HTTP/1.1\r\nHost: bar.sandbox.test:")


def test_yarl_keeps_the_prepared_path() -> None:
    """The request target aiohttp sends is _prepare_url's path, not re-quoted by yarl."""
    rng = random.Random(3)
    pieces = ["a", "Z", "/", "..", "?", "%", "%41", "%7e", "%zz", "%2F", ":", "@", "[", "]",
              " ", "ü", "*", "~", "&", "=", "+", "'", ";", ",", "!", "$", "(", "%20"]
    checked = 0
    for _ in range(2000):
        tail = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        try:
            t = _prepare_url(f"http://x.test/{tail}")
        except Exception:
            continue
        path, _, query = t.path.partition("?")
        url = URL.build(scheme="http", host="127.0.0.1", port=80, path=path, query_string=query,
                        encoded=True)
        assert url.raw_path_qs == t.path, tail
        checked += 1
    assert checked > 1000


#: Content-Encoding cases: (header value, body bytes sent)
_RAW = b"<html>" + b"encoded body " * 300 + b"</html>"
_CODINGS: dict[str, tuple[str, bytes]] = {
    "gzip": ("gzip", gzip.compress(_RAW)),
    "x-gzip": ("x-gzip", gzip.compress(_RAW)),
    "zlib": ("deflate", zlib.compress(_RAW)),
    "raw-deflate": ("deflate", zlib.compress(_RAW)[2:-4]),
    "members": ("gzip", gzip.compress(_RAW) + gzip.compress(b"second")),
    "trailing": ("gzip", gzip.compress(_RAW) + b"\0garbage"),
    "twice": ("gzip, gzip", gzip.compress(gzip.compress(_RAW))),
    "unknown": ("br", b"not brotli at all"),
    "identity-list": ("identity, gzip", gzip.compress(_RAW)),
    "broken": ("gzip", b"this is not gzip"),
    "cut": ("gzip", gzip.compress(_RAW)[:200]),
    "upper": ("GZIP", gzip.compress(_RAW)),
}


def _coded(req: Request) -> Reply:
    coding, body = _CODINGS[req.path.strip("/")]
    return Reply(200, body, "text/html", (("Content-Encoding", coding),))


def test_content_codings_decode_as_urllib3_does() -> None:
    with serving(LoopbackServer(respond=_coded)) as s:
        out: dict[tuple[type[Any], int], dict[str, Any]] = {}
        for cls in (Fetcher, LoopFetcher):
            for cap in (2000, 100_000):  # cut by the cap, and whole
                f = make_fetcher(cls, max_bytes=cap)
                out[cls, cap] = {name: (r.error, r.truncation, r.body)
                                 for name in _CODINGS
                                 for r in [f.fetch(f"http://bar.sandbox.test:{s.port}/{name}")]}
                f.close()
    for cap in (2000, 100_000):
        assert out[Fetcher, cap] == out[LoopFetcher, cap]
    assert out[LoopFetcher, 2000]["gzip"] == ("too_large", "length", _RAW[:2000])
    got = out[LoopFetcher, 100_000]
    assert got["gzip"] == got["twice"] == got["trailing"] == (None, None, _RAW)
    assert got["members"] == (None, None, _RAW + b"second")
    assert got["unknown"] == (None, None, b"not brotli at all")
    assert got["broken"][0] == "decoding_error"


def test_pool_connections_bounds_idle_connections(srv: Server) -> None:
    """Idle connections are kept for at most ``pool_connections`` host keys (LRU)."""
    hosts = ["a", "b", "bar", "a"]

    def conns_for_a(pool_connections: int) -> int:
        f = make_fetcher(LoopFetcher, pool_connections=pool_connections)
        before = len(srv.log)
        for h in hosts:
            ip = "127.0.0.1"  # b.sandbox.test is on 127.0.0.2 in STATIC: pin it here
            assert f.fetch(f"http://{h}.sandbox.test:{srv.port}/echo", ip=ip).ok
        f.close()
        return len({peer for h, _, peer in srv.log[before:] if h and h.startswith("a.")})

    assert conns_for_a(3) == 1
    assert conns_for_a(2) == 2


def _dropping_server() -> tuple[socket.socket, list[int]]:
    """A keep-alive server that answers the first request and closes the connection under
    every later one, unanswered (as a server with a short idle timeout does). Counts the
    requests it read."""
    lsock = socket.create_server(("127.0.0.1", 0))
    seen: list[int] = []

    def serve_conn(conn: socket.socket) -> None:
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                _, _, data = data.partition(b"\r\n\r\n")
                seen.append(1)
                if len(seen) > 1:
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    _serve_each(lsock, serve_conn)
    return lsock, seen


def _serve_each(lsock: socket.socket, answer: Any) -> None:
    """Accept on ``lsock`` until it closes; ``answer(conn)`` each connection on a thread."""
    def serve() -> None:
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


@pytest.mark.parametrize("retry_on", [False, True], ids=["ours", "aiohttp-default"])
def test_a_failed_request_is_not_sent_again(retry_on: bool) -> None:
    """A request whose kept-alive connection fails under it reaches the host once: a retry
    is the frontier's (after the backoff), not the HTTP client's at once, which would be a
    second request to the host with no delay. Negative control: aiohttp's default."""
    lsock, seen = _dropping_server()
    url = f"http://bar.sandbox.test:{lsock.getsockname()[1]}/x"

    async def run() -> tuple[Any, Any]:
        f = _aio()
        if retry_on:
            f._get_session()._retry_connection = True
        try:
            return await f.fetch(url, ip="127.0.0.1"), await f.fetch(url, ip="127.0.0.1")
        finally:
            await f.close()

    try:
        first, second = asyncio.run(run())
    finally:
        lsock.close()
    assert first.ok
    if retry_on:
        assert len(seen) == 3
        return
    assert len(seen) == 2, len(seen)
    assert second.error == "connection_reset" and second.status is None


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed", "control-stock-aiohttp"])
def test_a_bad_chunk_after_a_good_one_fails_the_fetch_at_once(
        fixed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp 3.14 puts a framing error read after the head on its protocol only: the body
    read then waits for the total timeout. Ours fails the body too (invalid_response, the
    good bytes kept); the control, with aiohttp's own protocol, shows the wait."""
    from aiohttp.client_proto import ResponseHandler

    from workers.fetch import aio

    if not fixed:
        monkeypatch.setattr(aio, "_BodyFailingHandler", ResponseHandler)

    async def run(port: int) -> tuple[Any, float]:
        f = _aio(total_timeout_s=3.0)
        try:
            t0 = time.monotonic()
            res = await f.fetch(f"http://bar.sandbox.test:{port}/badchunk")
            return res, time.monotonic() - t0
        finally:
            await f.close()

    with serving(LoopbackServer(CutBodyHandler)) as server:
        res, took = asyncio.run(run(server.port))
    if fixed:
        assert res.error == "invalid_response" and "chunk size" in res.error_detail
        assert res.body == b"hello" and res.truncated and took < 2.0, took
    else:
        assert res.error == "timeout" and took >= 2.9, (res.error, took)
