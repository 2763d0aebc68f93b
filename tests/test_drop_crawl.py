"""End to end: ``trawl drop`` in a running ``trawl crawl`` (real Celery workers, real Redis,
the sandbox web): the dropped host gets no request a few seconds after the command, each of
its URLs ends with a record, and the crawl still accounts for every URL it admitted.

Judged from the sandbox server's request log and the crawl's JSONL records.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from frontier.dropped import REFRESH_S
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig
from tests.checks import crawler_entries
from tests.webs import SandboxWebs
from workers.cli.main import main
from workers.report.records import load_records

pytestmark = pytest.mark.e2e

DELAY_S = 0.25
TOTAL_TIMEOUT_S = 2.0
#: Requests the victim host must have had before the drop (so it is mid-crawl).
BEFORE_DROP = 3


def test_a_dropped_host_is_left_alone_and_its_urls_end_dropped(
        tmp_path: Path, redis_server: EmbeddedRedis, module_webs: SandboxWebs,
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = SandboxConfig(seed=11, hosts=12, pages_per_host=50, ips=6, crawl_delay_s=0.0,
                        robots_slow_s=0.2, slow_page_s=0.2, hang_s=3.0)
    with module_webs.running(cfg) as web:
        victim = web.site.layout.seed_hosts[0]  # an allow-all host, crawled from the start
        out = tmp_path / "dropcrawl"
        dropped_at: list[float] = []

        def drop_mid_crawl() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                hits = [e for e in crawler_entries(web.read_log())
                        if e.host.split(":")[0] == victim and e.path != "/robots.txt"]
                if len(hits) >= BEFORE_DROP:
                    break
                time.sleep(0.05)
            dropped_at.append(time.time())
            assert main(["drop", "--redis", redis_server.url, "--namespace", out.name,
                         victim]) == 0

        dropper = threading.Thread(target=drop_mid_crawl)
        dropper.start()
        summary_path = out / "summary.json"
        assert main([
            "crawl", *web.seeds, "--redis", redis_server.url, "--workers", "2",
            "--concurrency", "8", "--allow", cfg.domain, "--output", str(out),
            "--summary-json", str(summary_path), "--no-progress", "--namespace", out.name,
            "--delay", str(DELAY_S),
            "--set", "allow_private_ips=true",
            "--set", f"static_hosts={json.dumps(web.resolver_map)}",
            "--set", "connect_timeout_s=1.0", "--set", "read_timeout_s=1.5",
            "--set", f"total_timeout_s={TOTAL_TIMEOUT_S}", "--set", "retry_backoff_s=0.2",
        ]) == 0
        dropper.join()
        entries = crawler_entries(web.read_log())
        expected = web.site.expected_fetches(web.seeds)
    summary = json.loads(summary_path.read_text())
    records = load_records(out).records

    # nothing is lost: every admitted URL ended, the dropped ones with a record each
    assert summary["accounted"] == summary["urls_admitted"], summary
    dropped = [r for r in records if r["outcome"] == "dropped"]
    assert len(dropped) == summary["dropped"] > 0, summary
    assert {r["host"].split(":")[0] for r in dropped} == {victim}
    assert all("dropped from the crawl" in r["reason"] for r in dropped)
    assert len({r["url"] for r in records}) == len(records) == summary["accounted"]

    # politeness to the operator: no request to the victim once the workers read the drop
    # (REFRESH_S), after a fetch that was already under way (TOTAL_TIMEOUT_S), plus slack
    bound = dropped_at[0] + REFRESH_S + TOTAL_TIMEOUT_S + 1.0
    victim_requests = [e.start for e in entries if e.host.split(":")[0] == victim]
    late = [t for t in victim_requests if t > bound]
    print(f"drop: {len(dropped)} URLs dropped, {len(victim_requests)} requests to {victim}, "
          f"the last {max(victim_requests) - dropped_at[0]:+.2f} s after the command; "
          f"links refused: {summary['links'].get('links_dropped_domain', 0)}")
    assert late == [], late[:3]

    # control: the victim still had pages to give, which the other hosts' crawl shows it
    # would have been asked for (everything else reachable was fetched)
    fetched_victim = {r["url"] for r in records
                      if r["host"].split(":")[0] == victim and r["outcome"] == "fetched"}
    victim_expected = {u for u, kind in expected.items()
                       if f"//{victim}" in u and kind != "robots"}
    assert len(victim_expected - fetched_victim) >= len(dropped) // 2 > 0
    # links to the victim found after the drop were refused by the scope, not admitted
    assert summary["links"].get("links_dropped_domain", 0) > 0, summary["links"]

    # the operator sees it: trawl status and trawl drop --list
    capsys.readouterr()
    assert main(["status", "--redis", redis_server.url, "--namespace", out.name,
                 "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["dropped_domains"] == [victim]
    assert status["totals"]["dropped"] == summary["dropped"]
    assert main(["drop", "--redis", redis_server.url, "--namespace", out.name,
                 "--list"]) == 0
    assert capsys.readouterr().out.split() == [victim]
    # a URL is not a domain: a clear error, exit 2, nothing dropped
    assert main(["drop", "--redis", redis_server.url, "--namespace", out.name,
                 f"http://{victim}/"]) == 2
    assert "not a domain name" in capsys.readouterr().err
