"""The sandbox web: generation is deterministic, the real server serves what the site lists,
and the crawl oracle agrees with the HTML actually served."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from urllib.parse import urldefrag, urljoin, urlsplit

import lxml.html
import pytest
import requests
from protego import Protego

from sandbox import (
    ROBOTS_PARSE_LIMIT,
    RobotsKind,
    SandboxConfig,
    SandboxSite,
    SandboxWeb,
    SpecialKind,
    canonical_url,
)
from sandbox.graph import relative_ref
from tests.webs import SandboxWebs

CONFIG = SandboxConfig(seed=3, hosts=30, pages_per_host=30, ips=8, robots_slow_s=0.3,
                       slow_page_s=0.3, hang_s=4.0, crawl_delay_s=0.25)


@pytest.fixture(scope="module")
def web(module_webs: SandboxWebs) -> SandboxWeb:
    return module_webs.shared(CONFIG)


def get(web: SandboxWeb, url: str, timeout: float = 5.0, **headers: str) -> requests.Response:
    parts = urlsplit(url)
    assert parts.hostname
    ip = web.resolver_map.get(parts.hostname, "127.0.1.1")
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    return requests.get(f"http://{ip}:{web.port}{target}", allow_redirects=False, timeout=timeout,
                        headers={"Host": parts.netloc, "User-Agent": "trawl-test/1", **headers})


def site_of(web: SandboxWeb) -> SandboxSite:
    assert web.site is not None
    return web.site


# -- generation, no server ---------------------------------------------------------------------
def test_same_seed_same_web_different_seed_different_web() -> None:
    a, b, c = (SandboxSite(CONFIG, 4242), SandboxSite(CONFIG, 4242),
               SandboxSite(SandboxConfig(**{**CONFIG.to_dict(), "seed": 4}), 4242))
    assert a.resolver_map() == b.resolver_map()
    urls = random.Random(0).sample(a.page_urls(), 40)
    for u in urls:
        host, path = urlsplit(u).hostname or "", urlsplit(u).path
        assert a.respond(host, path).body == b.respond(host, path).body
    assert a.expected_fetches(a.seeds()) == b.expected_fetches(b.seeds())
    assert [a.robots_kind(h) for h in a.hosts] != [c.robots_kind(h) for h in c.hosts]
    host, path = urlsplit(urls[0]).hostname or "", urlsplit(urls[0]).path
    assert a.respond(host, path).body != c.respond(host, path).body
    assert a.outlinks(a.url(a.hosts[0], "/")) != c.outlinks(c.url(c.hosts[0], "/"))
    # without SandboxConfig.traps there are no trap hosts (tests/sandbox/test_sandbox_traps.py)
    assert a.trap_hosts() == {} and a.farm_rule() is None
    assert all(a.trap_kind(u) is None for u in a.expected_fetches(a.seeds()))


def test_page_sizes_and_link_counts_in_range() -> None:
    site = SandboxSite(CONFIG, 4242)
    for url in site.page_urls():
        host = urlsplit(url).hostname or ""
        if host == site.hang_host:
            continue
        body = site.respond(host, urlsplit(url).path).body
        assert 10_000 <= len(body) <= 60_000, (url, len(body))
        n_links = len(lxml.html.fromstring(body).xpath("//a[@href] | //area[@href]"))
        assert 20 <= n_links <= 165, (url, n_links)


def test_every_special_variant_exists() -> None:
    site = SandboxSite(CONFIG, 4242)
    for kind in RobotsKind:
        assert site.robots_hosts(kind), kind
    assert {s.kind for s in site.specials()} == set(SpecialKind)
    assert site.slow_urls() and site.meta_nofollow_urls() and site.header_nofollow_urls()
    shared = [hs for hs in site.hosts_on_ip().values() if len(hs) > 1]
    assert shared and all(ip.startswith("127.") for ip in site.resolver_map().values())


def test_relative_refs_resolve_to_their_target() -> None:
    cases = [("/", "/p/3.html"), ("/a/news/", "/"), ("/a/news/", "/a/blog/page-2.html"),
             ("/d/wiki/4/", "/d/wiki/4/"), ("/a/x/y/", "/p/1.html"), ("/p/", "/d/news/7/")]
    for from_dir, to in cases:
        ref = relative_ref(from_dir, to)
        assert urljoin("http://h:1" + from_dir + "page.html", ref) == "http://h:1" + to, ref


def test_oversized_robots_rule_lies_past_the_parse_limit() -> None:
    site = SandboxSite(CONFIG, 4242)
    host = site.robots_hosts(RobotsKind.OVERSIZED)[0]
    body = site.respond(host, "/robots.txt").body
    assert len(body) > ROBOTS_PARSE_LIMIT
    assert body.index(b"Disallow: /a/") > ROBOTS_PARSE_LIMIT
    full = Protego.parse(body.decode())
    head = Protego.parse(body[:ROBOTS_PARSE_LIMIT].decode())
    url = site.url(host, "/a/news/page-3.html")
    assert not full.can_fetch(url, "trawl") and head.can_fetch(url, "trawl")
    assert not head.can_fetch(site.url(host, "/private/5.html"), "trawl")
    assert site.robots_rules(host).allowed(url, "trawl")


def test_oracle_respects_robots_and_reaches_specials() -> None:
    site = SandboxSite(CONFIG, 4242)
    exp = site.expected_fetches(site.seeds())
    for host in [*site.robots_hosts(RobotsKind.SERVER_ERROR), site.hang_host]:
        fetched = [u for u in exp if urlsplit(u).hostname == host]
        assert all(u.endswith("/robots.txt") for u in fetched), fetched
    assert exp[site.url(site.hang_host, "/robots.txt")] == "timeout"
    for host in site.robots_hosts(RobotsKind.DISALLOW):
        assert not [u for u in exp if urlsplit(u).hostname == host and "/private/" in u]
    for host in site.robots_hosts(RobotsKind.AGENT_SPECIFIC):
        assert not [u for u in exp if urlsplit(u).hostname == host and "/a/" in u]
        other = site.expected_fetches(site.seeds(), user_agent_token="otherbot")
        assert [u for u in other if urlsplit(u).hostname == host and "/a/" in u]
    for url in site.special_urls():
        assert url in exp, url
    assert {"page", "resource", "redirect", "not_found", "error", "flaky", "robots",
            "timeout"} <= set(exp.values())
    assert all("#" not in u for u in exp)
    for url in site.meta_nofollow_urls() + site.header_nofollow_urls():
        assert site.outlinks(url) == []


# -- the real server ---------------------------------------------------------------------------
def test_robots_variants_are_served_as_listed(web: SandboxWeb) -> None:
    site = site_of(web)
    expect = {RobotsKind.ALLOW_ALL: 200, RobotsKind.DISALLOW: 200, RobotsKind.CRAWL_DELAY: 200,
              RobotsKind.AGENT_SPECIFIC: 200, RobotsKind.NOT_FOUND: 404,
              RobotsKind.SERVER_ERROR: 500, RobotsKind.SLOW: 200, RobotsKind.OVERSIZED: 200,
              RobotsKind.REDIRECT: 301}
    for kind, status in expect.items():
        host = site.robots_hosts(kind)[0]
        t0 = time.monotonic()
        r = get(web, site.url(host, "/robots.txt"))
        assert r.status_code == status, kind
        if kind is RobotsKind.SLOW:
            assert time.monotonic() - t0 >= CONFIG.robots_slow_s
        if kind is RobotsKind.CRAWL_DELAY:
            assert Protego.parse(r.text).crawl_delay("trawl") == CONFIG.crawl_delay_s
        if kind is RobotsKind.DISALLOW:
            assert not Protego.parse(r.text).can_fetch(site.url(host, "/private/5.html"), "trawl")
        if kind is RobotsKind.OVERSIZED:
            assert len(r.content) > ROBOTS_PARSE_LIMIT
        if kind is RobotsKind.REDIRECT:
            assert r.headers["Location"] == site.url(host, "/robots-real.txt")
            real = get(web, r.headers["Location"])
            assert real.status_code == 200 and "Disallow: /private/" in real.text


def test_redirects_errors_and_not_found(web: SandboxWeb) -> None:
    site = site_of(web)
    for url in site.special_urls(SpecialKind.MOVED) + site.special_urls(SpecialKind.CROSS_HOST):
        r = get(web, url)
        assert r.status_code == 301 and r.headers["Location"].startswith("http://")
        assert site.page(r.headers["Location"]) is not None
    for url in site.special_urls(SpecialKind.FOUND):
        r = get(web, url)
        assert r.status_code == 302 and r.headers["Location"].startswith("/")
    chain = next(u for u in site.special_urls(SpecialKind.CHAIN) if u.endswith("chain-1.html"))
    url, hops = chain, 0
    while (r := get(web, url)).status_code in (301, 302):
        url, hops = urljoin(url, r.headers["Location"]), hops + 1
    assert hops == 3 and r.status_code == 200 and "text/html" in r.headers["Content-Type"]
    loop_a = next(u for u in site.special_urls(SpecialKind.LOOP) if u.endswith("loop-a.html"))
    loop_b = urljoin(loop_a, get(web, loop_a).headers["Location"])
    assert urljoin(loop_b, get(web, loop_b).headers["Location"]) == loop_a
    assert get(web, site.special_urls(SpecialKind.ERROR)[0]).status_code == 500
    flaky = site.special_urls(SpecialKind.FLAKY)[0]
    assert [get(web, flaky).status_code for _ in range(3)] == [503, 200, 200]
    assert get(web, site.url(site.hosts[1], "/gone/nothing.html")).status_code == 404
    assert get(web, f"http://nobody.example:{web.port}/").status_code == 404


def test_resources_slow_pages_and_x_robots_tag(web: SandboxWeb) -> None:
    site = site_of(web)
    pdf = next(u for u in site.resource_urls() if u.endswith(".pdf"))
    png = next(u for u in site.resource_urls() if u.endswith(".png"))
    r = get(web, pdf)
    assert r.headers["Content-Type"] == "application/pdf" and r.content.startswith(b"%PDF")
    r = get(web, png)
    assert r.headers["Content-Type"] == "image/png" and r.content.startswith(b"\x89PNG")
    t0 = time.monotonic()
    assert get(web, site.slow_urls()[0]).status_code == 200
    assert time.monotonic() - t0 >= CONFIG.slow_page_s
    assert get(web, site.header_nofollow_urls()[0]).headers["X-Robots-Tag"] == "nofollow"
    body = get(web, site.meta_nofollow_urls()[0]).text
    assert '<meta name="robots" content="nofollow">' in body


def test_etag_and_last_modified_give_304(web: SandboxWeb) -> None:
    url = site_of(web).seeds()[0]
    r = get(web, url)
    assert r.status_code == 200 and r.headers["ETag"]
    assert get(web, url, **{"If-None-Match": r.headers["ETag"]}).status_code == 304
    assert get(web, url, **{"If-None-Match": '"other"'}).status_code == 200
    assert get(web, url, **{"If-Modified-Since": r.headers["Last-Modified"]}).status_code == 304


def test_hanging_host_outlasts_a_sane_timeout(web: SandboxWeb) -> None:
    site = site_of(web)
    with pytest.raises(requests.Timeout):
        get(web, site.url(site.hang_host, "/robots.txt"), timeout=0.5)


def test_hosts_share_an_ip_and_the_log_records_it(web: SandboxWeb) -> None:
    site = site_of(web)
    ip, hosts = next((ip, hs) for ip, hs in site.hosts_on_ip().items()
                     if len(hs) > 1 and site.hang_host not in hs)
    for h in hosts[:2]:
        assert get(web, site.url(h, "/")).status_code == 200
    time.sleep(0.3)
    seen = {(e.host, e.ip) for e in web.read_log() if e.path == "/"}
    assert {(h, ip) for h in hosts[:2]} <= seen


def test_served_html_agrees_with_oracle(web: SandboxWeb) -> None:
    site = site_of(web)
    exp = site.expected_fetches(web.seeds)
    pages = [u for u, k in exp.items() if k == "page"]
    rng = random.Random(1)
    sample = set(rng.sample(pages, 60)) | set(site.meta_nofollow_urls()[:2])
    sample |= {u for u in pages if "?" in u}
    sample |= {u for u in pages if (p := site.page(u)) and p.base_href}
    for url in sample:
        r = get(web, url)
        assert r.status_code == 200, url
        assert set(links_in_html(url, r, web.resolver_map)) == set(site.outlinks(url)), url
    # every kind the oracle names is what the server answers
    want = {"page": (200,), "resource": (200,), "redirect": (301, 302), "not_found": (404,),
            "error": (500,), "flaky": (503, 200), "robots": (200, 301, 404, 500)}
    for url, kind in rng.sample(sorted(exp.items()), 150):
        if kind != "timeout":
            assert get(web, url).status_code in want[kind], (url, kind)


def links_in_html(url: str, r: requests.Response, hosts: dict[str, str]) -> list[str]:
    """What a correct crawler extracts: a/area/frame/iframe/canonical, honouring nofollow."""
    if "nofollow" in r.headers.get("X-Robots-Tag", ""):
        return []
    doc = lxml.html.fromstring(r.content)
    if any("nofollow" in c.lower() for c in doc.xpath('//meta[@name="robots"]/@content')):
        return []
    base = doc.xpath("//base/@href")
    base_url = urljoin(url, base[0]) if base else url
    hrefs = [el.get("href") for el in doc.iter("a", "area")
             if "nofollow" not in (el.get("rel") or "").lower().split()]
    hrefs += [el.get("src") for el in doc.iter("iframe", "frame")]
    hrefs += doc.xpath('//link[@rel="canonical"]/@href')
    out = []
    for href in hrefs:
        if href is None:
            continue
        absolute = urldefrag(urljoin(base_url, href.strip())).url
        parts = urlsplit(absolute)
        if parts.scheme == "http" and parts.hostname in hosts:
            out.append(canonical_url(absolute))
    return out


def test_log_is_complete_after_shutdown(webs: SandboxWebs) -> None:
    with webs.running(CONFIG) as w:
        site = site_of(w)
        urls = site.page_urls()[:25]
        for u in urls:
            get(w, u)
        hung = threading.Thread(target=lambda: _swallow(w, site.url(site.hang_host, "/")))
        hung.start()
        time.sleep(0.3)
        t_stop = time.time()
    hung.join()
    entries = w.read_log()
    assert [e.path for e in entries[:25]] == [urlsplit(u).path for u in urls]
    for e in entries[:25]:
        assert e.status == 200 and e.bytes > 10_000 and e.end >= e.start
        assert e.ua == "trawl-test/1" and e.ip == w.resolver_map[e.host]
    hang = [e for e in entries if e.host == site.hang_host]
    assert len(hang) == 1 and hang[0].status == 0 and hang[0].end >= t_stop


def _swallow(w: SandboxWeb, url: str) -> None:
    with contextlib.suppress(requests.RequestException):
        get(w, url, timeout=10)


def test_prerender_keeps_every_page_past_the_cache_bound() -> None:
    cfg = SandboxConfig(seed=3, hosts=12, pages_per_host=20, ips=4, page_cache=16)
    site = SandboxSite(cfg, 8080)
    n = site.prerender(processes=2)
    assert len(site.replies.cache) == n
    assert n == sum(len(site.layout.page_of[h]) for h in site.layout.hosts) == 12 * 20
    fresh = SandboxSite(cfg, 8080)
    for host in site.layout.hosts[:3]:
        for path in list(site.layout.page_of[host])[:5]:
            assert (host, path) in site.replies.cache  # none evicted although page_cache is 16
            assert site.respond(host, path) == fresh.respond(host, path)


def test_prerendered_server_serves_the_same_bytes(webs: SandboxWebs) -> None:
    with webs.running(CONFIG, prerender=True) as w:
        site = site_of(w)
        assert w.prerendered["pages"] == CONFIG.hosts * CONFIG.pages_per_host
        urls = [u for u in site.page_urls() if urlsplit(u).hostname != site.hang_host]
        for url in random.Random(2).sample(urls, 20):
            r = get(w, url)
            host, target = urlsplit(url).hostname, urlsplit(url).path
            assert host is not None
            assert r.status_code == 200 and r.content == site.respond(host, target).body, url
            assert get(w, url, **{"If-None-Match": r.headers["ETag"]}).status_code == 304
