"""``trawl inspect URL`` against a real loopback HTTP server (and a saved file, no network)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.loopback import HTTPServerFactory, LoopbackServer, Reply, Request
from workers.cli.main import main
from workers.pipeline.parse import parse_html

ROBOTS = b"User-agent: *\nDisallow: /private\n"
PAGE = ("<html><head><title>Caf\u00e9 page</title></head><body>"
        "<p>Some words about a caf\u00e9 so the page has text to shingle for dedup.</p>"
        '<a href="/a/../next#top">next</a>'
        '<a href="http://elsewhere.example/x">elsewhere</a>'
        '<a href="/secret" rel="nofollow">secret</a>'
        '<a href="/long/' + "x" * 120 + '">long</a>'
        "</body></html>").encode("iso-8859-1")
ALLOW_LOOPBACK = ["--set", 'allowed_networks=["127.0.0.0/8"]', "--delay", "0.05"]


def _respond(req: Request) -> Reply:
    if req.path == "/robots.txt":
        return Reply(200, ROBOTS, "text/plain")
    if req.path == "/busy":
        return Reply(503, b"busy", "text/plain", headers=(("Retry-After", "120"),))
    if req.path == "/moved":
        return Reply(301, b"", "text/html", headers=(("Location", "/page"),))
    if req.path.startswith("/page"):
        return Reply(200, PAGE, "text/html; charset=iso-8859-1",
                     headers=(("X-Test-Header", "hello"),))
    return Reply(404, b"not here")


@pytest.fixture(scope="module")
def server(http_server: HTTPServerFactory) -> LoopbackServer:
    return http_server(respond=_respond)


def run(*argv: str) -> tuple[int, str, str]:
    """``trawl ARGV`` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def inspect_json(*argv: str) -> dict[str, Any]:
    code, out, err = run("inspect", "--json", *argv)
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def page_report(server: LoopbackServer) -> dict[str, Any]:
    """One polite inspection of the page, shared by the tests that read it."""
    before = len(server.requests)
    report = inspect_json(server.origin() + "/page", *ALLOW_LOOPBACK,
                          "--set", "max_url_length=100")
    report["_requests"] = [r.path for r in server.requests[before:]]
    return report


def test_robots_fetched_first_then_the_page(page_report: dict[str, Any]) -> None:
    assert page_report["_requests"] == ["/robots.txt", "/page"]
    robots = page_report["robots"]
    assert robots["allowed"] is True and robots["status"] == 200 and robots["kind"] == "parsed"
    assert page_report["outcome"] == "fetched"


def test_disallowed_url_is_not_fetched(server: LoopbackServer) -> None:
    before = len(server.requests)
    report = inspect_json(server.origin() + "/private/x", *ALLOW_LOOPBACK)
    assert [r.path for r in server.requests[before:]] == ["/robots.txt"]
    assert report["robots"]["allowed"] is False
    assert report["outcome"] == "robots_blocked"
    assert "disallowed by robots.txt" in report["outcome_reason"]
    assert report["status"] is None and report["links"] == []


def test_headers_charset_and_features(page_report: dict[str, Any]) -> None:
    headers = {k.lower(): v for k, v in page_report["headers"]}
    assert headers["x-test-header"] == "hello"
    assert page_report["status"] == 200
    assert page_report["header_charset"] == "cp1252"  # latin-1 read as windows-1252
    # The charset the crawl's own page step decodes with: the header's (the page has no meta)
    assert page_report["charset"] == "cp1252"
    assert parse_html(PAGE, "http://x/", "text/html").encoding != "cp1252"  # the control
    assert page_report["title"] is not None
    dedup = page_report["dedup"]
    assert len(dedup["content_digest"]) > 0 and dedup["tokens"] > 5
    assert len(dedup["minhash_head"]) == 8 and len(dedup["text_fingerprint"]) == 32
    assert page_report["warc"]["written"] is None
    assert [r["url"].rsplit("/", 1)[1] for r in page_report["warc"]["records"]] == [
        "robots.txt", "page"]


def test_each_link_has_its_verdict_and_reason(page_report: dict[str, Any],
                                               server: LoopbackServer) -> None:
    by_href = {link["href"].split("/")[-1] or link["href"]: link
               for link in page_report["links"]}
    nxt = by_href["next#top"]
    assert nxt["verdict"] == "admitted"
    assert nxt["url"] == server.origin() + "/next"  # canonicalized as the crawl does
    assert by_href["x"]["verdict"] == "out_of_scope" and by_href["x"]["reason"] == "out_of_scope"
    assert by_href["secret"]["verdict"] == "nofollow"
    long = by_href["x" * 120]  # over --set max_url_length=100
    assert long["verdict"] == "invalid" and long["reason"] == "too long" and long["url"] is None
    assert page_report["outcome_reason"].startswith("1 of 4 links")


