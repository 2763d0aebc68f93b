"""Reading a crawl's output directory: the JSONL records of every worker and summary.json.

A torn last line (a worker killed mid-write) is skipped and counted, never fatal: the report
and the export say how many lines they could not read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frontier.config import ConfigError


@dataclass
class CrawlRecords:
    """One crawl's records (sorted by fetch start), its summary, and what could not be read."""

    out_dir: Path
    records: list[dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)
    bad_lines: int = 0
    files: int = 0


def records_dir(path: Path) -> Path:
    """The records/ directory of an output directory (or ``path`` itself if it is one)."""
    return path / "records" if (path / "records").is_dir() else path


def load_records(path: Path) -> CrawlRecords:
    """Every record under ``path`` (an output dir or its records/ dir); ConfigError if none."""
    path = Path(path)
    rdir = records_dir(path)
    files = sorted(rdir.glob("*.jsonl")) if rdir.is_dir() else []
    if not files:
        raise ConfigError(f"no records/*.jsonl under {path}: is it a crawl's output directory?")
    records: list[dict[str, Any]] = []
    bad = 0
    for f in files:
        with f.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    bad += 1
                    continue
                if isinstance(rec, dict) and "url" in rec:
                    records.append(rec)
                else:
                    bad += 1
    records.sort(key=lambda r: float(r.get("fetched_at") or 0.0))
    out_dir = rdir.parent if rdir.name == "records" else rdir
    summary: dict[str, Any] = {}
    summary_path = out_dir / "summary.json"
    if summary_path.is_file():
        try:
            summary = json.loads(summary_path.read_text())
        except (OSError, json.JSONDecodeError):
            summary = {}
    return CrawlRecords(out_dir, records, summary, bad, len(files))
