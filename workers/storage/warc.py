"""Rotating WARC files of gzip members: one member per record, so that a (file, offset) pair
from the JSONL/CDXJ index seeks straight to a readable record.

Layout: ``PREFIX-YYYYmmddHHMMSS-NNNNN.warc.gz`` (UTC time the file was opened, NNNNN a
per-writer serial), WARC/1.1 or 1.0 (``warc_version``). Each file starts with a ``warcinfo``
record (built by warcio: software, crawl name, operator contact, robots policy; see
:func:`crawl_warcinfo`); each fetch adds a ``response`` then a ``request`` record
``WARC-Concurrent-To`` it (built by workers/storage/warc_records.py). Beside each file, its
CDXJ index (``PREFIX-...-NNNNN.cdxj``, sorted when the file is closed; ``.cdxj.open`` while
it is written: workers/storage/cdxj.py).
Fetches that failed before any response (``status is None``) are not written (``write``
returns ``None``): there is nothing to archive, and the JSONL record holds the error.
"""

from __future__ import annotations

import importlib.metadata
import io
import logging
import socket
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from isal import isal_zlib
from warcio.warcwriter import WARCWriter

from workers.fetch import FetchResult
from workers.storage.cdxj import CdxjIndex, cdxj_parts
from workers.storage.warc_records import (
    WARC_VERSIONS,
    FetchRecords,
    fetch_records,
    warc_value,
)
from workers.storage.warc_revisit import RevisitProfile, revisit_records

log = logging.getLogger(__name__)

_GZIP_WBITS = zlib.MAX_WBITS | 16

#: The specification each version's warcinfo names in ``conformsTo``.
_SPEC_URL = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-{v}/"


def crawl_warcinfo(crawl_name: str, operator: str, user_agent: str) -> dict[str, str]:
    """The crawl's fields of each file's warcinfo record (names of the WARC specification's
    annex and Heritrix's): who crawled (``operator``: the contact URL the User-Agent
    carries), for which crawl, as which agent, and that robots.txt was obeyed (Trawl has
    no setting to ignore it)."""
    return {"isPartOf": crawl_name, "operator": operator,
            "http-header-user-agent": user_agent, "robots": "obey"}


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "unknown"


#: The ``software`` field of each warcinfo record.
SOFTWARE = f"Trawl/{_version('trawl')} warcio/{_version('warcio')}"


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
        warc_version: str = "1.1",
        index: bool = True,
    ) -> None:
        if warc_version not in WARC_VERSIONS:
            raise ValueError(f"warc_version {warc_version!r}: one of {', '.join(WARC_VERSIONS)}")
        self.warc_version = warc_version
        #: write a CDXJ index beside each file (workers/storage/cdxj.py)
        self.index = index
        self._index: CdxjIndex | None = None
        #: every sorted index written, in order (one per closed file)
        self.indexes: list[Path] = []
        #: response records left out of the index, with the reason logged (no SURT key)
        self.index_skipped = 0
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
                                                          warc_version=self.warc_version)
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
            "software": SOFTWARE,
            "format": f"WARC File Format {self.warc_version}",
            "conformsTo": _SPEC_URL.format(v=self.warc_version),
            "hostname": socket.gethostname(),
            "isPartOf": self.prefix,
            **self._extra_info,
        }
        rec = self._thread_builder().create_warcinfo_record(name, info)
        self._warcinfo_id = rec.rec_headers.get_header("WARC-Record-ID")
        self._append(self._encode(rec))
        self._records_in_file = 0
        if self.index:
            self._index = CdxjIndex(path)

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()  # before the index, whose lines name its records
            self._file = None
            self._path = None
        if self._index is not None:
            self.indexes.append(self._index.close())
            self._index = None

    # -- public --------------------------------------------------------------------------
    def write(self, result: FetchResult) -> WarcLocation | None:
        """Archive one fetch; returns where its response record starts, or None if not written.
        See :meth:`_write`."""
        return self._write(result, fetch_records, ())

    def write_revisit(self, result: FetchResult, profile: RevisitProfile,
                      refers_to_s: float) -> WarcLocation | None:
        """Archive a fetch that brought nothing new as a ``revisit`` record of ``profile``
        (workers/storage/warc_revisit.py); indexed with the media type warc/revisit."""
        return self._write(result, revisit_records, (profile, refers_to_s))

    def _write(self, result: FetchResult, build: Callable[..., FetchRecords],
               extra: tuple[Any, ...]) -> WarcLocation | None:
        """Archive one fetch's records made by ``build(result, warcinfo id, version, *extra)``.

        The records are built and compressed outside the writer's lock (with 8 fetch threads
        a lock held over gzip made them queue); under the lock they are only appended. If
        the file rotated meanwhile, they are built again for the new file's warcinfo.
        """
        if result.status is None:
            return None
        while True:
            with self._lock:
                self._rotate_if_full()
                info_id, path = self._warcinfo_id, self._path
            assert info_id is not None and path is not None
            resp_bytes, req_bytes, line = self._encode_fetch(result, info_id, path.name,
                                                             build, extra)
            with self._lock:
                self._rotate_if_full()
                if self._warcinfo_id != info_id or self._path is None:
                    continue
                offset = self._append(resp_bytes)
                self._append(req_bytes)
                if line is not None and self._index is not None:
                    self._index.add(f"{line[0]}{offset}{line[1]}")
                    if len(self._index.pending) >= CdxjIndex.FLUSH_LINES:
                        self._file.flush()  # type: ignore[union-attr]  # open: _path is set
                        self._index.flush()
                self._records_in_file += 2
                self.records_written += 2
                return WarcLocation(self._path.name, offset, len(resp_bytes))

    def _rotate_if_full(self) -> None:
        """Open the first file, or a new one once the current has reached ``max_bytes``."""
        if self._file is None or (
            self._records_in_file > 0 and self._file.tell() >= self.max_bytes
        ):
            self._open_new()

    def _encode_fetch(self, result: FetchResult, warcinfo_id: str, filename: str,
                      build: Callable[..., FetchRecords] = fetch_records,
                      extra: tuple[Any, ...] = (),
                      ) -> tuple[bytes, bytes, tuple[str, str] | None]:
        """The compressed response and request records of one fetch (one gzip member each),
        and the response's index line but its offset (None: no index, or no key)."""
        records = build(result, warcinfo_id, self.warc_version, *extra)
        resp = self._gzip(*records.response)
        line = None
        if self.index:
            try:
                line = cdxj_parts(warc_value(result.url), records.date, result.status or 0,
                                  records.headers, records.payload_digest, len(resp), filename)
            except ValueError as exc:
                self.index_skipped += 1
                log.warning("WARC record of %r not indexed: %s", result.url, exc)
        return resp, self._gzip(records.request), line

    def flush(self) -> None:
        """Flush the WARC file, then its index (whose lines only name flushed records)."""
        with self._lock:
            if self._file is not None:
                self._file.flush()
            if self._index is not None:
                self._index.flush()

    def close(self) -> None:
        with self._lock:
            self._close_file()

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
