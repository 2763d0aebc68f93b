"""HTTPS hosts of the sandbox web crawled end to end by real workers: with the sandbox's CA
(setting ca_bundle) every reachable page of them is fetched, verified; without it none is, and
each refusal is recorded with a TLS reason (verification is never turned off)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxWeb
from tests.checks import crawler_entries
from tests.webs import SandboxWebs
from workers.cli.main import main

pytestmark = pytest.mark.e2e

WEB = SandboxConfig(seed=21, hosts=16, pages_per_host=10, ips=8, https_share=0.5,
                    crawl_delay_s=0.2, robots_slow_s=0.2, slow_page_s=0.2, hang_s=3.0)


@pytest.fixture(scope="module")
def web(module_webs: SandboxWebs) -> SandboxWeb:
    return module_webs.shared(WEB)


def _crawl(web: SandboxWeb, redis_url: str, out: Path, *extra: str) -> list[dict]:
    settings = out.parent / f"{out.name}.json"
    settings.write_text(json.dumps({"allow_private_ips": True,
                                    "static_hosts": web.resolver_map,
                                    "connect_timeout_s": 1.0, "read_timeout_s": 1.5,
                                    "total_timeout_s": 2.0, "max_retries": 0}))
    argv = ["crawl", *web.seeds, "--redis", redis_url, "--workers", "1",
            "--allow", web.config.domain, "--output", str(out), "--no-progress",
            "--namespace", out.name, "--delay", "0.05", "--config", str(settings), *extra]
    assert main(argv) == 0
    return [json.loads(line) for f in (out / "records").glob("*.jsonl")
            for line in f.read_text().splitlines()]


def test_https_hosts_crawled_with_the_ca_and_refused_without(
        web: SandboxWeb, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    https_hosts = set(web.site.https_hosts())
    assert https_hosts and web.ca_path
    records = _crawl(web, redis_server.url, tmp_path / "with-ca",
                     "--set", f"ca_bundle={json.dumps(web.ca_path)}")
    fetched = {r["url"] for r in records if r["outcome"] == "fetched"}
    pages = {u for u, kind in web.site.expected_fetches(web.seeds).items()
             if u.startswith("https://") and kind == "page"}
    assert len(pages) >= 20 and pages <= fetched  # every reachable HTTPS page, verified
    entries = crawler_entries(web.read_log())
    assert {e.host for e in entries if e.scheme == "https"} == https_hosts  # robots.txt at least

    before = len(web.read_log())
    records = _crawl(web, redis_server.url, tmp_path / "without-ca")
    refused = [r for r in records if r["url"].startswith("https://")]
    assert refused and not [r for r in refused if r["outcome"] == "fetched"]
    # robots.txt is the first fetch of a host: refused, it makes the host unavailable, and
    # each URL's record says why
    assert all("tls_error" in r.get("reason", "") for r in refused), refused[:3]
    assert any(r["url"].startswith("http://") and r["outcome"] == "fetched" for r in records)
    later = crawler_entries(web.read_log()[before:])
    assert not [e for e in later if e.scheme == "https" and e.status]  # no page was served
