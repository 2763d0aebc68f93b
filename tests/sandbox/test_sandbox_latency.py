"""The internet-like sandbox (sandbox/latency.py): a seeded latency model, and a server that
keeps to it (delays, resets, hangs, trickled bodies, idle keep-alive connections closed)."""

from __future__ import annotations

import http.client
import os
import signal
import statistics
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from sandbox import SandboxConfig, SandboxWeb
from sandbox.latency import Failure, LatencyModel
from sandbox.looplag import lag_between, lag_path, read_lag
from tests.webs import SandboxWebs

WEB = SandboxConfig.internet(seed=3, hosts=12, pages_per_host=20, ips=4, hang_s=1.0,
                             slow_host_share=0.0, fail_share=0.3, trickle_share=0.3,
                             latency_median_s=0.1, keepalive_idle_s=0.5)


def test_model_is_lognormal_around_its_median_and_deterministic() -> None:
    model = LatencyModel(seed=1, median_s=0.15, shape=0.7, slow_host_share=0.0)
    times = [model.server_time_s(f"h{i % 50}", f"/p{i}", 1) for i in range(4000)]
    assert statistics.median(times) == pytest.approx(0.15, rel=0.08)
    assert max(times) > 1.0  # a lognormal tail: some answers take over a second
    spread = statistics.stdev(__import__("math").log(t) for t in times)
    assert spread == pytest.approx(0.7, rel=0.08)
    again = LatencyModel(seed=1, median_s=0.15, shape=0.7, slow_host_share=0.0)
    other = LatencyModel(seed=2, median_s=0.15, shape=0.7, slow_host_share=0.0)
    assert [again.answer("h1", "/x", n) for n in range(20)] == \
        [model.answer("h1", "/x", n) for n in range(20)]
    assert [other.answer("h1", "/x", n) for n in range(20)] != \
        [model.answer("h1", "/x", n) for n in range(20)]


def test_model_shares_of_slow_hosts_and_failures() -> None:
    model = LatencyModel(seed=4, slow_host_share=0.1, fail_share=0.05, trickle_share=0.2)
    slow = [h for h in (f"host{i}" for i in range(3000)) if model.slow_host(h)]
    assert len(slow) / 3000 == pytest.approx(0.1, abs=0.02)
    assert all(1.0 <= model.server_time_s(h, "/", 1) <= 3.0 for h in slow[:50])
    answers = [model.answer(f"h{i % 100}", f"/{i}", 1) for i in range(5000)]
    failed = [a.failure for a in answers if a.failure]
    assert len(failed) / 5000 == pytest.approx(0.05, abs=0.01)
    assert {Failure.RESET, Failure.HANG} == set(failed)
    assert sum(1 for a in answers if a.trickle_chunks) / 5000 == pytest.approx(0.2, abs=0.03)


@pytest.fixture(scope="module")
def web(module_webs: SandboxWebs) -> SandboxWeb:
    return module_webs.shared(WEB)


def _get(web: SandboxWeb, url: str, conn: http.client.HTTPConnection | None = None
         ) -> tuple[int, bytes]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    conn = conn or http.client.HTTPConnection(web.resolver_map[host], web.port, timeout=5)
    conn.request("GET", parts.path or "/", headers={"Host": f"{host}:{web.port}"})
    resp = conn.getresponse()
    return resp.status, resp.read()


def test_server_answers_as_the_model_says(web: SandboxWeb) -> None:
    model = WEB.latency_model()
    seen = {"ok": 0, "reset": 0, "hang": 0, "trickle": 0}
    for url in web.site.seeds()[:3] + web.site.page_urls()[:27]:
        host, path = urlsplit(url).hostname or "", urlsplit(url).path or "/"
        answer = model.answer(host, path, 1)  # the first request of each URL
        reply = web.site.respond(host, path)
        if reply.delay_s or reply.first_status is not None:
            continue  # the web's own slow or flaky pages, tested elsewhere
        start = time.monotonic()
        if answer.failure is Failure.RESET:
            with pytest.raises((ConnectionError, http.client.HTTPException)):
                _get(web, url)
            seen["reset"] += 1
            continue
        status, body = _get(web, url)
        took = time.monotonic() - start
        assert status == reply.status and body
        if answer.failure is Failure.HANG:
            assert took >= WEB.hang_s
            seen["hang"] += 1
        else:
            assert answer.delay_s - 0.01 <= took <= answer.delay_s + 0.5, (url, took, answer)
            seen["trickle" if answer.trickle_chunks else "ok"] += 1
    assert all(seen.values()), seen


