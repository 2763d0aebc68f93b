"""The sandbox's spider-trap hosts (SandboxConfig.traps), served by the real server on loopback:
each trap kind is endless in the way it claims, the legitimate pages among them are ordinary
pages of the oracle, and with the option off the web is the web it was before traps existed."""

from __future__ import annotations

import hashlib
import json
import re
import time
from difflib import SequenceMatcher
from urllib.parse import parse_qsl, urldefrag, urljoin, urlsplit

import lxml.html
import pytest
import requests

from sandbox import FARM_LISTED, TRAP_KINDS, SandboxConfig, SandboxSite, SandboxWeb, canonical_url
from tests.webs import SandboxWebs

CONFIG = SandboxConfig(seed=7, hosts=16, pages_per_host=20, ips=4, robots_slow_s=0.3,
                       slow_page_s=0.3, hang_s=4.0, crawl_delay_s=0.25, traps=True)
OFF = SandboxConfig(**{**CONFIG.to_dict(), "traps": False})
SESSION_ID = re.compile(r"[?&](?:sid|PHPSESSID)=[0-9a-f]+$|;jsessionid=[0-9A-F]+$")


@pytest.fixture(scope="module")
def web(module_webs: SandboxWebs) -> SandboxWeb:
    return module_webs.shared(CONFIG)


def site_of(web: SandboxWeb) -> SandboxSite:
    assert web.site is not None
    return web.site


def get(web: SandboxWeb, url: str) -> requests.Response:
    """GET ``url`` on the IP the sandbox serves its host on (the farm by its suffix rule)."""
    parts = urlsplit(url)
    ip = site_of(web).resolve(parts.hostname or "")
    assert ip is not None, url
    target = parts.path + (f"?{parts.query}" if parts.query else "")  # path keeps ;params
    return requests.get(f"http://{ip}:{web.port}{target}", allow_redirects=False, timeout=5,
                        headers={"Host": parts.netloc, "User-Agent": "trawl-test/1"})


def hrefs(url: str, r: requests.Response) -> list[str]:
    """Absolute link targets of a served page, as written (no canonicalization)."""
    doc = lxml.html.fromstring(r.content)
    return [urldefrag(urljoin(url, h)).url for h in doc.xpath("//a/@href")]


def link_named(url: str, r: requests.Response, text: str) -> str:
    doc = lxml.html.fromstring(r.content)
    return next(urljoin(url, a.get("href")) for a in doc.iter("a") if a.text_content() == text)


def registered(host: str) -> str:
    """The Public Suffix List's default rule ``*``: the last label is the suffix."""
    return ".".join(host.split(".")[-2:])


def strip_session(url: str) -> str:
    return SESSION_ID.sub("", url)


# -- hosts, names, entry links --------------------------------------------------------------
def test_trap_hosts_are_mapped_linked_and_allow_all(web: SandboxWeb) -> None:
    site = site_of(web)
    hosts, domains = site.trap_hosts(), site.trap_domains()
    assert set(hosts) == set(domains) == set(TRAP_KINDS)
    normal = {registered(h) for h in site.hosts}
    assert normal == {"sandbox.test"} and not normal & set(domains.values())
    assert len(set(domains.values())) == len(TRAP_KINDS)
    assert {registered(h) for h in hosts.values()} == set(domains.values())
    for kind, host in hosts.items():
        assert web.resolver_map[host] == site.resolve(host), kind
        assert site.resolve(host) not in {site.resolve(h) for h in site.hosts}, kind
        robots = get(web, site.url(host, "/robots.txt"))
        assert robots.status_code == 200 and "Disallow:\n" in robots.text, kind
    suffix, farm_ip = site.farm_rule() or ("", "")
    farm = [h for h in web.resolver_map if h.endswith(suffix)]
    assert len(farm) == FARM_LISTED and {web.resolver_map[h] for h in farm} == {farm_ip}
    assert web.traps["farm_suffix"] == suffix and web.traps["farm_ip"] == farm_ip
    expected = site.expected_fetches(web.seeds)
    entries = site.trap_entries()
    assert {k for k, _, _ in entries} == set(TRAP_KINDS)
    for kind, page, trap_url in entries:
        assert expected.get(page) == "page", page
        assert trap_url in hrefs(page, get(web, page)), (kind, page)
        assert site.trap_kind(page) is None


