"""The sandbox web answering like the internet: latency distribution, slow hosts, resets and
hangs, determinism across server starts, idle keep-alive closed, HTTPS hosts with their own
CA (verified with it, refused without it), and the web unchanged with all of it off.

Each test uses its own page indices (the model's n counts requests per URL in a server's life),
so the tests do not disturb each other's draws on the shared server.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from sandbox import SandboxConfig, SandboxSite, SandboxWeb
from sandbox.__main__ import config_from_args, parse_args
from sandbox.latency import Failure
from tests.webs import SandboxWebs

WEB = SandboxConfig.internet(seed=5, hosts=40, pages_per_host=10, ips=4, hang_s=1.5,
                             latency_median_s=0.1, latency_shape=0.6, slow_host_share=0.1,
                             fail_share=0.1, keepalive_idle_s=0.8, trickle_share=0.0)
MODEL = WEB.latency_model()


@pytest.fixture(scope="module")
def web(module_webs: SandboxWebs) -> SandboxWeb:
    return module_webs.shared(WEB)


def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


def _connect(web: SandboxWeb, url: str, ctx: ssl.SSLContext | None, timeout: float
             ) -> socket.socket:
    parts = urlsplit(url)
    host = parts.hostname or ""
    raw = socket.create_connection((web.resolver_map[host], parts.port or 80), timeout)
    if parts.scheme != "https":
        return raw
    assert ctx is not None
    try:
        return ctx.wrap_socket(raw, server_hostname=host)  # SNI and verification: the name
    except BaseException:
        raw.close()
        raise


def _get(web: SandboxWeb, url: str, *, sock: socket.socket | None = None, timeout: float = 5.0,
         ctx: ssl.SSLContext | None = None) -> tuple[int, bytes, socket.socket]:
    """GET over ``sock`` (or a new connection: TLS for https URLs, trusting web.ca_path)."""
    parts = urlsplit(url)
    if sock is None:
        ctx = ctx or ssl.create_default_context(cafile=web.ca_path)
        sock = _connect(web, url, ctx, timeout)
    sock.sendall(f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode())
    resp = http.client.HTTPResponse(sock)
    resp.begin()
    return resp.status, resp.read(), sock


def _fetch_once(web: SandboxWeb, url: str, timeout: float = 5.0) -> tuple[str, float]:
    """('ok' | 'reset' | 'timeout', seconds) for one request on a new connection."""
    start = time.monotonic()
    sock = None
    try:
        status, _, sock = _get(web, url, timeout=timeout)
        return ("ok" if status == 200 else f"status {status}"), time.monotonic() - start
    except TimeoutError:
        return "timeout", time.monotonic() - start
    except (ConnectionError, http.client.HTTPException, ssl.SSLError):
        return "reset", time.monotonic() - start
    finally:
        if sock is not None:
            sock.close()


def _urls(site: SandboxSite, index: int, *, slow: bool = False, calm: int = 0) -> list[str]:
    """Page ``index`` of every host that is no special host; of slow hosts only if ``slow``;
    ``calm``: only URLs whose first ``calm`` requests the model lets through."""
    out = []
    for h in site.hosts:
        path = site.layout.paths[h][index]
        if (h == site.hang_host or MODEL.slow_host(h) != slow
                or site.respond(h, path).delay_s or site.respond(h, path).first_status):
            continue
        if any(MODEL.answer(h, path, n).failure for n in range(1, calm + 1)):
            continue
        out.append(site.url(h, path))
    return out


def _handshakes(url: str) -> float:
    """What the model adds to a request that opens its connection (TCP, and TLS on https)."""
    parts = urlsplit(url)
    return MODEL.handshake_s(parts.hostname or "", parts.scheme == "https")


def _parallel(web: SandboxWeb, urls: list[str], timeout: float = 5.0) -> list[tuple[str, float]]:
    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(lambda u: _fetch_once(web, u, timeout), urls))


# -- configuration ---------------------------------------------------------------------------
def test_everything_is_off_by_default_and_the_preset_turns_it_on() -> None:
    plain = SandboxConfig()
    assert (plain.latency, plain.https_share, plain.trickle_share, plain.handshake_rtts) == \
        (False, 0.0, 0.0, False)
    net = SandboxConfig.internet()
    assert (net.latency, net.https_share, net.trickle_share, net.handshake_rtts) == \
        (True, 0.5, 0.02, True)
    assert SandboxConfig.internet(https_share=0.0).https_share == 0.0  # overrides win
    # the command line (what SandboxWeb starts) carries them both ways
    for config in (net, SandboxConfig.internet(handshake_rtts=False, latency_max_base_s=0.2)):
        argv = SandboxWeb(config, Path("/nonexistent/log")).command()[3:]
        parsed = config_from_args(parse_args(argv))
        assert (parsed.handshake_rtts, parsed.latency_max_base_s) == \
            (config.handshake_rtts, config.latency_max_base_s)
    assert config_from_args(parse_args(["--internet", "--log", "x"])).handshake_rtts
    assert not config_from_args(parse_args(["--internet", "--no-handshake-rtts", "--log", "x"])
                                ).handshake_rtts
    with pytest.raises(ValueError, match="latency_max_base_s"):
        SandboxConfig(latency_max_base_s=-1.0)
    with pytest.raises(ValueError, match="https_share"):
        SandboxConfig(https_share=1.5)
    with pytest.raises(ValueError, match="pages_per_host"):
        SandboxConfig(pages_per_host=9)


def test_https_hosts_carry_their_scheme_and_port_and_off_leaves_the_web_unchanged() -> None:
    base = SandboxSite(SandboxConfig(hosts=40, pages_per_host=10, ips=4, seed=5), 8000)
    off = SandboxSite(SandboxConfig(hosts=40, pages_per_host=10, ips=4, seed=5,
                                    https_share=0.0, latency=True), 8000)
    on = SandboxSite(SandboxConfig(hosts=40, pages_per_host=10, ips=4, seed=5,
                                   https_share=0.5), 8000, 8443)
    many = SandboxSite(SandboxConfig(hosts=600, pages_per_host=10, ips=4, https_share=0.5), 1, 2)
    assert len(many.https_hosts()) / 600 == pytest.approx(0.5, abs=0.07)
    assert off.https_hosts() == [] and on.https_hosts()
    home = base.seeds()[0]
    host = urlsplit(home).hostname or ""
    assert off.respond(host, "/").body == base.respond(host, "/").body  # byte-identical
    https_host = on.https_hosts()[0]
    assert on.url(https_host, "/x") == f"https://{https_host}:8443/x"
    for url in on.seeds():
        h = urlsplit(url).hostname or ""
        assert url.startswith(f"https://{h}:8443/" if on.is_https(h) else f"http://{h}:8000/")
    expected = on.expected_fetches(on.seeds())
    schemes = {urlsplit(u).scheme + str(urlsplit(u).port) for u in expected}
    assert schemes == {"http8000", "https8443"}
    assert all((urlsplit(u).scheme == "https") == on.is_https(urlsplit(u).hostname or "")
               for u in expected)
    # the HTML names each host with its own scheme; off, the same page never says https
    links = [lk.target for u in list(expected)[:200] if (spec := on.page(u)) is not None
             for lk in spec.links if lk.target]
    assert any(t.startswith("https://") for t in links)
    assert b"https://" not in base.respond(host, "/").body


# -- HTTPS -----------------------------------------------------------------------------------
def test_https_host_is_served_with_its_own_certificate_from_the_ca(web: SandboxWeb) -> None:
    site = web.site
    assert site is not None and web.ca_path and web.https_port
    a, b = site.https_hosts()[:2]
    url_a = site.url(a, site.layout.paths[a][9])
    status, body, sock = _get(web, url_a)
    assert status == 200 and body == site.respond(a, urlsplit(url_a).path).body
    assert isinstance(sock, ssl.SSLSocket)
    cert = sock.getpeercert()
    sock.close()
    assert ("DNS", a) in cert["subjectAltName"]
    _, _, sock_b = _get(web, site.url(b, site.layout.paths[b][9]))
    assert ("DNS", b) in sock_b.getpeercert()["subjectAltName"]  # per host name, by SNI
    sock_b.close()
    # refused without the CA (verification stays on) ...
    with pytest.raises(ssl.SSLCertVerificationError):
        _connect(web, url_a, _tls(), 5)
    # ... and for a name the TLS port does not serve (a plain-HTTP host)
    plain = next(h for h in site.hosts if not site.is_https(h))
    raw = socket.create_connection((web.resolver_map[plain], web.https_port), 5)
    with pytest.raises(ssl.SSLError):
        ssl.create_default_context(cafile=web.ca_path).wrap_socket(raw, server_hostname=plain)
    raw.close()
    time.sleep(0.3)
    logged = [e for e in web.read_log() if e.host == a and e.status == 200]
    assert logged and all(e.scheme == "https" for e in logged)


# -- latency ---------------------------------------------------------------------------------
def test_server_times_center_on_the_median_and_slow_hosts_are_slow(web: SandboxWeb) -> None:
    site = web.site
    assert site is not None
    urls = [u for i in range(4) for u in _urls(site, i, calm=1)]
    slow = _urls(site, 4, slow=True, calm=1)
    assert len(urls) >= 100 and slow
    results = _parallel(web, urls + slow)
    assert all(kind == "ok" for kind, _ in results), results
    took = [t for _, t in results[: len(urls)]]
    # wall time minus the host's base delay (up to 50 ms) and the new connection's handshakes:
    # the lognormal server time
    server = [t - MODEL.host_base_s(urlsplit(u).hostname or "") - _handshakes(u)
              for u, t in zip(urls, took, strict=True)]
    assert statistics.median(server) == pytest.approx(WEB.latency_median_s, rel=0.25)
    assert min(took) < WEB.latency_median_s < max(took)  # a spread, not a constant
    assert all(1.0 <= t < 3.8 for _, t in results[len(urls):])
    assert max(took) < 1.0 <= min(t for _, t in results[len(urls):])


def test_fail_share_resets_and_hangs_exactly_where_the_model_says(web: SandboxWeb) -> None:
    site = web.site
    assert site is not None
    urls = _urls(site, 5) + _urls(site, 6)
    results = _parallel(web, urls, timeout=1.0)  # hang_s 1.5 outlasts this client's timeout
    predicted = [MODEL.answer(urlsplit(u).hostname or "", urlsplit(u).path, 1).failure
                 for u in urls]
    kinds = [k for k, _ in results]
    want = {None: "ok", Failure.RESET: "reset", Failure.HANG: "timeout"}
    assert kinds == [want[f] for f in predicted]
    assert "reset" in kinds and "timeout" in kinds
    assert 0.03 <= (len(urls) - kinds.count("ok")) / len(urls) <= 0.25


def test_idle_keepalive_connection_is_closed_by_the_server(web: SandboxWeb) -> None:
    site = web.site
    assert site is not None
    url = next(u for u in _urls(site, 9, calm=3) if urlsplit(u).scheme == "https"
               and (urlsplit(u).hostname or "") not in site.https_hosts()[:2])
    status, _, sock = _get(web, url)
    assert status == 200
    time.sleep(WEB.keepalive_idle_s / 3)
    assert _get(web, url, sock=sock)[0] == 200  # within the idle time: kept alive, reused
    time.sleep(WEB.keepalive_idle_s + 0.4)
    sock.settimeout(2)
    try:
        closed = sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        closed = True
    sock.close()
    assert closed


#: Round trips long enough to time on a loaded machine: bases up to 0.6 s, a near-constant
#: 20 ms server time, nothing failing or slow.
FAR = SandboxConfig.internet(seed=11, hosts=16, pages_per_host=10, ips=4, latency_median_s=0.02,
                             latency_shape=0.0, slow_host_share=0.0, fail_share=0.0,
                             latency_max_base_s=0.6)


def test_a_new_connection_pays_its_handshakes_round_trips_and_a_reused_one_does_not(
        module_webs: SandboxWebs) -> None:
    """tc netem is missing here, so the server charges a connection's first request one round
    trip (the host's base delay) for TCP and one more for TLS; later requests on the same
    connection pay only their own round trip. The control is the reused connection's request
    to the same host, and the preset's switch (off: no handshake time at all)."""
    far = module_webs.shared(FAR)
    site, model = far.site, FAR.latency_model()
    assert site is not None and model.handshake_rtts
    assert SandboxConfig(latency=True).latency_model().handshake_s("h", True) == 0.0
    checked = set()
    for scheme in ("http", "https"):
        url = next(site.url(h, site.layout.paths[h][6]) for h in site.hosts
                   if site.url(h, "/").startswith(scheme + ":") and h != site.hang_host
                   and model.host_base_s(h) > 0.25
                   and not site.respond(h, site.layout.paths[h][6]).delay_s)
        host = urlsplit(url).hostname or ""
        base, rtts = model.host_base_s(host), 2 if scheme == "https" else 1
        assert model.handshake_s(host, scheme == "https") == pytest.approx(rtts * base)
        start = time.monotonic()
        status, _, sock = _get(far, url)
        opened = time.monotonic() - start
        start = time.monotonic()
        again = _get(far, url, sock=sock)[0]
        reused = time.monotonic() - start
        sock.close()
        assert status == again == 200
        server = FAR.latency_median_s
        assert opened >= (1 + rtts) * base + server - 0.01, (url, opened, base)
        assert reused >= base + server - 0.01, (url, reused, base)
        assert reused < base + server + base / 2, (url, reused, base)  # no handshake again
        assert opened - reused > (rtts - 0.5) * base, (url, opened, reused, base)
        checked.add(scheme)
    assert checked == {"http", "https"}


# -- determinism -----------------------------------------------------------------------------
def _timings(web: SandboxWeb, urls: list[str]) -> list[float]:
    """Each URL twice in turn (n = 1, 2), timed by the server's own log (end - start)."""
    for u in urls:
        for _ in range(2):
            assert _fetch_once(web, u)[0] == "ok"
    time.sleep(0.3)
    wanted = {(urlsplit(u).hostname, urlsplit(u).path) for u in urls}
    return [e.end - e.start for e in web.read_log() if (e.host, e.path) in wanted]


def test_two_servers_with_the_same_seed_answer_after_the_same_delays(
        web: SandboxWeb, webs: SandboxWebs) -> None:
    site = web.site
    assert site is not None
    urls = _urls(site, 7, calm=2)[:8] + _urls(site, 8, calm=2)[:4]
    first = _timings(web, urls)
    with webs.running(WEB) as again:
        assert again.site is not None
        second = _timings(again, [again.site.url(urlsplit(u).hostname or "", urlsplit(u).path)
                                  for u in urls])
    assert len(first) == len(second) == 2 * len(urls)
    predicted = [MODEL.answer(urlsplit(u).hostname or "", urlsplit(u).path, n).delay_s
                 + _handshakes(u) for u in urls for n in (1, 2)]  # each on a new connection
    assert max(abs(x - y) for x, y in zip(first, second, strict=True)) < 0.06
    assert max(abs(x - p) for x, p in zip(first, predicted, strict=True)) < 0.06
    # negative control: the second request of a URL is drawn anew, not a repeat of the first
    assert max(abs(x - y) for x, y in zip(first[::2], first[1::2], strict=True)) > 0.06
