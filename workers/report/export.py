"""``trawl export``: a crawl's page records as one JSONL, CSV or Parquet file.

CSV and Parquet get a fixed column list (stable across crawls, so a notebook's code keeps
working); JSONL keeps each record whole. The MinHash sketch is left out of the tables: it is
an opaque blob for ``trawl dedup-report``, not something to analyse in a spreadsheet."""

from __future__ import annotations

import csv
import enum
import json
from pathlib import Path
from typing import Any

from frontier.config import ConfigError
from workers.report.records import CrawlRecords

#: The table's columns, in order. ``warc`` (a [file, offset] pair) is split in two.
COLUMNS: tuple[str, ...] = (
    "url", "outcome", "fetched_at", "host", "ip", "depth", "attempts", "status", "bytes",
    "elapsed_s", "content_type", "links_found", "links_admitted", "digest", "dup_kind",
    "dup_of", "mirror_of", "truncated", "error", "reason", "warc_file", "warc_offset",
)


class ExportFormat(enum.StrEnum):
    JSONL = "jsonl"
    CSV = "csv"
    PARQUET = "parquet"


def row(record: dict[str, Any]) -> dict[str, Any]:
    """One record as a table row over :data:`COLUMNS` (absent fields are None)."""
    warc = record.get("warc")
    flat = dict(record)
    if isinstance(warc, list | tuple) and len(warc) == 2:
        flat["warc_file"], flat["warc_offset"] = warc[0], warc[1]
    return {c: flat.get(c) for c in COLUMNS}


def export(crawl: CrawlRecords, fmt: ExportFormat, dest: Path) -> int:
    """Write the records to ``dest``; the number of rows written."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if fmt is ExportFormat.JSONL:
        with dest.open("w", encoding="utf-8", newline="\n") as fh:
            for rec in crawl.records:
                fh.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
    elif fmt is ExportFormat.CSV:
        with dest.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(row(r) for r in crawl.records)
    else:
        _write_parquet(crawl, dest)
    return len(crawl.records)


def _write_parquet(crawl: CrawlRecords, dest: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError("--format parquet needs pyarrow: pip install 'trawl[parquet]' "
                          "(or use --format csv / jsonl)") from exc
    types = {"fetched_at": pa.float64(), "elapsed_s": pa.float64(), "depth": pa.int64(),
             "attempts": pa.int64(), "status": pa.int64(), "bytes": pa.int64(),
             "links_found": pa.int64(), "links_admitted": pa.int64(),
             "warc_offset": pa.int64()}
    schema = pa.schema([(c, types.get(c, pa.string())) for c in COLUMNS])
    rows = [row(r) for r in crawl.records]
    for r in rows:  # free-text fields may hold a number or a list in odd records
        for c in COLUMNS:
            if c not in types and r[c] is not None and not isinstance(r[c], str):
                r[c] = json.dumps(r[c])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), dest)
