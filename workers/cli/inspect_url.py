"""``trawl inspect URL``: one URL as the crawl would see it (a parsechecker and a shell in one
line): the robots verdict, the response headers and charset, each link with its scope verdict
and reason, the dedup features, and the outcome, WARC records and links the crawl would take.

The work is workers/cli/inspect_page.py (the crawl's own fetcher, robots, parser, scope and
dedup code); this module is the command line and the report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from frontier.config import ConfigError
from frontier.urls import InvalidURL, canonicalize


def add_inspect_parser(sub: Any) -> None:
    p = sub.add_parser("inspect", help="fetch one URL politely (or read a saved page) and show "
                       "what the crawl would do with it")
    p.add_argument("url", nargs="?", help="the URL to inspect (with --file: its base URL)")
    p.add_argument("--url", dest="base_url", help="with --file: the URL the page came from")
    p.add_argument("--file", help="a saved HTML file: no network at all")
    p.add_argument("--content-type", help="with --file: its Content-Type (default text/html)")
    p.add_argument("--allow", action="append", default=[], metavar="DOMAIN",
                   help="allowed host or domain (repeatable; default: the URL's host)")
    p.add_argument("--config", metavar="FILE", help="crawl-job file (TOML, or JSON) of settings")
    p.add_argument("--set", action="append", default=[], metavar="NAME=JSON",
                   help="any crawl setting, e.g. --set allowed_networks='[\"10.0.0.0/8\"]'")
    p.add_argument("--delay", type=float, help="seconds between robots.txt and the page "
                   "(host_delay_s; robots.txt's Crawl-delay can make it longer)")
    p.add_argument("--max-depth", type=int, help="link depth limit (the page is at depth 0)")
    p.add_argument("--warc", help="write the WARC records the crawl would write to this "
                   "directory (default: none written)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--all-links", action="store_true",
                   help="list every link (default: at most 50 in the text report)")


def cmd_inspect(args: argparse.Namespace) -> int:
    from workers.cli.crawl import default_domains
    from workers.cli.inspect_page import Inspector
    from workers.cli.options import load_from_args

    raw = args.base_url or args.url
    if not raw:
        raise ConfigError("trawl inspect: give a URL (with --file, the page's URL or --url)")
    effective = load_from_args(args)  # flags > TRAWL_* env > --config > defaults
    try:
        url = canonicalize(raw.strip())
    except InvalidURL as exc:
        raise ConfigError(f"trawl inspect: {raw!r} is not a crawlable URL: {exc.reason}") from exc
    cfg = effective.config
    if effective.origins["allowed_domains"] == "default":
        cfg.allowed_domains = default_domains([url])
    inspector = Inspector(cfg)
    url = inspector.canonical(raw.strip())  # with the crawl's session-id stripping
    warc = Path(args.warc) if args.warc else None
    if args.file:
        path = Path(args.file)
        try:
            ins = inspector.inspect_file(path, url, args.content_type, warc)
        except OSError as exc:
            raise ConfigError(f"trawl inspect: cannot read --file {path}: {exc}") from exc
    else:
        ins = inspector.inspect_network(url, warc)
    if args.json:
        json.dump(ins.to_dict(), sys.stdout, indent=2, default=str)
        print()
    else:
        print_report(ins.to_dict(), sys.stdout, 0 if args.all_links else 50)
    return 0


def print_report(d: dict[str, Any], out: TextIO, max_links: int = 50) -> None:
    """The human report: one section per step, plain text."""
    def line(text: str = "") -> None:
        print(text, file=out)

    line(f"URL       {d['url']}  (source: {d['source']})")
    line(f"scope     {d['scope']}")
    r = d["robots"]
    if r.get("checked") is False:
        line(f"robots    not checked ({r['reason']})")
    elif r:
        verdict = "allowed" if r["allowed"] else "DISALLOWED"
        note = f" ({r['reason']})" if r.get("reason") else ""
        delay = r.get("crawl_delay")
        line(f"robots    {verdict} for {r['agent']!r}: {r['url']} -> {r['status']} "
             f"{r['kind']}{note}; crawl-delay={'none' if delay is None else delay}")
    if d["status"] is None and d["error"]:
        line(f"error     {d['error']}: {d['error_detail']}")
    elif d["status"] is not None:
        line(f"response  {d['http_version']} {d['status']} {d['reason']}  {d['bytes']} bytes "
             f"in {d['elapsed_s']}s from {d['ip']}"
             + (f"  error={d['error']}: {d['error_detail']}" if d["error"] else ""))
        for name, value in d["headers"]:
            line(f"  {name}: {value}")
        line(f"charset   {d['charset'] or '-'}  content-type={d['content_type'] or '-'}"
             + (f"  header charset={d['header_charset']}" if d["header_charset"] else "")
             + (f"  truncated={d['truncated']}" if d["truncated"] else ""))
        if d["charset"] and d["header_charset"] and d["charset"] != d["header_charset"]:
            line("          note: the crawl decodes with the BOM / <meta charset> / utf-8, "
                 "not the header's charset")
    if d["title"] is not None or d["meta"]:
        m = d["meta"]
        line(f"page      title={d['title']!r} noindex={m.get('noindex')} "
             f"nofollow={m.get('nofollow')} canonical={m.get('canonical')}"
             + (f" parse_error={m['parse_error']}" if m.get("parse_error") else ""))
    if d["links"] or d["meta"]:
        _links(d["links"], line, max_links)
    if d["dedup"]:
        line("dedup")
        for name, value in d["dedup"].items():
            line(f"  {name}: {value}")
    line(f"outcome   {d['outcome']}: {d['outcome_reason']}")
    w = d["warc"]
    if w:
        recs = ", ".join(f"{x['url']} ({x['status']}, {x['payload_bytes']} B)"
                         for x in w["records"]) or "none"
        where = f"written to {w['written']}" if w["written"] else "not written (--warc DIR)"
        line(f"warc      {recs}; {where}")


def _links(links: list[dict[str, Any]], line: Any, max_links: int) -> None:
    counts: dict[str, int] = {}
    for link in links:
        counts[link["verdict"]] = counts.get(link["verdict"], 0) + 1
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    line(f"links     {len(links)}" + (f" ({summary})" if summary else ""))
    shown = links if not max_links else links[:max_links]
    for link in shown:
        target = link["url"] or link["href"]
        line(f"  {link['verdict']:<12} {target}  [{link['tag']}] {link['reason']}")
    if len(shown) < len(links):
        line(f"  ... {len(links) - len(shown)} more (--all-links)")
