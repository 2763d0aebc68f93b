"""Sitemaps through the whole pipeline on a real Redis and a real loopback server: the
``Sitemap:`` lines of robots.txt, an index, gzipped XML, a text sitemap, and the hostile ones
(a gzip bomb, a file over 50,000 URLs, an index nesting endlessly, malformed XML), each ending
recorded with its reason; the URLs they list admitted under scope and robots.txt like any link.
"""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from frontier.config import DEFAULT_CONTENT_TYPES, CrawlConfig
from frontier.counters import accounted
from frontier.redisserver import EmbeddedRedis
from frontier.urls import host_of
from tests.hostilekit import read_records
from tests.inprocess import crawl_until_done
from tests.loopback import HTTPServerFactory, Reply, Request
from workers.cli.crawl import init_crawl
from workers.pipeline import sitemaps
from workers.pipeline.sitemaps import (
    SITEMAP_MAX_BYTES,
    SITEMAP_MAX_NESTING,
    SITEMAP_MAX_URLS,
    parse_sitemap,
)

HOST = "site.test"
NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
XMLNS = b'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
#: a 120 MB document of unknown elements, gzipped to ~120 KB: inflated whole it would cost
#: 120 MB (a single text node that long ends sooner: lxml refuses text nodes over 10 MB)
BOMB = gzip.compress(b"<urlset " + XMLNS + b">"
                     + (b"<x>" + b" " * 1017 + b"</x>") * (120 * 1024), 9)
BIG_EXTRA = 7  # entries of big.xml past the 50,000 cap


def _urlset(urls: list[tuple[str, str | None]]) -> bytes:
    body = b"".join(b"<url><loc>%s</loc>%s</url>" % (
        u.encode(), b"<lastmod>%s</lastmod>" % m.encode() if m else b"") for u, m in urls)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n<urlset ' + XMLNS + b">" + body + \
        b"</urlset>"


def _index(urls: list[str]) -> bytes:
    body = b"".join(b"<sitemap><loc>%s</loc></sitemap>" % u.encode() for u in urls)
    return b"<sitemapindex " + XMLNS + b">" + body + b"</sitemapindex>"


def _site(origin: str) -> dict[str, Reply]:
    xml, gz = "application/xml", "application/gzip"
    robots = ("User-agent: *\nDisallow: /private\n\n"
              + "".join(f"Sitemap: {origin}{p}\n" for p in (
                  "/index.xml", "/list.txt", "/bad.xml", "/bomb.xml.gz", "/big.xml",
                  "/loop/0.xml", "/private/sitemap.xml"))
              + "sitemap: http://out.example/sitemap.xml\n")
    big = _urlset([(f"http://out.example/{i}", None)
                   for i in range(SITEMAP_MAX_URLS + BIG_EXTRA)])
    site = {
        "/robots.txt": Reply(200, robots.encode(), "text/plain"),
        "/index.xml": Reply(200, _index([f"{origin}/pages.xml.gz", f"{origin}/index.xml"]), xml),
        "/pages.xml.gz": Reply(200, gzip.compress(_urlset([
            (f"{origin}/a", "2024-05-01T10:00:00+00:00"), (f"{origin}/private/x", None),
            ("http://out.example/y", "2024-01-01")])), gz),
        "/list.txt": Reply(200, f"{origin}/b\n\nnot a url\n{origin}/c\n".encode(), "text/plain"),
        "/bad.xml": Reply(200, b"<urlset " + XMLNS + b"><url><loc>" + origin.encode()
                          + b"/d</loc></url><url><loc>broken", xml),
        "/bomb.xml.gz": Reply(200, BOMB, gz),
        "/big.xml": Reply(200, big, xml),
    }
    for page in ("/a", "/b", "/c", "/d", "/private/x"):
        site[page] = Reply(200, b"<html><body><p>page</p></body></html>")
    return site


def _respond(site: dict[str, Reply], origin: str):  # type: ignore[no-untyped-def]
    def respond(req: Request) -> Reply:
        if req.path.startswith("/loop/"):  # an index naming the next one, without end
            n = int(req.path[6:].split(".")[0])
            return Reply(200, _index([f"{origin}/loop/{n + 1}.xml"]), "application/xml")
        return site.get(req.path, Reply(404, b"no"))
    return respond


