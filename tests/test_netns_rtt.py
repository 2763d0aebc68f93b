"""Real round-trip times in the netns harness (``deploy/netns-cluster rtt``, sandbox/delayline.py).

The sandbox's latency model waits before an answer; it cannot make a TCP or TLS handshake
slow. Here the web node's packets to the workers pass a delay line (a TUN device: the kernel
has no sch_netem), so every exchange pays the round trip of its web address, as on the
internet. Checked from a worker node with Trawl's own fetcher, HTTP and HTTPS (the sandbox CA,
verified), and by a whole crawl over the harness:

  * a TCP connect takes the address's RTT; a first HTTP fetch two RTTs, a first HTTPS fetch
    three (TCP, TLS 1.3, the request), a fetch on the kept-alive connection one;
  * negative control: with the line off, the same connect and HTTPS fetch take a small part
    of one RTT, so the figures above come from the line and not from the server;
  * a crawl by a ``trawl worker`` in its node: every page fetched, the politeness proofs of the
    drills from the server's log, and each fetch in the crawl's records took at least its
    address's RTT (two on a new connection).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import SandboxConfig
from sandbox.delayline import RttModel
from sandbox.robots import RobotsKind
from tests.drillkit import Drill, drill_config, judge, refetched
from tests.netns import NetnsCluster, NetnsRedis, NetnsWeb, NetnsWorkerPool, netns_unavailable
from workers.cli.crawl import init_crawl
from workers.report.records import load_records

REASON = netns_unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"netns harness: {REASON}")

PASSWORD = "rtt-pass"
RTT_MS, SPREAD = 60.0, 0.5
MODEL = RttModel(RTT_MS, SPREAD)
#: 24 hosts on 6 web addresses, half over HTTPS; no latency model: the round trips are the
#: only wait, so the figures below can be checked against them.
WEB = SandboxConfig(seed=11, hosts=24, pages_per_host=15, ips=6, crawl_delay_s=0.3,
                    robots_slow_s=0.2, slow_page_s=0.2, hang_s=2.0, https_share=0.5)
#: Hosts whose robots.txt is a small 200 at once.
QUICK_ROBOTS = (RobotsKind.ALLOW_ALL, RobotsKind.DISALLOW, RobotsKind.AGENT_SPECIFIC)
#: Slack for the scheduling of a loaded 2-core machine on top of the model's figures.
SLACK_S = 0.04

# Run in the worker node: TCP connect time to each address, then for a plain and an HTTPS host
# with Trawl's AsyncFetcher (pinned IPs, the sandbox CA trusted), on one connection: robots.txt
# twice (small: one TCP window), then the home page.
PROBE = """
import asyncio, json, socket, sys, time
from workers.dns.resolver import CachingResolver
from workers.fetch import AsyncFetcher
args = json.loads(sys.argv[1])
out = {"connect": {}, "fetch": {}}
for ip, port in args["connect"]:
    t = time.monotonic(); socket.create_connection((ip, port), timeout=5).close()
    out["connect"][ip] = time.monotonic() - t
async def fetches():
    f = AsyncFetcher(CachingResolver(static=args["static"], allow_private=True), "trawl-probe",
                     allow_private=True, extra_ca=args["ca"])
    for origin in args["origins"]:
        rs = [await f.fetch(origin + path) for path in ("/robots.txt", "/robots.txt", "/")]
        out["fetch"][origin] = [[r.status, r.elapsed_s, len(r.body), r.error_detail] for r in rs]
    await f.close()
asyncio.run(fetches())
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[NetnsCluster, NetnsRedis, NetnsWeb]]:
    tmp = tmp_path_factory.mktemp("rtt")
    net = NetnsCluster(prefix=f"tr{os.getpid() % 100000}", workers=1, web_ips=WEB.ips)
    with net:
        server = net.start_redis(tmp / "redis", PASSWORD)
        try:
            with NetnsWeb(net, WEB, tmp / "requests.log") as web:
                net.rtt("web", RTT_MS, SPREAD)
                yield net, server, web
        finally:
            server.stop()


def probe(net: NetnsCluster, web: NetnsWeb) -> tuple[dict[str, float], dict[str, list]]:
    """(connect seconds by web address, [[status, seconds, bytes, error] x 3] by origin) from
    w1."""
    plain = {h for h in web.resolver_map if web.site.robots_kind(h) in QUICK_ROBOTS}
    http_host = min(plain - web.site.layout.https_hosts)
    https_host = min(plain & web.site.layout.https_hosts)
    origins = [web.site.url(http_host, ""), web.site.url(https_host, "")]
    args = {"connect": [[ip, web.port] for ip in net.web_addresses()],
            "static": web.resolver_map, "ca": web.ca_path, "origins": origins}
    root = str(Path(__file__).resolve().parent.parent)
    res = net.run("w1", [sys.executable, "-c", PROBE, json.dumps(args)], timeout=60,
                  cwd=root, env=dict(os.environ, PYTHONPATH=root))
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    return out["connect"], out["fetch"]