def test_names_with_single_label_domain() -> None:
    site = SandboxSite(SandboxConfig(**{**CONFIG.to_dict(), "domain": "test"}), 4242)
    normal = {registered(h) for h in site.hosts}
    assert len(normal) == len(site.hosts)  # each normal host is its own registered domain
    domains = set(site.trap_domains().values())
    assert len(domains) == len(TRAP_KINDS) and not normal & domains
    assert all(h.endswith(".test") for h in site.trap_hosts().values())
    with pytest.raises(ValueError, match="registered domain"):
        SandboxSite(SandboxConfig(**{**CONFIG.to_dict(), "domain": "farm-trap.test"}), 4242)


# -- each trap kind ------------------------------------------------------------------------
def test_calendar_is_endless_both_ways(web: SandboxWeb) -> None:
    site = site_of(web)
    start = site.url(site.trap_hosts()["calendar"], "/cal/2026/01/")
    for step, years in (("next month", 50), ("previous year", 40)):
        url, seen = start, []
        for _ in range(years):
            r = get(web, url)
            assert r.status_code == 200 and len(r.content) < 4096, url
            url = link_named(url, r, step)
            seen.append(url)
        assert len(set(seen)) == len(seen) == years
        assert {site.trap_kind(u) for u in seen} == {"calendar"}
    assert url.endswith("/cal/1986/01/")
    days = [u for u in hrefs(start, get(web, start)) if re.search(r"/cal/2026/01/\d\d/$", u)]
    assert days and all(get(web, u).status_code == 200 for u in days)
    far = site.url(site.trap_hosts()["calendar"], "/cal/12026/05/")
    assert get(web, far).status_code == 200
    assert link_named(far, get(web, far), "next year").endswith("/cal/12027/05/")
    for bad in ("/cal/2026/13/", "/cal/2026/02/30/", "/cal/02026/01/"):
        assert get(web, site.url(site.trap_hosts()["calendar"], bad)).status_code == 404


def test_session_ids_make_endless_urls_of_thirty_pages(web: SandboxWeb) -> None:
    site = site_of(web)
    host = site.trap_hosts()["session"]
    home = site.url(host, "/")
    assert site.trap_kind(home) is None
    url, seen, forms = home, [], set()
    for _ in range(40):
        r = get(web, url)
        assert r.status_code == 200, url
        inner = [u for u in hrefs(url, r) if urlsplit(u).hostname == host]
        assert inner and all(SESSION_ID.search(u) for u in inner)  # every internal link
        forms |= {SESSION_ID.search(u)[0][:4] for u in inner}  # type: ignore[index]
        url = inner[len(seen) % len(inner)]
        seen.append(url)
    assert len(set(seen)) == len(seen) and {site.trap_kind(u) for u in seen} == {"session"}
    assert forms == {"?sid", "?PHP", ";jse"}
    assert {strip_session(u) for u in seen} <= set(site.page_urls())
    # one page under three URLs: the same page, each with other session ids
    page = site.url(host, "/s/3.html")
    variants = [page, page + "?sid=00ff", page + ";jsessionid=ABCD"]
    bodies = [get(web, u).content for u in variants]
    assert len(set(bodies)) == 3
    stripped = {re.sub(rb"(?:[?&](?:sid|PHPSESSID)=|;jsessionid=)[0-9a-fA-F]+", b"", b)
                for b in bodies}
    assert len(stripped) == 1
    legit = [u for u in site.page_urls() if urlsplit(u).hostname == host]
    assert len(legit) == 30 and all(site.trap_kind(u) is None for u in legit)


