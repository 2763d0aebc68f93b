"""Checking one CDXJ index line against its WARC file (tests of workers/storage/cdxj.py)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator


def check_line(warc_dir: Path, line: str) -> None:
    """One index line against its WARC file: at ``offset`` exactly ``length`` bytes hold one
    gzip member, the response record of ``url`` whose timestamp, status, mime and payload
    digest the line gives. Raises AssertionError otherwise."""
    _key, stamp, text = line.split(" ", 2)
    fields = json.loads(text)
    offset, length = int(fields["offset"]), int(fields["length"])
    with open(warc_dir / fields["filename"], "rb") as f:
        f.seek(offset)
        member = f.read(length)
        d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        try:
            d.decompress(member)
        except zlib.error as exc:
            raise AssertionError(f"no gzip member at {offset}: {exc}") from None
        assert d.eof and not d.unused_data, "length is not one gzip member"
        f.seek(offset)
        rec = next(iter(ArchiveIterator(f)))
        assert rec.rec_type == "response"
        assert rec.rec_headers.get_header("WARC-Target-URI") == fields["url"]
        date = rec.rec_headers.get_header("WARC-Date")
        assert stamp == "".join(c for c in date if c.isdigit())[:14]
        assert rec.http_headers.get_statuscode() == fields["status"]
        assert rec.rec_headers.get_header("WARC-Payload-Digest") == "sha1:" + fields["digest"]
        ctype = rec.http_headers.get_header("Content-Type")
        assert fields["mime"] == ctype.split(";")[0].strip()
