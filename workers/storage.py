"""Crawl output: WARC files of the fetches and append-only JSONL records of the URLs.

The parts, each in its own module:

* ``workers/warc.py``: :class:`WarcWriter`, rotating ``.warc.gz`` files of one gzip member per
  record, and :class:`WarcLocation`, where a response record starts;
* ``workers/warc_records.py``: a fetch's response and request records, serialized by hand
  (why: its docstring);
* ``workers/jsonl.py``: :class:`RecordWriter`, the JSONL records;
* here: :func:`content_digest`, and the names the rest of Trawl imports from ``storage``.
"""

from __future__ import annotations

import xxhash

from workers.jsonl import RecordWriter
from workers.warc import WarcLocation, WarcWriter

__all__ = ["RecordWriter", "WarcLocation", "WarcWriter", "content_digest"]


def content_digest(body: bytes) -> str:
    """Exact content fingerprint for dedup: xxh3-128, 32 hex digits (not cryptographic)."""
    return xxhash.xxh3_128_hexdigest(body)