def test_allow_widens_the_scope(server: LoopbackServer) -> None:
    report = inspect_json(server.origin() + "/page", *ALLOW_LOOPBACK,
                          "--allow", "127.0.0.1", "--allow", "elsewhere.example")
    verdicts = {link["href"]: link["verdict"] for link in report["links"]}
    assert verdicts["http://elsewhere.example/x"] == "admitted"


def test_config_file_settings_apply_to_links(server: LoopbackServer, tmp_path: Path) -> None:
    config = tmp_path / "crawl.json"
    config.write_text(json.dumps({"deny_url_patterns": ["/next"]}))
    report = inspect_json(server.origin() + "/page", *ALLOW_LOOPBACK, "--config", str(config))
    nxt = [link for link in report["links"] if link["href"].endswith("next#top")]
    assert nxt and nxt[0]["verdict"] == "out_of_scope" and nxt[0]["reason"] == "deny_pattern"


def test_redirect_target_is_a_link_with_its_verdict(server: LoopbackServer) -> None:
    before = len(server.requests)
    report = inspect_json(server.origin() + "/moved", *ALLOW_LOOPBACK)
    assert [r.path for r in server.requests[before:]] == ["/robots.txt", "/moved"]  # not followed
    assert report["status"] == 301 and report["outcome"] == "fetched"
    assert [(x["url"], x["verdict"]) for x in report["links"]] == [
        (server.origin() + "/page", "admitted")]
    assert "redirect to" in report["outcome_reason"]


def test_server_error_would_be_retried(server: LoopbackServer) -> None:
    report = inspect_json(server.origin() + "/busy", *ALLOW_LOOPBACK)
    assert report["status"] == 503 and report["outcome"] == "failed"
    assert "retried up to" in report["outcome_reason"]
    assert "Retry-After holds the host 120s" in report["outcome_reason"]
    assert report["links"] == [] and "content_digest" not in report["dedup"]


def test_private_address_refused_by_default(server: LoopbackServer) -> None:
    before = len(server.requests)
    code, out, _ = run("inspect", server.origin() + "/page")
    assert code == 0
    assert len(server.requests) == before  # nothing was sent
    assert "address_refused" in out and "allowed_networks" in out


def test_text_report(server: LoopbackServer) -> None:
    code, out, _ = run("inspect", server.origin() + "/page", *ALLOW_LOOPBACK)
    assert code == 0
    assert "robots    allowed" in out
    assert "X-Test-Header: hello" in out
    assert "header charset=cp1252" in out
    assert "out_of_scope http://elsewhere.example/x" in out
    assert "outcome   fetched" in out


def test_file_needs_no_network(tmp_path: Path, server: LoopbackServer) -> None:
    page = tmp_path / "saved.html"
    page.write_bytes(PAGE.decode("iso-8859-1").encode("utf-8"))
    warc = tmp_path / "warc"
    # An unresolvable host: any network use would fail the inspection.
    report = inspect_json("--file", str(page), "--url", "http://saved.invalid/dir/p.html",
                          "--warc", str(warc))
    # A base URL on the live server, loopback allowed: still not one request.
    before = len(server.requests)
    inspect_json("--file", str(page), "--url", server.origin() + "/page", *ALLOW_LOOPBACK)
    assert len(server.requests) == before
    assert report["robots"]["checked"] is False
    assert report["outcome"] == "fetched" and report["status"] == 200
    urls = {link["url"] for link in report["links"]}
    assert "http://saved.invalid/next" in urls
    assert report["warc"]["written"] == str(warc)
    assert any(p.name.endswith(".warc.gz") for p in warc.iterdir())


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    code, _, err = run("inspect", "ftp://example.com/")
    assert code == 2 and "not a crawlable URL" in err
    code, _, err = run("inspect", "--file", str(tmp_path / "missing.html"), "--url",
                       "http://saved.invalid/")
    assert code == 2 and "cannot read --file" in err


def test_subprocess_json(server: LoopbackServer) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, "-m", "workers.cli", "inspect", "--json",
                           server.origin() + "/page", *ALLOW_LOOPBACK],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["outcome"] == "fetched" and report["robots"]["allowed"] is True