def rtt_of(web: NetnsWeb, url: str) -> float:
    host = url.split("/")[2].split(":")[0]
    return MODEL.rtt_s(web.resolver_map[host])


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_each_exchange_pays_the_round_trip_of_its_address(
        harness: tuple[NetnsCluster, NetnsRedis, NetnsWeb]) -> None:
    net, _, web = harness
    connect, fetches = probe(net, web)
    rtts = {ip: MODEL.rtt_s(ip) for ip in connect}
    assert len(set(round(r, 4) for r in rtts.values())) > 1, "spread 0.5 gives distinct RTTs"
    for ip, took in connect.items():
        assert rtts[ip] <= took <= rtts[ip] + SLACK_S, (ip, took, rtts[ip])
    http_url, https_url = fetches
    assert https_url.startswith("https://") and http_url.startswith("http://")
    for url, rounds in ((http_url, 2), (https_url, 3)):  # TCP [+ TLS 1.3] + the request
        (s1, first, _, e1), (s2, again, _, e2), (s3, page, size, e3) = fetches[url]
        rtt = rtt_of(web, url)
        assert s1 == s2 == s3 == 200, (url, e1, e2, e3)
        assert rounds * rtt <= first <= rounds * rtt + 2 * SLACK_S, (url, first, rtt)
        assert rtt <= again <= rtt + SLACK_S, (url, again, rtt)  # the kept-alive connection
        assert size > 10_000 and page >= rtt, (url, size, page, rtt)
    stats = net.rtt_stats("web")
    print(json.dumps({"connect_s": connect, "fetch_s": fetches, "rtt_s": rtts,
                      "line": stats}))


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_control_without_the_line_the_handshakes_are_free(
        harness: tuple[NetnsCluster, NetnsRedis, NetnsWeb]) -> None:
    net, _, web = harness
    net.rtt("web", None)
    try:
        connect, fetches = probe(net, web)
    finally:
        net.rtt("web", RTT_MS, SPREAD)
    for ip, took in connect.items():
        assert took < MODEL.rtt_s(ip) / 4, (ip, took)
    https_url = next(u for u in fetches if u.startswith("https://"))
    (status, first, _, err), *_ = fetches[https_url]
    assert status == 200 and first < rtt_of(web, https_url), (err, first)


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_a_crawl_over_real_round_trips_is_complete_and_polite(
        harness: tuple[NetnsCluster, NetnsRedis, NetnsWeb], tmp_path: Path) -> None:
    net, server, web = harness
    before = net.rtt_stats("web").get("packets", 0)
    client = server.client()
    config = drill_config(web, "rtt", tmp_path / "out", ca_bundle=web.ca_path,
                          connect_timeout_s=2.0, read_timeout_s=2.0, total_timeout_s=4.0,
                          lease_ttl_s=15.0)
    frontier = init_crawl(client, config, list(web.seeds))
    pool = NetnsWorkerPool(server.url, config.namespace, 0, 8, tmp_path / "logs", net=net)
    d = Drill(web, frontier, pool, tmp_path / "out")
    t0 = time.monotonic()
    try:
        pool.start_one(0)
        d.wait_done(timeout_s=180.0)
        counts, expected = judge(d)
    finally:
        pool.stop()
        client.close()
    took = time.monotonic() - t0
    read = load_records(tmp_path / "out")
    assert read.bad_lines == 0
    fetched = [r for r in read.records if r.get("status") == 200 and r.get("elapsed_s")]
    dupes = refetched(counts, expected)
    assert len(dupes) <= 0.01 * len(expected), dupes[:10]
    pages = sum(1 for kind in expected.values() if kind == "page")
    assert len(fetched) >= 0.9 * pages, (len(fetched), pages)
    short = [r["url"] for r in fetched if r["elapsed_s"] < rtt_of(web, r["url"]) - 0.002]
    assert short == [], short[:5]
    line = net.rtt_stats("web")
    assert line.get("packets", 0) > before and line.get("dropped_full") == 0, line
    print(json.dumps({"urls": len(expected), "pages": pages, "crawl_s": round(took, 1),
                      "fetches_200": len(fetched), "refetched": len(dupes),
                      "line": line}))
