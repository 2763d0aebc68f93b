"""The `trawl` command: clear errors for bad input before a crawl starts, and the small tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from frontier.config import CrawlConfig
from frontier.redisserver import EmbeddedRedis
from workers.cli.crawl import init_crawl
from workers.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_malformed_seed_is_named(capsys, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    code, _out, err = run(capsys, "crawl", "javascript:alert(1)", "--redis", redis_server.url,
                          "--output", str(tmp_path), "--no-progress")
    assert code == 2
    assert "javascript:alert(1)" in err and "unsupported scheme" in err


@pytest.mark.parametrize("url", ["localhost:6379", "redis://127.0.0.1:1/0"])
def test_bad_redis_url_is_named(capsys, tmp_path: Path, url: str) -> None:
    code, _out, err = run(capsys, "crawl", "http://example.org/", "--redis", url,
                          "--output", str(tmp_path), "--no-progress")
    assert code == 2
    assert url in err


@pytest.mark.parametrize(("setting", "word"), [
    ("partitions=0", "partitions"), ("bloom_error_rate=0.9", "bloom_error_rate"),
    ("no_such_thing=1", "no_such_thing"), ("user_agent_contact=\"me\"", "user_agent_contact"),
    ('dedup_settings={"threshold": 2}', "dedup_settings"),
    ('dedup_settings={"treshold": 0.9}', "treshold"),
])
def test_bad_config_value_is_named(capsys, redis_server: EmbeddedRedis, tmp_path: Path,
                                   setting: str, word: str) -> None:
    code, _out, err = run(capsys, "crawl", "http://example.org/", "--redis", redis_server.url,
                          "--set", setting, "--output", str(tmp_path), "--no-progress")
    assert code == 2
    assert word in err


def test_worker_without_crawl_fails_fast(capsys, redis_client: redis.Redis,
                                         redis_server: EmbeddedRedis) -> None:
    code, _out, err = run(capsys, "worker", "--redis", redis_server.url, "--namespace", "nope")
    assert code == 2 and "nope" in err


def test_robots_command_json(capsys, tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /private/\nCrawl-delay: 3\n")
    code, out, _err = run(capsys, "robots", str(robots), "http://a.test/private/x",
                          "http://a.test/ok", "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["url"], r["allowed"], r["crawl_delay"]) for r in rows] == [
        ("http://a.test/private/x", False, 3.0), ("http://a.test/ok", True, 3.0)]


def test_seed_and_status_on_a_crawl(capsys, redis_client: redis.Redis,
                                    redis_server: EmbeddedRedis) -> None:
    init_crawl(redis_client, CrawlConfig(namespace="c1", partitions=4).validate(),
               ["http://a.test/"])
    code, out, _ = run(capsys, "seed", "--redis", redis_server.url, "--namespace", "c1",
                       "http://a.test/", "http://b.test/x")
    assert code == 0 and "admitted 1 new" in out
    code, out, _ = run(capsys, "status", "--redis", redis_server.url, "--namespace", "c1",
                       "--json", "--partitions")
    assert code == 0
    st = json.loads(out)
    assert st["totals"]["queued"] == 2 and len(st["partitions"]) == 4
    assert st["pages_per_s"] == 0
    code, _out, err = run(capsys, "seed", "--redis", redis_server.url, "--namespace", "c1",
                          "ftp://x/")
    assert code == 2 and "ftp://x/" in err