def test_repeat_paths_answer_with_ever_longer_repeats(web: SandboxWeb) -> None:
    site = site_of(web)
    url = site.url(site.trap_hosts()["repeat"], "/a/b/")
    for _ in range(12):
        r = get(web, url)
        assert r.status_code == 200, url
        assert 'href="a/b/"' in r.text  # relative: resolved against ever deeper bases
        url = hrefs(url, r)[0]
    assert urlsplit(url).path == "/a/b" + "/a/b" * 12 + "/"
    assert site.trap_kind(url) == "repeat"
    assert get(web, site.url(site.trap_hosts()["repeat"], "/a/c/")).status_code == 404


def test_deep_paths_go_one_fresh_level_deeper(web: SandboxWeb) -> None:
    site = site_of(web)
    url = site.url(site.trap_hosts()["deep"], "/deep/")
    for _ in range(40):
        r = get(web, url)
        assert r.status_code == 200, url
        url = link_named(url, r, "deeper")
    segs = urlsplit(url).path.strip("/").split("/")
    assert len(segs) == 41 and len(set(segs)) == 41  # fresh names, no repeats
    assert site.trap_kind(url) == "deep"


def test_facets_explode(web: SandboxWeb) -> None:
    site = site_of(web)
    frontier, seen = [site.url(site.trap_hosts()["facets"], "/shop/list")], set()
    while frontier and len(seen) < 150:
        url = frontier.pop(0)
        if url in seen:
            continue
        seen.add(url)
        r = get(web, url)
        assert r.status_code == 200 and len(r.content) < 4096, url
        frontier += hrefs(url, r)
    assert len(seen) == 150 and len(frontier) > 500
    assert {site.trap_kind(u) for u in seen} == {"facets"}
    url = site.url(site.trap_hosts()["facets"], "/shop/list")
    for _ in range(12):  # always take the link with the most parameters
        url = max(hrefs(url, get(web, url)), key=lambda u: len(parse_qsl(urlsplit(u).query)))
    assert len(parse_qsl(urlsplit(url).query)) == 11 and site.trap_kind(url) == "facets"
    url = site.url(site.trap_hosts()["facets"], "/shop/list?page=41&color=red")
    assert site.url(site.trap_hosts()["facets"], "/shop/list?page=42&color=red") in hrefs(
        url, get(web, url))


def test_soft404_answers_200_with_one_template(web: SandboxWeb) -> None:
    site = site_of(web)
    host = site.trap_hosts()["soft404"]
    missing = [site.url(host, p) for p in ("/nothing/here.html", "/x", "/2019/old-post/")]
    bodies = []
    for url in missing:
        r = get(web, url)
        assert r.status_code == 200 and "not found" in r.text.lower(), url
        assert site.trap_kind(url) == "soft404"
        bodies.append(r.text)
        fresh = [u for u in hrefs(url, r) if urlsplit(u).path != "/"]
        assert len(fresh) == 4 and get(web, fresh[0]).status_code == 200
    assert SequenceMatcher(None, bodies[0], bodies[1]).ratio() > 0.9
    assert SequenceMatcher(None, bodies[1], bodies[2]).ratio() > 0.9
    home = get(web, site.url(host, "/"))
    articles = [u for u in hrefs(site.url(host, "/"), home) if "/articles/" in u]
    assert len(articles) == 20 and all(site.trap_kind(u) is None for u in articles)
    pages = [get(web, u).text for u in articles[:3]]
    assert SequenceMatcher(None, pages[0], pages[1]).ratio() < 0.5
    assert SequenceMatcher(None, pages[0], bodies[0]).ratio() < 0.5


