"""The address policy (SSRF guard, issue 21): which addresses the crawler refuses by default,
what ``allowed_networks`` opens, and that the check holds where it matters: on the address the
connection is opened to (a DNS answer that changes between check and connect, DNS rebinding,
does not get through), on every redirect hop, with its own outcome and a reason naming the
setting to change.

Real components: a scripted DNS server on loopback (tests/dnskit.py) whose first answer for a
name is an allowed address (127.0.0.2, in ``allowed_networks``) and whose later answers are a
refused one (127.0.0.3), real HTTP servers on both addresses (same port, so one URL can reach
either), both fetchers, and a real ``trawl crawl`` per fetch engine (Redis, a Celery worker
process; ~3.5 s each) read back from its JSONL records. Negative control: a naive client that
checks the name's address and then lets the HTTP library resolve again does reach 127.0.0.3
(and a fetcher changed to do so fails the fetcher and crawl tests: tried by hand).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import urllib3

from frontier.config import ConfigError, CrawlConfig
from frontier.redisserver import EmbeddedRedis
from frontier.useragent import user_agent
from tests.dnskit import ScriptedDNS
from tests.loopback import LoopbackServer, Reply, Request
from workers.cli.main import main
from workers.dns.policy import SETTINGS_HINT, AddressPolicy
from workers.dns.pool import nameserver_lookup
from workers.dns.resolver import CachingResolver, ForbiddenAddressError
from workers.fetch import Fetcher, LoopFetcher

ALLOWED_IP, REFUSED_IP = "127.0.0.2", "127.0.0.3"
ALLOW = [f"{ALLOWED_IP}/32"]

# -- the default policy, family by family ----------------------------------------------------

DEFAULT_CASES = [  # (address, the start of the refusal, or None: allowed)
    ("127.0.0.1", "loopback address"),
    ("127.255.255.254", "loopback address"),
    ("10.0.0.1", "private address"),
    ("172.16.5.4", "private address"),
    ("192.168.1.1", "private address"),
    ("169.254.169.254", "link-local address"),  # cloud metadata
    ("0.0.0.0", "unspecified address"),
    ("0.1.2.3", "this-network address"),
    ("100.64.0.1", "shared (carrier-grade NAT) address"),
    ("224.0.0.1", "multicast address"),
    ("255.255.255.255", "broadcast address"),
    ("240.0.0.1", "reserved address"),
    ("192.0.2.1", "documentation address"),
    ("::1", "loopback address"),
    ("::", "unspecified address"),
    ("fe80::1", "link-local address"),
    ("fe80::1%eth0", "link-local address"),
    ("febf::1", "link-local address"),  # the top of fe80::/10
    ("fc00::1", "unique-local address"),
    ("fdff:ffff::1", "unique-local address"),  # the top of fc00::/7
    ("fec0::1", "site-local address"),
    ("ff02::1", "multicast address"),
    ("2001:db8::1", "documentation address"),
    ("::ffff:127.0.0.1", "IPv4-mapped loopback address"),
    ("::ffff:10.0.0.1", "IPv4-mapped private address"),
    ("::ffff:169.254.169.254", "IPv4-mapped link-local address"),
    ("64:ff9b::a00:1", "NAT64 private address"),  # NAT64 of 10.0.0.1
    ("64:ff9b::7f00:1", "NAT64 loopback address"),
    ("2002:a00:1::", "6to4 private address"),  # 6to4 of 10.0.0.1
    ("2002:7f00:1::1", "6to4 loopback address"),
    ("not-an-ip", "not an IP address"),
    ("", "not an IP address"),
    # globally routable: allowed
    ("93.184.216.34", None),
    ("8.8.8.8", None),
    ("172.32.0.1", None),  # just past 172.16.0.0/12
    ("100.128.0.1", None),  # just past 100.64.0.0/10
    ("2606:4700:4700::1111", None),
    ("::ffff:8.8.8.8", None),
    ("64:ff9b::808:808", None),  # NAT64 of 8.8.8.8
    ("2002:808:808::1", None),  # 6to4 of 8.8.8.8
]


@pytest.mark.parametrize(("ip", "refusal"), DEFAULT_CASES, ids=[c[0] or "empty"
                                                                 for c in DEFAULT_CASES])
def test_default_policy(ip: str, refusal: str | None) -> None:
    got = AddressPolicy().refusal(ip)
    if refusal is None:
        assert got is None
    else:
        assert got is not None and got.startswith(refusal), got
        assert ip.split("%")[0] in got or refusal == "not an IP address"
    # allow_private_ips opens everything that parses (the sandbox web's setting)
    assert AddressPolicy(allow_private=True).allows(ip) is (refusal != "not an IP address")


ALLOW_LIST = ["10.20.0.0/16", "127.0.0.2/32", "fd00:1::/64", "64:ff9b::/96"]
ALLOW_CASES = [  # (address, allowed with ALLOW_LIST)
    ("10.20.3.4", True),
    ("10.21.0.1", False),  # next to the network
    ("127.0.0.2", True),
    ("127.0.0.3", False),
    ("::ffff:10.20.3.4", True),  # the IPv4-mapped form of a listed address
    ("::ffff:10.21.0.1", False),
    ("fd00:1::5", True),
    ("fd00:2::5", False),
    ("64:ff9b::a00:1", True),  # listed as an IPv6 network
    ("169.254.169.254", False),  # the rest of the policy is unchanged
    ("fe80::1", False),
    ("2002:a14:304::", True),  # 6to4 of 10.20.3.4: judged by its IPv4 address
    ("93.184.216.34", True),
]


@pytest.mark.parametrize(("ip", "allowed"), ALLOW_CASES, ids=[c[0] for c in ALLOW_CASES])
def test_allowed_networks(ip: str, allowed: bool) -> None:
    policy = AddressPolicy.of(False, ALLOW_LIST)
    assert policy.allows(ip) is allowed, policy.refusal(ip)
    if not allowed:  # control: the same address is refused or allowed by the default
        assert not AddressPolicy().allows(ip)


@pytest.mark.parametrize("bad", [["10.0.0.0/33"], ["10.0.0.1/8"], ["not-a-net"], ["fe80::/129"],
                                 "10.0.0.0/8", [8]])
def test_a_bad_network_is_refused_naming_the_setting(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"^Setting allowed_networks=.*is invalid: .*CIDR"):
        CrawlConfig(allowed_networks=bad).validate()


def test_good_networks_pass_and_reach_the_resolver() -> None:
    cfg = CrawlConfig(allowed_networks=["10.20.0.0/16", "fd00::/8", "127.0.0.2"]).validate()
    lookup = {"in.test": ["10.20.0.9"], "out.test": ["10.30.0.9"]}
    r = CachingResolver(allowed_networks=cfg.allowed_networks, lookup=lookup.__getitem__)
    assert r.resolve("in.test") == "10.20.0.9"
    with pytest.raises(ForbiddenAddressError, match=r"^private address 10\.30\.0\.9 \(out"):
        r.resolve("out.test")
    assert r.resolve("127.0.0.2") == "127.0.0.2"
    with pytest.raises(ForbiddenAddressError, match=r"loopback address 127\.0\.0\.3"):
        r.resolve("127.0.0.3")


# -- the network: DNS that rebinds, a server on each address ---------------------------------


@dataclass
class Net:
    dns: ScriptedDNS
    allowed: LoopbackServer  # on ALLOWED_IP
    refused: LoopbackServer  # on REFUSED_IP, same port: what a rebinding attack reaches
    port: int

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"


def _site(port: int) -> Any:
    """The allowed server's pages: links to two redirects that leave for the refused address,
    one to an IP literal, one (after a first hop) to a name now resolving to it."""
    def respond(req: Request) -> Reply:
        if req.path == "/robots.txt":
            return Reply(200, b"User-agent: *\nAllow: /\n", "text/plain")
        if req.path == "/":
            links = "".join(f'<a href="/{p}">{p}</a> ' for p in ("page", "to-ip", "chain"))
            return Reply(200, f"<html><body><p>rebinding home</p>{links}</body></html>".encode())
        if req.path == "/to-ip":
            return Reply(302, headers=(("Location", f"http://{REFUSED_IP}:{port}/secret"),))
        if req.path == "/chain":
            return Reply(302, headers=(("Location", "/to-name"),))
        if req.path == "/to-name":  # rebind-X.test -> rebound-X.test
            target = req.host.replace("rebind", "rebound", 1)
            return Reply(302, headers=(("Location", f"http://{target}:{port}/secret"),))
        if req.path == "/robots-away.txt":
            return Reply(301, headers=(("Location", f"http://rebound.test:{port}/robots.txt"),))
        return Reply(200, b"<html><body><p>an ordinary page</p></body></html>")
    return respond


@pytest.fixture(scope="module")
def net() -> Iterator[Net]:
    dns = ScriptedDNS()
    allowed = LoopbackServer(addr=ALLOWED_IP)
    port = allowed.port
    refused = LoopbackServer(addr=REFUSED_IP, port=port,
                             respond=lambda _r: Reply(200, b"<p>internal secret</p>"))
    allowed.respond = _site(port)
    allowed.start(), refused.start()
    yield Net(dns, allowed, refused, port)
    allowed.stop(), refused.stop()
    dns.close()


class _ResolvesAtConnect(urllib3.connection.HTTPConnection):
    """What a naive client does: the HTTP library resolves the name again when it connects."""

    lookup: Any = None

    def _new_conn(self) -> socket.socket:
        return socket.create_connection((self.lookup(self.host)[0], self.port), timeout=2)


def naive_get(net: Net, host: str, path: str) -> int:
    """Check the name's address against the policy, then GET the URL by name: the check and
    the connect each resolve (time of check, time of use)."""
    lookup = nameserver_lookup([net.dns.address], 2.0)
    refusal = AddressPolicy.of(False, ALLOW).refusal(lookup(host)[0])
    assert refusal is None, refusal
    pool = urllib3.HTTPConnectionPool(host, net.port, retries=False)
    pool.ConnectionCls = type("Conn", (_ResolvesAtConnect,), {"lookup": staticmethod(lookup)})
    with pool:
        return pool.request("GET", path).status


def _hits(server: LoopbackServer, path: str) -> int:
    return sum(1 for r in server.requests if r.path == path)


def test_control_a_naive_client_is_rebound(net: Net) -> None:
    """The test's DNS rebinds and its refused server answers: a client that checks, then
    resolves again to connect, reaches 127.0.0.3 although the check said 127.0.0.2."""
    net.dns.script("naive.test", [ALLOWED_IP, REFUSED_IP])
    assert naive_get(net, "naive.test", "/naive") == 200
    assert _hits(net.refused, "/naive") == 1 and _hits(net.allowed, "/naive") == 0


@pytest.mark.parametrize("cls", [Fetcher, LoopFetcher], ids=["urllib3", "aiohttp"])
def test_fetchers_connect_to_the_address_they_checked(net: Net, cls: Any) -> None:
    """Each fetch resolves once and connects to that answer, after checking it: the first
    fetch gets 127.0.0.2 (allowed) and is served there; the next resolves again (TTL 0, no
    cache) and is refused before any connection. Also for a robots.txt redirect hop, and
    for the IPv4-mapped form of the refused address given as the IP to connect to."""
    name = f"rebind-{cls.__name__.lower()}.test"
    net.dns.script(name, [ALLOWED_IP, REFUSED_IP])
    net.dns.script("rebound.test", [REFUSED_IP])
    resolver = CachingResolver(ttl_s=0, negative_ttl_s=0, allowed_networks=ALLOW,
                               lookup=nameserver_lookup([net.dns.address], 2.0))
    f = cls(resolver, user_agent(), allowed_networks=ALLOW, connect_timeout_s=2.0,
            read_timeout_s=2.0, total_timeout_s=4.0)
    try:
        before = len(net.refused.requests)
        first = f.fetch(net.url(name, "/fetch-1"))
        assert (first.status, first.ip, first.error) == (200, ALLOWED_IP, None)
        second = f.fetch(net.url(name, "/fetch-2"))
        assert second.error == "forbidden_ip" and second.status is None
        assert second.error_detail == f"loopback address {REFUSED_IP} for {name}"
        robots = f.fetch_robots(net.url("127.0.0.2", "/robots-away.txt"))
        assert robots.redirects == [net.url("127.0.0.2", "/robots-away.txt")]
        assert robots.error == "forbidden_ip", robots.error_detail
        assert robots.error_detail == f"loopback address {REFUSED_IP} for rebound.test"
        mapped = f.fetch(net.url(name, "/fetch-3"), ip=f"::ffff:{REFUSED_IP}")
        assert mapped.error_detail == (f"IPv4-mapped loopback address ::ffff:{REFUSED_IP} "
                                       f"({REFUSED_IP}) for {name}")
        assert len(net.refused.requests) == before  # nothing reached 127.0.0.3
        assert _hits(net.allowed, "/fetch-1") >= 1 and _hits(net.allowed, "/fetch-2") == 0
    finally:
        f.close()


# -- a real crawl ----------------------------------------------------------------------------


@dataclass
class Crawl:
    engine: str
    #: the name that rebinds (its first answer allowed), the name that resolves to the
    #: refused address, and the host of the refused server's requests (Host header)
    name: str
    rebound: str
    records: dict[str, dict[str, Any]]
    summary: dict[str, Any]
    dns_queries: dict[str, int]


@pytest.fixture(scope="module", params=["loop", "threads"])
def crawl(request: pytest.FixtureRequest, net: Net, redis_server: EmbeddedRedis,
          tmp_path_factory: pytest.TempPathFactory) -> Crawl:
    """``trawl crawl`` (one real worker process, fetching on the aiohttp loop or on urllib3
    threads) of a name that rebinds, with only 127.0.0.2 in allowed_networks."""
    engine = request.param
    name, rebound = f"rebind-{engine}.test", f"rebound-{engine}.test"
    net.dns.script(name, [ALLOWED_IP, REFUSED_IP])
    net.dns.script(rebound, [REFUSED_IP])
    out = tmp_path_factory.mktemp(f"addrpol-{engine}")
    argv = ["crawl", net.url(name), "--redis", redis_server.url, "--workers", "1",
            "--concurrency", "4", "--output", str(out), "--no-progress", "--namespace",
            f"addrpol-{engine}", "--partitions", "2", "--delay", "0.05",
            "--allow", name, "--allow", rebound, "--allow", REFUSED_IP,
            "--set", f"allowed_networks={json.dumps(ALLOW)}",
            "--set", f"dns_servers={json.dumps([net.dns.address])}",
            "--set", f"fetch_engine={engine}", "--set", "soft404_probe=false",
            "--set", "adaptive_delay_factor=0", "--set", "max_retries=0",
            "--set", "connect_timeout_s=2", "--set", "read_timeout_s=2",
            "--set", "total_timeout_s=4"]
    assert main(argv) == 0
    records = {}
    for path in (out / "records").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            records[rec["url"]] = rec
    return Crawl(engine, name, rebound, records, json.loads((out / "summary.json").read_text()),
                 dict(net.dns.queries))


def _host_hits(server: LoopbackServer, host: str, path: str | None = None) -> int:
    return sum(1 for r in server.requests if r.host == host and path in (None, r.path))


def test_the_crawl_fetches_from_the_checked_address_only(crawl: Crawl, net: Net) -> None:
    """The name's first answer (127.0.0.2) is the address every fetch of it went to; the
    rebound answer (127.0.0.3) got no request at all, though the name was asked for with
    TTL 0 (the control test above shows a client that resolves again would reach it)."""
    home, page = (crawl.records[net.url(crawl.name, p)] for p in ("/", "/page"))
    for rec in (home, page):
        assert (rec["outcome"], rec["status"], rec["ip"]) == ("fetched", 200, ALLOWED_IP), rec
    assert _host_hits(net.allowed, crawl.name, "/") == 1
    assert _host_hits(net.allowed, crawl.name, "/page") == 1
    for host in (crawl.name, crawl.rebound, REFUSED_IP):
        assert _host_hits(net.refused, host) == 0, net.refused.requests
    assert crawl.dns_queries[crawl.name] >= 1


def test_redirects_to_the_refused_address_end_as_address_refused(crawl: Crawl,
                                                                  net: Net) -> None:
    """Each hop is checked: to an IP literal, and (after a first hop on the allowed host) to
    a name now resolving to the refused address. Each ends with its own outcome, its reason
    naming the address, its kind and the settings that would allow it."""
    hint = f"({SETTINGS_HINT})"
    literal = crawl.records[f"http://{REFUSED_IP}:{net.port}/secret"]
    assert (literal["outcome"], literal["ip"]) == ("address_refused", REFUSED_IP)
    assert literal["reason"] == f"loopback address {REFUSED_IP} for {REFUSED_IP} {hint}"
    named = crawl.records[net.url(crawl.rebound, "/secret")]
    assert (named["outcome"], named["ip"]) == ("address_refused", REFUSED_IP)
    assert named["reason"] == f"loopback address {REFUSED_IP} for {crawl.rebound} {hint}"
    assert "allowed_networks" in named["reason"] and "allow_private_ips" in named["reason"]
    # the hops before them were fetched from the allowed server and led there
    chain = [crawl.records[net.url(crawl.name, p)] for p in ("/to-ip", "/chain", "/to-name")]
    assert [(r["outcome"], r["status"]) for r in chain] == [("fetched", 302)] * 3
    assert chain[1]["redirect_to"] == net.url(crawl.name, "/to-name")
    assert chain[2]["redirect_to"] == net.url(crawl.rebound, "/secret")


def test_the_crawl_counts_each_refusal(crawl: Crawl) -> None:
    s = crawl.summary
    assert s["address_refused"] == 2 and s["pages_failed"] == 0 and s["robots_blocked"] == 0
    assert s["accounted"] == s["urls_admitted"] == len(crawl.records) == 7