@pytest.fixture(scope="module")
def crawl(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory,
          http_server: HTTPServerFactory) -> Iterator[dict[str, Any]]:
    """One crawl seeded with the site's home page, by acquire → pipeline → apply_results."""
    tmp_path = tmp_path_factory.mktemp("sitemaps")
    holder: dict[str, Any] = {}
    server = http_server(respond=lambda req: holder["respond"](req))
    origin = f"http://{HOST}:{server.port}"
    holder["respond"] = _respond(_site(origin), origin)
    cfg = CrawlConfig(namespace="sm1", partitions=2, output_dir=str(tmp_path),
                      host_delay_s=0.0, adaptive_delay_factor=0.0, allow_private_ips=True,
                      soft404_probe=False, max_retries=0,
                      allowed_content_types=[*DEFAULT_CONTENT_TYPES, *sitemaps.SITEMAP_TYPES],
                      allowed_domains=[HOST], static_hosts={HOST: "127.0.0.1"}).validate()
    client = redis.Redis.from_url(redis_server.url)
    frontier = init_crawl(client, cfg, [f"{origin}/b"], fresh=True)
    started = time.monotonic()
    crawl_until_done(redis_server.url, frontier, timeout_s=60, skip_delays=True)
    records, dups = read_records(tmp_path)
    assert not dups, dups  # one final record per URL
    lastmods = {k.decode(): v.decode() for k, v in
                client.hgetall(frontier.keys.sitemap_lastmod(
                    frontier.partition(host_of(origin + "/")), host_of(origin + "/"))).items()}
    yield {"origin": origin, "records": records, "stats": frontier.stats(),
           "requests": Counter(r.path for r in server.requests), "lastmods": lastmods,
           "seconds": time.monotonic() - started}
    client.close()


def test_sitemap_urls_are_crawled_under_scope_and_robots(crawl: dict[str, Any]) -> None:
    o, records, requests = crawl["origin"], crawl["records"], crawl["requests"]
    for page in ("/a", "/b", "/c", "/d"):  # from the gzipped urlset, the text file, bad.xml
        assert records[o + page]["outcome"] == "fetched", records[o + page]
        assert requests[page] == 1
    # listed, admitted, but robots.txt keeps it out: recorded, never requested
    blocked = records[o + "/private/x"]
    assert blocked["outcome"] == "robots_blocked" and "disallowed" in blocked["reason"]
    assert requests["/private/x"] == 0
    # out of scope (another site's sitemap, its URLs): never admitted, counted
    assert not any(url.startswith("http://out.example") for url in records)
    assert crawl["stats"]["links_out_of_scope"] >= SITEMAP_MAX_URLS + 1
    # the index names itself: the URL-seen test fetches it once
    assert requests["/index.xml"] == 1 and requests["/robots.txt"] == 1
    assert records[o + "/index.xml"]["sitemap"] == "index"
    assert records[o + "/pages.xml.gz"]["sitemap"] == "urlset"
    assert records[o + "/list.txt"]["sitemap"] == "text"
    assert records[o + "/list.txt"]["sitemap_urls"] == 2
    assert accounted(crawl["stats"]) == crawl["stats"]["admitted"]
    assert crawl["stats"]["sitemaps_from_robots"] == 7  # out.example's refused by scope
    # a sitemap robots.txt disallows: admitted, never requested, recorded
    assert records[o + "/private/sitemap.xml"]["outcome"] == "robots_blocked"
    assert requests["/private/sitemap.xml"] == 0


def test_lastmod_is_kept_for_the_revisit_work(crawl: dict[str, Any]) -> None:
    o = crawl["origin"]
    assert crawl["lastmods"] == {o + "/a": "2024-05-01T10:00:00+00:00"}


def test_each_hostile_sitemap_ends_recorded_with_its_reason(crawl: dict[str, Any]) -> None:
    o, records, stats = crawl["origin"], crawl["records"], crawl["stats"]
    bomb = records[o + "/bomb.xml.gz"]
    assert bomb["sitemap_cut"] == "max_bytes" and stats["sitemap_cut_bytes"] == 1
    big = records[o + "/big.xml"]
    assert big["sitemap_cut"] == "max_urls" and big["sitemap_urls"] == SITEMAP_MAX_URLS
    assert big["sitemap_dropped"] == BIG_EXTRA and stats["sitemap_cut_urls"] == 1
    bad = records[o + "/bad.xml"]
    assert bad["sitemap_error"].startswith("malformed XML") and bad["sitemap_urls"] == 1
    assert stats["sitemap_errors"] == 1  # bad.xml; the bomb's cut is a cut, not an error
    # the endless index: followed to the nesting cap, no further
    for n in range(SITEMAP_MAX_NESTING + 1):
        assert crawl["requests"][f"/loop/{n}.xml"] == 1
    assert crawl["requests"][f"/loop/{SITEMAP_MAX_NESTING + 1}.xml"] == 0
    deepest = records[f"{o}/loop/{SITEMAP_MAX_NESTING}.xml"]
    assert deepest["sitemap_cut"] == "max_nesting" and stats["sitemap_cut_nesting"] == 1
    assert crawl["seconds"] < 30


