"""CPU per page of writing one fetch's WARC records: warcio-built (the old path) vs hand-written.

Each page is a realistic fetch: a ~33 KB HTML body (slices of the real pages in
``$TRAWL_VECTORS/realpages``, synthetic HTML if they are missing), ~10 response headers (one
page in four decoded from gzip, so its headers are renamed) and the fetcher's 5 request
headers. Both paths produce the same two gzip members (response + request) at the writer's
default level; the old one builds the records with warcio's ``create_warc_record`` +
``write_record`` as ``workers/storage.py`` (now workers/storage/warc.py) did before, and is kept here only for comparison.
The CDXJ rows (issue 20) price the index written beside each file: the index line alone
(SURT key + JSON, workers/storage/cdxj.py), ``write()`` with and without the index, and the
sort of a file's index when it is closed, per line. CPU is ``time.thread_time``, best of
``--rounds``. Before timing, the outputs of both paths
are checked to be identical but for the record ids. The floor row is what no serialization
avoids: the two SHA-1 passes over the body (payload and block digests) and the two gzip
members. The 50-byte-body row shows the fixed cost per fetch. Run::

    .venv/bin/python bench/warc_cost.py [--pages 400] [--rounds 7] [--size 33000]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import gzip
import hashlib
import io
import os
import re
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from workers.fetch import FetchResult
from workers.fetch.result import TRUNCATION_BY_ERROR
from workers.storage.cdxj import OPEN_SUFFIX, cdxj_parts, finish_index
from workers.storage.warc import WarcWriter
from workers.storage.warc_records import FetchRecords, fetch_records, stored_headers

VECTORS = os.environ.get("TRAWL_VECTORS", "/work/shared/vectors")


class OldWarcWriter(WarcWriter):
    """The writer with the previous, warcio-built ``_encode_fetch`` (for comparison only)."""

    def _encode_fetch(self, result: FetchResult, warcinfo_id: str,
                      filename: str = "") -> tuple[bytes, bytes, None]:
        date = datetime.fromtimestamp(result.started_at or time.time(), UTC).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ")
        resp_headers = StatusAndHeaders(
            f"{result.status} {result.reason}".rstrip(), stored_headers(result),
            protocol=result.http_version,
        )
        resp_warc: dict[str, str] = {"WARC-Date": date, "WARC-Warcinfo-ID": warcinfo_id}
        if result.ip:
            resp_warc["WARC-IP-Address"] = result.ip
        if result.truncated or result.error == "content_type_skipped":
            resp_warc["WARC-Truncated"] = TRUNCATION_BY_ERROR.get(result.error or "", "unspecified")
        parts = urlsplit(result.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        req_headers = StatusAndHeaders(
            f"GET {target} {result.http_version}", list(result.request_headers),
            is_http_request=True,
        )
        builder: WARCWriter = self._thread_builder()
        response = builder.create_warc_record(
            result.url, "response", payload=io.BytesIO(result.body),
            length=len(result.body), http_headers=resp_headers, warc_headers_dict=resp_warc,
        )
        request = builder.create_warc_record(
            result.url, "request", payload=io.BytesIO(b""), length=0, http_headers=req_headers,
            warc_headers_dict={
                "WARC-Date": date,
                "WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID"),
                "WARC-Warcinfo-ID": warcinfo_id,
                **({"WARC-IP-Address": result.ip} if result.ip else {}),
            },
        )
        return self._encode(response), self._encode(request), None


def bodies(n: int, size: int) -> list[bytes]:
    """``n`` HTML bodies of ``size`` bytes: slices of the real pages, else synthetic."""
    pages = [Path(f).read_bytes() for f in sorted(glob.glob(f"{VECTORS}/realpages/*.html"))]
    pages = [p for p in pages if len(p) >= size]
    if not pages:
        para = b"<p>Lorem ipsum <a href='/x/%d'>dolor</a> sit amet, consectetur adipiscing.</p>\n"
        pages = [b"<!DOCTYPE html><html><body>" + b"".join(para % i for i in range(size // 60))]
    out = []
    for i in range(n):
        page = pages[i % len(pages)]
        start = (i * 7919) % max(1, len(page) - size)
        out.append(page[start:start + size])
    return out


def fetches(n: int, size: int) -> list[FetchResult]:
    """Realistic fetch results: ~10 response headers, 5 request headers, 1 in 4 decoded."""
    out = []
    now = time.time()
    for i, body in enumerate(bodies(n, size)):
        host = f"www.site{i % 50}.example"
        headers = [
            ("Date", "Thu, 04 Dec 2026 16:43:11 GMT"), ("Server", "nginx/1.24.0"),
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(body))), ("Connection", "keep-alive"),
            ("Cache-Control", "max-age=600, public"), ("Vary", "Accept-Encoding"),
            ("ETag", f'W/"{i:x}-5f3a9c2b"'), ("Last-Modified", "Wed, 03 Dec 2026 09:12:45 GMT"),
            ("Set-Cookie", f"sid={i:016x}; Path=/; HttpOnly"), ("X-Frame-Options", "SAMEORIGIN"),
        ]
        if i % 4 == 0:
            headers[3] = ("Content-Length", str(len(body) // 4))
            headers.insert(4, ("Content-Encoding", "gzip"))
        out.append(FetchResult(
            url=f"https://{host}/section/{i % 13}/article-{i}.html?ref=home&p={i % 3}",
            ip=f"203.0.113.{i % 250 + 1}", status=200, reason="OK", headers=headers, body=body,
            content_type="text/html",
            request_headers=[("Host", host), ("User-Agent", "Trawl/0.1 (+https://trawl.test)"),
                             ("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"),
                             ("Accept-Encoding", "gzip, deflate"), ("Connection", "keep-alive")],
            started_at=now + i * 0.0137,
        ))
    return out


_IDS = re.compile(rb"<urn:uuid:[0-9a-f-]{36}>")


def check_same(old: WarcWriter, new: WarcWriter, results: list[FetchResult]) -> None:
    """Both paths' records are byte-identical once the (random) record ids are masked."""
    for r in results:
        a = [_IDS.sub(b"<id>", gzip.decompress(x))
             for x in old._encode_fetch(r, "<urn:uuid:i>")[:2]]
        b = [_IDS.sub(b"<id>", gzip.decompress(x))
             for x in new._encode_fetch(r, "<urn:uuid:i>", "f.warc.gz")[:2]]
        if a != b:
            raise SystemExit(f"outputs differ for {r.url}")


