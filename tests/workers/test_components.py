"""Plug-in components (workers/components/): loading and its errors, order, opting out, the
page pipeline's drop and change rules, URL filter reasons, and the soup rule (a BeautifulSoup
tree is built only when a configured extractor asks, once per page) in a real in-process
crawl of a sandbox web on a real Redis."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import bs4
import pytest
import redis

from examples.path_filter import PathFilter
from frontier.config import ConfigError, CrawlConfig
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig
from tests import componentkit as kit
from tests.componentkit import PREFIX
from tests.inprocess import crawl_until_done
from tests.webs import SandboxWebs
from workers.cli.crawl import init_crawl
from workers.cli.main import main
from workers.components import ComponentSetup, LinkCandidate, NotConfigured
from workers.components.builtin import (
    DEDUP,
    JSONL_RECORDS,
    LXML_LINKS,
    WARC_STORE,
    Dedup,
    JsonlRecords,
    LxmlLinks,
    WarcStore,
)
from workers.components.chain import Components, reason_name
from workers.components.loader import build_components, check_components
from workers.fetch import FetchResult


def _setup(cfg: CrawlConfig, tmp: Path, warc: Any = None) -> ComponentSetup:
    return ComponentSetup(cfg, {}, "test-1", tmp, warc)


def _components(tmp: Path, **settings: Any) -> Components:
    cfg = CrawlConfig(**settings)
    return Components(cfg, build_components(cfg, _setup(cfg, tmp)))


def _page(url: str = "http://a.test/p") -> tuple[dict[str, Any], FetchResult]:
    res = FetchResult(url=url, status=200, body=b"<title>t</title>", content_type="text/html")
    return {"url": url, "outcome": "fetched"}, res


# --- loading -------------------------------------------------------------------------------
def test_defaults_name_the_builtins_in_order() -> None:
    cfg = CrawlConfig()
    assert cfg.url_filters == [] and cfg.extractors == [LXML_LINKS]
    assert cfg.pipelines == [DEDUP, WARC_STORE, JSONL_RECORDS]
    assert check_components(cfg) == {"url_filters": [], "extractors": [LxmlLinks],
                                     "pipelines": [Dedup, WarcStore, JsonlRecords]}


@pytest.mark.parametrize(("setting", "path", "why"), [
    ("pipelines", "no_such_package.module.Thing", "does not import: ModuleNotFoundError"),
    ("pipelines", PREFIX + "Missing", "is not defined in tests.componentkit"),
    ("pipelines", PREFIX + "PlainLinks", "is not a workers.components.api.PagePipeline"),
    ("extractors", PREFIX + "NotAComponent", "is not a workers.components.api.LinkExtractor"),
    ("url_filters", PREFIX + "Marker", "is not a workers.components.api.UrlFilter"),
    ("url_filters", "PathFilter", "is not a class path"),
    ("extractors", 42, "is not a class path"),
    ("pipelines", PREFIX + "Marker.", "is not a class path"),
])
def test_a_bad_path_is_an_error_naming_the_setting_and_the_path(setting: str, path: object,
                                                                 why: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_components(CrawlConfig(**{setting: [path]}))
    msg = str(err.value)
    assert msg.startswith(f"Setting {setting}: {path!r} ") and why in msg, msg


@pytest.mark.parametrize(("settings", "fragment"), [
    ({"pipelines": [PREFIX + "Marker", PREFIX + "Marker"]}, "is listed twice"),
    ({"pipelines": PREFIX + "Marker"}, "is not a list of class paths"),
    ({"component_settings": {PREFIX + "Marker": {}}}, "is not in url_filters"),
    ({"url_filters": ["examples.path_filter.PathFilter"],
      "component_settings": {"examples.path_filter.PathFilter": {"patterns": ["(unclosed"]}}},
     "component_settings['examples.path_filter.PathFilter'] is invalid: pattern '(unclosed'"),
    ({"url_filters": ["examples.path_filter.PathFilter"],
      "component_settings": {"examples.path_filter.PathFilter": {"extension": [".pdf"]}}},
     "unknown keys ['extension']"),
])
def test_bad_lists_and_settings_are_config_errors(settings: dict[str, Any],
                                                  fragment: str) -> None:
    with pytest.raises(ConfigError, match="Setting ") as err:
        check_components(CrawlConfig(**settings))
    assert fragment in str(err.value)


def test_trawl_crawl_refuses_a_bad_path_before_it_starts(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    out = tmp_path / "out"
    code = main(["crawl", "http://a.test/", "--output", str(out), "--no-progress",
                 "--set", 'pipelines=["workers.components.builtin.JsonlRecords", "nope.Nope"]'])
    assert code == 2
    err = capsys.readouterr().err
    assert "Setting pipelines: 'nope.Nope' does not import" in err
    assert not (out / "redis").exists()  # refused before an embedded Redis was started


def test_components_are_built_in_config_order_and_may_opt_out(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = CrawlConfig(pipelines=[PREFIX + "SecondMarker", PREFIX + "OptOut", PREFIX + "Marker",
                                 WARC_STORE, DEDUP], dedup_enabled=False,
                      component_settings={PREFIX + "Marker": {"name": "m1"}})
    with caplog.at_level(logging.WARNING, logger="workers.components.loader"):
        built = build_components(cfg, _setup(cfg, tmp_path, warc=None))
    assert [type(p) for p in built.pipelines] == [kit.SecondMarker, kit.Marker]
    assert built.pipelines[1].name == "m1"  # its own component_settings entry
    assert built.disabled == {PREFIX + "OptOut": "nothing to do in this crawl",
                              WARC_STORE: "store_warc is false",
                              DEDUP: "dedup_enabled is false"}
    assert (f"component {PREFIX}OptOut disabled: nothing to do in this crawl"
            in caplog.messages)


# --- the page pipeline ---------------------------------------------------------------------
def test_stages_run_in_order_and_the_jsonl_record_is_taken_where_its_stage_is(
        tmp_path: Path) -> None:
    kit.Seen.records.clear()
    chain = _components(tmp_path, pipelines=[PREFIX + "Marker", JSONL_RECORDS,
                                             PREFIX + "SecondMarker", PREFIX + "Seen"])
    record, res = _page()
    written = chain.finish_page(record, res, None, None, Counter())
    assert written is not None and written["marks"] == ["Marker"]
    assert kit.Seen.records[-1]["marks"] == ["Marker", "SecondMarker"]


def test_a_drop_stops_the_stages_after_it(tmp_path: Path) -> None:
    kit.Seen.records.clear()
    settings = {PREFIX + "Dropper": {"contains": "/drop"}}
    before = _components(tmp_path, pipelines=[PREFIX + "Dropper", JSONL_RECORDS, PREFIX + "Seen"],
                         component_settings=settings)
    counters: Counter[str] = Counter()
    assert before.finish_page(*_page("http://a.test/drop"), None, None, counters) is None
    assert counters["pages_dropped_by_pipeline"] == 1 and kit.Seen.records == []
    kept = before.finish_page(*_page("http://a.test/keep"), None, None, counters)
    assert kept is not None and [r["url"] for r in kit.Seen.records] == ["http://a.test/keep"]
    # Dropped after the JSONL stage: the JSONL record stays, the later stages miss it.
    after = _components(tmp_path, pipelines=[JSONL_RECORDS, PREFIX + "Dropper", PREFIX + "Seen"],
                        component_settings=settings)
    written = after.finish_page(*_page("http://a.test/drop"), None, None, counters)
    assert written is not None and written["url"] == "http://a.test/drop"
    assert len(kit.Seen.records) == 1


def test_a_failing_stage_is_counted_and_the_page_goes_on(tmp_path: Path) -> None:
    chain = _components(tmp_path, pipelines=[PREFIX + "Boom", PREFIX + "Marker", JSONL_RECORDS])
    counters: Counter[str] = Counter()
    written = chain.finish_page(*_page(), None, None, counters)
    assert written is not None and written["marks"] == ["Marker"]
    assert counters["component_errors"] == 1


def test_no_jsonl_stage_means_no_record(tmp_path: Path) -> None:
    chain = _components(tmp_path, pipelines=[PREFIX + "Marker"])
    assert chain.finish_page(*_page(), None, None, Counter()) is None


# --- URL filters ---------------------------------------------------------------------------
def test_a_refusal_becomes_a_counter_name(tmp_path: Path) -> None:
    chain = _components(tmp_path, url_filters=[PREFIX + "RefuseAll"])
    assert chain.filtering
    assert chain.refusal("http://a.test/", "a.test", 1, Counter()) == "filter_not_wanted"
    assert reason_name("Path Pattern") == "filter_path_pattern"
    assert reason_name("!!!") == "filter_refused"
    assert not _components(tmp_path).filtering  # no filter: links.py asks nothing per link


def test_path_filter_refuses_by_extension_and_pattern(tmp_path: Path) -> None:
    cfg = CrawlConfig()
    f = PathFilter.from_setup(ComponentSetup(
        cfg, {"extensions": [".PDF", "zip"], "patterns": ["^/img/"]}, "w", tmp_path))
    verdicts = {url: f.check(LinkCandidate(url, "a.test", 1)) for url in (
        "http://a.test/files/doc-1.pdf", "http://a.test/x.ZIP?download=1", "http://a.test/img/a",
        "http://a.test/page.html", "http://a.test/pdf", "http://a.test/q?f=x.pdf",
        "http://a.test", "http://a.test/a/img/b")}
    assert verdicts == {
        "http://a.test/files/doc-1.pdf": "extension", "http://a.test/x.ZIP?download=1": "extension",
        "http://a.test/img/a": "path_pattern", "http://a.test/page.html": None,
        "http://a.test/pdf": None, "http://a.test/q?f=x.pdf": None, "http://a.test": None,
        "http://a.test/a/img/b": None}
    with pytest.raises(NotConfigured, match="no extensions or patterns"):
        PathFilter.from_setup(ComponentSetup(cfg, {}, "w", tmp_path))


# --- the soup rule, in a real crawl ----------------------------------------------------------
WEB = SandboxConfig(seed=5, hosts=12, pages_per_host=10, ips=4, crawl_delay_s=0.0,
                    robots_slow_s=0.05, slow_page_s=0.05, hang_s=0.5)


def _inprocess_crawl(redis_url: str, web: Any, out: Path, extractors: list[str],
                     pipelines: list[str]) -> tuple[int, int]:
    """Crawl the web with these extractors and pipelines; (soups built, HTML pages the
    extractors got)."""
    kit.PlainLinks.soups.clear()
    kit.SoupLinks.soups.clear()
    built = 0
    original = bs4.BeautifulSoup.__init__

    def counting(self: Any, *a: Any, **kw: Any) -> None:
        nonlocal built
        built += 1
        original(self, *a, **kw)

    cfg = CrawlConfig(namespace=out.name, output_dir=str(out), host_delay_s=0.0,
                      adaptive_delay_factor=0.0, allow_private_ips=True, soft404_probe=False,
                      static_hosts=web.resolver_map, allowed_domains=[web.config.domain],
                      denied_domains=[web.site.hang_host],  # a second a page: not the point here
                      max_retries=0, connect_timeout_s=1.0, read_timeout_s=1.0,
                      total_timeout_s=1.5, dns_timeout_s=0.5, extractors=extractors,
                      pipelines=pipelines).validate()
    frontier = init_crawl(redis.Redis.from_url(redis_url), cfg, web.seeds, fresh=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bs4.BeautifulSoup, "__init__", counting)
        crawl_until_done(redis_url, frontier, timeout_s=60, skip_delays=True)
    return built, len(kit.PlainLinks.soups)


@pytest.fixture(scope="module")
def soup_crawls(redis_server: EmbeddedRedis, module_webs: SandboxWebs,
                tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    web = module_webs.shared(WEB)
    tmp = tmp_path_factory.mktemp("soup")
    found: dict[str, Any] = {}
    plain = [LXML_LINKS, PREFIX + "PlainLinks"]
    # The first crawl also reorders the built-in pipelines and leaves Dedup out.
    found["plain"] = (*_inprocess_crawl(redis_server.url, web, tmp / "plain", plain,
                                        [JSONL_RECORDS, WARC_STORE]),
                      list(kit.PlainLinks.soups))
    found["soup"] = (*_inprocess_crawl(redis_server.url, web, tmp / "soup",
                                       [*plain, PREFIX + "SoupLinks"],
                                       CrawlConfig().pipelines),
                     list(kit.PlainLinks.soups), list(kit.SoupLinks.soups))
    found["dirs"] = {"plain": tmp / "plain", "soup": tmp / "soup"}
    return found


def test_no_soup_is_built_when_no_extractor_asks(soup_crawls: dict[str, Any]) -> None:
    built, pages, seen = soup_crawls["plain"]
    assert pages >= 20  # the extractors ran on the crawl's HTML pages
    assert built == 0
    assert all(soup is None for _url, soup in seen)


def test_one_soup_per_page_when_an_extractor_asks(soup_crawls: dict[str, Any]) -> None:
    """The negative control of the test above: the same count finds the soups."""
    built, pages, plain_seen, soup_seen = soup_crawls["soup"]
    assert pages >= 20 and built == pages
    # Every extractor of a page is given the one soup built for it.
    assert [(u, id(s)) for u, s in plain_seen] == [(u, id(s)) for u, s in soup_seen]
    assert all(isinstance(s, bs4.BeautifulSoup) for _u, s in soup_seen)


def _pages(out: Path) -> list[dict[str, Any]]:
    recs = [json.loads(line) for p in (out / "records").glob("*.jsonl")
            for line in p.read_text().splitlines()]
    return [r for r in recs if r["outcome"] == "fetched" and r.get("status") == 200]


def test_builtin_pipelines_reordered_and_left_out_in_a_real_crawl(
        soup_crawls: dict[str, Any]) -> None:
    """JSONL before WARC, no Dedup: records without dup or warc fields, WARC still written;
    the defaults (the negative control) give both fields."""
    reordered, default = soup_crawls["dirs"]["plain"], soup_crawls["dirs"]["soup"]
    pages = _pages(reordered)
    assert len(pages) >= 20
    assert not [r for r in pages if "dup_kind" in r or "warc" in r]
    assert list((reordered / "warc").glob("*.warc.gz"))
    pages = _pages(default)
    assert len(pages) >= 20
    assert all("warc" in r for r in pages)
    assert {r.get("dup_kind") for r in pages} >= {"unique"}
