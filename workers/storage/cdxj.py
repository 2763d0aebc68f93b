"""The CDXJ index of a WARC file, written as its records are: one line per response record.

A line is what pywb's own indexer (``cdx-indexer --cdxj``) writes for the record, byte for
byte: the SURT urlkey (the ``surt`` package, which pywb uses to look a URL up), the 14-digit
timestamp of the WARC-Date, then JSON with url, mime, status, digest (base32 SHA-1 of the
payload, without ``sha1:``), length and offset (of the record's gzip member) and filename.
The writer knows all of these when it appends the record, so no pass over the WARC is needed.

Sorting: pywb binary-searches an index, so it must be sorted, but records come in crawl
order. Lines are appended (and flushed with the WARC) to ``NAME.cdxj.open`` while the WARC is
written: every line there describes a record already in the file, in write order. When the
WARC file is closed (rotation or close) that file is sorted into ``NAME.cdxj`` (written beside
and renamed, so a reader never sees half of it) and removed. A worker that died leaves its
``.cdxj.open``: :func:`finish_index` sorts it afterwards (``.cdxj`` = closed and sorted).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import surt

from frontier.memo import BoundedMemo

log = logging.getLogger(__name__)

#: Suffix of the index of a WARC file being written (unsorted, append order).
OPEN_SUFFIX = ".cdxj.open"
#: Suffix of the sorted index of a closed WARC file.
SORTED_SUFFIX = ".cdxj"


def index_name(warc_name: str) -> str:
    """``NAME.warc.gz`` -> ``NAME.cdxj`` (the index beside its WARC file)."""
    return warc_name.removesuffix(".gz").removesuffix(".warc") + SORTED_SUFFIX


#: Characters a key cannot hold: the line is split on spaces and newlines.
_KEY_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
#: Where a Content-Type's media type ends (pywb's rule).
_MIME_END = re.compile("[; ]")


def mime_of(headers: Sequence[tuple[str, str]]) -> str:
    """The media type as pywb indexes it: the first Content-Type up to ``;`` or a space,
    ``unk`` without one (empty, and so left out of the line, if the value starts with one)."""
    for name, value in headers:
        if name.lower() == "content-type":
            return _MIME_END.split(value, maxsplit=1)[0] if value else "unk"
    return "unk"


#: A URL whose SURT key is its origin's key followed by its path: no userinfo, query or
#: fragment, and a path of segments of lower-case letters, digits and ``-._~`` not starting
#: with a dot, so nothing surt escapes, lower-cases, drops as a session id or normalizes
#: (no empty, ``.`` or ``..`` segment). The sandbox's and most crawled URLs are of this form.
_PLAIN_PATH_URL = re.compile(r"(https?://[a-z0-9.\-]+(?::[0-9]+)?)((?:/[a-z0-9\-_~][a-z0-9.\-_~]*)*/?)")
#: origin -> its SURT key up to the path (``"test,sandbox,h1:8080)"``), None when surt's key
#: of ``origin/`` does not end in ``)/`` (then every URL of it takes the full path).
_ORIGIN_KEYS: BoundedMemo[str, str | None] = BoundedMemo(65_536)


def surt_key(url: str) -> str:
    """``surt.surt(url)``, without its ~40 us of parsing for a URL of :data:`_PLAIN_PATH_URL`'s
    form: the origin's key is made once (by surt) and the path appended as surt's default
    canonicalization leaves it (a trailing slash dropped). tests/workers/test_cdxj_index.py
    compares the two on URLs of every kind."""
    m = _PLAIN_PATH_URL.fullmatch(url)
    if m is None or not m.group(2):
        return surt.surt(url)  # type: ignore[no-any-return]
    origin, path = m.groups()
    try:
        head = _ORIGIN_KEYS[origin]
    except KeyError:
        key = surt.surt(origin + "/")
        head = _ORIGIN_KEYS.put(origin, key[:-1] if key.endswith(")/") else None)
    if head is None:
        return surt.surt(url)  # type: ignore[no-any-return]
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    return head + path


def cdxj_parts(url: str, warc_date: str, status: int, headers: Sequence[tuple[str, str]],
               payload_digest: str, length: int, filename: str) -> tuple[str, str]:
    """One index line for a response record, in two parts to join with its offset (only
    known once the record is appended): ``before + str(offset) + after`` is the line, with
    its newline. ``url`` is the record's WARC-Target-URI as written (what pywb indexes).
    Raises ValueError when ``surt`` cannot make a key of ``url``."""
    if not url:
        raise ValueError("no URL to key")
    try:
        key = surt_key(url)
    except Exception as exc:  # surt raises what its parsing meets; one reason for the caller
        raise ValueError(f"no SURT key for {url!r}: {exc}") from None
    if not key.isprintable() or " " in key:  # the line's separators must stay separators
        key = _KEY_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), key)
    # "2026-12-06T05:52:29.123456Z" (or without the fraction) -> "20261206055229"
    stamp = (warc_date[0:4] + warc_date[5:7] + warc_date[8:10] + warc_date[11:13]
             + warc_date[14:16] + warc_date[17:19])
    fields = {"url": url, "mime": mime_of(headers), "status": str(status),
              "digest": payload_digest.removeprefix("sha1:"), "length": str(length)}
    if not fields["mime"]:  # pywb leaves out an empty field
        del fields["mime"]
    head = json.dumps(fields)[:-1]  # without the closing brace
    return f'{key} {stamp} {head}, "offset": "', f'", "filename": {json.dumps(filename)}}}\n'


def cdxj_line(url: str, warc_date: str, status: int, headers: Sequence[tuple[str, str]],
              payload_digest: str, offset: int, length: int, filename: str) -> str:
    """:func:`cdxj_parts` joined with the offset."""
    before, after = cdxj_parts(url, warc_date, status, headers, payload_digest, length,
                               filename)
    return f"{before}{offset}{after}"


def finish_index(open_path: Path) -> Path:
    """Sort ``NAME.cdxj.open`` into ``NAME.cdxj`` (atomically), remove the open file and
    return the sorted one. A last line without its newline (a write cut by a crash) is
    dropped with a warning: its record may not be whole either."""
    text = open_path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        log.warning("%s: dropped a partial last index line (%d bytes)", open_path,
                    len(lines[-1]))
        lines.pop()
    final = open_path.with_name(open_path.name.removesuffix(OPEN_SUFFIX) + SORTED_SUFFIX)
    tmp = final.with_name(final.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(sorted(lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    open_path.unlink()
    return final


class CdxjIndex:
    """The index of one WARC file while it is written (not thread-safe: the WARC writer
    calls it under its lock). Lines wait in memory until :meth:`flush`, which the writer
    calls after flushing the WARC file, so every line on disk names a record on disk."""

    #: the writer flushes the WARC and its index every this many lines
    FLUSH_LINES = 64

    def __init__(self, warc_path: Path) -> None:
        self.warc_name = warc_path.name
        self.open_path = warc_path.with_name(
            index_name(warc_path.name).removesuffix(SORTED_SUFFIX) + OPEN_SUFFIX)
        self._file: IO[str] | None = open(  # noqa: SIM115 - closed in close()
            self.open_path, "x", encoding="utf-8")
        self.pending: list[str] = []
        self.lines = 0

    def add(self, line: str) -> None:
        self.pending.append(line)
        self.lines += 1

    def flush(self) -> None:
        """Write the pending lines (their records must be flushed already)."""
        if self._file is not None:
            self._file.writelines(self.pending)
            self._file.flush()
        self.pending.clear()

    def close(self) -> Path:
        """Write what is pending, close and sort; returns the sorted index's path."""
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None
        return finish_index(self.open_path)
