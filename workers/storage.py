"""Crawl output: WARC files (request/response records) and append-only JSONL records.

WARC layout: ``PREFIX-YYYYmmddHHMMSS-NNNNN.warc.gz`` (UTC time the file was opened, NNNNN a
per-writer serial), WARC/1.1, one gzip member per record so that a (file, offset) pair from
the JSONL/CDXJ index seeks straight to a readable record. Each file starts with a
``warcinfo`` record; each fetch adds a ``response`` then a ``request`` record (the request
carries ``WARC-Concurrent-To`` pointing at the response).

The body in :class:`workers.fetch.FetchResult` is already decoded (gzip/deflate and chunked
framing removed). Storing it under the original ``Content-Encoding`` / ``Transfer-Encoding``
headers would make WARC readers decode it a second time, so for such responses those headers
are renamed ``X-Trawl-Orig-<name>`` and ``Content-Length`` is set to the stored length (the
original kept as ``X-Trawl-Orig-Content-Length``), as other archivers that store decoded
payloads do. ``WARC-Payload-Digest`` (sha1, base32) is over that stored payload,
``WARC-Block-Digest`` over the HTTP head plus that payload. Truncated bodies get
``WARC-Truncated`` (length / time / disconnect / unspecified).

The response and request records are serialized here, not by warcio (see "Record
serialization" below for why), with the same WARC headers, order and values warcio wrote. HTTP
heads are ASCII: a non-ASCII header value is percent-encoded as warcio does (RFC 8187 for
``name=value`` parameters, else the whole value), a non-ASCII or control character in the
status line or request target (and a space in the target) is percent-encoded (UTF-8), and a
CR/LF in a header value (an obs-fold a server sent) becomes one space. In the WARC headers,
a control character or space in the Target-URI or IP is percent-encoded (non-ASCII stays UTF-8).
So a record is well-formed whatever the server (or a redirect) sent, and writing never raises.

Fetches that failed before any response (``status is None``) are not written to the WARC
(``write`` returns ``None``): there is nothing to archive, and the JSONL record holds the
error.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import math
import os
import re
import socket
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, urlsplit

import xxhash
from isal import isal_zlib
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from workers.fetch import FetchResult

__all__ = ["RecordWriter", "WarcLocation", "WarcWriter", "content_digest"]


def content_digest(body: bytes) -> str:
    """Exact content fingerprint for dedup: xxh3-128, 32 hex digits (not cryptographic)."""
    return xxhash.xxh3_128_hexdigest(body)


class WarcLocation(tuple):
    """``(filename, offset)`` of a response record, plus ``length`` (compressed bytes).

    A 2-tuple so ``name, offset = writer.write(r)`` works; ``length`` is what a CDXJ line
    also wants. ``filename`` is the base name (the index stores names, not paths).
    """

    filename: str
    offset: int
    length: int

    def __new__(cls, filename: str, offset: int, length: int) -> WarcLocation:
        self = super().__new__(cls, (filename, offset))
        self.filename, self.offset, self.length = filename, offset, length
        return self


_TRUNCATION_REASON = {"too_large": "length", "timeout": "time", "connection_reset": "disconnect"}
_HOP_BY_HOP_DECODED = ("content-encoding", "transfer-encoding")


# -- Record serialization -----------------------------------------------------------------
# Why the response/request records are not built by warcio: on the hot path its generic
# machinery (StatusAndHeaders, headers_to_str_headers, replace_header, ensure_digest twice
# per record reading BytesIO copies in 16 KB chunks, uuid4...) cost ~0.085 ms of CPU per fetch
# on top of the unavoidable work. bench/warc_cost.py (33 KB real-page bodies, ~10 response
# headers, gzip level 2, thread CPU): warcio 0.20-0.21 ms per fetch, hand-written 0.12-0.13 ms,
# of which ~0.10 ms is the floor, i.e. the two SHA-1 passes over the body (payload and block
# digests, ~0.02 ms each) and the two ISA-L gzip members; with a 50-byte body 0.11 ms vs
# 0.04 ms. The format is small: "WARC/1.1" CRLF, "Name: value" CRLF lines, CRLF, the block
# (the HTTP head then the payload), CRLF CRLF. The headers, their order and values are warcio's
# (tests/test_warc_writer.py compares the bytes); warcio still writes each file's warcinfo
# record, and reads the files in the tests.

_WARC_END = b"\r\n\r\n"
_GZIP_WBITS = zlib.MAX_WBITS | 16


#: Base32 (RFC 4648) of every 10-bit value: two characters.
_B32_PAIRS = [a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
              for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"]
_B32_SHIFTS = tuple(range(150, -1, -10))


def _sha1_label(digest: bytes) -> str:
    """A SHA-1 digest as warcio labels it: ``sha1:`` + base32, by table (160 bits: 32
    characters, no padding); ``base64.b32encode`` is pure Python, 2 µs a call."""
    n = int.from_bytes(digest, "big")
    return "sha1:" + "".join([_B32_PAIRS[n >> s & 1023] for s in _B32_SHIFTS])


#: The payload digest of a request record (no payload).
_EMPTY_SHA1 = "sha1:" + base64.b32encode(hashlib.sha1(b"").digest()).decode("ascii")
#: uuid4's variant nibble (10xx) for any random hex digit.
_UUID_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


def _record_ids() -> tuple[str, str]:
    """Two ``<urn:uuid:...>`` record ids, random version-4 UUIDs as :func:`uuid.uuid4` makes
    them (122 bits from ``os.urandom``), from one ``urandom`` call (uuid4 costs ~2 µs each)."""
    h = os.urandom(32).hex()
    return (
        f"<urn:uuid:{h[0:8]}-{h[8:12]}-4{h[13:16]}-{_UUID_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}>",
        f"<urn:uuid:{h[32:40]}-{h[40:44]}-4{h[45:48]}-{_UUID_VARIANT[h[48]]}{h[49:52]}-"
        f"{h[52:64]}>",
    )


#: ``(second, "YYYY-mm-ddTHH:MM:SS")`` of the last date formatted (a tuple: swapped atomically).
_date_cache: tuple[int, str] = (-1, "")


def _warc_date_slow(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _warc_date(ts: float) -> str:
    """``WARC-Date`` with microseconds, exactly as ``datetime.fromtimestamp(ts, UTC)`` gives it
    (microseconds rounded half-even), the seconds part formatted once per second."""
    global _date_cache
    if not 1e9 <= ts < 4e9:  # outside 2001-2096: let datetime handle (or reject) it
        return _warc_date_slow(ts)
    frac, whole = math.modf(ts)
    sec, us = int(whole), round(frac * 1e6)
    if us >= 1_000_000:
        sec, us = sec + 1, us - 1_000_000
    cached = _date_cache
    if cached[0] != sec:
        cached = _date_cache = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    return f"{cached[1]}.{us:06d}Z"


def _stored_headers(result: FetchResult) -> list[tuple[str, str]]:
    """Response headers as they describe the stored (decoded) body; see module docstring.

    Not decoded: ``result.headers`` itself (not a copy; callers only read it).
    """
    for k, v in result.headers:
        lk = k.lower()
        if lk == "transfer-encoding" or (
            lk == "content-encoding" and v.strip().lower() not in ("", "identity")
        ):
            break
    else:
        return result.headers
    out: list[tuple[str, str]] = []
    for k, v in result.headers:
        lk = k.lower()
        if lk in _HOP_BY_HOP_DECODED or lk == "content-length":
            out.append((f"X-Trawl-Orig-{k}", v))
        else:
            out.append((k, v))
    out.append(("Content-Length", str(len(result.body))))
    return out


#: A plain http(s) URL (printable ASCII, no space): urlsplit's path and query, without it.
_PLAIN_URL = re.compile(r"https?://[^/?#]*([^?#]*)(?:\?([^#]*))?")


def _request_target(url: str) -> str:
    """The request-target (path and query) of ``url``, percent-encoding what a request line
    cannot hold (space, control and non-ASCII characters, as UTF-8)."""
    m = _PLAIN_URL.match(url) if url.isascii() and url.isprintable() and " " not in url else None
    if m is not None:
        path, query = m.groups()
    else:
        try:
            parts = urlsplit(url)
            path, query = parts.path, parts.query
        except ValueError:  # e.g. an unbalanced IPv6 bracket: take what follows the host
            rest = url.partition("://")[2].partition("#")[0]
            path = rest[len(rest.split("/", 1)[0].split("?", 1)[0]):]
            path, _, query = path.partition("?")
    target = path or "/"
    if query:
        target += "?" + query
    return target if target.isascii() and target.isprintable() and " " not in target \
        else _NOT_TARGET.sub(_percent_encode_match, target)


#: Characters percent-encoded in a status line (not printable ASCII nor space) ...
_NOT_STATUS = re.compile(r"[^\x20-\x7e]")
#: ... in a request target or header name (also space) ...
_NOT_TARGET = re.compile(r"[^\x21-\x7e]")
#: ... and in a WARC header value: controls and space (WARC headers are UTF-8).
_WARC_UNSAFE = re.compile(r"[\x00-\x20\x7f]")
#: A line break inside a header value (an obs-fold, or a stray CR/LF) with its blanks.
_LINE_BREAK = re.compile(r"[ \t]*[\r\n]+[ \t]*")


def _percent_encode_match(m: re.Match[str]) -> str:
    return "".join(f"%{b:02X}" for b in m.group().encode("utf-8", "backslashreplace"))


def _warcio_percent_encode(value: str) -> str:
    """A non-ASCII header value as warcio's ``percent_encode_non_ascii_headers`` encodes it
    (what the WARC held before); non-ASCII it left (warcio then raised) is percent-encoded."""
    try:
        if ";" not in value:
            value = quote(value)
        else:
            new = StatusAndHeaders.ENCODE_HEADER_RX.sub(
                lambda m: "*=UTF-8''" + quote(m.group(1)), value)
            value = new if new != value else quote(value)
    except UnicodeEncodeError:  # lone surrogates: not from http.client, but never raise
        value = quote(value, errors="backslashreplace")
    return value if value.isascii() else _NOT_STATUS.sub(_percent_encode_match, value)


def _as_str(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("latin-1")  # as warcio's headers_to_str_headers
    return str(value)


def _http_head_safe(first_line: str, headers: Sequence[tuple[Any, Any]]) -> bytes:
    """:func:`_http_head` for heads that are not plain: each part made safe (module doc)."""
    lines = [_NOT_STATUS.sub(_percent_encode_match, first_line)]
    for name, value in headers:
        k, v = _as_str(name), _as_str(value)
        if not (k.isascii() and k.isprintable()) or " " in k:
            k = _NOT_TARGET.sub(_percent_encode_match, k)
        if not v.isascii():
            v = _warcio_percent_encode(v)
        if "\r" in v or "\n" in v:
            v = _LINE_BREAK.sub(" ", v)
        lines.append(f"{k}: {v}")
    lines += ("", "")
    return "\r\n".join(lines).encode("ascii")


def _http_head(first_line: str, headers: Sequence[tuple[str, str]]) -> bytes:
    """The HTTP head of a record's block: first line, ``name: value`` lines, blank line.

    The common case (plain ASCII, no CR/LF inside a line) is checked on the joined text at
    once; anything else goes through :func:`_http_head_safe`.
    """
    try:
        text = "\r\n".join([first_line, *map(": ".join, headers), "", ""])
    except TypeError:  # a name or value that is not a str
        return _http_head_safe(first_line, headers)
    n = len(headers) + 2
    if text.isascii() and text.count("\n") == n and text.count("\r") == n:
        return text.encode("ascii")
    return _http_head_safe(first_line, headers)


def _warc_value(value: str) -> str:
    """A WARC header value from outside (URL, IP), control characters and spaces
    percent-encoded (warcio's reader also takes a space in a Target-URI for ``%20``)."""
    if value.isprintable() and " " not in value:
        return value
    return _WARC_UNSAFE.sub(_percent_encode_match, value)


class WarcWriter:
    """Thread-safe rotating WARC writer; see the module docstring for the layout.

    ``max_bytes`` is checked before each fetch is written: once the current file has reached
    it, a new file is started (so a file exceeds the limit by at most one fetch's records).
    ``compress_level`` is the per-record gzip level. Levels 0-3 compress with ISA-L (the
    ``isal`` package: standard gzip output, any reader takes it), 4-9 with zlib. 2 by default:
    on the sandbox's 33 KB pages ISA-L level 2 costs 0.12 ms a page for 38% of the raw size,
    zlib's level 1 0.34 ms for 41% and its default 6 1.38 ms for 35% (bench: issue 7).
    """

    def __init__(
        self,
        directory: Path,
        prefix: str,
        max_bytes: int = 1_000_000_000,
        compress_level: int = 2,
        warcinfo: Mapping[str, str] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.compress_level = compress_level
        self._extra_info = dict(warcinfo or {})
        self._builders = threading.local()
        self._lock = threading.Lock()
        self._serial = 0
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._warcinfo_id: str | None = None
        self._records_in_file = 0
        #: every file this writer created, in order
        self.files: list[Path] = []
        self.records_written = 0

    @property
    def path(self) -> Path | None:
        """The file currently written to (None before the first write or after close)."""
        return self._path

    # -- low level -----------------------------------------------------------------------
    def _thread_builder(self) -> WARCWriter:
        """This thread's warcio record builder (its ``out`` stream is per-call state)."""
        builder = getattr(self._builders, "builder", None)
        if builder is None:
            builder = self._builders.builder = WARCWriter(io.BytesIO(), gzip=False,
                                                          warc_version="1.1")
        return builder

    def _encode(self, record: Any) -> bytes:
        """One warcio record (the warcinfo) as one gzip member."""
        buf = io.BytesIO()
        builder = self._thread_builder()
        builder.out = buf
        builder.write_record(record)
        return self._gzip(buf.getvalue())

    def _gzip(self, *parts: bytes) -> bytes:
        """``parts`` (one record) as one gzip member; ISA-L for levels 0-3, else zlib.

        The parts are fed one by one, so a large body is not copied to join them.
        """
        zmod: Any = isal_zlib if self.compress_level <= isal_zlib.ISAL_BEST_COMPRESSION else zlib
        if len(parts) == 1:
            return zmod.compress(parts[0], self.compress_level, _GZIP_WBITS)
        comp = zmod.compressobj(self.compress_level, zmod.DEFLATED, _GZIP_WBITS)
        out = [comp.compress(part) for part in parts]
        out.append(comp.flush())
        return b"".join(out)

    def _append(self, data: bytes) -> int:
        assert self._file is not None
        offset = self._file.tell()
        self._file.write(data)
        return offset

    def _open_new(self) -> None:
        self._close_file()
        while True:
            stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
            name = f"{self.prefix}-{stamp}-{self._serial:05d}.warc.gz"
            self._serial += 1
            path = self.directory / name
            try:
                self._file = open(path, "xb")  # noqa: SIM115 - closed in _close_file
            except FileExistsError:
                continue
            break
        self._path = path
        self.files.append(path)
        info = {
            "software": "Trawl (warcio)",
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
                          "warc-format/warc-1.1/",
            "hostname": socket.gethostname(),
            "isPartOf": self.prefix,
            **self._extra_info,
        }
        rec = self._thread_builder().create_warcinfo_record(name, info)
        self._warcinfo_id = rec.rec_headers.get_header("WARC-Record-ID")
        self._append(self._encode(rec))
        self._records_in_file = 0

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            self._path = None

    # -- public --------------------------------------------------------------------------
    def write(self, result: FetchResult) -> WarcLocation | None:
        """Archive one fetch; returns where its response record starts, or None if not written.

        The records are built and compressed outside the writer's lock (with 8 fetch threads
        a lock held over gzip made them queue); under the lock they are only appended. If
        the file rotated meanwhile, they are built again for the new file's warcinfo.
        """
        if result.status is None:
            return None
        while True:
            with self._lock:
                self._rotate_if_full()
                info_id = self._warcinfo_id
            assert info_id is not None
            resp_bytes, req_bytes = self._encode_fetch(result, info_id)
            with self._lock:
                self._rotate_if_full()
                if self._warcinfo_id != info_id or self._path is None:
                    continue
                offset = self._append(resp_bytes)
                self._append(req_bytes)
                self._records_in_file += 2
                self.records_written += 2
                return WarcLocation(self._path.name, offset, len(resp_bytes))

    def _rotate_if_full(self) -> None:
        """Open the first file, or a new one once the current has reached ``max_bytes``."""
        if self._file is None or (
            self._records_in_file > 0 and self._file.tell() >= self.max_bytes
        ):
            self._open_new()

    def _encode_fetch(self, result: FetchResult, warcinfo_id: str) -> tuple[bytes, bytes]:
        """The compressed response and request records of one fetch.

        Serialized by hand, not by warcio (see "Record serialization" above): the same WARC
        headers in the same order as warcio's ``create_warc_record`` + ``write_record``.
        """
        date = _warc_date(result.started_at or time.time())
        resp_id, req_id = _record_ids()
        body = result.body
        status_line = f"{result.status} {result.reason}".rstrip()
        proto = result.http_version
        resp_http = _http_head(f"{proto} {status_line}" if proto else status_line,
                               _stored_headers(result))
        block = hashlib.sha1(resp_http)
        block.update(body)
        url = result.url
        uri_line = f"WARC-Target-URI: {_warc_value(url)}\r\n" if url else ""
        ip_line = f"WARC-IP-Address: {_warc_value(result.ip)}\r\n" if result.ip else ""
        trunc_line = (
            f"WARC-Truncated: {_TRUNCATION_REASON.get(result.error or '', 'unspecified')}\r\n"
            if result.truncated or result.error == "content_type_skipped" else ""
        )
        resp_head = (
            f"WARC/1.1\r\nWARC-Date: {date}\r\nWARC-Warcinfo-ID: {warcinfo_id}\r\n"
            f"{ip_line}{trunc_line}WARC-Type: response\r\nWARC-Record-ID: {resp_id}\r\n"
            f"{uri_line}WARC-Payload-Digest: {_sha1_label(hashlib.sha1(body).digest())}\r\n"
            f"WARC-Block-Digest: {_sha1_label(block.digest())}\r\n"
            f"Content-Type: application/http; msgtype=response\r\n"
            f"Content-Length: {len(resp_http) + len(body)}\r\n\r\n"
        ).encode("utf-8", "backslashreplace")
        req_http = _http_head(f"GET {_request_target(url)} {proto}", result.request_headers)
        req_head = (
            f"WARC/1.1\r\nWARC-Date: {date}\r\nWARC-Concurrent-To: {resp_id}\r\n"
            f"WARC-Warcinfo-ID: {warcinfo_id}\r\n{ip_line}"
            f"WARC-Type: request\r\nWARC-Record-ID: {req_id}\r\n{uri_line}"
            f"WARC-Payload-Digest: {_EMPTY_SHA1}\r\n"
            f"WARC-Block-Digest: {_sha1_label(hashlib.sha1(req_http).digest())}\r\n"
            f"Content-Type: application/http; msgtype=request\r\n"
            f"Content-Length: {len(req_http)}\r\n\r\n"
        ).encode("utf-8", "backslashreplace")
        return (self._gzip(resp_head + resp_http, body, _WARC_END),
                self._gzip(req_head + req_http + _WARC_END))

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._close_file()

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RecordWriter:
    """Append-only JSONL: one JSON object per line, written whole under a lock.

    Lines are flushed to the OS every ``flush_every`` records and on ``flush``/``close``
    (``flush_every=1`` for line-at-a-time durability). Thread-safe.
    """

    def __init__(self, path: Path, flush_every: int = 100) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_every = max(1, flush_every)
        self._file: IO[str] | None = open(  # noqa: SIM115 - closed in close()
            self.path, "a", encoding="utf-8", newline="\n"
        )
        self._lock = threading.Lock()
        self._pending = 0
        self.records_written = 0

    def write(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            if self._file is None:
                raise ValueError("RecordWriter is closed")
            self._file.write(line)
            self.records_written += 1
            self._pending += 1
            if self._pending >= self.flush_every:
                self._file.flush()
                self._pending = 0

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()
                self._pending = 0

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.flush()
                self._file.close()
                self._file = None

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
