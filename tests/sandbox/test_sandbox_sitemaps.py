"""The sandbox's opt-in sitemaps (sandbox/sitemaps.py) and a crawl that reads them: every
allow-all host declares /sitemap.xml (XML, as most sites serve it) in its robots.txt, listing
its pages and an orphan page nothing links to. A crawl with the default settings (media types
included) fetches each orphan, so it read each sitemap; the oracle (``expected_fetches``)
counts the sitemaps and orphans, and the web without the option is unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from frontier.config import CrawlConfig
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxSite
from sandbox.robots import RobotsKind
from sandbox.sitemaps import ORPHAN_PATH, SITEMAP_PATH
from tests.hostilekit import read_records
from tests.inprocess import crawl_until_done
from tests.webs import SandboxWebs
from workers.cli.crawl import init_crawl

WEB = SandboxConfig(seed=9, hosts=12, pages_per_host=10, ips=4, sitemaps=True,
                    crawl_delay_s=0.1, robots_slow_s=0.1, slow_page_s=0.1, hang_s=1.0)


@pytest.fixture(scope="module")
def crawl(redis_server: EmbeddedRedis, module_webs: SandboxWebs,
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    web = module_webs.shared(WEB)
    out: Path = tmp_path_factory.mktemp("sandbox-sitemaps")
    cfg = CrawlConfig(namespace="sbsm", output_dir=str(out), host_delay_s=0.0,
                      adaptive_delay_factor=0.0, allow_private_ips=True, soft404_probe=False,
                      static_hosts=web.resolver_map, allowed_domains=[web.config.domain],
                      denied_domains=[web.site.hang_host], max_retries=0,
                      connect_timeout_s=1.0, read_timeout_s=1.0, total_timeout_s=1.5,
                      dedup_enabled=False).validate()
    frontier = init_crawl(redis.Redis.from_url(redis_server.url), cfg, web.seeds, fresh=True)
    crawl_until_done(redis_server.url, frontier, timeout_s=90, skip_delays=True)
    records, _dups = read_records(out)
    return {"web": web, "records": records}


def _sitemap_hosts(site: SandboxSite) -> list[str]:
    return [h for h in site.hosts if site.robots_kind(h) is RobotsKind.ALLOW_ALL
            and h != site.hang_host]


def test_each_orphan_is_reached_through_its_hosts_sitemap(crawl: dict[str, Any]) -> None:
    site, records = crawl["web"].site, crawl["records"]
    hosts = _sitemap_hosts(site)
    assert hosts
    # control: no page of the web links to an orphan; a crawler finds it only in a sitemap
    linked = {u for url in site.page_urls() for u in site.outlinks(url)}
    for host in hosts:
        orphan, sitemap = site.url(host, ORPHAN_PATH), site.url(host, SITEMAP_PATH)
        assert orphan not in linked
        assert records[sitemap]["sitemap"] == "urlset", records.get(sitemap)
        assert records[orphan]["outcome"] == "fetched", records.get(orphan)


def test_the_oracle_counts_sitemaps_and_orphans(crawl: dict[str, Any]) -> None:
    site, records = crawl["web"].site, crawl["records"]
    expected = site.expected_fetches(site.seeds())
    for host in _sitemap_hosts(site):
        assert expected[site.url(host, SITEMAP_PATH)] == "sitemap"
        assert expected[site.url(host, ORPHAN_PATH)] == "page"
    # every page the oracle expects (the hanging host is denied in this crawl) was fetched
    pages = {u for u, kind in expected.items()
             if kind == "page" and not u.startswith(site.url(site.hang_host, ""))}
    assert pages - set(records) == set()


def test_without_the_option_the_web_is_unchanged() -> None:
    plain = SandboxSite(SandboxConfig(seed=9, hosts=12, pages_per_host=10, ips=4), 8080)
    with_maps = SandboxSite(WEB, 8080)
    host = _sitemap_hosts(plain)[0]
    assert b"Sitemap:" not in plain.respond(host, "/robots.txt").body
    assert b"Sitemap:" in with_maps.respond(host, "/robots.txt").body
    assert plain.respond(host, SITEMAP_PATH).status == 404
    page = next(iter(plain.layout.page_of[host]))
    assert plain.respond(host, page).body == with_maps.respond(host, page).body