def test_redirect_chain_never_ends(web: SandboxWeb) -> None:
    site = site_of(web)
    url, seen = site.url(site.trap_hosts()["redirect"], "/hop/1"), []
    for _ in range(30):
        r = get(web, url)
        assert r.status_code == 302, url
        url = urljoin(url, r.headers["Location"])
        seen.append(url)
    assert len(set(seen)) == 30 and {site.trap_kind(u) for u in seen} == {"redirect"}


def test_farm_links_lead_to_new_subdomains_on_the_farm_ip(web: SandboxWeb) -> None:
    site = site_of(web)
    suffix, farm_ip = site.farm_rule() or ("", "")
    level, seen = [site.url(site.trap_hosts()["farm"], "/")], set[str]()
    for _ in range(6):
        nxt = []
        for url in level[:6]:
            r = get(web, url)
            assert r.status_code == 200, url
            here = urlsplit(url).hostname or ""
            seen.add(here)
            nxt += [u for u in hrefs(url, r) if urlsplit(u).hostname not in seen]
        level = nxt
    assert len(seen) > 20 and all(h.endswith(suffix) for h in seen)
    assert {registered(h) for h in seen} == {site.trap_domains()["farm"]}
    assert all(site.resolve(h) == farm_ip for h in seen)
    time.sleep(0.3)  # the server flushes its log every 0.1 s
    farm_hits = [e for e in web.read_log() if e.host.endswith(suffix)]
    assert farm_hits and {e.ip for e in farm_hits} == {farm_ip}
    beyond = site.url(f"s{FARM_LISTED * 1000 + 7}{suffix}", "/p/1.html")
    assert urlsplit(beyond).hostname not in web.resolver_map
    assert get(web, beyond).status_code == 200 and site.trap_kind(beyond) == "farm"
    r = requests.get(f"http://{farm_ip}:{web.port}/", headers={"Host": f"s01{suffix}"}, timeout=5)
    assert r.status_code == 404  # not a farm name (leading zero): an unknown host


def test_static_hosts_let_the_crawlers_resolver_reach_every_farm_subdomain() -> None:
    from workers.dns.resolver import CachingResolver

    site = SandboxSite(CONFIG, 4242)
    suffix, farm_ip = site.farm_rule() or ("", "")
    static = site.static_hosts()
    assert static == {**site.resolver_map(), "*" + suffix: farm_ip}
    resolver = CachingResolver(static=static, allow_private=True)
    for n in (0, FARM_LISTED - 1, FARM_LISTED, 4**30 + 3):
        assert resolver.resolve(f"s{n}{suffix}") == farm_ip == site.resolve(f"s{n}{suffix}")
    for host in [*site.hosts[:3], *site.trap_hosts().values()]:
        assert resolver.resolve(host) == site.resolve(host)
    assert SandboxSite(OFF, 4242).static_hosts() == SandboxSite(OFF, 4242).resolver_map()


def test_trap_pages_are_small_and_cheap() -> None:
    site = SandboxSite(CONFIG, 4242)
    hosts = site.trap_hosts()
    n = 50
    t0 = time.process_time()
    for k in range(n):  # a new URL of each trap every time
        for host, target in [(hosts["calendar"], f"/cal/{2031 + k}/07/"),
                             (hosts["session"], f"/s/9.html?sid={k:x}"),
                             (hosts["repeat"], "/a/b" * (k + 1) + "/"),
                             (hosts["deep"], f"/deep/x1/y{k}/"),
                             (hosts["facets"], f"/shop/list?color=red&size=m&page={k}"),
                             (hosts["soft404"], f"/missing-{k}.html"),
                             (hosts["redirect"], f"/hop/{k + 1}"),
                             (f"s{k}{site.farm_rule()[0]}", "/p/2.html"),  # type: ignore[index]
                             (f"s{k}{site.farm_rule()[0]}", "/robots.txt")]:  # type: ignore[index]
            r = site.respond(host, target)
            assert len(r.body) < 4096 and r.status in (200, 302), (host, target)
    per_request = (time.process_time() - t0) / (n * 9)
    assert per_request < 0.002, per_request  # measured ~70 µs on this machine
    assert not site.replies.cache  # trap hosts' answers are not cached (they would evict pages)


