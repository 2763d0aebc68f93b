"""End to end: the example components (examples/) in `trawl crawl` runs with real Celery
workers, a real Redis and the sandbox web, judged from the server's request log, the JSONL
records and the SQLite file.

Two crawls of the same web, shared by the module's tests: one with the SQLite pipeline and
the path filter (PDFs and /img/ refused), and its negative control, where the filter is
listed without settings, so it opts out at start (NotConfigured) and the same URLs are
fetched.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from examples.sqlite_pages import COLUMNS, SCHEMA
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxWeb
from tests.checks import crawler_entries, fetch_counts
from tests.webs import SandboxWebs
from workers.cli.main import main
from workers.components.builtin import DEDUP, JSONL_RECORDS, WARC_STORE
from workers.report.records import load_records

pytestmark = pytest.mark.e2e

WEB = SandboxConfig(seed=13, hosts=12, pages_per_host=10, ips=6, crawl_delay_s=0.0,
                    robots_slow_s=0.1, slow_page_s=0.1, hang_s=1.0)
FILTER = "examples.path_filter.PathFilter"
SQLITE = "examples.sqlite_pages.SqlitePages"
FILTER_SETTINGS = {"extensions": [".pdf"], "patterns": ["^/img/"]}
ROOT = Path(__file__).resolve().parent.parent


def refused(path: str) -> bool:
    """What FILTER_SETTINGS refuse (the oracle, written apart from the filter's code)."""
    path = path.split("?", 1)[0]
    return path.lower().endswith(".pdf") or path.startswith("/img/")


def crawl(web: SandboxWeb, redis_url: str, out: Path, *extra: str) -> dict[str, Any]:
    summary_path = out / "summary.json"
    argv = [
        "crawl", *web.seeds, "--redis", redis_url, "--workers", "2", "--concurrency", "4",
        "--allow", web.config.domain, "--output", str(out), "--summary-json", str(summary_path),
        "--no-progress", "--namespace", out.name, "--delay", "0.05",
        "--set", "allow_private_ips=true",
        "--set", f"static_hosts={json.dumps(web.resolver_map)}",
        # the hanging host answers each request after a second: not the point here
        "--set", f"denied_domains={json.dumps([web.site.hang_host])}",
        "--set", "connect_timeout_s=1.0", "--set", "read_timeout_s=1.5",
        "--set", "total_timeout_s=2.0", "--set", "retry_backoff_s=0.2",
        "--set", "max_retries=1", "--set", f"url_filters={json.dumps([FILTER])}", *extra,
    ]
    assert main(argv) == 0
    return json.loads(summary_path.read_text())


def worker_logs(out: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (out / "logs").glob("worker-*.log"))


@pytest.fixture(scope="module")
def crawls(tmp_path_factory: pytest.TempPathFactory, redis_server: EmbeddedRedis,
           module_webs: SandboxWebs) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("components")
    found: dict[str, Any] = {}
    settings = {FILTER: FILTER_SETTINGS, SQLITE: {"commit_every": 7}}
    pipelines = [DEDUP, WARC_STORE, JSONL_RECORDS, SQLITE]
    with module_webs.running(WEB) as web:
        out = tmp / "filtered"
        summary = crawl(web, redis_server.url, out,
                        "--set", f"pipelines={json.dumps(pipelines)}",
                        "--set", f"component_settings={json.dumps(settings)}")
        found["filtered"] = (summary, crawler_entries(web.read_log()), out, web.port)
        found["expected"] = web.site.expected_fetches(web.seeds)
        found["hang_host"] = web.site.hang_host
    with module_webs.running(WEB) as web:
        out = tmp / "control"
        summary = crawl(web, redis_server.url, out)
        found["control"] = (summary, crawler_entries(web.read_log()), out, web.port)
    return found


def test_sqlite_has_one_row_per_fetched_page_matching_the_jsonl_records(crawls) -> None:
    summary, _entries, out, _port = crawls["filtered"]
    with sqlite3.connect(out / "pages.sqlite") as db:
        rows = [dict(zip(COLUMNS, r, strict=True))
                for r in db.execute(f"SELECT {', '.join(COLUMNS)} FROM pages")]
    pages = [r for r in load_records(out).records if r["outcome"] in ("fetched", "truncated")]
    assert len(pages) == summary["pages_fetched"] >= 60
    assert len(rows) == len(pages) == len({r["url"] for r in rows})
    by_url = {r["url"]: r for r in rows}
    for rec in pages:
        row = by_url[rec["url"]]
        for col in COLUMNS:
            if col not in ("title", "worker"):
                assert row[col] == rec.get(col), (col, row, rec)
    workers = {r["worker"] for r in rows}
    assert 1 <= len(workers) <= 2  # each worker process wrote its own rows into one file
    titled = [r for r in rows if r["content_type"] == "text/html" and r["status"] == 200]
    assert titled and all(r["title"] for r in titled)


def test_the_documented_schema_is_the_one_created(crawls) -> None:
    _summary, _entries, out, _port = crawls["filtered"]
    doc = (ROOT / "docs" / "components.md").read_text()
    assert SCHEMA.strip() in doc
    with sqlite3.connect(out / "pages.sqlite") as db:
        cols = [r[1] for r in db.execute("PRAGMA table_info(pages)")]
    assert cols == ["id", *COLUMNS]


def test_refused_urls_are_never_fetched_and_are_counted_by_reason(crawls) -> None:
    summary, entries, _out, port = crawls["filtered"]
    assert [e.path for e in entries if refused(e.path)] == []
    links = summary["links"]
    assert links["links_filter_extension"] > 0 and links["links_filter_path_pattern"] > 0
    # Everything else a polite crawler reaches was fetched: the filter refused no more.
    counts = fetch_counts(entries, port)
    hang = crawls["hang_host"]
    wanted = {u for u in crawls["expected"]
              if urlsplit(u).hostname != hang and not refused(urlsplit(u).path)}
    assert set(counts) == wanted


def test_negative_control_without_the_filter_fetches_them(crawls) -> None:
    summary, entries, out, _port = crawls["control"]
    fetched = {e.path.split("?")[0] for e in entries if refused(e.path)}
    assert any(p.endswith(".pdf") for p in fetched) and any(p.startswith("/img/") for p in fetched)
    assert not [k for k in summary["links"] if k.startswith("links_filter_")]
    assert (f"component {FILTER} disabled: no extensions or patterns in its "
            "component_settings") in worker_logs(out)
    assert not (out / "pages.sqlite").exists()  # SQLite is not a default pipeline
