"""The ``report`` and ``export`` subcommands, and the report written at the end of a crawl."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from workers.report.records import load_records

log = logging.getLogger(__name__)


def add_report_parsers(sub: Any) -> None:
    report = sub.add_parser("report", help="one HTML file with plots of a finished crawl")
    report.add_argument("output_dir", help="the crawl's output directory")
    report.add_argument("--out", help="where to write it (default OUTPUT_DIR/report.html)")
    export = sub.add_parser("export", help="the crawl's page records as JSONL, CSV or Parquet")
    export.add_argument("output_dir", help="the crawl's output directory (or its records/)")
    export.add_argument("--format", choices=["jsonl", "csv", "parquet"], default="jsonl")
    export.add_argument("--out", help="destination file (default OUTPUT_DIR/pages.FORMAT)")


def cmd_report(args: argparse.Namespace) -> int:
    from workers.report.html import write_report

    crawl = load_records(Path(args.output_dir))
    path = write_report(crawl, Path(args.out) if args.out else None)
    print(f"report: {path}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from workers.report.export import ExportFormat, export

    crawl = load_records(Path(args.output_dir))
    fmt = ExportFormat(args.format)
    dest = Path(args.out) if args.out else crawl.out_dir / f"pages.{fmt.value}"
    n = export(crawl, fmt, dest)
    skipped = f" ({crawl.bad_lines} unreadable lines skipped)" if crawl.bad_lines else ""
    print(f"exported {n} records to {dest}{skipped}")
    return 0


def report_after_crawl(out: Path, summary: dict[str, Any]) -> None:
    """At the end of ``crawl``/``demo``: write the report and print its path. A crawl that
    stored no records gets no report (and says so); a plotting bug never fails the crawl."""
    from frontier.config import ConfigError
    from workers.report.html import write_report

    try:
        crawl = load_records(out)
        crawl.summary = summary  # --summary-json may have put it elsewhere
        print(f"report: {write_report(crawl)}")
    except ConfigError as exc:
        print(f"report: none ({exc})")
    except Exception:  # the crawl itself succeeded: say what broke, keep its exit code
        log.exception("could not write the crawl report")
        print("report: failed (see the log above)", file=sys.stderr)
