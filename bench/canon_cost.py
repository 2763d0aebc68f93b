"""Cost per link of URL canonicalization candidates, and per page of link extraction.

Links are those lxml extracts (raw href + page base) from vectors/realpages/*.html. Run:
``/work/venv/bin/python bench/canon_cost.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import glob
import os
import time
import urllib.parse

import w3lib.url
from ada_url import join_url
from lxml import etree

from frontier.urls import InvalidURL, canonicalize
from workers.pipeline.parse import parse_html

VECTORS = os.environ.get("TRAWL_VECTORS", "/work/shared/vectors")
BASE = "https://www.example.com/section/2020/article.html"


def raw_links(pages: list[bytes]) -> list[str]:
    """Raw href values as authors wrote them (relative, with fragments, whitespace...)."""
    out: list[str] = []
    parser = etree.HTMLParser(encoding="utf-8", recover=True)
    for body in pages:
        root = etree.fromstring(body, parser)
        for el in root.iter("a", "area", "link", "iframe"):
            v = el.get("href") or el.get("src")
            if v:
                out.append(v.strip())
    return out


def per_link(fn, links: list[str], rounds: int) -> tuple[float, int]:
    best = float("inf")
    errors = 0
    for _ in range(rounds):
        errors = 0
        t0 = time.perf_counter()
        for link in links:
            try:
                fn(link)
            except (ValueError, InvalidURL):
                errors += 1
        best = min(best, time.perf_counter() - t0)
    return best / len(links) * 1e6, errors


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(VECTORS, "realpages", "*.html")))
    pages = []
    for f in files:
        with open(f, "rb") as fh:
            pages.append(fh.read())
    links = raw_links(pages)
    print(f"{len(links)} links from {len(files)} pages, best of {args.rounds} rounds")
    candidates = {
        "trawl canonicalize (ada-url + our rules)": lambda u: canonicalize(u, BASE),
        "ada-url join_url only": lambda u: join_url(BASE, u),
        "urllib urljoin only": lambda u: urllib.parse.urljoin(BASE, u),
        "urljoin + w3lib.canonicalize_url": lambda u: w3lib.url.canonicalize_url(
            urllib.parse.urljoin(BASE, u)),
        "urljoin + w3lib.safe_url_string": lambda u: w3lib.url.safe_url_string(
            urllib.parse.urljoin(BASE, u)),
    }
    for name, fn in candidates.items():
        us, errors = per_link(fn, links, args.rounds)
        print(f"  {name:45s} {us:6.2f} µs/link  ({errors} rejected)")
    best = float("inf")
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for body in pages:
            parse_html(body, BASE)
        best = min(best, time.perf_counter() - t0)
    print(f"  parse_html (lxml, links+meta)               {best / len(pages) * 1e3:6.2f} ms/page "
          f"(avg {sum(map(len, pages)) / len(pages) / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
