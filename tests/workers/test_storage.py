"""Tests for workers/storage: WARC records read back with warcio, rotation, JSONL."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import random
import re
import threading
import time
import zlib
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from workers.fetch import FetchResult
from workers.storage.digest import content_digest
from workers.storage.jsonl import RecordWriter
from workers.storage.warc import WarcWriter


def result(i: int = 0, body: bytes | None = None, **kw: object) -> FetchResult:
    body = body if body is not None else f"<html><p>page {i}</p></html>".encode() * 3
    fields: dict[str, object] = {
        "url": f"http://h{i % 7}.sandbox.test/page/{i}?q={i}",
        "ip": "127.0.0.2",
        "status": 200,
        "reason": "OK",
        "headers": [("Content-Type", "text/html; charset=utf-8"),
                    ("Content-Length", str(len(body))), ("Set-Cookie", "a=1"),
                    ("Set-Cookie", "b=2")],
        "body": body,
        "content_type": "text/html",
        "request_headers": [("Host", f"h{i % 7}.sandbox.test"), ("User-Agent", "Trawl/0.1"),
                            ("Accept-Encoding", "gzip, deflate")],
        "started_at": time.time(),
    }
    fields.update(kw)
    return FetchResult(**fields)  # type: ignore[arg-type]


def read_all(paths: list[Path]) -> list:
    out = []
    for p in paths:
        with open(p, "rb") as f:
            for rec in ArchiveIterator(f):
                out.append((p.name, rec.rec_type, rec.rec_headers, rec.http_headers,
                            rec.content_stream().read()))
    return out


def test_write_and_read_back(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path, "trawl-w1")
    results = [result(i) for i in range(5)]
    locs = [w.write(r) for r in results]
    w.close()
    assert len(w.files) == 1
    name = w.files[0].name
    assert re.fullmatch(r"trawl-w1-\d{14}-00000\.warc\.gz", name)
    recs = read_all(w.files)
    assert [r[1] for r in recs] == ["warcinfo"] + ["response", "request"] * 5
    assert recs[0][2].get_header("WARC-Filename") == name
    info_id = recs[0][2].get_header("WARC-Record-ID")
    for k, r in enumerate(results):
        _, _, resp_h, resp_http, payload = recs[1 + 2 * k]
        _, _, req_h, req_http, _ = recs[2 + 2 * k]
        assert resp_h.get_header("WARC-Target-URI") == r.url
        assert resp_h.get_header("WARC-IP-Address") == "127.0.0.2"
        assert resp_h.get_header("WARC-Warcinfo-ID") == info_id
        assert resp_http.get_statuscode() == "200"
        assert resp_http.protocol == "HTTP/1.1"
        assert [v for k, v in resp_http.headers if k == "Set-Cookie"] == ["a=1", "b=2"]
        assert payload == r.body
        sha1 = base64.b32encode(hashlib.sha1(r.body).digest()).decode()
        assert resp_h.get_header("WARC-Payload-Digest") == f"sha1:{sha1}"
        assert req_h.get_header("WARC-Concurrent-To") == resp_h.get_header("WARC-Record-ID")
        assert req_h.get_header("WARC-Target-URI") == r.url
        assert req_http.protocol == "GET"
        assert req_http.statusline == f"/page/{k}?q={k} HTTP/1.1"
        assert req_http.get_header("Host") == f"h{k % 7}.sandbox.test"
        assert locs[k] is not None and locs[k][0] == name  # type: ignore[index]


def test_offsets_seek_to_own_gzip_member(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path, "seek")
    results = [result(i) for i in range(10)]
    locs = [w.write(r) for r in results]
    w.close()
    data = w.files[0].read_bytes()
    for r, loc in zip(results, locs, strict=True):
        assert loc is not None
        name, offset = loc
        assert name == w.files[0].name
        member = data[offset:offset + loc.length]
        d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        text = d.decompress(member)
        assert d.eof and d.unused_data == b""  # exactly one gzip member
        assert text.startswith(b"WARC/1.1\r\n") and b"WARC-Type: response" in text
        with open(w.files[0], "rb") as f:
            f.seek(offset)
            rec = next(iter(ArchiveIterator(f)))
            assert rec.rec_type == "response"
            assert rec.rec_headers.get_header("WARC-Target-URI") == r.url
            assert rec.content_stream().read() == r.body


def test_rotation_by_size(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path, "rot", max_bytes=20_000)
    rng_bodies = [random.Random(i).randbytes(6000) for i in range(40)]  # incompressible
    results = [result(i, body=b) for i, b in enumerate(rng_bodies)]
    locs = [w.write(r) for r in results]
    w.close()
    assert len(w.files) > 5
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in w.files + w.indexes)  # each WARC file and its CDXJ index
    recs = read_all(w.files)
    responses = [(n, h.get_header("WARC-Target-URI"), p) for n, t, h, _, p in recs
                 if t == "response"]
    assert [u for _, u, _ in responses] == [r.url for r in results]
    assert [p for _, _, p in responses] == rng_bodies
    assert [n for n, _, _ in responses] == [loc[0] for loc in locs]  # type: ignore[index]
    for p in w.files:  # every file starts with warcinfo and stays near the limit
        with open(p, "rb") as f:
            assert next(iter(ArchiveIterator(f))).rec_type == "warcinfo"
        assert p.stat().st_size < 20_000 + 20_000


def test_decoded_body_headers_rewritten(tmp_path: Path) -> None:
    body = b"<html>" + b"a" * 5000 + b"</html>"
    r = result(1, body=body, headers=[
        ("Content-Type", "text/html"), ("Content-Encoding", "gzip"),
        ("Content-Length", str(len(gzip.compress(body))))])
    chunked = result(2, headers=[("Content-Type", "text/html"),
                                 ("Transfer-Encoding", "chunked")])
    w = WarcWriter(tmp_path, "enc")
    w.write(r)
    w.write(chunked)
    w.close()
    recs = [x for x in read_all(w.files) if x[1] == "response"]
    http1, payload1 = recs[0][3], recs[0][4]
    assert payload1 == body  # warcio did not try to gunzip it again
    assert http1.get_header("Content-Encoding") is None
    assert http1.get_header("X-Trawl-Orig-Content-Encoding") == "gzip"
    assert http1.get_header("Content-Length") == str(len(body))
    assert recs[1][4] == chunked.body
    assert recs[1][3].get_header("X-Trawl-Orig-Transfer-Encoding") == "chunked"


def test_truncated_and_failed_fetches(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path, "tr")
    big = result(1, truncated=True, error="too_large")
    skipped = result(2, body=b"", error="content_type_skipped", content_type="image/png")
    failed = FetchResult(url="http://x.test/", error="timeout", status=None)
    assert w.write(big) is not None
    assert w.write(skipped) is not None
    assert w.write(failed) is None
    w.close()
    recs = [x for x in read_all(w.files) if x[1] == "response"]
    assert recs[0][2].get_header("WARC-Truncated") == "length"
    assert recs[1][2].get_header("WARC-Truncated") == "unspecified"
    assert len(recs) == 2


def test_warc_truncated_says_why_the_fetcher_cut_the_body(tmp_path: Path) -> None:
    """The reason the fetcher set (``FetchResult.cut``) is the header's value; a result marked
    ``truncated`` by hand gets what its error implies; a whole body gets none."""
    cut = []
    for reason, error in (("disconnect", "connection_reset"), ("time", "timeout"),
                          ("length", "too_large"), ("unspecified", "aborted"),
                          ("length", None)):
        r = result(len(cut), body=b"<html><p>the first bytes of a pa", error=error)
        r.cut(reason)
        cut.append(r)
    by_hand = [result(10, truncated=True, error="connection_reset"),
               result(11, truncated=True, error="tls_error"),
               result(12, truncated=True),  # a cap that is not an error (robots.txt)
               result(13, truncated=True, error="decoding_error")]
    whole = result(14)
    w = WarcWriter(tmp_path, "cut")
    for r in [*cut, *by_hand, whole]:
        assert w.write(r) is not None
    w.close()
    got = [x[2].get_header("WARC-Truncated") for x in read_all(w.files) if x[1] == "response"]
    assert got == ["disconnect", "time", "length", "unspecified", "length",
                   "disconnect", "disconnect", "length", "unspecified", None]
    assert [r.cut_reason for r in [*cut, *by_hand, whole]] == got


def test_concurrent_warc_writes(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path, "conc", max_bytes=50_000)
    n_threads, per = 8, 50
    locs: dict[str, tuple[str, int]] = {}
    lock = threading.Lock()

    def worker(t: int) -> None:
        for k in range(per):
            r = result(t * 1000 + k)
            loc = w.write(r)
            assert loc is not None
            with lock:
                locs[r.url] = loc

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    recs = read_all(w.files)
    resp = [(n, h) for n, t, h, _, _ in recs if t == "response"]
    req = [h for _, t, h, _, _ in recs if t == "request"]
    assert len(resp) == len(req) == n_threads * per
    # each request record directly follows its response (pairs never interleave)
    kinds = [t for _, t, _, _, _ in recs if t != "warcinfo"]
    assert kinds == ["response", "request"] * (n_threads * per)
    for (_n, h), rq in zip(resp, req, strict=True):
        assert rq.get_header("WARC-Concurrent-To") == h.get_header("WARC-Record-ID")
    for name, h in resp:
        assert locs[h.get_header("WARC-Target-URI")][0] == name
    # records are built outside the writer's lock: each still names its own file's warcinfo
    info = {n: h.get_header("WARC-Record-ID") for n, t, h, _, _ in recs if t == "warcinfo"}
    assert len(info) == len(w.files) > 1
    for name, t, h, _, _ in recs:
        if t != "warcinfo":
            assert h.get_header("WARC-Warcinfo-ID") == info[name], (name, t)
    for p in w.files:  # rotation still bounds a file: the limit plus one fetch's records
        assert p.stat().st_size < 50_000 + 5_000


def test_jsonl_records(tmp_path: Path) -> None:
    path = tmp_path / "out" / "records.jsonl"
    rw = RecordWriter(path, flush_every=3)
    recs = [{"url": f"http://a.test/{i}", "status": 200, "digest": content_digest(b"%d" % i),
             "title": "naïve ☃\nline"} for i in range(10)]
    for r in recs:
        rw.write(r)
    rw.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(x) for x in lines] == recs
    rw2 = RecordWriter(path)  # append, never truncate
    rw2.write({"url": "http://a.test/more"})
    rw2.close()
    assert len(path.read_text(encoding="utf-8").splitlines()) == 11


def test_jsonl_flush_every(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    rw = RecordWriter(path, flush_every=2)
    rw.write({"a": 1})
    rw.write({"a": 2})
    assert len(path.read_text().splitlines()) == 2
    rw.write({"a": 3})
    rw.flush()
    assert len(path.read_text().splitlines()) == 3
    rw.close()


def test_concurrent_jsonl_lines_do_not_interleave(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    rw = RecordWriter(path, flush_every=7)
    payload = "x" * 5000

    def worker(t: int) -> None:
        for k in range(200):
            rw.write({"t": t, "k": k, "pad": payload})

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rw.close()
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(rows) == 1600
    assert {(r["t"], r["k"]) for r in rows} == {(t, k) for t in range(8) for k in range(200)}
    for t in range(8):
        assert [r["k"] for r in rows if r["t"] == t] == list(range(200))


def test_content_digest() -> None:
    d = content_digest(b"hello")
    assert re.fullmatch(r"[0-9a-f]{32}", d)
    assert d == content_digest(b"hello") != content_digest(b"hello!")