def cpu_per_page(fn: Callable[[FetchResult], object], results: list[FetchResult],
                 rounds: int) -> float:
    """Best thread CPU ms per page over ``rounds`` (after one warm-up pass)."""
    for r in results:
        fn(r)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time()
        for r in results:
            fn(r)
        best = min(best, time.thread_time() - t0)
    return best / len(results) * 1e3


def cdxj_rows(plain: WarcWriter, indexed: WarcWriter, results: list[FetchResult],
              rounds: int) -> list[tuple[str, float]]:
    """What the CDXJ index adds per page: its line alone, write() with it minus without it
    (same pages, same rounds), and sorting a file's index at close (per line)."""
    recs = [(r, fetch_records(r, "<urn:uuid:i>")) for r in results]

    def line(item: tuple[FetchResult, FetchRecords]) -> None:
        r, rec = item
        cdxj_parts(r.url, rec.date, r.status or 0, rec.headers, rec.payload_digest, 12345,
                   "trawl-host-1-20261206000000-00000.warc.gz")

    line_ms = cpu_per_page(line, recs, rounds)  # type: ignore[arg-type]
    with_ms, without_ms = float("inf"), float("inf")
    for _ in range(rounds):  # interleaved, so a change of machine load hits both alike
        with_ms = min(with_ms, cpu_per_page(indexed.write, results, 1))
        without_ms = min(without_ms, cpu_per_page(plain.write, results, 1))
    indexed.flush()
    assert indexed._index is not None
    open_path = indexed._index.open_path
    n = len(open_path.read_text().splitlines())
    copy = open_path.with_name("sortbench" + OPEN_SUFFIX)
    best = float("inf")
    for _ in range(rounds):
        shutil.copy(open_path, copy)
        t0 = time.thread_time()
        finish_index(copy)
        best = min(best, time.thread_time() - t0)
    return [("index line (SURT key + JSON)", line_ms),
            ("write() with the index", with_ms),
            ("write() without it", without_ms),
            ("difference", with_ms - without_ms),
            (f"sort at close (a file of {n} lines), per line", best / n * 1e3)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--size", type=int, default=33_000, help="body bytes per page")
    args = ap.parse_args()
    results = fetches(args.pages, args.size)
    with tempfile.TemporaryDirectory() as tmp:
        old = OldWarcWriter(Path(tmp) / "old", "old", max_bytes=50_000_000, index=False)
        new = WarcWriter(Path(tmp) / "new", "new", max_bytes=50_000_000, index=False)
        indexed = WarcWriter(Path(tmp) / "idx", "idx", max_bytes=50_000_000)
        small = [dataclasses.replace(r, body=r.body[:50]) for r in results]  # fixed costs
        check_same(old, new, results + small)
        info = "<urn:uuid:00000000-0000-4000-8000-000000000000>"
        req = zlib.decompress(new._encode_fetch(results[0], info, "f")[1], zlib.MAX_WBITS | 16)

        def floor(r: FetchResult) -> None:
            hashlib.sha1(r.body).digest()
            hashlib.sha1(r.body).digest()
            new._gzip(r.body)
            new._gzip(req)

        rows = [
            ("records + gzip (_encode_fetch)",
             cpu_per_page(lambda r: old._encode_fetch(r, info), results, args.rounds),
             cpu_per_page(lambda r: new._encode_fetch(r, info, "f"), results, args.rounds)),
            ("write() to a file",
             cpu_per_page(old.write, results, args.rounds),
             cpu_per_page(new.write, results, args.rounds)),
            ("_encode_fetch, 50-byte bodies",
             cpu_per_page(lambda r: old._encode_fetch(r, info), small, args.rounds),
             cpu_per_page(lambda r: new._encode_fetch(r, info, "f"), small, args.rounds)),
        ]
        fl = cpu_per_page(floor, results, args.rounds)
        cdxj = cdxj_rows(new, indexed, results, args.rounds)
        old.close()
        new.close()
        indexed.close()
        raw = sum(len(r.body) for r in results) / len(results)
        print(f"{len(results)} pages, {raw / 1000:.1f} KB bodies, gzip level "
              f"{new.compress_level}; thread CPU ms/page, best of {args.rounds} rounds")
        print(f"  {'':32s} {'old (warcio)':>13s} {'new':>8s} {'ratio':>6s}")
        for name, a, b in rows:
            print(f"  {name:32s} {a:13.3f} {b:8.3f} {a / b:5.1f}x")
        print(f"  floor: 2 SHA-1 of the body + gzip of the body and of a request record: "
              f"{fl:.3f}")
        print("CDXJ index (thread CPU ms/page):")
        for name, ms in cdxj:
            print(f"  {name:52s} {ms:8.4f}")


if __name__ == "__main__":
    main()
