"""WarcWriter's hand-written response/request records: same bytes as warcio built them, valid
digests and lengths (checked by an independent parser and by warcio), odd server headers.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import http.client
import io
import random
import re
import time
import uuid
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from workers.fetch import FetchResult
from workers.fetch.result import TRUNCATION_BY_ERROR
from workers.storage import warc_records
from workers.storage.warc import WarcWriter

INFO_ID = "<urn:uuid:3f2b1c2e-8c55-4d0e-9b7a-0c1d2e3f4a5b>"
T0 = 1_764_860_000.123456


def fetch(i: int = 0, body: bytes | None = None, **kw: Any) -> FetchResult:
    body = body if body is not None else b"<html><body>" + b"<p>text %d</p>" % i * 200 + b"</html>"
    fields: dict[str, Any] = {
        "url": f"https://www.h{i}.example/a/b-{i}.html?x={i}&y=2",
        "ip": "203.0.113.7", "status": 200, "reason": "OK",
        "headers": [("Date", "Thu, 04 Dec 2026 16:43:11 GMT"), ("Server", "nginx"),
                    ("Content-Type", "text/html; charset=utf-8"),
                    ("Content-Length", str(len(body))), ("Set-Cookie", "a=1; Path=/"),
                    ("Set-Cookie", "b=2"), ("ETag", '"abc"'), ("Vary", "Accept-Encoding")],
        "body": body, "content_type": "text/html",
        "request_headers": [("Host", f"www.h{i}.example"), ("User-Agent", "Trawl/0.1"),
                            ("Accept", "text/html,*/*;q=0.8"),
                            ("Accept-Encoding", "gzip, deflate"), ("Connection", "keep-alive")],
        "started_at": T0 + i,
    }
    fields.update(kw)
    return FetchResult(**fields)


# -- the records as warcio built them (the code this replaced), for byte comparison ----------
def warcio_records(result: FetchResult, info_id: str,
                   version: str = "1.1") -> tuple[bytes, bytes]:
    """Uncompressed response and request records, built by warcio as storage.py did."""
    date = datetime.fromtimestamp(result.started_at, UTC).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ" if version == "1.1" else "%Y-%m-%dT%H:%M:%SZ")
    resp_http = StatusAndHeaders(f"{result.status} {result.reason}".rstrip(),
                                 warc_records.stored_headers(result), protocol=result.http_version)
    resp_warc = {"WARC-Date": date, "WARC-Warcinfo-ID": info_id}
    if result.ip:
        resp_warc["WARC-IP-Address"] = result.ip
    if result.truncated or result.error == "content_type_skipped":
        resp_warc["WARC-Truncated"] = TRUNCATION_BY_ERROR.get(result.error or "", "unspecified")
    parts = urlsplit(result.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    req_http = StatusAndHeaders(f"GET {target} {result.http_version}",
                                list(result.request_headers), is_http_request=True)
    builder = WARCWriter(io.BytesIO(), gzip=False, warc_version=version)
    resp = builder.create_warc_record(result.url, "response", payload=io.BytesIO(result.body),
                                      length=len(result.body), http_headers=resp_http,
                                      warc_headers_dict=resp_warc)
    req = builder.create_warc_record(
        result.url, "request", payload=io.BytesIO(b""), length=0, http_headers=req_http,
        warc_headers_dict={
            "WARC-Date": date,
            "WARC-Concurrent-To": resp.rec_headers.get_header("WARC-Record-ID"),
            "WARC-Warcinfo-ID": info_id,
            **({"WARC-IP-Address": result.ip} if result.ip else {}),
        })
    out = []
    for rec in (resp, req):
        builder.out = io.BytesIO()
        builder.write_record(rec)
        out.append(builder.out.getvalue())
    return out[0], out[1]


_IDS = re.compile(
    rb"<urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}>")


def mask_ids(record: bytes) -> bytes:
    return _IDS.sub(b"<id>", record)


# -- an independent check of one record (one gzip member) ------------------------------------
def sha1_label(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def parse_member(member: bytes) -> tuple[dict[str, list[str]], bytes, bytes]:
    """One gzip member holding one WARC record: (WARC headers, HTTP head, payload).

    Asserts what a reader relies on: exactly one gzip member, ``WARC/1.1``, header lines
    without a stray CR or LF, ``Content-Length`` = the block, the block followed by exactly
    CRLF CRLF, both SHA-1 digests right, the HTTP head ASCII and CRLF-terminated.
    """
    d = zlib.decompressobj(zlib.MAX_WBITS | 16)
    raw = d.decompress(member) + d.flush()
    assert d.eof and d.unused_data == b"", "not exactly one gzip member"
    head, sep, rest = raw.partition(b"\r\n\r\n")
    assert sep, "no end of WARC headers"
    lines = head.decode("utf-8").split("\r\n")
    assert lines[0] == "WARC/1.1"
    warc: dict[str, list[str]] = {}
    for line in lines[1:]:
        assert "\r" not in line and "\n" not in line, line
        name, colon, value = line.partition(": ")
        assert colon and name, line
        warc.setdefault(name, []).append(value)
    assert all(len(v) == 1 for v in warc.values()), warc
    length = int(warc["Content-Length"][0])
    block, end = rest[:length], rest[length:]
    assert len(block) == length and end == b"\r\n\r\n", "Content-Length does not frame the block"
    assert warc["WARC-Block-Digest"] == [sha1_label(block)], "block digest"
    http_head, sep, payload = block.partition(b"\r\n\r\n")
    assert sep and http_head.isascii()
    http_head += b"\r\n\r\n"
    for line in http_head[:-4].split(b"\r\n"):
        assert b"\r" not in line and b"\n" not in line, line
    assert warc["WARC-Payload-Digest"] == [sha1_label(payload)], "payload digest"
    assert _IDS.fullmatch(warc["WARC-Record-ID"][0].encode())
    return warc, http_head, payload


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> WarcWriter:
    """A writer used only for ``_encode_fetch`` (no file is opened)."""
    return WarcWriter(tmp_path_factory.mktemp("enc"), "enc")


def members(writer: WarcWriter, result: FetchResult) -> tuple[bytes, bytes]:
    """The gzipped response and request records of ``result``, as ``write`` appends them."""
    resp, req, _ = writer._encode_fetch(result, INFO_ID, "enc.warc.gz")
    return resp, req


def read_file(path: Path) -> list[Any]:
    """Every record of a WARC file, digests verified by warcio (raises on a bad one)."""
    out = []
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, check_digests="raise"):
            payload = rec.content_stream().read()
            assert rec.digest_checker.passed is not False, rec.digest_checker.problems
            out.append((rec.rec_type, rec.rec_headers, rec.http_headers, payload))
    return out


# -- equivalence with the warcio-built records ------------------------------------------------
big = random.Random(1).randbytes(300_000)
CASES: dict[str, FetchResult] = {
    "plain": fetch(1),
    "gzip-decoded": fetch(2, headers=[("Content-Type", "text/html"),
                                      ("Content-Encoding", "gzip"), ("Content-Length", "123")]),
    "chunked": fetch(3, headers=[("Content-Type", "text/html"),
                                 ("Transfer-Encoding", "chunked")]),
    "identity": fetch(4, headers=[("Content-Encoding", "identity"), ("Content-Length", "9")]),
    "too-large": fetch(5, truncated=True, error="too_large"),
    "timeout": fetch(6, truncated=True, error="timeout"),
    "reset": fetch(7, truncated=True, error="connection_reset"),
    "truncated-other": fetch(8, truncated=True, error="invalid_response"),
    "skipped": fetch(9, body=b"", error="content_type_skipped", content_type="image/png"),
    "no-ip": fetch(10, ip=None),
    "no-reason": fetch(11, reason=""),
    "http10": fetch(12, http_version="HTTP/1.0"),
    "empty-204": fetch(13, status=204, reason="No Content", body=b"", headers=[]),
    "redirect": fetch(14, status=301, reason="Moved Permanently", body=b"",
                      headers=[("Location", "https://elsewhere.example/x")]),
    "binary-300k": fetch(15, body=big),
    "host-only": fetch(16, url="http://h.example"),
    "query-no-path": fetch(17, url="http://h.example?a=1"),
    "fragment": fetch(18, url="http://h.example/p#frag?x"),
    "empty-query": fetch(19, url="http://h.example/p?"),
    "port-userinfo": fetch(20, url="http://u:p@h.example:8080/p;params?q"),
    "upper-scheme": fetch(21, url="HTTP://H.example/Q?x"),
    "pipes-brackets": fetch(22, url='http://h.example/a|b{c}"d\'^`?x=[1]'),
    "latin1-value": fetch(23, headers=[("X-Name", "caf\xe9"), ("Content-Type", "text/html")]),
    "rfc8187-param": fetch(24, headers=[
        ("Content-Disposition", 'attachment; filename="r\xe9sum\xe9.txt"')]),
    "many-headers": fetch(25, headers=[(f"X-H{k}", "v" * k) for k in range(60)]),
    "spaces-in-values": fetch(26, headers=[("X-Sp", "  lead and trail  "), ("X-Empty", "")]),
    "usec-round-up": fetch(27, started_at=1_764_860_000.9999996),
    "usec-half": fetch(28, started_at=1_764_860_000.5000005),
    "http2": fetch(29, http_version="HTTP/2", reason=""),
}


@pytest.mark.parametrize("name", list(CASES))
def test_same_bytes_as_warcio(encoder: WarcWriter, name: str) -> None:
    result = CASES[name]
    resp, req = members(encoder, result)
    want_resp, want_req = warcio_records(result, INFO_ID)
    got_resp, got_req = gzip.decompress(resp), gzip.decompress(req)
    assert mask_ids(got_resp) == mask_ids(want_resp)
    assert mask_ids(got_req) == mask_ids(want_req)
    warc, _, payload = parse_member(resp)
    req_warc, _, req_payload = parse_member(req)
    assert payload == result.body and req_payload == b""
    assert req_warc["WARC-Concurrent-To"] == warc["WARC-Record-ID"]
    assert req_warc["WARC-Record-ID"] != warc["WARC-Record-ID"]
    assert warc["WARC-Warcinfo-ID"] == req_warc["WARC-Warcinfo-ID"] == [INFO_ID]


@pytest.mark.parametrize("name", ["plain", "usec-round-up", "latin1-value", "http2"])
def test_warc_1_0_same_bytes_as_warcio(tmp_path: Path, name: str) -> None:
    """``warc_version="1.0"``: the records warcio writes as WARC/1.0 (dates to the second)."""
    w = WarcWriter(tmp_path, "v10", warc_version="1.0")
    resp, req, _ = w._encode_fetch(CASES[name], INFO_ID, "v10.warc.gz")
    want_resp, want_req = warcio_records(CASES[name], INFO_ID, "1.0")
    assert want_resp.startswith(b"WARC/1.0\r\n")
    assert mask_ids(gzip.decompress(resp)) == mask_ids(want_resp)
    assert mask_ids(gzip.decompress(req)) == mask_ids(want_req)


@pytest.mark.parametrize("level", range(10))
def test_every_compress_level_reads_back(tmp_path: Path, level: int) -> None:
    w = WarcWriter(tmp_path, f"lvl{level}", compress_level=level)
    results = [fetch(i) for i in range(3)] + [CASES["binary-300k"], CASES["gzip-decoded"]]
    locs = [w.write(r) for r in results]
    w.close()
    data = w.files[0].read_bytes()
    recs = read_file(w.files[0])
    assert [t for t, *_ in recs] == ["warcinfo"] + ["response", "request"] * len(results)
    for r, loc in zip(results, locs, strict=True):
        assert loc is not None
        warc, _, payload = parse_member(data[loc.offset:loc.offset + loc.length])
        assert payload == r.body and warc["WARC-Target-URI"] == [r.url]
        # the request record is the next member, up to the next response (or the end)
        following = [x.offset for x in locs if x is not None and x.offset > loc.offset]
        req_end = min(following, default=len(data))
        req_warc, _, _ = parse_member(data[loc.offset + loc.length:req_end])
        assert req_warc["WARC-Type"] == ["request"]
        assert req_warc["WARC-Concurrent-To"] == warc["WARC-Record-ID"]


def test_written_files_verify(tmp_path: Path) -> None:
    """Across rotation: every record's digests verify (warcio and the independent parser),
    every offset from write() seeks straight to its own response record."""
    w = WarcWriter(tmp_path, "rot", max_bytes=20_000)
    rng = random.Random(5)
    # not "upper-scheme": warcio's reader parses HTTP heads only under a lowercase "http:"
    # Target-URI, so it checks that record's payload digest over the whole block
    results = [dataclasses.replace(r, started_at=time.time()) for name, r in CASES.items()
               if name != "upper-scheme"]
    results += [fetch(100 + i, body=rng.randbytes(8000)) for i in range(10)]  # incompressible
    rng.shuffle(results)
    locs = [w.write(r) for r in results]
    w.close()
    assert len(w.files) > 2
    by_name = {p.name: p for p in w.files}
    info_ids = {}
    for p in w.files:
        recs = read_file(p)
        info_ids[p.name] = recs[0][1].get_header("WARC-Record-ID")
        for kind, headers, _, _ in recs[1:]:
            assert kind in ("response", "request")
            assert headers.get_header("WARC-Warcinfo-ID") == info_ids[p.name]
    for r, loc in zip(results, locs, strict=True):
        assert loc is not None
        with open(by_name[loc.filename], "rb") as f:
            f.seek(loc.offset)
            rec = next(iter(ArchiveIterator(f, check_digests="raise")))
            assert rec.rec_type == "response"
            assert rec.content_stream().read() == r.body
            assert rec.rec_headers.get_header("WARC-Target-URI") == r.url
            assert rec.digest_checker.passed is True
        parse_member(by_name[loc.filename].read_bytes()[loc.offset:loc.offset + loc.length])


# -- the checks above catch a wrong digest or length ---------------------------------------------
def _regzip(raw: bytes) -> bytes:
    return gzip.compress(raw, mtime=0)


def test_checks_catch_wrong_digest_or_length(encoder: WarcWriter, tmp_path: Path) -> None:
    resp, _ = members(encoder, fetch(1))
    raw = gzip.decompress(resp)
    parse_member(resp)  # the genuine record passes
    tampered = {
        "payload byte": raw.replace(b"text 1", b"text 2", 1),
        "block digest": re.sub(rb"(WARC-Block-Digest: sha1:)\w", rb"\g<1>2", raw),
        "payload digest": re.sub(rb"(WARC-Payload-Digest: sha1:)\w", rb"\g<1>2", raw),
        "length": re.sub(rb"Content-Length: (\d+)\r\n\r\nHTTP",
                         lambda m: b"Content-Length: %d\r\n\r\nHTTP" % (int(m[1]) - 1), raw),
    }
    for what, bad in tampered.items():
        assert bad != raw, what
        with pytest.raises(AssertionError):
            parse_member(_regzip(bad))
        if what != "length":  # warcio's own check finds the digest ones
            path = tmp_path / f"{what.replace(' ', '-')}.warc.gz"
            path.write_bytes(_regzip(bad))
            with pytest.raises(ArchiveLoadFailed):
                read_file(path)


# -- odd headers, as http.client hands them to the fetcher ------------------------------------
class _Sock:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, *args: object, **kw: object) -> io.BytesIO:
        return io.BytesIO(self.data)


def parsed_response(raw_head: bytes) -> tuple[str, list[tuple[str, str]]]:
    """(reason, headers) exactly as workers.fetch takes them from http.client."""
    resp = http.client.HTTPResponse(_Sock(raw_head + b"Content-Length: 2\r\n\r\nok"))  # type: ignore[arg-type]
    resp.begin()
    return resp.reason, [(str(k), str(v)) for k, v in resp.msg.raw_items()]


def test_odd_server_headers(tmp_path: Path) -> None:
    reason, headers = parsed_response(
        b"HTTP/1.1 200 Tr\xe8s bien\r\n"
        b"Content-Type: text/html\r\n"
        b"X-Fold: a\r\n   b\r\n\tc\r\n"            # obs-fold: the value holds CRLFs
        b"X-Latin: caf\xe9\r\n"                    # latin-1 byte
        b"Content-Disposition: attachment; filename=\"r\xe9sum\xe9.txt\"\r\n"
        b"X-Mixed: na\xefve; a=b\r\n"              # warcio left the non-ASCII and raised
        b"X-Nul: a\x00b\r\n"
        b"X-Empty:\r\n"
    )
    names = [k for k, _ in headers]
    assert "X-Fold" in names and any("\r\n" in v for _, v in headers)  # the input is odd
    r = fetch(1, reason=reason, headers=headers)
    w = WarcWriter(tmp_path, "odd")
    loc = w.write(r)
    w.close()
    assert loc is not None
    recs = read_file(w.files[0])
    (_, _, http_h, payload), (_, _, req_h, _) = recs[1], recs[2]
    assert payload == r.body
    assert http_h.get_statuscode() == "200"
    assert http_h.statusline == "200 Tr%C3%A8s bien"
    got = dict(http_h.headers)
    assert [k for k, _ in http_h.headers] == names  # no header lost, none injected
    assert got["X-Fold"] == "a b c"
    # non-ASCII values: percent-encoded as warcio encoded them before
    expected = StatusAndHeaders("", [(k, v) for k, v in headers if k != "X-Fold"])
    expected.percent_encode_non_ascii_headers()
    assert got["X-Latin"] == expected.get_header("X-Latin") == "caf%C3%A9"
    assert got["Content-Disposition"] == expected.get_header("Content-Disposition") == (
        "attachment; filename*=UTF-8''r%C3%A9sum%C3%A9.txt")
    assert got["X-Mixed"] == "na%C3%AFve; a*=UTF-8''b"
    assert got["X-Nul"] == "a\x00b" and got["X-Empty"] == ""
    assert req_h.get_header("Host") == "www.h1.example"
    parse_member(w.files[0].read_bytes()[loc.offset:loc.offset + loc.length])


def test_header_and_url_injection_is_neutralized(encoder: WarcWriter, tmp_path: Path) -> None:
    r = fetch(
        2,
        url="http://x.example/a\r\nWARC-Type: evil\x00 ü?q=é",
        ip="203.0.113.9\r\nWARC-Evil: 1",
        reason="OK\r\nX-Injected: 1",
        headers=[("X-Evil", "a\r\nX-Injected: 1"), ("X-LF", "b\nc"), ("X-CR", "d\re"),
                 ("X-Bytes", b"v\xe9"), ("X-Sur", "s\udc80"), ("Bad Name\r\n", "v"),
                 ("X-Int", 7)],
        request_headers=[("Host", "x.example"), ("User-Agent", "T\r\nX-Injected: 1")],
    )
    w = WarcWriter(tmp_path, "inj")
    loc = w.write(r)
    w.close()
    assert loc is not None
    recs = read_file(w.files[0])
    (_, resp_w, resp_h, payload), (_, req_w, req_h, _) = recs[1], recs[2]
    assert payload == r.body
    for wh in (resp_w, req_w):
        assert [k for k, _ in wh.headers].count("WARC-Type") == 1
        assert wh.get_header("WARC-Evil") is None
        assert wh.get_header("WARC-Target-URI") == (
            "http://x.example/a%0D%0AWARC-Type:%20evil%00%20ü?q=é")
        assert wh.get_header("WARC-IP-Address") == "203.0.113.9%0D%0AWARC-Evil:%201"
    assert resp_w.get_header("WARC-Type") == "response"
    assert req_w.get_header("WARC-Type") == "request"
    assert resp_h.statusline == "200 OK%0D%0AX-Injected: 1"
    got = dict(resp_h.headers)
    assert "X-Injected" not in got and req_h.get_header("X-Injected") is None
    assert len(resp_h.headers) == len(r.headers)
    assert got["X-Evil"] == "a X-Injected: 1"
    assert got["X-LF"] == "b c" and got["X-CR"] == "d e"
    assert got["X-Bytes"] == "v%C3%A9"  # bytes taken as latin-1, as warcio did
    assert got["X-Sur"].isascii()
    assert got["Bad%20Name%0D%0A"] == "v" and got["X-Int"] == "7"
    assert req_h.get_header("User-Agent") == "T X-Injected: 1"
    # urlsplit drops the CR/LF; what a request line cannot hold is percent-encoded
    assert req_h.protocol == "GET"
    assert req_h.statusline == "/aWARC-Type:%20evil%00%20%C3%BC?q=%C3%A9 HTTP/1.1"
    for member in members(encoder, r):
        parse_member(member)


def test_non_ascii_url(tmp_path: Path) -> None:
    """A robots.txt redirect can leave a non-ASCII URL: warcio raised on its request line."""
    r = fetch(3, url="http://x.example/caf\xe9/\u4e2d?q=\xfc#f")
    w = WarcWriter(tmp_path, "iri")
    assert w.write(r) is not None
    w.close()
    recs = read_file(w.files[0])
    assert recs[1][1].get_header("WARC-Target-URI") == r.url  # UTF-8, as before
    assert recs[2][2].statusline == "/caf%C3%A9/%E4%B8%AD?q=%C3%BC HTTP/1.1"


def test_bad_ipv6_url_does_not_raise(encoder: WarcWriter) -> None:
    r = fetch(4, url="http://[::1/robots.txt?x")
    with pytest.raises(ValueError):
        urlsplit(r.url)
    for member in members(encoder, r):
        parse_member(member)
    assert warc_records.request_target(r.url) == "/robots.txt?x"


# -- the small pieces -------------------------------------------------------------------------
def test_request_target_matches_urlsplit() -> None:
    urls = [c.url for c in CASES.values()] + [
        "http://h", "https://h/", "http://h/?", "http://h/a?b?c#d", "http://h#x",
        "http://h/a/./b/../c", "https://h:443/%7Euser/?a=%20b", "http://[::1]:80/x?y",
        "http://h/a;b=c", "ftp://h/x", "//h/x?y", "/just/path?q", "http://h\\a\\b?c",
    ]
    for url in urls:
        parts = urlsplit(url)
        want = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        assert warc_records.request_target(url) == want, url


def test_warc_date_matches_datetime() -> None:
    rng = random.Random(7)
    stamps = [rng.uniform(1e9, 4e9) for _ in range(20_000)]
    stamps += [s + k / 1e6 + d for s in (1_764_860_000, 1_999_999_999)
               for k in range(0, 1_000_000, 999_983) for d in (0, 4.999e-7, 5e-7, 5.001e-7)]
    stamps += [1_764_860_000.9999995, 1_764_860_000.9999996, 1e9, 3.9999e9, 1_764_860_000.0]
    for ts in stamps:
        want = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert warc_records.warc_date(ts) == want, ts
    for ts in (0.0, 12.5, 5e9):  # outside the fast range: datetime itself
        assert warc_records.warc_date(ts) == (
            datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def test_record_ids_are_uuid4() -> None:
    seen = set()
    for _ in range(2000):
        for rid in warc_records.record_ids():
            assert rid.startswith("<urn:uuid:") and rid.endswith(">")
            u = uuid.UUID(rid[10:-1])
            assert u.version == 4 and u.variant == uuid.RFC_4122
            assert str(u) == rid[10:-1]
            seen.add(rid)
    assert len(seen) == 4000


def test_sha1_label_matches_base32() -> None:
    for data in (b"", b"a", random.Random(3).randbytes(5000)):
        digest = hashlib.sha1(data).digest()
        assert warc_records.sha1_label(digest) == sha1_label(data)
    assert sha1_label(b"") == warc_records.EMPTY_SHA1