def test_a_gzip_bomb_costs_at_most_the_cap() -> None:
    """Python-side memory while reading the bomb stays at a few chunks (lxml's tree is
    pruned as it goes: the crawl's RSS is the end-to-end check); the negative control
    inflates it whole."""
    tracemalloc.start()
    try:
        sm = parse_sitemap(BOMB, "application/gzip")
        _, capped_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        whole = zlib.decompress(BOMB, 16 + zlib.MAX_WBITS)
        _, whole_peak = tracemalloc.get_traced_memory()
        del whole
    finally:
        tracemalloc.stop()
    assert sm.cut == "max_bytes"
    assert sm.error is None  # the document ends unclosed because it was cut, no more
    assert capped_peak < 4 * 1024 * 1024  # chunks of 64 KiB, never the whole file
    assert whole_peak > 2 * SITEMAP_MAX_BYTES  # the control: uncapped, the bomb goes off


def test_no_entity_is_expanded_and_no_dtd_accepted() -> None:
    laughs = (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaaaaaaaa">'
              b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
              b"<urlset><url><loc>http://x.test/&b;</loc></url></urlset>")
    sm = parse_sitemap(laughs, "application/xml")
    assert sm.error == "DTD not allowed in a sitemap" and sm.locs == []


def test_sitemaps_are_read_with_the_default_media_types(
        redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory,
        http_server: HTTPServerFactory) -> None:
    """allowed_content_types left at its default (HTML and text): a sitemap robots.txt
    declares and a child of its index named like a sitemap are read although they are XML and
    gzip; a child named otherwise is an XML file like any other, skipped by media type (the
    control: the filter is still on for everything else)."""
    tmp = tmp_path_factory.mktemp("sitemaps-default")
    holder: dict[str, Any] = {}
    server = http_server(respond=lambda req: holder["site"].get(req.path, Reply(404, b"no")))
    o = f"http://{HOST}:{server.port}"
    xml, gz = "application/xml", "application/gzip"
    holder["site"] = {
        "/robots.txt": Reply(200, f"User-agent: *\nAllow: /\nSitemap: {o}/idx.xml\n".encode(),
                             "text/plain"),
        "/idx.xml": Reply(200, _index([f"{o}/post-sitemap2.xml.gz", f"{o}/feed.xml"]), xml),
        "/post-sitemap2.xml.gz": Reply(200, gzip.compress(_urlset([(f"{o}/a", None)])), gz),
        "/feed.xml": Reply(200, _urlset([(f"{o}/b", None)]), xml),
        "/a": Reply(200, b"<html><body><p>a</p></body></html>"),
        "/b": Reply(200, b"<html><body><p>b</p></body></html>"),
    }
    cfg = CrawlConfig(namespace="sm2", partitions=2, output_dir=str(tmp), host_delay_s=0.0,
                      adaptive_delay_factor=0.0, allow_private_ips=True, soft404_probe=False,
                      max_retries=0, allowed_domains=[HOST],
                      static_hosts={HOST: "127.0.0.1"}).validate()
    assert cfg.allowed_content_types == list(DEFAULT_CONTENT_TYPES)
    client = redis.Redis.from_url(redis_server.url)
    frontier = init_crawl(client, cfg, [f"{o}/"], fresh=True)
    crawl_until_done(redis_server.url, frontier, timeout_s=60, skip_delays=True)
    records, _dups = read_records(tmp)
    client.close()
    assert records[o + "/idx.xml"]["sitemap"] == "index"
    assert records[o + "/post-sitemap2.xml.gz"]["sitemap"] == "urlset"
    assert records[o + "/a"]["outcome"] == "fetched"
    assert records[o + "/feed.xml"].get("skipped") == "content_type_skipped"
    assert o + "/b" not in records