def test_idle_keepalive_connections_are_closed(web: SandboxWeb) -> None:
    model = WEB.latency_model()

    def calm(u: str) -> bool:
        host, path = urlsplit(u).hostname or "", urlsplit(u).path or "/"
        return all(model.answer(host, path, n).failure is None for n in (1, 2))

    url = next(u for u in web.site.page_urls()[40:] if calm(u))
    ip = web.resolver_map[urlsplit(url).hostname or ""]
    conn = http.client.HTTPConnection(ip, web.port, timeout=5)
    assert _get(web, url, conn)[0] == 200
    sock = conn.sock
    assert _get(web, url, conn)[0] == 200 and conn.sock is sock  # reused at once: kept alive
    time.sleep(WEB.keepalive_idle_s + 0.5)
    assert sock is not None and sock.recv(1) == b""  # idle too long: the server closed it
    conn.close()
    assert _get(web, url)[0] == 200  # on a new connection
    time.sleep(0.3)  # the log flushes every 0.1 s
    path = urlsplit(url).path
    # the log numbers each request on its connection: 1 opened one, 2 reused it
    assert [e.conn_request for e in web.read_log() if e.path == path][-3:] == [1, 2, 1]


def test_loop_lag_is_measured_and_a_stalled_server_shows_it(web: SandboxWeb) -> None:
    """The server writes how late its event loop runs; stopping the process for a second
    (as a starved CPU would) shows as about a second of lag in that window."""
    lag_file = lag_path(web.log_path)
    time.sleep(1.2)
    before = read_lag(lag_file)
    assert before is not None and before["samples"] > 0
    time.sleep(1.5)
    calm = lag_between(before, read_lag(lag_file))
    assert calm is not None and calm["samples"] * calm["mean_ms"] < 500, calm
    before = read_lag(lag_file)
    os.kill(web.pid, signal.SIGSTOP)
    try:
        time.sleep(1.0)
    finally:
        os.kill(web.pid, signal.SIGCONT)
    resumed = time.time()
    after = read_lag(lag_file)
    deadline = time.monotonic() + 10
    while (after is None or after["at"] < resumed + 0.1) and time.monotonic() < deadline:
        time.sleep(0.1)  # the monitor rewrites the file every second
        after = read_lag(lag_file)
    stalled = lag_between(before, after)
    assert stalled is not None and stalled["samples"] * stalled["mean_ms"] >= 900, stalled
    assert stalled["late_share"] > calm["late_share"]


def test_lag_between_two_snapshots() -> None:
    tops = [1, 10, 100, 1000]
    before = {"period_s": 0.02, "buckets_ms": tops, "counts": [5, 0, 0, 0, 0],
              "total_lag_s": 0.001}
    after = {"period_s": 0.02, "buckets_ms": tops, "counts": [95, 0, 0, 10, 0],
             "total_lag_s": 5.001}
    lag = lag_between(before, after)
    assert lag is not None
    assert lag["samples"] == 100 and lag["mean_ms"] == 50.0
    assert lag["p50_ms"] == 1 and lag["p90_ms"] == 1 and lag["p99_ms"] == 1000
    assert lag["share_over_100ms"] == 0.1
    assert lag["late_share"] == round(5.0 / (100 * 0.02 + 5.0), 3)
    assert lag_between(after, after) is None and lag_between(None, None) is None


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/proc/self/autogroup"),
                    reason="a negative niceness needs root; autogroups need their kernel option")
def test_a_niced_web_runs_in_a_session_and_autogroup_of_its_own(
        module_webs: SandboxWebs, web: SandboxWeb) -> None:
    """With autogroup scheduling a niceness only ranks threads within a session: the bench's
    web gets its weight by being a session of its own with that autogroup's niceness. The
    un-niced web (negative control) shares the test's session and autogroup."""
    niced = module_webs.fresh(WEB, nice=-5)
    assert os.getsid(niced.pid) == niced.pid != os.getsid(0)
    assert Path(f"/proc/{niced.pid}/autogroup").read_text().split()[-1] == "-5"
    assert os.getsid(web.pid) == os.getsid(0)
    assert Path(f"/proc/{web.pid}/autogroup").read_text() == \
        Path("/proc/self/autogroup").read_text()