# -- the oracle and the web without traps ---------------------------------------------------
def test_oracle_is_the_normal_oracle_plus_legit_pages() -> None:
    on, off = SandboxSite(CONFIG, 4242), SandboxSite(OFF, 4242)
    exp_on, exp_off = on.expected_fetches(on.seeds()), off.expected_fetches(off.seeds())
    hosts = on.trap_hosts()
    legit = {u for u in on.page_urls() if urlsplit(u).hostname in hosts.values()}
    assert len(legit) == 30 + 21
    robots = {on.url(hosts[k], "/robots.txt") for k in ("session", "soft404")}
    assert set(exp_on) == set(exp_off) | legit | robots
    assert all(exp_on[u] == k for u, k in exp_off.items())
    assert all(exp_on[u] == "page" for u in legit)
    assert all(on.trap_kind(u) is None for u in exp_on)
    assert all(off.trap_kind(u) is None for u in exp_on)  # no traps, no trap kinds


def test_served_legit_pages_agree_with_oracle(web: SandboxWeb) -> None:
    site = site_of(web)
    hosts = web.resolver_map
    for url in [u for u in site.page_urls() if urlsplit(u).hostname in site.trap_hosts().values()]:
        r = get(web, url)
        assert r.status_code == 200 and r.headers.get("ETag"), url
        links = {canonical_url(strip_session(u)) for u in hrefs(url, r)
                 if urlsplit(u).hostname in hosts}
        assert links == set(site.outlinks(url)), url
        assert len(r.content) < 4096


def fingerprint(site: SandboxSite) -> str:
    """Every URL's full answer, the oracle, the resolver map and the seeds."""
    h = hashlib.sha256()
    h.update(json.dumps([site.resolver_map(), site.seeds(), site.all_urls()]).encode())
    for url in site.all_urls():
        parts = urlsplit(url)
        r = site.respond(parts.hostname or "", parts.path)
        h.update(f"{r.status} {r.kind} {r.headers} {r.etag}".encode())
        h.update(r.body)
    h.update(json.dumps(sorted(site.expected_fetches(site.seeds()).items())).encode())
    return h.hexdigest()


def test_traps_off_is_the_web_before_traps_existed() -> None:
    cfg = SandboxConfig(seed=11, hosts=12, pages_per_host=20, ips=4)
    assert cfg.traps is False
    # Computed by the sandbox of commit c89ecc5, before traps (and the faster page builder).
    assert fingerprint(SandboxSite(cfg, 4242)) == (
        "49fdee7455747a1c540b998ffaa1121857baa44e02caec28794b67b5cf99a150")
    off = SandboxSite(cfg, 4242)
    assert off.trap_hosts() == {} and off.trap_entries() == [] and off.farm_rule() is None


def test_traps_on_changes_only_the_entry_pages() -> None:
    on, off = SandboxSite(CONFIG, 4242), SandboxSite(OFF, 4242)
    normal = off.page_urls()
    assert on.page_urls()[: len(normal)] == normal and off.resource_urls() == on.resource_urls()
    assert off.special_urls() == on.special_urls() and off.seeds() == on.seeds()
    assert off.resolver_map().items() <= on.resolver_map().items()
    entry = {page for _, page, _ in on.trap_entries()}
    for url in normal:
        parts = urlsplit(url)
        a, b = on.respond(parts.hostname or "", parts.path), off.respond(parts.hostname or "",
                                                                         parts.path)
        if url not in entry:
            assert a.body == b.body, url
            continue
        added = [t for _, p, t in on.trap_entries() if p == url]
        assert on.outlinks(url) == off.outlinks(url) + added, url
        for t in added:
            assert f'href="{t}"'.encode() in a.body
